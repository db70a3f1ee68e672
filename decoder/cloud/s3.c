/* SPDX-License-Identifier: Apache-2.0 */
/* s3.c — the object-store client: one libcurl multi handle per client,
 * driven by the client's own thread. See s3.h. curl's initialisation, its
 * transient failures and the wiping of headers are http.c's, the one other
 * file that includes curl (for the credential endpoints).
 *
 * The thread owns every transfer once it is taken from the incoming queue:
 * ready (FIFO) -> active (on a connection, at most max_conns) -> done, or
 * -> timers (waiting for a retry) -> ready. Other threads only append to
 * the incoming queue and to the cancel list, under the lock, and wake the
 * thread (curl_multi_wakeup).
 */
#include "s3.h"

#include "cred.h"
#include "common.h"
#include "http.h"
#include "s3_impl.h"
#include "s3sign.h"
#include "s3xml.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MSG_MAX 768
#define CURL_BUFFER (128L * 1024)
#define MAX_EMPTY_PAGES 100 /* truncated listing pages with no key, in a row */
#define FAILURES_KEPT 256 /* ranges that gave up, remembered a while */
#define FAILURE_MIN_NS 1000000000ull

/* What a transfer is: the kinds of s3resp.c. */
#define X_GET BFS_S3RESP_GET /* a caller's ranged read (bfs_s3_submit) */
#define X_HEAD BFS_S3RESP_HEAD
#define X_LIST BFS_S3RESP_LIST /* one page */
#define X_PROBE BFS_S3RESP_PROBE /* after a failed HEAD: GET bytes=0-0, for the reason */

enum xwhere { W_NONE, W_READY, W_TIMER, W_ACTIVE };

struct waiter {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	int err;
	char msg[MSG_MAX];
};

struct xfer {
	struct bfs_s3 *c;
	enum bfs_s3resp_kind kind;
	struct bfs_s3_req *req; /* X_GET */
	const char *bucket, *key; /* borrowed from req or from the waiting caller */
	char *query; /* X_LIST */
	struct bfs_s3_target target; /* built at the first attempt */
	/* attempts */
	unsigned attempt; /* attempts started */
	uint64_t first_ns; /* the first attempt's start */
	uint64_t due_ns; /* W_TIMER: when to try again */
	bool cancel;
	bool gave_up; /* X_GET: failed after its retries (remembered) */
	bool one_try; /* X_GET started while the store is down: no retry */
	CURL *easy; /* W_ACTIVE */
	struct curl_slist *hdrs;
	struct bfs_s3resp r; /* the request's shape and the attempt's response */
	struct bfs_cred *cred; /* what the attempt was signed with (the keeper's snapshot) */
	bool cred_retried; /* tried again once after the store said the token expired */
	char errbuf[CURL_ERROR_SIZE];
	char last[MSG_MAX]; /* the last transient failure, for the final message */
	/* the result (internal kinds: read by the waiting caller) */
	int err;
	char msg[MSG_MAX];
	struct waiter w; /* internal kinds: the caller waiting */
	enum xwhere where;
	struct xfer *prev, *next;
};

struct xlist {
	struct xfer *head, *tail;
};

/* A ranged read that gave up after its retries: for as long again as its
 * tries took, a GET of the same object overlapping it fails at once with
 * the same message (a reader does not wait the budget again, errors.txt
 * gets one line). */
struct failure {
	char *object; /* "bucket/key" (NULL: a free slot) */
	uint64_t off, end; /* [off, end) */
	uint64_t until_ns;
	char *msg;
};

struct bfs_s3 {
	struct bfs_s3_config cfg;
	unsigned max_conns;
	CURLM *multi;
	pthread_t thread;
	pthread_mutex_t lock; /* guards incoming, cancels, ncancel, capcancel, stopping */
	struct xlist incoming;
	struct bfs_s3_req **cancels;
	size_t ncancel, capcancel;
	bool stopping;
	/* the client's thread only */
	struct xlist ready, timers, active;
	unsigned nactive;
	CURL **idle; /* easy handles kept for reuse */
	unsigned nidle;
	uint64_t rng;
	struct failure failures[FAILURES_KEPT]; /* a ring */
	unsigned next_failure;
	/* a read gave up, and no request has succeeded since: until then,
	 * new reads get one try (a store that is down costs each range one
	 * request, not the whole budget) */
	uint64_t down_until_ns;
	/* counters */
	atomic_uint_fast64_t n_requests, n_retries, n_failed, n_bytes, n_expired;
	atomic_uint n_active, n_queued;
};

/* ---- lists ---- */

static void xl_push(struct xlist *l, struct xfer *x)
{
	x->next = NULL;
	x->prev = l->tail;
	if (l->tail)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
}

static void xl_remove(struct xlist *l, struct xfer *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		l->head = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		l->tail = x->prev;
	x->prev = x->next = NULL;
}

static struct xfer *xl_pop(struct xlist *l)
{
	struct xfer *x = l->head;

	if (x)
		xl_remove(l, x);
	return x;
}

