/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3_impl.h — what the object-store client's files (s3.c, s3conf.c,
 * s3resolve.c, s3resp.c) share: requests' addresses, endpoints, the retry
 * policy, messages, one response judged. Not part of the API.
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

#include "s3str.h"

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

/* The endpoint in its normal form: scheme and host lower-case, no default
 * port, no '/' at the end. 0, -EINVAL (a bad endpoint, with a message),
 * -ENOMEM. */
int bfs_s3_endpoint_normal(char **out, const char *ep);

/* Replace every occurrence of cfg's secret and session token in msg (a
 * NUL-terminated string in a buffer of cap bytes) by "[redacted]", and
 * control characters by spaces, so that msg is one line. */
void bfs_s3_msg_clean(char *msg, size_t cap, const struct bfs_s3_config *cfg);

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
