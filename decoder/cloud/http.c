/* SPDX-License-Identifier: Apache-2.0 */
/* http.c — one blocking HTTP request for the credential endpoints (metadata
 * servers, token endpoints, STS), with retries: see http.h. */
#include "http.h"

#include "common.h"
#include "cred.h"
#include "s3str.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- what both clients share (the object-store client's is s3.c) ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

CURLcode bfs_http_curl_init(void)
{
	pthread_once(&curl_once, curl_init_once);
	return curl_init_rc;
}

void bfs_http_wipe_headers(struct curl_slist *h)
{
	for (; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
}

bool bfs_http_transient(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:
		return true;
	default:
		return false;
	}
}

/* ---- one blocking request ---- */

#define NOPROXY_CRED                                                                               \
	"169.254.169.254,169.254.170.2,169.254.170.23,fd00:ec2::254,fd00:ec2::23,127.0.0.1,"       \
	"localhost,::1,metadata.google.internal"

struct http_body {
	struct bfs_s3_str s;
	bool over;
};

static size_t http_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct http_body *b = ud;
	size_t n = size * nmemb;

	bfs_s3_str_add(&b->s, p, n);
	if (b->s.err) {
		b->over = b->s.err == -EFBIG;
		return 0;
	}
	return n;
}

/* The URL without its query or fragment, for messages. */
static void url_for_msg(const char *url, char *dst, size_t cap)
{
	size_t n = strcspn(url, "?#");

	snprintf(dst, cap, "%.*s", (int)(n < 200 ? n : 200), url);
}

static void http_body_wipe(struct http_body *b)
{
	if (b->s.p)
		explicit_bzero(b->s.p, b->s.cap);
	bfs_s3_str_free(&b->s);
	b->s.err = 0;
	b->over = false;
}

/* r's headers as curl's list in *out. */
static int http_headers(const struct bfs_http_req *r, struct curl_slist **out)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		struct curl_slist *nl = curl_slist_append(*out, r->headers[i]);

		if (!nl)
			return -ENOMEM;
		*out = nl;
	}
	return 0;
}

/* The hosts never reached through a proxy: the link-local credential
 * endpoints (Google's metadata server by its name too) and loopback never
 * go through a proxy of the environment (the user's no_proxy still
 * applies). */
static void http_noproxy(char *noproxy, size_t cap)
{
	const char *np = getenv("no_proxy") ? getenv("no_proxy") : getenv("NO_PROXY");

	snprintf(noproxy, cap, "%s%s%s", NOPROXY_CRED, np && *np ? "," : "",
		 np && strlen(np) < cap - sizeof(NOPROXY_CRED) - 2 ? np : "");
}

/* One request of bfs_http_request, over its tries. */
struct http_call {
	const struct bfs_http_req *r;
	CURL *e;
	struct curl_slist *h; /* r's headers */
	struct http_body b; /* the answer */
	long status; /* its HTTP status */
	char where[256]; /* the URL for messages */
	char errbuf[CURL_ERROR_SIZE], noproxy[1024];
};

/* Set up c->e for one try of c->r. */
static void http_setopts(struct http_call *c)
{
	const struct bfs_http_req *r = c->r;
	CURL *e = c->e;

	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	if (r->body || strcmp(r->method, "POST") == 0 || strcmp(r->method, "PUT") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(r->body ? r->body_len : 0));
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &c->b);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_VERBOSE, 0L); /* it would print the headers */
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(r->connect_timeout_ms ? r->connect_timeout_ms : 2000));
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(r->timeout_ms ? r->timeout_ms : 5000));
	curl_easy_setopt(e, CURLOPT_USERAGENT, "batchfs");
	curl_easy_setopt(e, CURLOPT_NOPROXY, c->noproxy);
	if (r->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, r->ca_file);
}

/* How one try of bfs_http_request ended. */
enum http_end {
	HTTP_DONE, /* an answer to hand over */
	HTTP_AGAIN, /* a failure (*rc, why), or a 5xx or 429 (*rc 0): *retry says if
		       another try may help */
	HTTP_FAIL, /* an answer too large or out of memory: *rc */
};

#define HTTP_CANCEL_POLL_MS 20 /* a fetch told to give up stops this soon */

/* curl_easy_perform(e), but given up (*cancelled) within
 * HTTP_CANCEL_POLL_MS once bfs_cred_fetch_cancelled() says so: a keeper
 * being freed, or a fork, never waits for a credential endpoint that hangs. */
static CURLcode http_perform(CURL *e, bool *cancelled)
{
	CURLM *m = curl_multi_init();
	CURLcode cr = CURLE_FAILED_INIT;
	CURLMsg *msg;
	int running = 1, left;

	*cancelled = false;
	if (!m)
		return CURLE_OUT_OF_MEMORY;
	if (curl_multi_add_handle(m, e) != CURLM_OK) {
		curl_multi_cleanup(m);
		return CURLE_OUT_OF_MEMORY;
	}
	while (curl_multi_perform(m, &running) == CURLM_OK && running) {
		if (bfs_cred_fetch_cancelled()) {
			*cancelled = true;
			break;
		}
		curl_multi_poll(m, NULL, 0, HTTP_CANCEL_POLL_MS, NULL);
	}
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == e)
			cr = msg->data.result;
	curl_multi_remove_handle(m, e);
	curl_multi_cleanup(m);
	return cr;
}

/* One try of c->r: the answer in c->b, its HTTP status in c->status. */
static enum http_end http_try(struct http_call *c, int *rc, bool *retry, char *why, size_t whycap)
{
	struct http_body *b = &c->b;
	bool cancelled;
	CURLcode cr;