/* Insert into the timers, sorted by due_ns. */
static void timers_insert(struct bfs_s3 *c, struct xfer *x)
{
	struct xfer *at = c->timers.tail;

	while (at && at->due_ns > x->due_ns)
		at = at->prev;
	if (!at) {
		x->prev = NULL;
		x->next = c->timers.head;
		if (c->timers.head)
			c->timers.head->prev = x;
		else
			c->timers.tail = x;
		c->timers.head = x;
	} else {
		x->prev = at;
		x->next = at->next;
		if (at->next)
			at->next->prev = x;
		else
			c->timers.tail = x;
		at->next = x;
	}
	x->where = W_TIMER;
}

/* ---- messages ---- */

static const char *scheme_name(const struct bfs_s3 *c)
{
	return c->cfg.scheme == BFS_S3_SCHEME_GS ? "gs" : "s3";
}

/* What the transfer is about: "s3://b/k bytes 0-99", "s3://b/p (listing)". */
static void xfer_subject(const struct xfer *x, char *dst, size_t cap)
{
	const struct bfs_s3 *c = x->c;

	switch (x->kind) {
	case X_GET:
		snprintf(dst, cap, "%s://%s/%s bytes %" PRIu64 "-%" PRIu64, scheme_name(c),
			 x->bucket, x->key, x->req->off, x->req->off + x->req->len - 1);
		break;
	case X_LIST:
		snprintf(dst, cap, "%s://%s/%s (listing)", scheme_name(c), x->bucket,
			 x->key ? x->key : "");
		break;
	default:
		snprintf(dst, cap, "%s://%s/%s", scheme_name(c), x->bucket, x->key);
		break;
	}
}

/* ---- completion ---- */

static void waiter_init(struct waiter *w)
{
	pthread_mutex_init(&w->m, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->done = false;
	w->err = 0;
	w->msg[0] = '\0';
}

static void waiter_destroy(struct waiter *w)
{
	pthread_mutex_destroy(&w->m);
	pthread_cond_destroy(&w->cv);
}

static void waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->m);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->m);
	pthread_mutex_unlock(&w->m);
}

static void waiter_signal(struct waiter *w, int err, const char *msg)
{
	pthread_mutex_lock(&w->m);
	w->err = err;
	snprintf(w->msg, sizeof(w->msg), "%s", msg ? msg : "");
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

static void xfer_free(struct xfer *x)
{
	if (!x)
		return;
	if (x->kind != X_GET)
		waiter_destroy(&x->w);
	bfs_cred_unref(x->cred);
	free(x->query);
	bfs_s3_target_destroy(&x->target);
	bfs_s3_str_free(&x->r.body);
	free(x);
}

/* ---- ranges that gave up ---- */

static bool failure_is(const struct failure *f, const struct xfer *x, uint64_t now)
{
	size_t bl = strlen(x->bucket);

	return f->object && (!now || f->until_ns > now) && x->req->off < f->end &&
	       x->req->off + x->req->len > f->off && strncmp(f->object, x->bucket, bl) == 0 &&
	       f->object[bl] == '/' && strcmp(f->object + bl + 1, x->key) == 0;
}

/* The message of a remembered failure that x (a GET) overlaps, or NULL;
 * expired ones too with `any`. The client's thread only. */
static const char *failure_recall(struct bfs_s3 *c, const struct xfer *x, bool any)
{
	uint64_t now = any ? 0 : bfs_now_ns();

	for (unsigned i = 0; i < FAILURES_KEPT; i++)
		if (failure_is(&c->failures[i], x, now))
			return c->failures[i].msg;
	return NULL;
}

static void failure_free(struct failure *f)
{
	free(f->object);
	free(f->msg);
	memset(f, 0, sizeof(*f));
}

/* Remember that x gave up with msg (best effort: out of memory, not). */
static void failure_keep(struct bfs_s3 *c, const struct xfer *x, const char *msg)
{
	struct failure *f = &c->failures[c->next_failure];
	uint64_t now = bfs_now_ns(), took;
	char *object = NULL, *copy = strdup(msg);

	if (!copy || asprintf(&object, "%s/%s", x->bucket, x->key) < 0) {
		free(copy);
		return;
	}
	failure_free(f);
	f->object = object;
	f->msg = copy;
	f->off = x->req->off;
	f->end = x->req->off + x->req->len;
	/* as long again as its tries took: 1 s at least, retry_ms at most */
	took = now - x->first_ns;
	if (took < FAILURE_MIN_NS)
		took = FAILURE_MIN_NS;
	if (took > (uint64_t)c->cfg.retry_ms * 1000000u)
		took = (uint64_t)c->cfg.retry_ms * 1000000u;
	f->until_ns = now + took;
	c->next_failure = (c->next_failure + 1) % FAILURES_KEPT;
	c->down_until_ns = now + (uint64_t)c->cfg.retry_ms * 1000000u;
}

/* The end of a transfer with its whole message (empty when err is 0):
 * the caller's callback, or the waiting caller. Nothing here touches x
 * after that. */
static void finish(struct xfer *x, int err, const char *msg)
{
	x->where = W_NONE;
	if (err)
		atomic_fetch_add(&x->c->n_failed, 1);
	if (x->kind == X_GET) {
		struct bfs_s3_req *r = x->req;

		if (err && x->gave_up)
			failure_keep(x->c, x, msg);
		xfer_free(x);
		r->done(r, err, err ? msg : NULL);
		return;
	}
	x->err = err;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
	waiter_signal(&x->w, err, msg);
}

/* The end of a transfer: "SUBJECT: reason" when it failed. */
static void complete(struct xfer *x, int err, const char *reason)
{
	struct bfs_s3 *c = x->c;
	char subject[MSG_MAX / 2], msg[MSG_MAX];

	msg[0] = '\0';
	if (err) {
		xfer_subject(x, subject, sizeof(subject));
		snprintf(msg, sizeof(msg), "%s: %s", subject, reason);
		bfs_s3_msg_clean(msg, sizeof(msg), &c->cfg);
		if (x->cred) {
			const char *secrets[] = { x->cred->secret, x->cred->token };

			bfs_cred_scrub(msg, sizeof(msg), secrets, 2);
		}
	}
	finish(x, err, msg);
}

/* ---- one attempt ---- */

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	struct xfer *x = ud;

	bfs_s3resp_header(&x->r, buf, size * nitems);
	return size * nitems;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct xfer *x = ud;

	return bfs_s3resp_body(&x->r, p, size * nmemb);
}

