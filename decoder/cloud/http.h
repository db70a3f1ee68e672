/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h — HTTP for the credential endpoints: one blocking request to a
 * metadata server, a token endpoint or STS, with retries; and the curl
 * pieces the object-store client (s3.c) shares with it (http.c).
 */
#ifndef BFS_HTTP_H
#define BFS_HTTP_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- what the object-store client (s3.c) shares with this one ---- */

/* curl_global_init, once for the process: what it returned. */
CURLcode bfs_http_curl_init(void);
/* Wipe the headers' text (they may hold secrets) before they are freed. */
void bfs_http_wipe_headers(struct curl_slist *h);
/* A transport failure worth another try: refused, reset, timed out, cut
 * short. */
bool bfs_http_transient(CURLcode rc);

/* ---- one blocking request ---- */

/* One blocking request to a metadata server, a token endpoint or STS.
 * Usable without an S3 client (before one exists). */
struct bfs_http_req {
	const char *method; /* "GET", "PUT", "POST" */
	const char *url; /* http:// or https:// only */
	const char *const *headers; /* "Name: value" lines, maybe secret: never logged */
	size_t nheaders;
	const void *body; /* POST/PUT body, maybe secret; NULL: none */
	size_t body_len;
	size_t max_body; /* the most of the response body kept; 0: 1 MiB. More: -EFBIG */
	/* the retry policy, as the object-store client's (s3.h); 0: its default */
	unsigned tries; /* attempts (default 4) */
	unsigned retry_ms; /* no new attempt starts this long after the first (default 10000) */
	unsigned connect_timeout_ms; /* (default 2000; IMDS and container: 1000) */
	unsigned timeout_ms; /* each attempt, whole (default 5000) */
	const char *ca_file; /* NULL: the system's CAs ($AWS_CA_BUNDLE is the caller's to pass) */
};

struct bfs_http_resp {
	long status; /* the HTTP status of the last attempt */
	char *body; /* NUL-terminated (len bytes before the NUL), malloc'd; maybe secret */
	size_t len;
};

/* Send r. Connection failures (refused, reset, timed out, cut short), 5xx
 * and 429 are retried with backoff and jitter within r's policy; when the
 * tries run out on a 5xx, that last answer is returned. 0 with *resp filled,
 * whatever the status (the caller judges it; free it with
 * bfs_http_resp_free, which wipes the body); -EHOSTUNREACH nothing listens
 * or the host does not resolve, -ETIMEDOUT no answer in time, -EIO another
 * transport failure (each after the tries), -EFBIG a body over max_body,
 * -EINVAL a bad request, -ENOMEM, -ECANCELED given up at once when
 * bfs_cred_fetch_cancelled() says so (checked every 20 ms, in a try and
 * between tries). why (one line, naming the URL without
 * its query, never a header or a body) is set on every error. The
 * link-local metadata and container addresses and loopback never go
 * through a proxy of the environment (http_proxy); others do, as curl's
 * defaults say (no_proxy applies). */
int bfs_http_request(const struct bfs_http_req *r, struct bfs_http_resp *resp, char *why,
		     size_t whycap);
void bfs_http_resp_free(struct bfs_http_resp *resp); /* wipes and frees; accepts zeroed */

#endif
