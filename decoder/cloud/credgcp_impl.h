/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credgcp_impl.h — what the files of Google's credentials share: the
 * provider's context, made by the chain (credgcpchain.c) and used by the
 * provider (credgcptoken.c). Not part of the API: credgcp.h is.
 */
#ifndef BFS_CREDGCP_IMPL_H
#define BFS_CREDGCP_IMPL_H

#include "cred.h"
#include "credgcp.h"

#include <stdbool.h>
#include <stddef.h>

#define WHY_MAX 512

struct gcp_ctx {
	struct bfs_gcp_source src;
	char *ca_file;
	bool probing; /* the chain's first fetch: the metadata server may not be there */
	char source[1024]; /* for humans */
	char account[320]; /* the service account's email, when known */
};

/* Wipe and free *p, and set it to NULL. Accepts *p NULL. */
void bfs_credgcp_free_secret(char **p);
/* *dst a copy of v: 0, or -ENOMEM with a message. */
int bfs_credgcp_dup_to(char **dst, const char *v);

/* ---- credgcptoken.c: the provider ---- */

/* Frees a struct gcp_ctx (its source's secrets wiped). Accepts NULL. */
void bfs_credgcp_ctx_free(void *p);
/* Fetch an access token from ctx's place (a struct gcp_ctx). See
 * bfs_cred_fetch_fn. */
int bfs_credgcp_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap);
/* The VM's service account's email, for humans, into c->account (and
 * c->source); left as is when not known. */
void bfs_credgcp_metadata_email(struct gcp_ctx *c);

#endif