static int add_header(struct curl_slist **l, const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 3;
	struct curl_slist *nl;
	char *buf = malloc(n);

	if (!buf)
		return -ENOMEM;
	snprintf(buf, n, "%s: %s", name, value);
	nl = curl_slist_append(*l, buf);
	explicit_bzero(buf, n);
	free(buf);
	if (!nl)
		return -ENOMEM;
	*l = nl;
	return 0;
}

/* The request's headers, signed. */
static int build_headers(struct xfer *x, char *why, size_t whycap)
{
	struct bfs_s3 *c = x->c;
	struct bfs_s3_kv extra[2];
	size_t nextra = 0;
	char range[64];
	struct curl_slist *h = NULL;
	int rc;

	if (x->kind == X_GET) {
		snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, x->req->off,
			 x->req->off + x->req->len - 1);
		extra[nextra++] = (struct bfs_s3_kv){ "range", range };
		if (x->req->etag && *x->req->etag)
			extra[nextra++] = (struct bfs_s3_kv){ "if-match", x->req->etag };
	} else if (x->kind == X_PROBE) {
		extra[nextra++] = (struct bfs_s3_kv){ "range", "bytes=0-0" };
	}
	bfs_cred_unref(x->cred);
	x->cred = NULL;
	/* none valid now: -EAGAIN (being refreshed) is waited for as a
	 * transient failure; -EACCES (the provider fails) ends the request */
	if (!c->cfg.anonymous && (rc = bfs_cred_keeper_get(c->cfg.keeper, &x->cred, why, whycap)))
		return rc;
	if ((rc = add_header(&h, "Host", x->target.host)))
		goto out;
	for (size_t i = 0; i < nextra; i++)
		if ((rc = add_header(&h, extra[i].name, extra[i].value)))
			goto out;
	if (x->cred && x->cred->kind == BFS_CRED_BEARER) {
		size_t n = strlen(x->cred->token) + 8;
		char *v = malloc(n);

		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		snprintf(v, n, "Bearer %s", x->cred->token);
		rc = add_header(&h, "Authorization", v);
		explicit_bzero(v, n);
		free(v);
		if (rc)
			goto out;
	} else if (x->cred && x->cred->kind == BFS_CRED_SIGV4) {
		struct bfs_s3_sigreq sr = {
			.method = x->kind == X_HEAD ? "HEAD" : "GET",
			.host = x->target.host,
			.path = x->target.path,
			.query = x->query,
			.headers = extra,
			.nheaders = nextra,
			.region = c->cfg.region,
			.service = "s3",
			.when = time(NULL),
		};
		struct bfs_s3_creds cr = { x->cred->key_id, x->cred->secret, x->cred->token };
		struct bfs_s3_signed sig = { 0 };

		rc = bfs_s3_sign(&sig, &sr, &cr);
		if (rc) {
			snprintf(why, whycap, "%s",
				 rc == -ENOMEM ? "out of memory"
					       : "cannot sign the request (a key id, region, "
						 "ETag or token that no header can carry)");
			goto out;
		}
		if ((rc = add_header(&h, "x-amz-date", sig.amz_date)) ||
		    (rc = add_header(&h, "x-amz-content-sha256", sig.content_sha256)) ||
		    (x->cred->token &&
		     (rc = add_header(&h, "x-amz-security-token", x->cred->token))) ||
		    (rc = add_header(&h, "Authorization", sig.authorization))) {
			explicit_bzero(&sig, sizeof(sig));
			goto out;
		}
		explicit_bzero(&sig, sizeof(sig));
	}
	x->hdrs = h;
	h = NULL;
out:
	if (rc == -ENOMEM)
		snprintf(why, whycap, "out of memory");
	bfs_http_wipe_headers(h);
	curl_slist_free_all(h);
	return rc;
}

static CURL *easy_get(struct bfs_s3 *c)
{
	if (c->nidle)
		return c->idle[--c->nidle];
	return curl_easy_init();
}

static void easy_put(struct bfs_s3 *c, CURL *e)
{
	if (c->nidle < c->max_conns) {
		curl_easy_reset(e);
		c->idle[c->nidle++] = e;
	} else {
		curl_easy_cleanup(e);
	}
}