	curl_easy_reset(c->e);
	http_body_wipe(b);
	b->s.max = c->r->max_body ? c->r->max_body : (1u << 20);
	c->errbuf[0] = '\0';
	http_setopts(c);
	cr = http_perform(c->e, &cancelled);
	if (cancelled) {
		snprintf(why, whycap, "%s: given up (the keeper stops)", c->where);
		*rc = -ECANCELED;
		return HTTP_FAIL;
	}
	c->status = 0;
	curl_easy_getinfo(c->e, CURLINFO_RESPONSE_CODE, &c->status);
	if (b->over) {
		snprintf(why, whycap, "%s: an answer over %zu bytes", c->where, b->s.max);
		*rc = -EFBIG;
		return HTTP_FAIL;
	}
	if (b->s.err) {
		*rc = -ENOMEM;
		return HTTP_FAIL;
	}
	if (cr == CURLE_OK) {
		*retry = c->status >= 500 || c->status == 429;
		if (!*retry)
			return HTTP_DONE;
		snprintf(why, whycap, "%s: HTTP %ld", c->where, c->status);
		*rc = 0;
		return HTTP_AGAIN;
	}
	*retry = bfs_http_transient(cr);
	*rc = cr == CURLE_COULDNT_CONNECT || cr == CURLE_COULDNT_RESOLVE_HOST ? -EHOSTUNREACH
	      : cr == CURLE_OPERATION_TIMEDOUT				      ? -ETIMEDOUT
									      : -EIO;
	/* curl's words name the host, never a header */
	snprintf(why, whycap, "%s: %s", c->where,
		 c->errbuf[0] ? c->errbuf : curl_easy_strerror(cr));
	return HTTP_AGAIN;
}

/* Sleep ms, in steps, unless the fetch is told to give up: false then. */
static bool sleep_ms(unsigned ms)
{
	while (ms && !bfs_cred_fetch_cancelled()) {
		unsigned step = ms < HTTP_CANCEL_POLL_MS ? ms : HTTP_CANCEL_POLL_MS;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)step * 1000000 };

		nanosleep(&ts, NULL);
		ms -= step;
	}
	return !bfs_cred_fetch_cancelled();
}

int bfs_http_request(const struct bfs_http_req *r, struct bfs_http_resp *resp, char *why,
		     size_t whycap)
{
	struct http_call c = { .r = r };
	uint64_t t0 = bfs_now_ns(), rnd = bfs_now_ns() ^ (uint64_t)(uintptr_t)r;
	unsigned tries = r->tries ? r->tries : 4, retry_ms = r->retry_ms ? r->retry_ms : 10000;
	int rc = 0;

	memset(resp, 0, sizeof(*resp));
	url_for_msg(r->url ? r->url : "", c.where, sizeof(c.where));
	if (!r->method || !r->url ||
	    (strncasecmp(r->url, "http://", 7) != 0 && strncasecmp(r->url, "https://", 8) != 0)) {
		snprintf(why, whycap, "%s: not an http:// or https:// URL", c.where);
		return -EINVAL;
	}
	if (bfs_http_curl_init() != CURLE_OK) {
		snprintf(why, whycap, "curl: %s", curl_easy_strerror(curl_init_rc));
		return -EIO;
	}
	rc = http_headers(r, &c.h);
	if (rc)
		goto out;
	if (!(c.e = curl_easy_init())) {
		rc = -ENOMEM;
		goto out;
	}
	http_noproxy(c.noproxy, sizeof(c.noproxy));
	c.b.s.max = r->max_body ? r->max_body : (1u << 20);
	for (unsigned attempt = 1;; attempt++) {
		bool retry = false;
		unsigned wait_ms;
		enum http_end end = http_try(&c, &rc, &retry, why, whycap);

		if (end == HTTP_DONE)
			break;
		if (end == HTTP_FAIL)
			goto out;
		wait_ms =
			bfs_backoff_ms(100, 2000, attempt, rnd = rnd * 6364136223846793005ULL + 1);
		if (!retry || attempt >= tries ||
		    bfs_now_ns() + (uint64_t)wait_ms * 1000000u - t0 >
			    (uint64_t)retry_ms * 1000000u) {
			if (rc == 0) /* a 5xx to the last try: the caller judges it */
				break;
			if (attempt > 1) {
				size_t n = strlen(why);

				snprintf(why + n, whycap > n ? whycap - n : 0, " (%u tries)",
					 attempt);
			}
			goto out;
		}
		if (!sleep_ms(wait_ms)) {
			snprintf(why, whycap, "%s: given up (the keeper stops)", c.where);
			rc = -ECANCELED;
			goto out;
		}
	}
	rc = 0;
	resp->status = c.status;
	resp->len = c.b.s.n;
	if (bfs_s3_str_take(&c.b.s, &resp->body)) {
		rc = -ENOMEM;
		goto out;
	}
out:
	if (rc == -ENOMEM)
		snprintf(why, whycap, "out of memory");
	http_body_wipe(&c.b);
	if (c.e)
		curl_easy_cleanup(c.e);
	bfs_http_wipe_headers(c.h);
	curl_slist_free_all(c.h);
	return rc;
}

void bfs_http_resp_free(struct bfs_http_resp *resp)
{
	if (!resp)
		return;
	if (resp->body) {
		explicit_bzero(resp->body, resp->len);
		free(resp->body);
	}
	memset(resp, 0, sizeof(*resp));
}
