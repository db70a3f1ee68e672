/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_impl.h — helpers shared by the object-store client's files (s3.c,
 * s3conf.c, s3sign.c, s3xml.c): a growable string. Not part of the API.
 */
#ifndef BFS_S3_IMPL_H
#define BFS_S3_IMPL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated string that grows; err sticks at -ENOMEM (or -EFBIG past
 * max, when max is set) and every later append is a no-op. */
struct bfs_s3_str {
	char *p;
	size_t n, cap;
	size_t max; /* 0: no bound */
	int err;
};

static inline int bfs_s3_str_reserve(struct bfs_s3_str *s, size_t more)
{
	size_t want, cap;
	char *p;

	if (s->err)
		return s->err;
	if (__builtin_add_overflow(s->n, more, &want) || want == SIZE_MAX ||
	    (s->max && want > s->max)) {
		s->err = s->max ? -EFBIG : -ENOMEM;
		return s->err;
	}
	if (want < s->cap)
		return 0;
	cap = s->cap ? s->cap : 64;
	while (cap <= want)
		cap = cap > SIZE_MAX / 2 ? want + 1 : cap * 2;
	p = realloc(s->p, cap);
	if (!p) {
		s->err = -ENOMEM;
		return s->err;
	}
	s->p = p;
	s->cap = cap;
	return 0;
}

static inline void bfs_s3_str_add(struct bfs_s3_str *s, const void *p, size_t n)
{
	if (bfs_s3_str_reserve(s, n))
		return;
	if (n)
		memcpy(s->p + s->n, p, n);
	s->n += n;
	s->p[s->n] = '\0';
}

static inline void bfs_s3_str_adds(struct bfs_s3_str *s, const char *z)
{
	bfs_s3_str_add(s, z, strlen(z));
}

static inline void bfs_s3_str_addc(struct bfs_s3_str *s, char c)
{
	bfs_s3_str_add(s, &c, 1);
}