static void setup_easy(struct bfs_s3 *c, struct xfer *x, CURL *e)
{
	long stall_s = (long)((c->cfg.stall_timeout_ms + 999) / 1000);

	curl_easy_setopt(e, CURLOPT_URL, x->target.url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(e, CURLOPT_VERBOSE, 0L); /* it would print the headers */
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* "a/../b" is a key */
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->cfg.connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, CURL_BUFFER);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "batchfs");
	if (c->cfg.ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->cfg.ca_file);
	if (x->kind == X_HEAD)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
}

/* No valid credential now (the keeper says why): wait as after a transient
 * failure, within the request's tries and time, then fail with -EIO. */
static void cred_wait(struct bfs_s3 *c, struct xfer *x, const char *why)
{
	uint64_t now = bfs_now_ns(), wait_ns;

	if (x->attempt++ == 0)
		x->first_ns = now;
	snprintf(x->last, sizeof(x->last), "%s", why);
	wait_ns =
		(uint64_t)bfs_s3_backoff_ms(&c->cfg, x->attempt, bfs_rand_next(&c->rng)) * 1000000u;
	if (x->attempt >= c->cfg.tries ||
	    now + wait_ns - x->first_ns > (uint64_t)c->cfg.retry_ms * 1000000u) {
		char msg[MSG_MAX + 64];

		snprintf(msg, sizeof(msg), "%s (gave up after %u tries in %.1f s)", x->last,
			 x->attempt, (double)(now - x->first_ns) / 1e9);
		complete(x, -EIO, msg);
		return;
	}
	x->due_ns = now + wait_ns;
	timers_insert(c, x);
	atomic_fetch_add(&c->n_queued, 1);
}

/* Whether the store's answer says the credential's token expired: S3's
 * ExpiredToken (400), STS-style ExpiredTokenException, TokenRefreshRequired;
 * a 401 to a Bearer token; a HEAD (no body) refused with 400 or 401 while
 * signed with a session token. */
static bool token_expired(const struct xfer *x)
{
	static const char *const codes[] = { "ExpiredToken", "ExpiredTokenException",
					     "TokenRefreshRequired" };
	const struct bfs_s3resp *r = &x->r;
	struct bfs_s3xml_error e;

	if (!x->cred || (r->status != 400 && r->status != 401 && r->status != 403))
		return false;
	if (x->cred->kind == BFS_CRED_BEARER && r->status == 401)
		return true;
	if (r->body.n && bfs_s3xml_parse_error(&e, r->body.p, r->body.n) == 0) {
		for (size_t i = 0; i < BFS_ARRAY_SIZE(codes); i++)
			if (strcmp(e.code, codes[i]) == 0)
				return true;
		return false;
	}
	return x->kind == X_HEAD && x->cred->token && r->status != 403;
}

/* Start an attempt of x (taken from ready). */
static void start(struct bfs_s3 *c, struct xfer *x)
{
	char why[MSG_MAX];
	CURL *e;
	int rc;

	atomic_fetch_sub(&c->n_queued, 1);
	if (x->cancel) {
		complete(x, -ECANCELED, "cancelled");
		return;
	}
	if (x->kind == X_GET && x->attempt == 0) {
		const char *failed = failure_recall(c, x, false);

		if (failed) { /* gave up moments ago: not again within the budget */
			finish(x, -EIO, failed);
			return;
		}
		x->one_try = bfs_now_ns() < c->down_until_ns;
	}
	if (!x->target.url) {
		rc = bfs_s3_target_build(&x->target, &c->cfg, x->bucket,
					 x->kind == X_LIST ? NULL : x->key, x->query);
		if (rc) {
			complete(x, rc, rc == -ENOMEM ? "out of memory" : "a bad endpoint");
			return;
		}
	}
	why[0] = '\0';
	rc = build_headers(x, why, sizeof(why));
	if (rc == -EAGAIN) {
		cred_wait(c, x, why);
		return;
	}
	if (rc == -EACCES) { /* no credentials: the read fails (EIO), the keeper retries */
		complete(x, -EIO, why);
		return;
	}
	if (rc != 0) {
		complete(x, -EINVAL, why);
		return;
	}
	e = easy_get(c);
	if (!e) {
		bfs_http_wipe_headers(x->hdrs);
		curl_slist_free_all(x->hdrs);
		x->hdrs = NULL;
		complete(x, -ENOMEM, "out of memory");
		return;
	}
	bfs_s3resp_reset(&x->r);
	x->errbuf[0] = '\0';
	setup_easy(c, x, e);
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
		easy_put(c, e);
		bfs_http_wipe_headers(x->hdrs);
		curl_slist_free_all(x->hdrs);
		x->hdrs = NULL;
		complete(x, -EIO, "curl refused the transfer");
		return;
	}
	if (x->attempt++ == 0)
		x->first_ns = bfs_now_ns();
	else
		atomic_fetch_add(&c->n_retries, 1);
	atomic_fetch_add(&c->n_requests, 1);
	x->easy = e;
	x->where = W_ACTIVE;
	xl_push(&c->active, x);
	c->nactive++;
	atomic_store(&c->n_active, c->nactive);
}

/* Take x off its connection. */
static void detach(struct bfs_s3 *c, struct xfer *x)
{
	curl_multi_remove_handle(c->multi, x->easy);
	easy_put(c, x->easy);
	x->easy = NULL;
	bfs_http_wipe_headers(x->hdrs);
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	xl_remove(&c->active, x);
	c->nactive--;
	atomic_store(&c->n_active, c->nactive);
}

