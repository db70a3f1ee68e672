/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3sign.h — AWS Signature Version 4 for the object-store client: the
 * canonical request, the string to sign, the signing key and the
 * Authorization header of one S3 request (header-based authentication).
 *
 * Written here rather than taken from curl's CURLOPT_AWS_SIGV4, which (in
 * 7.88) neither sends nor signs x-amz-content-sha256 and does not encode
 * and sort the query as SigV4 requires.
 *
 * What S3 wants, and this does:
 *  - the path as sent, each byte but the unreserved ones (A-Z a-z 0-9
 *    - _ . ~) and '/' percent-encoded with upper-case hex, never encoded
 *    twice and never normalized ("a/../b" and "a//b" are keys);
 *  - the query as sent, names and values encoded the same way but '/' too,
 *    sorted by name (then value), "name=" for an empty value;
 *  - signed headers: host, x-amz-content-sha256, x-amz-date,
 *    x-amz-security-token (with a session token) and every header the
 *    caller adds (range, if-match): names lower-cased, values trimmed, runs
 *    of blanks made one space, sorted by name;
 *  - the payload hash of the empty body (GET and HEAD send none), signed
 *    and sent as x-amz-content-sha256.
 *
 * Does not: send anything, read credentials, or keep state. The secret is
 * read only to derive the signing key; nothing here writes it anywhere.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_S3SIGN_H
#define BFS_S3SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

/* A name and a value (borrowed). */
struct bfs_s3_kv {
	const char *name;
	const char *value; /* NULL: empty */
};

/* Credentials (borrowed). token NULL: none. */
struct bfs_s3_creds {
	const char *key_id;
	const char *secret;
	const char *token;
};

/* s percent-encoded for SigV4 (above); '/' kept when keep_slash (paths),
 * encoded otherwise (query names and values). *out is malloc'd. 0 or
 * -ENOMEM. */
int bfs_s3_uri_encode(char **out, const char *s, bool keep_slash);

/* The canonical query string of params[0..n): encoded, sorted, joined with
 * '&' ("" for n == 0). The request's URL must carry this very string, so
 * that what is signed is what is sent. *out is malloc'd. 0 or -ENOMEM. */
int bfs_s3_query_build(char **out, const struct bfs_s3_kv *params, size_t n);

/* One request to sign. Everything is borrowed. */
struct bfs_s3_sigreq {
	const char *method; /* "GET", "HEAD" */
	const char *host; /* the Host header as sent: host, or host:port when not the default */
	const char *path; /* as sent: already encoded (bfs_s3_uri_encode with keep_slash) */
	const char *query; /* as sent: bfs_s3_query_build's string, or NULL/"" */
	const struct bfs_s3_kv *headers; /* more headers sent and signed: any case, no duplicates */
	size_t nheaders;
	const char *payload_hash; /* hex SHA-256 of the body; NULL: the empty body */
	const char *region; /* "us-east-1"; "auto" for Google Cloud Storage */
	const char *service; /* "s3" */
	time_t when; /* the request's time (x-amz-date) */
};

#define BFS_S3_AUTH_MAX 1024

/* The headers a signed request carries, besides those of bfs_s3_sigreq. */
struct bfs_s3_signed {
	char amz_date[17]; /* x-amz-date: YYYYMMDDTHHMMSSZ */
	char content_sha256[65]; /* x-amz-content-sha256 */
	char authorization[BFS_S3_AUTH_MAX]; /* Authorization */
};

/* Sign r with cr (cr->token, when set, is sent as x-amz-security-token and
 * signed). 0; -EINVAL a header named twice or one that the signer sets
 * itself, a name or value with a control character, a key id or region
 * that would not fit an Authorization header of BFS_S3_AUTH_MAX bytes;
 * -ENOMEM. Sets no thread-local message (nothing here may print). */
int bfs_s3_sign(struct bfs_s3_signed *out, const struct bfs_s3_sigreq *r,
		const struct bfs_s3_creds *cr);

/* The canonical request and the string to sign that bfs_s3_sign signs, for
 * tests (both malloc'd, holding no secret). Same errors. */
int bfs_s3_sign_canonical(char **creq, char **sts, const struct bfs_s3_sigreq *r,
			  const struct bfs_s3_creds *cr);

#endif
