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

#define WHY 512 /* an error line */
#define MAX_TOKEN_FILE (64u * 1024) /* a web identity or container token file */

struct bfs_cjson;

/* The chain's walk: STS's region and the CA file for the providers it
 * builds, and the places it looked in so far (the "looked in" line). */
struct chain {
	const char *region, *ca;
	struct bfs_s3_str looked;
};

/* Where STS is (credsts.c says how it is found). */
struct sts {
	char *url; /* the endpoint, normal form, no '/' at the end */
	char *region; /* for the signature */
	char *ca;
};

/* An AssumeRole provider's context (credassume.c), made by the chain. */
struct assume {
	struct sts sts;
	char *role_arn, *session, *external_id, *duration;
	char *source_desc; /* "source_profile 'base'" */
	struct bfs_cred_provider src; /* the source's credentials */
	char *desc;
};

/* A credential_process provider's context (credprocess.c), made by the
 * chain. */
struct process {
	char *command;
	char *desc;
};

/* A profile: its sections of the credentials and config files. */
struct profile {
	const char *name;
	bool named; /* given, not the default */
	char cred_path[PATH_MAX], conf_path[PATH_MAX];
	struct bfs_s3_ini cred, conf;
};

/* ---- credawsutil.c: helpers ---- */

/* v is "true", in any case. */
bool bfs_credaws_truthy(const char *v);
/* strdup, NULL for NULL. */
char *bfs_credaws_strdup(const char *s);
/* Wipe and free a secret string; accepts NULL. */
void bfs_credaws_free_wiped(char *p);
/* A token file of at most max bytes, up to its first blank: 0 with *out
 * (malloc'd), or -ENOENT, -EIO, -ENOMEM with why. */
int bfs_credaws_read_small(const char *path, size_t max, char **out, char *why, size_t cap);
/* Credentials from a parsed JSON object o (NULL: the document was not one):
 * AccessKeyId, SecretAccessKey, the token under token_key, Expiration
 * (required unless optional_expiry). Wipes o's secrets and frees it. */
int bfs_credaws_json_creds(struct bfs_cjson *o, const char *token_key, bool optional_expiry,
			   const char *source, const char *account, struct bfs_cred **out,
			   char *why, size_t cap);
/* body[0..len) parsed as a JSON object, or NULL. */
struct bfs_cjson *bfs_credaws_json_object(const char *body, size_t len);
/* An error of bfs_http_request as the chain sees it: nothing listening is
 * -ENOENT ("not here"), the rest -EIO ("there, but failing"). */
int bfs_credaws_http_errno(int rc);
/* host[:port] and path of an http(s) URL, for the signature. */
int bfs_credaws_url_split(const char *url, char *host, size_t hcap, const char **path);
/* Append name=value, form-encoded, to the body b. */
void bfs_credaws_form_add(struct bfs_s3_str *b, const char *name, const char *value);
/* "Name: value", malloc'd (NULL when out of memory). */
char *bfs_credaws_hdr(const char *name, const char *value);
/* The role's name from its ARN (arn:aws:iam::123:role/path/NAME). */
const char *bfs_credaws_role_name(const char *arn);
/* The role session's name: given, else "batchfs-<time>" (malloc'd). */
char *bfs_credaws_session_name(const char *given);
/* Add one place to ch's "looked in" line. */
void bfs_credaws_looked(struct chain *ch, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- credprofile.c: the profile ---- */

/* Wipe and free what profile_load read. */
void bfs_credaws_profile_free(struct profile *p);
/* Read profile name's sections of both files: 0, or an error with a
 * message. */
int bfs_credaws_profile_load(struct profile *p, const char *name);
/* A key of the profile: the config file's, or the credentials file's. */
const char *bfs_credaws_pget(const struct profile *p, const char *key);
/* Static keys in one of the profile's files (i: 0 credentials, 1 config).
 * -ENOENT when it has none. */
int bfs_credaws_profile_keys(const struct profile *p, int i, struct bfs_cred **out);

/* ---- credsts.c: STS ---- */

/* Free s's strings. */
void bfs_credaws_sts_destroy(struct sts *s);
/* Where STS is for region (AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, the
 * regional endpoint, the global one): 0 or -ENOMEM. */
int bfs_credaws_sts_init(struct sts *s, const char *region, const char *ca);
/* POST the form to STS, signed with signer (NULL: unsigned), and parse the
 * answer into a credential. See bfs_cred_fetch_fn for the errors. */
int bfs_credaws_sts_call(const struct sts *s, const char *action, const char *form,
			 const struct bfs_cred *signer, const char *source, const char *account,
			 struct bfs_cred **out, char *why, size_t cap);

/* ---- credassume.c: AssumeRole ---- */

/* The provider's ctx_free and fetch over a struct assume. */
void bfs_credaws_assume_free(void *ctx);
int bfs_credaws_assume_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap);

/* ---- credwebid.c: AssumeRoleWithWebIdentity ---- */

/* A web identity provider: token file, role ARN, session name (NULL: made
 * up), where (for humans: which settings named them). 0 or -ENOMEM. */
int bfs_credaws_webid_make(struct chain *ch, const char *file, const char *arn, const char *session,
			   const char *where, struct bfs_cred_provider *out);

/* ---- credprocess.c: credential_process ---- */

/* The provider's ctx_free and fetch over a struct process. */
void bfs_credaws_process_free(void *ctx);
int bfs_credaws_process_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap);

/* ---- credcontainer.c: container credentials ---- */

/* The container credentials provider, *found when the environment names
 * an endpoint (else the place is added to ch's "looked in" line). 0, or
 * -EINVAL (a bad AWS_CONTAINER_CREDENTIALS_FULL_URI), -ENOMEM, with a
 * message. */
int bfs_credaws_container(struct chain *ch, struct bfs_cred_provider *out, bool *found);

/* ---- credimds.c: the instance metadata service ---- */

/* The IMDS provider, *found when it is enabled (whether it answers is
 * learned by fetching). 0, or -EINVAL (a bad endpoint), -ENOMEM, with a
 * message. */
int bfs_credaws_imds(struct chain *ch, struct bfs_cred_provider *out, bool *found);

#endif