/* An attempt ended: done, failed, or to be tried again. */
static void attempt_done(struct bfs_s3 *c, struct xfer *x, CURLcode res)
{
	char why[MSG_MAX];
	enum bfs_s3resp_verdict v;
	uint64_t now, wait_ns;
	unsigned wait_ms;
	int err = 0;

	detach(c, x);
	if (x->cancel) {
		complete(x, -ECANCELED, "cancelled");
		return;
	}
	if (res == CURLE_OK && !x->cred_retried && token_expired(x)) {
		/* one refresh, one more try: the next start() gets the new one */
		x->cred_retried = true;
		bfs_cred_keeper_expired(c->cfg.keeper, x->cred);
		atomic_fetch_add(&c->n_expired, 1);
		x->due_ns = bfs_now_ns();
		timers_insert(c, x);
		atomic_fetch_add(&c->n_queued, 1);
		return;
	}
	v = bfs_s3resp_judge(&x->r,
			     res == CURLE_OK	       ? BFS_S3RESP_NET_OK
			     : bfs_http_transient(res) ? BFS_S3RESP_NET_TRANSIENT
						       : BFS_S3RESP_NET_FATAL,
			     res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST,
			     x->errbuf[0] ? x->errbuf : curl_easy_strerror(res), &c->cfg, &err, why,
			     sizeof(why));
	if (v == BFS_S3RESP_OK) {
		c->down_until_ns = 0; /* the store answers */
		if (x->kind == X_GET) {
			struct bfs_s3_req *r = x->req;

			r->got = x->r.got;
			r->object_size = x->r.object_size;
			snprintf(r->etag_got, sizeof(r->etag_got), "%s", x->r.etag);
			atomic_fetch_add(&c->n_bytes, x->r.got);
		}
		complete(x, 0, NULL);
		return;
	}
	if (v == BFS_S3RESP_FAIL) {
		complete(x, err, why);
		return;
	}
	/* V_RETRY: while tries and time are left */
	snprintf(x->last, sizeof(x->last), "%s", why);
	now = bfs_now_ns();
	wait_ms = bfs_s3_backoff_ms(&c->cfg, x->attempt, bfs_rand_next(&c->rng));
	if (x->r.retry_after_s && x->r.retry_after_s * 1000u > wait_ms)
		wait_ms = x->r.retry_after_s * 1000u;
	wait_ns = (uint64_t)wait_ms * 1000000u;
	if (x->attempt >= c->cfg.tries || x->one_try ||
	    now + wait_ns - x->first_ns > (uint64_t)c->cfg.retry_ms * 1000000u) {
		char msg[MSG_MAX + 96];
		const char *before = x->one_try ? failure_recall(c, x, true) : NULL;

		if (before) { /* the range failed before: the same line again */
			snprintf(msg, sizeof(msg), "%s", before); /* its slot may be reused */
			x->gave_up = true;
			finish(x, -EIO, msg);
			return;
		}
		/* no time in it: the same failure is the same line */
		if (x->one_try)
			snprintf(msg, sizeof(msg),
				 "%s (one try: a read gave up and nothing succeeded since)",
				 x->last);
		else
			snprintf(msg, sizeof(msg), "%s (gave up after %u tries)", x->last,
				 x->attempt);
		x->gave_up = true;
		complete(x, -EIO, msg);
		return;
	}
	x->due_ns = now + wait_ns;
	timers_insert(c, x);
	atomic_fetch_add(&c->n_queued, 1);
}

/* ---- the client's thread ---- */

static void take_cancels(struct bfs_s3 *c, struct bfs_s3_req **v, size_t n)
{
	struct xlist *lists[] = { &c->ready, &c->timers, &c->active };

	for (size_t i = 0; i < n; i++)
		for (size_t l = 0; l < BFS_ARRAY_SIZE(lists); l++)
			for (struct xfer *x = lists[l]->head; x; x = x->next) {
				if (x->kind != X_GET || x->req != v[i])
					continue;
				x->cancel = true;
				if (x->where == W_TIMER) { /* start() ends it at once */
					xl_remove(&c->timers, x);
					x->where = W_READY;
					xl_push(&c->ready, x);
				} else if (x->where == W_ACTIVE) {
					detach(c, x);
					atomic_fetch_add(&c->n_queued, 1);
					x->where = W_READY;
					xl_push(&c->ready, x);
				}
				break;
			}
}

/* Move what other threads queued; false when stopping. */
static bool take_incoming(struct bfs_s3 *c)
{
	struct bfs_s3_req **cancels = NULL;
	size_t ncancel = 0;
	struct xfer *x;
	bool stopping;

	pthread_mutex_lock(&c->lock);
	while ((x = xl_pop(&c->incoming))) {
		x->where = W_READY;
		xl_push(&c->ready, x);
	}
	if (c->ncancel) {
		cancels = c->cancels;
		ncancel = c->ncancel;
		c->cancels = NULL;
		c->ncancel = c->capcancel = 0;
	}
	stopping = c->stopping;
	pthread_mutex_unlock(&c->lock);
	take_cancels(c, cancels, ncancel);
	free(cancels);
	return !stopping;
}

static void reap(struct bfs_s3 *c)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(c->multi, &left))) {
		char *priv = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
		if (priv)
			attempt_done(c, (struct xfer *)priv, m->data.result);
	}
}

