/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credgcp.h — Google's Application Default Credentials (ADC) for gs://:
 * where they are, what the files say, and the OAuth 2.0 requests that turn
 * them into a Bearer access token, as google-auth does.
 *
 * The chain (bfs_gcp_adc_find), the first place that has something winning:
 *  1. $GOOGLE_APPLICATION_CREDENTIALS: a JSON file, either a service-account
 *     key ("type": "service_account": a JWT signed RS256 with its private
 *     key, exchanged at the key's token_uri, grant type
 *     urn:ietf:params:oauth:grant-type:jwt-bearer) or user credentials
 *     ("authorized_user": its refresh token exchanged at its token_uri,
 *     default https://oauth2.googleapis.com/token). Set but unreadable is an
 *     error, not a step to the next place (google-auth does the same).
 *  2. the gcloud ADC file, application_default_credentials.json under
 *     $CLOUDSDK_CONFIG, else ~/.config/gcloud/ (what `gcloud auth
 *     application-default login` writes): the same two types.
 *  3. the metadata server of a Google Cloud VM (GCE, TPU VMs, GKE, Vertex
 *     AI): $GCE_METADATA_HOST (host[:port]; $GCE_METADATA_ROOT, its older
 *     name, when it is unset), else metadata.google.internal;
 *     GET /computeMetadata/v1/instance/service-accounts/default/token with
 *     the header "Metadata-Flavor: Google".
 * The other types of key file (external_account: workload identity
 * federation; impersonated_service_account; gdch_service_account ...) are
 * refused with a message saying so.
 *
 * A token reply (all three) is JSON {"access_token", "expires_in",
 * "token_type": "Bearer"}.
 *
 * Secrets (the private key, the client secret, the refresh token, the
 * assertion, the access token) are never written to a message; the
 * structures here wipe them when destroyed. Messages name the file and the
 * field, one line.
 *
 * The provider (bfs_credgcp_chain) fetches tokens with http.h's blocking
 * bfs_http_request: a POST of the grant to the file's
 * token_uri, or the metadata server's GET. Its first fetch is the chain's
 * test of the metadata server: 1 s to connect, 2 tries, so that a machine
 * with none fails at once with a "looked in" line. The functions declared
 * here do no I/O but the reading of the key files.
 *
 * Thread-safety: none needed: a source belongs to one thread at a time.
 */
#ifndef BFS_CREDGCP_H
#define BFS_CREDGCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_cred_keeper;

/* Google's Application Default Credentials as a chain: walks the places
 * above and makes a keeper over the first that has credentials (fetching
 * a token once, blocking); its keeper hands out BFS_CRED_BEARER
 * credentials that s3.c sends as "Authorization: Bearer". 0 with *out;
 * -ENOENT when no place has any: `looked` (cap bytes) then names every
 * place looked in, with what was there, in one line, e.g.
 * "GOOGLE_APPLICATION_CREDENTIALS (unset),
 * ~/.config/gcloud/application_default_credentials.json (no such file),
 * the metadata server at http://169.254.169.254 (no answer)"; another
 * negative errno (a bad file, a refused grant) with one line in the
 * thread-local message (common.h) naming the place. Never a secret in
 * either. s3resolve.c (bfs_s3_config_resolve) calls it for gs:// when no
 * HMAC keys are given. */
int bfs_credgcp_chain(struct bfs_cred_keeper **out, const char *ca_file, char *looked, size_t cap);

#define BFS_GCP_SCOPE "https://www.googleapis.com/auth/devstorage.read_only"
#define BFS_GCP_TOKEN_URI "https://oauth2.googleapis.com/token"
#define BFS_GCP_METADATA_HOST "metadata.google.internal"
#define BFS_GCP_METADATA_PATH "/computeMetadata/v1/instance/service-accounts/default/token"
#define BFS_GCP_JWT_LIFETIME 3600 /* seconds: exp = iat + this, Google's most */
#define BFS_GCP_KEY_FILE_MAX (1u << 20)

enum bfs_gcp_kind {
	BFS_GCP_NONE = 0,
	BFS_GCP_SERVICE_ACCOUNT, /* a key file: a JWT assertion */
	BFS_GCP_AUTHORIZED_USER, /* a user's refresh token */
	BFS_GCP_METADATA, /* the metadata server */
};

/* Where the credentials are and what they are. */
struct bfs_gcp_source {
	enum bfs_gcp_kind kind;
	char *path; /* the file (NULL for the metadata server) */
	char *via; /* how it was found: "GOOGLE_APPLICATION_CREDENTIALS", ... */
	char *token_uri; /* the files: where the grant is POSTed */
	char *client_email; /* service account: the JWT's iss */
	char *private_key_id; /* service account: the JWT's kid (may be NULL) */
	char *private_key; /* service account: PEM (a secret) */
	char *client_id; /* user */
	char *client_secret; /* user (a secret) */
	char *refresh_token; /* user (a secret) */
	char *metadata_host; /* metadata: "host[:port]" */
};

/* Free the strings (wiping the secrets) and zero s. Accepts a zeroed one. */
void bfs_gcp_source_destroy(struct bfs_gcp_source *s);

/* Parse the key file text[0..n) read from path (named in messages). 0;
 * -EINVAL with one line naming path and the field (not JSON, no "type", a
 * type batchfs does not support, a field missing or not a string, a
 * token_uri that is not http[s]://); -ENOMEM. */
int bfs_gcp_source_parse(struct bfs_gcp_source *out, const char *path, const char *text, size_t n);
/* Read and parse path. -ENOENT when it does not exist, -EACCES when it
 * cannot be read (one line each), else as bfs_gcp_source_parse. */
int bfs_gcp_source_load(struct bfs_gcp_source *out, const char *path);

/* Walk the chain (see above) as far as a place that holds something: a key
 * file (parsed), or, when neither file is there, the metadata server (not
 * contacted here: whether it answers is the first fetch's business).
 * looked (cap bytes) gets the places looked in, for a "no credentials"
 * line. 0; the errors of bfs_gcp_source_load for a file that is there (or
 * named by GOOGLE_APPLICATION_CREDENTIALS) but bad; -EINVAL when
 * GOOGLE_APPLICATION_CREDENTIALS names a file that is not there. */
int bfs_gcp_adc_find(struct bfs_gcp_source *out, char *looked, size_t cap);

/* base64url without padding (RFC 7515) of p[0..n) into *out (malloc'd). */
int bfs_gcp_b64url(char **out, const void *p, size_t n);

/* The signed JWT a service-account key asserts (RFC 7523): header {"alg":
 * "RS256", "typ": "JWT", "kid": private_key_id}, claims {"iss":
 * client_email, "scope": scope, "aud": token_uri, "iat": now, "exp": now +
 * 3600}, signed with the private key. *out malloc'd (a secret: wipe it).
 * 0, -EINVAL (the key does not load: the message names the file and
 * "private_key"), -ENOMEM. */
int bfs_gcp_jwt(char **out, const struct bfs_gcp_source *s, const char *scope, int64_t now);

/* The token request of s: *url (malloc'd) and, for the files, the form
 * body to POST (*body malloc'd, a secret; NULL for the metadata server,
 * which is a GET with "Metadata-Flavor: Google"). 0, or bfs_gcp_jwt's
 * errors. */
int bfs_gcp_token_request(const struct bfs_gcp_source *s, int64_t now, char **url, char **body);

/* Parse a token reply body[0..n): *token (malloc'd, a secret) and
 * *expires_in (seconds; 3600 when the reply gives none). 0; -EBADMSG with
 * why (cap bytes, never the body's secrets: only its error and
 * error_description fields) when it holds no access token. */
int bfs_gcp_token_parse(const char *body, size_t n, char **token, int64_t *expires_in, char *why,
			size_t cap);

/* One line for README.txt and messages: "service account NAME (key file
 * PATH, from GOOGLE_APPLICATION_CREDENTIALS)", "user credentials (PATH, the
 * gcloud ADC file)", "the metadata server (HOST)". Never a secret. */
void bfs_gcp_source_describe(const struct bfs_gcp_source *s, char *dst, size_t cap);

#endif
