/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credaws.h — AWS's default credential chain, and the HMAC keys of a
 * profile for gs:// (credaws.c). What a chain hands out is a keeper
 * (cred.h).
 */
#ifndef BFS_CREDAWS_H
#define BFS_CREDAWS_H

#include <stddef.h>

struct bfs_cred_keeper;

/* The chain walks its places in AWS's order and makes a keeper over the
 * first that has credentials (fetching them once, blocking). 0 with *out;
 * -ENOENT when no place has any: `looked` (cap bytes) then names every
 * place looked in, with what was there, in one line; another negative
 * errno (a place that has credentials that do not work: a bad file, a
 * refused role) with one line in the thread-local message (common.h)
 * naming the place. Never a secret in either. s3resolve.c
 * (bfs_s3_config_resolve) calls it for s3:// where the options give no
 * credentials.
 *
 * The order is botocore's (credaws.c says it in full): the environment's
 * keys, the profile's role_arn (STS AssumeRole), web identity (STS
 * AssumeRoleWithWebIdentity), the profile's keys and credential_process,
 * container credentials, IMDSv2. profile: the mount's profile option, or
 * NULL ($AWS_PROFILE, "default"); region: STS's region (the mount's);
 * ca_file: for https endpoints, or NULL. */
int bfs_credaws_chain(struct bfs_cred_keeper **out, const char *profile, const char *region,
		      const char *ca_file, char *looked, size_t cap);

/* HMAC keys only (gs://): the environment's, else the profile's (credentials
 * file, then config file), in a keeper. -ENOENT with `looked` when none;
 * other errors with a message. */
int bfs_credaws_static(struct bfs_cred_keeper **out, const char *profile, char *looked, size_t cap);

#endif