static void shutdown_all(struct bfs_s3 *c)
{
	struct xfer *x;

	while ((x = c->active.head)) {
		detach(c, x);
		complete(x, -ECANCELED, "the client was stopped");
	}
	pthread_mutex_lock(&c->lock);
	while ((x = xl_pop(&c->incoming)))
		xl_push(&c->ready, x);
	pthread_mutex_unlock(&c->lock);
	while ((x = xl_pop(&c->timers)))
		complete(x, -ECANCELED, "the client was stopped");
	while ((x = xl_pop(&c->ready)))
		complete(x, -ECANCELED, "the client was stopped");
	atomic_store(&c->n_queued, 0);
}

static void *loop_main(void *arg)
{
	struct bfs_s3 *c = arg;

	(void)pthread_setname_np(pthread_self(), "bfs-s3"); /* for top -H, gdb */
	for (;;) {
		uint64_t now;
		long tmo = -1;
		int running, wait_ms = 1000;

		if (!take_incoming(c))
			break;
		now = bfs_now_ns();
		while (c->timers.head && c->timers.head->due_ns <= now) {
			struct xfer *x = xl_pop(&c->timers);

			x->where = W_READY;
			xl_push(&c->ready, x);
		}
		while (c->nactive < c->max_conns && c->ready.head)
			start(c, xl_pop(&c->ready));
		curl_multi_perform(c->multi, &running);
		reap(c);
		if (c->nactive < c->max_conns && c->ready.head)
			continue;
		curl_multi_timeout(c->multi, &tmo);
		if (tmo >= 0 && tmo < wait_ms)
			wait_ms = (int)tmo;
		if (c->timers.head) {
			uint64_t due = c->timers.head->due_ns;
			uint64_t ms = due > now ? (due - now + 999999) / 1000000 : 0;

			if (ms < (uint64_t)wait_ms)
				wait_ms = (int)ms;
		}
		if (wait_ms > 0)
			curl_multi_poll(c->multi, NULL, 0, wait_ms, NULL);
	}
	shutdown_all(c);
	return NULL;
}

/* ---- the API ---- */

int bfs_s3_new(struct bfs_s3 **out, const struct bfs_s3_config *cfg, unsigned max_conns)
{
	struct bfs_s3 *c;
	int rc;

	if (max_conns < 1 || max_conns > 1024)
		return bfs_err_set(-EINVAL, "max_conns %u: it must be 1 to 1024", max_conns);
	if (!cfg->endpoint || !cfg->region ||
	    (!cfg->anonymous && !cfg->keeper && (!cfg->key_id || !cfg->secret)))
		return bfs_err_set(-EINVAL, "the object-store configuration is not resolved");
	if (bfs_http_curl_init() != CURLE_OK)
		return bfs_err_set(-EIO, "curl: %s", curl_easy_strerror(bfs_http_curl_init()));
	c = calloc(1, sizeof(*c));
	if (!c)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (bfs_s3_config_copy(&c->cfg, cfg)) {
		free(c);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	if (c->cfg.tries < 1)
		c->cfg.tries = 1;
	if (!c->cfg.anonymous && !c->cfg.keeper) { /* keys that never change */
		struct bfs_cred *k = NULL;

		rc = bfs_cred_new(&k, BFS_CRED_SIGV4, c->cfg.key_id, c->cfg.secret,
				  c->cfg.session_token, 0,
				  c->cfg.source ? c->cfg.source : "the configuration", NULL);
		if (rc == 0)
			rc = bfs_cred_keeper_static(&c->cfg.keeper, k);
		bfs_cred_unref(k);
		if (rc) {
			bfs_s3_config_destroy(&c->cfg);
			free(c);
			return bfs_err_set(rc, "%s",
					   rc == -ENOMEM
						   ? "out of memory"
						   : "a key id, secret or token that no header "
						     "can carry");
		}
	}
	c->max_conns = max_conns;
	c->rng = bfs_rand_seed((uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c ^ bfs_now_ns());
	c->idle = calloc(max_conns, sizeof(*c->idle));
	c->multi = curl_multi_init();
	if (!c->idle || !c->multi) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto fail;
	}
	curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)max_conns);
	curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)max_conns);
	curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)max_conns);
	pthread_mutex_init(&c->lock, NULL);
	rc = bfs_thread_start(&c->thread, loop_main, c);
	if (rc) {
		pthread_mutex_destroy(&c->lock);
		rc = bfs_err_set(-EIO, "cannot start the object-store thread: %s", strerror(rc));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	if (c->multi)
		curl_multi_cleanup(c->multi);
	free(c->idle);
	bfs_s3_config_destroy(&c->cfg);
	free(c);
	return rc;
}

void bfs_s3_free(struct bfs_s3 *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_mutex_unlock(&c->lock);
	curl_multi_wakeup(c->multi);
	pthread_join(c->thread, NULL);
	for (unsigned i = 0; i < c->nidle; i++)
		curl_easy_cleanup(c->idle[i]);
	curl_multi_cleanup(c->multi);
	free(c->idle);
	free(c->cancels);
	for (unsigned i = 0; i < FAILURES_KEPT; i++)
		failure_free(&c->failures[i]);
	pthread_mutex_destroy(&c->lock);
	bfs_s3_config_destroy(&c->cfg);
	free(c);
}

