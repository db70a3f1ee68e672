/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credaws_impl.h — what the AWS credential providers' files share: the
 * chain's state, STS, the providers that the chain (credaws.c) builds, the
 * profile, and small helpers (credawsutil.c). Not part of the API:
 * credaws.h is.
 */
#ifndef BFS_CREDAWS_IMPL_H
#define BFS_CREDAWS_IMPL_H

#include "cred.h"
#include "http.h"
#include "s3ini.h"
#include "s3str.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WHY 512

struct bfs_cjson;

struct chain {
	const char *region, *ca;
	struct bfs_s3_str looked;
};

struct sts {
	char *url; /* the endpoint, normal form, no '/' at the end */
	char *region; /* for the signature */
	char *ca;
};

struct assume {
	struct sts sts;
	char *role_arn, *session, *external_id, *duration;
	char *source_desc; /* "source_profile 'base'" */
	struct bfs_cred_provider src; /* the source's credentials */
	char *desc;
};

struct process {
	char *command;
	char *desc;
};

struct profile {
	const char *name;
	bool named; /* given, not the default */
	char cred_path[PATH_MAX], conf_path[PATH_MAX];
	struct bfs_s3_ini cred, conf;
};

/* ---- credawsutil.c: helpers ---- */

bool bfs_credaws_truthy(const char *v);
char *bfs_credaws_strdup(const char *s);
void bfs_credaws_free_wiped(char *p);
int bfs_credaws_read_small(const char *path, size_t max, char **out, char *why, size_t cap);
int bfs_credaws_json_creds(struct bfs_cjson *o, const char *token_key, bool optional_expiry,
			   const char *source, const char *account, struct bfs_cred **out,
			   char *why, size_t cap);
struct bfs_cjson *bfs_credaws_json_object(const char *body, size_t len);
int bfs_credaws_http_errno(int rc);
int bfs_credaws_url_split(const char *url, char *host, size_t hcap, const char **path);
void bfs_credaws_form_add(struct bfs_s3_str *b, const char *name, const char *value);
char *bfs_credaws_hdr(const char *name, const char *value);
const char *bfs_credaws_role_name(const char *arn);
char *bfs_credaws_session_name(const char *given);
void bfs_credaws_looked(struct chain *ch, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- credprofile.c: the profile ---- */

void bfs_credaws_profile_free(struct profile *p);
int bfs_credaws_profile_load(struct profile *p, const char *name);
const char *bfs_credaws_pget(const struct profile *p, const char *key);
int bfs_credaws_profile_keys(const struct profile *p, int i, struct bfs_cred **out);

/* ---- credsts.c: STS ---- */

void bfs_credaws_sts_destroy(struct sts *s);
int bfs_credaws_sts_init(struct sts *s, const char *region, const char *ca);
int bfs_credaws_sts_call(const struct sts *s, const char *action, const char *form,
			 const struct bfs_cred *signer, const char *source, const char *account,
			 struct bfs_cred **out, char *why, size_t cap);

/* ---- credassume.c: AssumeRole ---- */

void bfs_credaws_assume_free(void *ctx);
int bfs_credaws_assume_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap);

/* ---- credwebid.c: AssumeRoleWithWebIdentity ---- */

int bfs_credaws_webid_make(struct chain *ch, const char *file, const char *arn, const char *session,
			   const char *where, struct bfs_cred_provider *out);

/* ---- credprocess.c: credential_process ---- */

void bfs_credaws_process_free(void *ctx);
int bfs_credaws_process_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap);

/* ---- credcontainer.c: container credentials ---- */

int bfs_credaws_container(struct chain *ch, struct bfs_cred_provider *out, bool *found);

/* ---- credimds.c: the instance metadata service ---- */

int bfs_credaws_imds(struct chain *ch, struct bfs_cred_provider *out, bool *found);

#endif