__attribute__((format(printf, 2, 3))) static inline void bfs_s3_str_addf(struct bfs_s3_str *s,
									 const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		s->err = -EINVAL;
		return;
	}
	if (bfs_s3_str_reserve(s, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(s->p + s->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s->n += (size_t)n;
}

/* Take the string (never NULL on success: "" when nothing was added);
 * returns 0 or the sticky error, and frees it then. */
static inline int bfs_s3_str_take(struct bfs_s3_str *s, char **out)
{
	if (!s->err && !s->p) { /* nothing was added: "" */
		s->p = calloc(1, 1);
		s->cap = 1;
		if (!s->p)
			s->err = -ENOMEM;
	}
	if (s->err) {
		free(s->p);
		s->p = NULL;
		return s->err;
	}
	*out = s->p;
	s->p = NULL;
	s->n = s->cap = 0;
	return 0;
}

static inline void bfs_s3_str_free(struct bfs_s3_str *s)
{
	free(s->p);
	s->p = NULL;
	s->n = s->cap = 0;
}

/* ---- s3conf.c: requests' addresses, the retry policy, messages ---- */
#include "s3.h"

/* Where one request goes. */
struct bfs_s3_target {
	char *url; /* scheme://host[:port]/path[?query]: what curl is given */
	char *host; /* the Host header (the port only when not the scheme's default) */
	char *path; /* the encoded path, as in url */
};

/* The target of bucket/key (key NULL: the bucket itself, for a listing)
 * with the query (bfs_s3_query_build's, or NULL), path-style or
 * virtual-hosted as cfg says and the bucket allows (a bucket that is no
 * DNS name, or holds a '.' under https, goes path-style). 0, -EINVAL (a
 * bad endpoint, with a message), -ENOMEM. */
int bfs_s3_target_build(struct bfs_s3_target *t, const struct bfs_s3_config *cfg,
			const char *bucket, const char *key, const char *query);
void bfs_s3_target_destroy(struct bfs_s3_target *t);

/* The wait before retry number `retry` (1 for the first): backoff_ms
 * doubling each time, capped at backoff_max_ms, half of it fixed and half
 * drawn from rnd ("equal jitter"). */
unsigned bfs_s3_backoff_ms(const struct bfs_s3_config *cfg, unsigned retry, uint64_t rnd);

/* Replace every occurrence of cfg's secret and session token in msg (a
 * NUL-terminated string in a buffer of cap bytes) by "[redacted]", and
 * control characters by spaces, so that msg is one line. */
void bfs_s3_msg_clean(char *msg, size_t cap, const struct bfs_s3_config *cfg);

/* A profile file's one section, its keys lower-cased; a key indented under
 * "parent =" (with nothing after the '=') is "parent.key". Values may be
 * secrets: bfs_s3_ini_free wipes them. */
struct bfs_s3_ini {
	char **keys, **vals;
	size_t n, cap;
	bool found; /* the section is in the file */
};

/* Load section `want` ("default", "profile dev", "sso-session x") of the
 * file at path; a missing file is an empty one. 0, -EINVAL (unreadable, over
 * 1 MiB: with a message), -ENOMEM. */
int bfs_s3_ini_load(struct bfs_s3_ini *s, const char *path, const char *want);
/* The value of key (lower-case) in s, the last one given; NULL if none. */
const char *bfs_s3_ini_get(const struct bfs_s3_ini *s, const char *key);
void bfs_s3_ini_free(struct bfs_s3_ini *s);
/* $var, else ~/.aws/name; a leading "~/" is the home directory. */
int bfs_s3_profile_path(char *out, size_t cap, const char *var, const char *name);

/* ---- credaws.c ---- */
struct bfs_cred_keeper;
/* HMAC keys only (gs://): the environment's, else the profile's (credentials
 * file, then config file), in a keeper. -ENOENT with `looked` when none;
 * other errors with a message. */
int bfs_credaws_static(struct bfs_cred_keeper **out, const char *profile, char *looked, size_t cap);

/* ---- s3resp.c: one HTTP response, judged (no curl here: fuzzable) ---- */

enum bfs_s3resp_kind {
	BFS_S3RESP_GET, /* a ranged read into the caller's memory */
	BFS_S3RESP_HEAD,
	BFS_S3RESP_LIST, /* a listing page: the body is kept whole */
	BFS_S3RESP_PROBE, /* GET bytes=0-0 after a failed HEAD: only the reason matters */
};

#define BFS_S3RESP_ERRBODY (64u * 1024) /* of an error body, what is kept to parse */
#define BFS_S3RESP_LISTBODY (32u << 20) /* a listing page (S3's are about 300 KiB) */

/* What was asked, and what came back of one attempt. */
struct bfs_s3resp {
	enum bfs_s3resp_kind kind;
	/* the request (BFS_S3RESP_GET) */
	uint64_t off;
	size_t len;
	void *dst;
	const char *if_match; /* NULL or "" for none */
	bool to_end; /* BFS_S3_REQ_TO_END */
	/* the response */
	long status;
	size_t got; /* GET: body bytes written to dst */
	struct bfs_s3_str body; /* LIST: the page; any error: the start of its body */
	char etag[BFS_S3_ETAG_MAX];
	bool have_crange, have_total, have_clen, overflow;
	uint64_t cr_first, cr_last, cr_total, clen;
	char bucket_region[64];
	unsigned retry_after_s;
	/* results of a good GET */
	uint64_t object_size;
};

/* How an attempt's transport ended (curl's result, classified). */
enum bfs_s3resp_net {
	BFS_S3RESP_NET_OK = 0,
	BFS_S3RESP_NET_TRANSIENT, /* refused, reset, timed out, cut short: worth another try */
	BFS_S3RESP_NET_FATAL, /* anything else (a bad certificate ...) */
};

enum bfs_s3resp_verdict { BFS_S3RESP_OK, BFS_S3RESP_RETRY, BFS_S3RESP_FAIL };

/* Forget the last attempt's response (the request fields stay). */
void bfs_s3resp_reset(struct bfs_s3resp *r);
/* One header line as received (with its CRLF), the status line too. */
void bfs_s3resp_header(struct bfs_s3resp *r, const char *line, size_t n);
/* Body bytes: n when taken, 0 to abort the transfer (more than the range, or
 * a listing over its cap: overflow is set). */
size_t bfs_s3resp_body(struct bfs_s3resp *r, const void *p, size_t n);
/* The verdict on a finished attempt; for RETRY and FAIL, *err and why (the
 * reason, one line, without the object's name). net_msg: curl's words for a
 * transport failure; endpoint for "cannot reach" lines. */
enum bfs_s3resp_verdict bfs_s3resp_judge(struct bfs_s3resp *r, enum bfs_s3resp_net net,
					 bool unreachable, const char *net_msg,
					 const struct bfs_s3_config *cfg, int *err, char *why,
					 size_t cap);

#endif