static bool on_client_thread(const struct bfs_s3 *c)
{
	return pthread_equal(pthread_self(), c->thread);
}

/* Queue x (to the client's thread). -ECANCELED when stopping. */
static int enqueue(struct bfs_s3 *c, struct xfer *x)
{
	pthread_mutex_lock(&c->lock);
	if (c->stopping) {
		pthread_mutex_unlock(&c->lock);
		return -ECANCELED;
	}
	x->where = W_READY;
	xl_push(&c->incoming, x);
	atomic_fetch_add(&c->n_queued, 1);
	pthread_mutex_unlock(&c->lock);
	curl_multi_wakeup(c->multi);
	return 0;
}

static struct xfer *xfer_new(struct bfs_s3 *c, enum bfs_s3resp_kind kind, const char *bucket,
			     const char *key)
{
	struct xfer *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->c = c;
	x->kind = kind;
	x->bucket = bucket;
	x->key = key;
	x->r.kind = kind;
	if (kind != X_GET)
		waiter_init(&x->w);
	return x;
}

int bfs_s3_submit(struct bfs_s3 *c, struct bfs_s3_req *r)
{
	struct xfer *x;
	uint64_t last;
	int rc;

	if (!r || !r->bucket || !*r->bucket || !r->key || !*r->key || !r->dst || !r->done ||
	    r->len == 0 || __builtin_add_overflow(r->off, (uint64_t)r->len - 1, &last))
		return -EINVAL;
	r->got = 0;
	r->object_size = 0;
	r->etag_got[0] = '\0';
	x = xfer_new(c, X_GET, r->bucket, r->key);
	if (!x)
		return -ENOMEM;
	x->req = r;
	x->r.off = r->off;
	x->r.len = r->len;
	x->r.dst = r->dst;
	x->r.if_match = r->etag;
	x->r.to_end = r->flags & BFS_S3_REQ_TO_END;
	rc = enqueue(c, x);
	if (rc)
		xfer_free(x);
	return rc;
}

void bfs_s3_cancel(struct bfs_s3 *c, struct bfs_s3_req *r)
{
	pthread_mutex_lock(&c->lock);
	if (c->ncancel == c->capcancel) {
		size_t cap = c->capcancel ? c->capcancel * 2 : 16;
		struct bfs_s3_req **v = realloc(c->cancels, cap * sizeof(struct bfs_s3_req *));

		if (!v) { /* the request then simply runs to its end */
			pthread_mutex_unlock(&c->lock);
			return;
		}
		c->cancels = v;
		c->capcancel = cap;
	}
	c->cancels[c->ncancel++] = r;
	pthread_mutex_unlock(&c->lock);
	curl_multi_wakeup(c->multi);
}

/* Run an internal transfer to its end; its err and msg say how it went. */
static int run_sync(struct bfs_s3 *c, struct xfer *x)
{
	int rc = enqueue(c, x);

	if (rc == 0) {
		waiter_wait(&x->w);
		rc = x->err;
	} else {
		snprintf(x->msg, sizeof(x->msg), "the client is stopping");
		x->err = rc;
	}
	return rc;
}

static void get_done(struct bfs_s3_req *r, int err, const char *msg)
{
	waiter_signal(r->ctx, err, msg);
}

int bfs_s3_get(struct bfs_s3 *c, const char *bucket, const char *key, const char *etag,
	       uint64_t off, void *dst, size_t len)
{
	struct waiter w;
	struct bfs_s3_req r = { .bucket = bucket,
				.key = key,
				.etag = etag,
				.off = off,
				.len = len,
				.dst = dst,
				.done = get_done,
				.ctx = &w };
	int rc;

	if (on_client_thread(c))
		return bfs_err_set(-EDEADLK, "bfs_s3_get called from a completion callback");
	waiter_init(&w);
	rc = bfs_s3_submit(c, &r);
	if (rc) {
		waiter_destroy(&w);
		return bfs_err_set(rc, "%s://%s/%s: %s", scheme_name(c), bucket ? bucket : "",
				   key ? key : "",
				   rc == -ECANCELED ? "the client is stopping" : "a bad request");
	}
	waiter_wait(&w);
	rc = w.err;
	if (rc)
		bfs_err_format("%s", w.msg);
	waiter_destroy(&w);
	return rc;
}

static int cmp_object(const void *a, const void *b)
{
	return strcmp(((const struct bfs_s3_object *)a)->key,
		      ((const struct bfs_s3_object *)b)->key);
}

/* One page: its body parsed into l. */
static int list_page(struct bfs_s3 *c, const char *bucket, const char *prefix, const char *token,
		     struct bfs_s3xml_list *l)
{
	struct bfs_s3_kv params[5];
	size_t np = 0;
	char maxkeys[16], why[256];
	struct xfer *x;
	int rc;

	params[np++] = (struct bfs_s3_kv){ "list-type", "2" };
	params[np++] = (struct bfs_s3_kv){ "prefix", prefix };
	params[np++] = (struct bfs_s3_kv){ "encoding-type", "url" };
	if (c->cfg.max_keys) {
		snprintf(maxkeys, sizeof(maxkeys), "%u", c->cfg.max_keys);
		params[np++] = (struct bfs_s3_kv){ "max-keys", maxkeys };
	}
	if (token)
		params[np++] = (struct bfs_s3_kv){ "continuation-token", token };
	x = xfer_new(c, X_LIST, bucket, prefix);
	if (!x)
		return bfs_err_set(-ENOMEM, "out of memory");
	if (bfs_s3_query_build(&x->query, params, np)) {
		xfer_free(x);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	rc = run_sync(c, x);
	if (rc) {
		bfs_err_format("%s", x->msg);
	} else {
		rc = bfs_s3xml_parse_list(l, x->r.body.p ? x->r.body.p : "", x->r.body.n, why,
					  sizeof(why));
		if (rc)
			bfs_err_format(
				"%s://%s/%s (listing): the store's answer does not parse: %s",
				scheme_name(c), bucket, prefix, why);
	}
	xfer_free(x);
	return rc;
}

int bfs_s3_list(struct bfs_s3 *c, const char *bucket, const char *prefix,
		struct bfs_s3_object **out, size_t *n)
{
	struct bfs_s3xml_list l = { 0 };
	char *token = NULL;
	unsigned empty = 0;
	size_t plen, k = 0;
	int rc;

	if (on_client_thread(c))
		return bfs_err_set(-EDEADLK, "bfs_s3_list called from a completion callback");
	if (!bucket || !*bucket)
		return bfs_err_set(-EINVAL, "no bucket to list");
	if (!prefix)
		prefix = "";
	for (;;) {
		rc = list_page(c, bucket, prefix, token, &l);
		if (rc)
			goto out;
		if (!l.truncated)
			break;
		if (token && strcmp(token, l.next_token) == 0) {
			rc = bfs_err_set(
				-EBADMSG,
				"%s://%s/%s (listing): the store gave the same continuation "
				"token twice",
				scheme_name(c), bucket, prefix);
			goto out;
		}
		if (l.page_keys == 0 && ++empty > MAX_EMPTY_PAGES) {
			rc = bfs_err_set(-EBADMSG,
					 "%s://%s/%s (listing): %d pages in a row with no key",
					 scheme_name(c), bucket, prefix, MAX_EMPTY_PAGES);
			goto out;
		}
		if (l.page_keys)
			empty = 0;
		free(token);
		token = strdup(l.next_token);
		if (!token) {
			rc = bfs_err_set(-ENOMEM, "out of memory");
			goto out;
		}
	}
	/* only keys under the prefix, once each, sorted */
	plen = strlen(prefix);
	if (l.n)
		qsort(l.objs, l.n, sizeof(*l.objs), cmp_object);
	for (size_t i = 0; i < l.n; i++) {
		if (strncmp(l.objs[i].key, prefix, plen) != 0 ||
		    (k && strcmp(l.objs[k - 1].key, l.objs[i].key) == 0)) {
			bfs_s3_object_destroy(&l.objs[i]);
			continue;
		}
		l.objs[k++] = l.objs[i];
	}
	l.n = k;
	*out = l.n ? l.objs : NULL;
	*n = l.n;
	if (!l.n)
		free(l.objs);
	l.objs = NULL;
	l.n = 0;
out:
	free(token);
	bfs_s3xml_list_destroy(&l);
	return rc;
}

int bfs_s3_head(struct bfs_s3 *c, const char *bucket, const char *key, struct bfs_s3_object *out)
{
	struct xfer *x, *p;
	struct bfs_s3_object o = { 0 };
	int rc;

	if (on_client_thread(c))
		return bfs_err_set(-EDEADLK, "bfs_s3_head called from a completion callback");
	if (!bucket || !*bucket || !key || !*key)
		return bfs_err_set(-EINVAL, "no bucket or key");
	x = xfer_new(c, X_HEAD, bucket, key);
	if (!x)
		return bfs_err_set(-ENOMEM, "out of memory");
	rc = run_sync(c, x);
	if (rc == 0) {
		o.key = strdup(key);
		o.etag = strdup(x->r.etag);
		o.size = x->r.clen;
		if (!o.key || !o.etag) {
			bfs_s3_object_destroy(&o);
			rc = bfs_err_set(-ENOMEM, "out of memory");
		} else {
			*out = o;
		}
		xfer_free(x);
		return rc;
	}
	/* a HEAD reply has no body: ask again with a GET for the store's reason */
	p = (x->r.status >= 400 && x->r.status < 500 && x->r.status != 412)
		    ? xfer_new(c, X_PROBE, bucket, key)
		    : NULL;
	if (p && run_sync(c, p) != 0 && p->r.status >= 400 && p->r.body.n) {
		struct bfs_s3xml_error e;

		if (bfs_s3xml_parse_error(&e, p->r.body.p, p->r.body.n) == 0) {
			rc = p->err;
			bfs_err_format("%s", p->msg);
			xfer_free(p);
			xfer_free(x);
			return rc;
		}
	}
	xfer_free(p);
	bfs_err_format("%s", x->msg);
	xfer_free(x);
	return rc;
}

void bfs_s3_stats(struct bfs_s3 *c, struct bfs_s3_stats *out)
{
	out->requests = atomic_load(&c->n_requests);
	out->retries = atomic_load(&c->n_retries);
	out->failed = atomic_load(&c->n_failed);
	out->bytes = atomic_load(&c->n_bytes);
	out->in_flight = atomic_load(&c->n_active);
	out->queued = atomic_load(&c->n_queued);
	out->expired = atomic_load(&c->n_expired);
}
