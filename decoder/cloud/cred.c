/* SPDX-License-Identifier: Apache-2.0 */
/* cred.c — credentials, the timing policy and the keeper that refreshes
 * them ahead of expiry in a thread of its own. See cred.h. */
#include "cred.h"

#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEAD_MAX_MS (15 * 60 * 1000) /* refresh at most this long ahead */
#define GUARD_MAX_MS (10 * 1000) /* stop handing out this long before expiry, at most */
#define RETRY_FIRST_MS 500
#define RETRY_MAX_MS (30 * 1000)
#define ERRLINE_EVERY_MS (60 * 1000)
#define NUDGE_MS 1000 /* a get() finding none valid retries a failing provider this often */
#define WHY_MAX 512

/* ---- credentials ---- */

struct cred_impl {
	struct bfs_cred pub;
	atomic_uint refs;
};

static bool field_ok(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static void free_secret(const char *p)
{
	if (p) {
		explicit_bzero((char *)p, strlen(p));
		free((char *)p);
	}
}

int bfs_cred_new(struct bfs_cred **out, enum bfs_cred_kind kind, const char *key_id,
		 const char *secret, const char *token, time_t expires, const char *source,
		 const char *account)
{
	struct cred_impl *c;
	bool ok;

	switch (kind) {
	case BFS_CRED_NONE:
		ok = true;
		key_id = secret = token = NULL;
		break;
	case BFS_CRED_SIGV4:
		ok = field_ok(key_id) && field_ok(secret) && (!token || !*token || field_ok(token));
		if (token && !*token)
			token = NULL;
		break;
	case BFS_CRED_BEARER:
		ok = field_ok(token);
		key_id = secret = NULL;
		break;
	default:
		ok = false;
	}
	if (!ok || !source || !*source || expires < 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->pub.kind = kind;
	c->pub.expires = expires;
	c->pub.key_id = key_id ? strdup(key_id) : NULL;
	c->pub.secret = secret ? strdup(secret) : NULL;
	c->pub.token = token ? strdup(token) : NULL;
	c->pub.source = strdup(source);
	c->pub.account = account && *account ? strdup(account) : NULL;
	atomic_init(&c->refs, 1);
	if ((key_id && !c->pub.key_id) || (secret && !c->pub.secret) || (token && !c->pub.token) ||
	    !c->pub.source || (account && *account && !c->pub.account)) {
		bfs_cred_unref(&c->pub);
		return -ENOMEM;
	}
	*out = &c->pub;
	return 0;
}

struct bfs_cred *bfs_cred_ref(struct bfs_cred *c)
{
	if (c)
		atomic_fetch_add(&((struct cred_impl *)c)->refs, 1);
	return c;
}

void bfs_cred_unref(struct bfs_cred *c)
{
	struct cred_impl *ci = (struct cred_impl *)c;

	if (!c || atomic_fetch_sub(&ci->refs, 1) != 1)
		return;
	free((char *)c->key_id);
	free_secret(c->secret);
	free_secret(c->token);
	free((char *)c->source);
	free((char *)c->account);
	free(ci);
}

int64_t bfs_cred_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the timing policy ---- */

int64_t bfs_cred_refresh_lead(int64_t life_ms)
{
	if (life_ms <= 0)
		return 0;
	return life_ms / 2 < LEAD_MAX_MS ? life_ms / 2 : LEAD_MAX_MS;
}

int64_t bfs_cred_guard_ms(int64_t life_ms)
{
	if (life_ms <= 0)
		return 0;
	return life_ms / 10 < GUARD_MAX_MS ? life_ms / 10 : GUARD_MAX_MS;
}

unsigned bfs_cred_retry_ms(unsigned retry, uint64_t rnd)
{
	return bfs_backoff_ms(RETRY_FIRST_MS, RETRY_MAX_MS, retry, rnd);
}

/* ---- helpers ---- */

static void redact(char *msg, size_t cap, const char *secret)
{
	static const char mark[] = "[redacted]";
	size_t slen, mlen = sizeof(mark) - 1;
	char *from = msg, *at;

	if (!secret || (slen = strlen(secret)) < 4)
		return;
	while ((at = strstr(from, secret))) {
		size_t pos = (size_t)(at - msg), tail = strlen(at + slen);

		if (pos + mlen + 1 > cap) { /* no room for the mark: cut the line there */
			*at = '\0';
			return;
		}
		if (pos + mlen + tail + 1 > cap)
			tail = cap - pos - mlen - 1;
		memmove(at + mlen, at + slen, tail);
		at[mlen + tail] = '\0';
		memcpy(at, mark, mlen);
		from = at + mlen;
	}
}

void bfs_cred_scrub(char *msg, size_t cap, const char *const *secrets, size_t n)
{
	if (!msg || cap == 0)
		return;
	msg[cap - 1] = '\0';
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	for (size_t i = 0; i < n; i++)
		redact(msg, cap, secrets[i]);
}

static bool digits(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

int bfs_cred_parse_time(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec;
	const char *p;
	time_t t;

	if (!s || strlen(s) < 19 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
	    s[7] != '-' || !digits(s + 8, 2, &d) ||
	    (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !digits(s + 11, 2, &h) ||
	    s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
		return -EINVAL;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (!(((*p == 'Z' || *p == 'z') && p[1] == '\0') || strcmp(p, "+00:00") == 0 ||
	      strcmp(p, "-00:00") == 0))
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = t;
	return 0;
}

/* ---- the keeper ---- */

struct bfs_cred_keeper {
	atomic_uint refs;
	char *name;
	struct bfs_cred_provider p;
	pthread_mutex_t m;
	pthread_cond_t cv;
	/* m */
	struct bfs_cred *cur;
	int64_t cur_life_ms; /* how long cur lasted when fetched */
	bool dropped; /* the store said cur expired */
	bool refresh_now;
	bool running, stopping;
	bool forking; /* a fork is under way: the thread has left, none starts */
	atomic_bool cancel; /* stopping or forking: a fetch in progress gives up */
	pthread_t thread;
	unsigned fail_streak;
	int64_t next_try_ms; /* while failing */
	int64_t last_fail_ms;
	char last_why[WHY_MAX];
	int64_t errline_ms;
	bool unreported;
	struct bfs_cred_stats st;
	uint64_t rng;
	struct bfs_cred_keeper *next; /* every keeper, for fork */
};

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_cred_keeper *all_keepers;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* the keeper whose thread this is: its cancel flag, while it fetches */
static _Thread_local const atomic_bool *fetching_for;

bool bfs_cred_fetch_cancelled(void)
{
	return fetching_for && atomic_load(fetching_for);
}

static void ensure_thread(struct bfs_cred_keeper *k);

/* Before a fork: no keeper's thread runs while the process forks. A thread
 * copied across fork() would leave behind, in the child, whatever it held:
 * its place among the waiters of the condition variable (a child that
 * broadcasts on it then waits forever), a half-done fetch. So each thread
 * is told to leave (a fetch in progress gives up) and joined, and every
 * keeper's lock is held through the fork, so that none starts again. */
static void before_fork(void)
{
	pthread_mutex_lock(&all_lock);
	for (struct bfs_cred_keeper *k = all_keepers; k; k = k->next) {
		pthread_mutex_lock(&k->m);
		k->forking = true;
		atomic_store(&k->cancel, true);
		pthread_cond_broadcast(&k->cv);
		if (k->running && !pthread_equal(k->thread, pthread_self())) {
			pthread_mutex_unlock(&k->m);
			pthread_join(k->thread, NULL);
			pthread_mutex_lock(&k->m);
			k->running = false;
		}
	}
}

/* After it, in the parent: the threads start again where there is
 * something to do. */
static void after_fork_parent(void)
{
	for (struct bfs_cred_keeper *k = all_keepers; k; k = k->next) {
		k->forking = false;
		atomic_store(&k->cancel, false);
		ensure_thread(k);
		pthread_mutex_unlock(&k->m);
	}
	pthread_mutex_unlock(&all_lock);
}

/* In the child (a daemon, or a process about to exec): its keepers start
 * their thread at their next use. */
static void after_fork_child(void)
{
	for (struct bfs_cred_keeper *k = all_keepers; k; k = k->next) {
		k->forking = false;
		atomic_store(&k->cancel, false);
		pthread_mutex_unlock(&k->m);
	}
	pthread_mutex_unlock(&all_lock);
}

static void register_atfork(void)
{
	(void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static int64_t expires_ms(const struct bfs_cred *c)
{
	return (int64_t)c->expires * 1000;
}

/* Whether get() may hand out k->cur now (m held). */
static bool cur_usable(const struct bfs_cred_keeper *k, int64_t now)
{
	if (!k->cur || k->dropped)
		return false;
	if (!k->cur->expires)
		return true;
	return now < expires_ms(k->cur) - bfs_cred_guard_ms(k->cur_life_ms);
}

/* When the thread should fetch next (m held); INT64_MAX: never. */
static int64_t due_ms(const struct bfs_cred_keeper *k)
{
	if (k->refresh_now || !k->cur || k->dropped)
		return k->fail_streak ? k->next_try_ms : 0;
	if (!k->cur->expires)
		return INT64_MAX;
	if (k->fail_streak)
		return k->next_try_ms;
	return expires_ms(k->cur) - bfs_cred_refresh_lead(k->cur_life_ms);
}

static void fmt_utc(time_t t, char *dst, size_t cap)
{
	struct tm tm;

	if (gmtime_r(&t, &tm))
		strftime(dst, cap, "%Y-%m-%d %H:%M:%S UTC", &tm);
	else
		snprintf(dst, cap, "%lld", (long long)t);
}

/* One fetch, with m not held; its result taken under m. */
static void fetch_once(struct bfs_cred_keeper *k)
{
	struct bfs_cred *c = NULL;
	char why[WHY_MAX] = "";
	int64_t now;
	int rc;

	pthread_mutex_unlock(&k->m);
	fetching_for = &k->cancel;
	rc = k->p.fetch(k->p.ctx, &c, why, sizeof(why));
	fetching_for = NULL;
	now = bfs_cred_now_ms();
	if (rc == 0 && c->expires &&
	    expires_ms(c) - bfs_cred_guard_ms(expires_ms(c) - now) <= now) {
		char when[64];

		fmt_utc(c->expires, when, sizeof(when));
		snprintf(why, sizeof(why),
			 "it handed out credentials that expire at %s, in the past", when);
		bfs_cred_unref(c);
		c = NULL;
		rc = -EIO;
	}
	pthread_mutex_lock(&k->m);
	if (rc != 0 && atomic_load(&k->cancel))
		return; /* given up: the keeper stops, or the process forks */
	if (rc == 0) {
		bfs_cred_unref(k->cur);
		k->cur = c;
		k->cur_life_ms = c->expires ? expires_ms(c) - now : 0;
		k->dropped = false;
		k->refresh_now = false;
		k->fail_streak = 0;
		k->st.refreshes++;
		k->st.last_refresh_ms = now;
		k->st.expires = c->expires;
	} else {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", strerror(-rc));
		snprintf(k->last_why, sizeof(k->last_why), "%s", why);
		k->fail_streak++;
		k->last_fail_ms = now;
		k->next_try_ms = now + bfs_cred_retry_ms(k->fail_streak, bfs_rand_next(&k->rng));
		k->st.failures++;
		k->unreported = true;
	}
	pthread_cond_broadcast(&k->cv);
}

static void *keeper_main(void *arg)
{
	struct bfs_cred_keeper *k = arg;

	(void)pthread_setname_np(pthread_self(), "bfs-cred"); /* for top -H, gdb */
	pthread_mutex_lock(&k->m);
	while (!k->stopping && !k->forking) {
		int64_t now = bfs_cred_now_ms(), due = due_ms(k);

		if (due <= now) {
			fetch_once(k);
			continue;
		}
		if (due == INT64_MAX) {
			pthread_cond_wait(&k->cv, &k->m);
		} else {
			struct timespec ts = { .tv_sec = (time_t)(due / 1000),
					       .tv_nsec = (long)(due % 1000) * 1000000 };

			pthread_cond_timedwait(&k->cv, &k->m, &ts);
		}
	}
	pthread_mutex_unlock(&k->m);
	return NULL;
}

/* Start the thread when it is not running and there is something to do
 * (m held). */
static void ensure_thread(struct bfs_cred_keeper *k)
{
	if (k->running || k->stopping || k->forking || due_ms(k) == INT64_MAX)
		return;
	if (bfs_thread_start(&k->thread, keeper_main, k) == 0)
		k->running = true;
}

int bfs_cred_keeper_new(struct bfs_cred_keeper **out, const struct bfs_cred_provider *p,
			struct bfs_cred *first)
{
	struct bfs_cred_keeper *k;
	char why[WHY_MAX] = "";
	int rc;

	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(p->name ? p->name : "credentials"))) {
		if (p->ctx_free)
			p->ctx_free(p->ctx);
		free(k);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	atomic_init(&k->refs, 1);
	atomic_init(&k->cancel, false);
	k->p = *p;
	k->p.name = k->name;
	pthread_mutex_init(&k->m, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->rng = bfs_rand_seed((uint64_t)bfs_cred_now_ms() ^ (uint64_t)(uintptr_t)k);
	if (first) {
		k->cur = bfs_cred_ref(first);
	} else {
		rc = p->fetch(p->ctx, &k->cur, why, sizeof(why));
		if (rc) {
			k->cur = NULL;
			bfs_cred_keeper_unref(k);
			return bfs_err_set(rc, "%s: %s", p->name ? p->name : "credentials",
					   why[0] ? why : strerror(-rc));
		}
	}
	k->st.refreshes = 1;
	k->st.last_refresh_ms = bfs_cred_now_ms();
	k->st.expires = k->cur->expires;
	k->cur_life_ms = k->cur->expires ? expires_ms(k->cur) - k->st.last_refresh_ms : 0;
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&all_lock);
	k->next = all_keepers;
	all_keepers = k;
	pthread_mutex_unlock(&all_lock);
	pthread_mutex_lock(&k->m);
	ensure_thread(k);
	pthread_mutex_unlock(&k->m);
	*out = k;
	return 0;
}

static int static_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	(void)why;
	(void)cap;
	*out = bfs_cred_ref(ctx);
	return 0;
}

static void static_free(void *ctx)
{
	bfs_cred_unref(ctx);
}

int bfs_cred_keeper_static(struct bfs_cred_keeper **out, struct bfs_cred *c)
{
	struct bfs_cred_provider p = { .name = c->source,
				       .fetch = static_fetch,
				       .ctx = bfs_cred_ref(c),
				       .ctx_free = static_free };

	return bfs_cred_keeper_new(out, &p, c);
}

struct bfs_cred_keeper *bfs_cred_keeper_ref(struct bfs_cred_keeper *k)
{
	if (k)
		atomic_fetch_add(&k->refs, 1);
	return k;
}

const char *bfs_cred_keeper_name(const struct bfs_cred_keeper *k)
{
	return k->name;
}

void bfs_cred_keeper_unref(struct bfs_cred_keeper *k)
{
	if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
		return;
	pthread_mutex_lock(&all_lock);
	for (struct bfs_cred_keeper **pp = &all_keepers; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
	pthread_mutex_unlock(&all_lock);
	pthread_mutex_lock(&k->m);
	k->stopping = true;
	atomic_store(&k->cancel, true); /* a fetch in progress gives up */
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->m);
	if (k->running)
		pthread_join(k->thread, NULL);
	bfs_cred_unref(k->cur);
	if (k->p.ctx_free)
		k->p.ctx_free(k->p.ctx);
	pthread_mutex_destroy(&k->m);
	pthread_cond_destroy(&k->cv);
	free(k->name);
	free(k);
}

int bfs_cred_keeper_get(struct bfs_cred_keeper *k, struct bfs_cred **out, char *why, size_t cap)
{
	int64_t now = bfs_cred_now_ms();
	int rc = 0;

	pthread_mutex_lock(&k->m);
	ensure_thread(k);
	if (cur_usable(k, now)) {
		*out = bfs_cred_ref(k->cur);
	} else {
		char when[64] = "";

		rc = -EACCES;
		/* reads are waiting: a failing provider is asked again soon, not
		 * after its backoff, so that the mount recovers as it comes back */
		if (k->fail_streak && now - k->last_fail_ms >= NUDGE_MS && k->next_try_ms > now) {
			k->next_try_ms = now;
			pthread_cond_broadcast(&k->cv);
		}
		if (k->cur && k->cur->expires)
			fmt_utc(k->cur->expires, when, sizeof(when));
		if (!k->fail_streak) {
			rc = -EAGAIN; /* a refresh is due or running, and none failed yet */
			snprintf(why, cap, "the credentials from %s %s: they are being refreshed",
				 k->name, k->dropped ? "were refused as expired" : "expired");
		} else
			snprintf(why, cap,
				 "the credentials from %s %s%s and could not be refreshed%s%s",
				 k->name, when[0] ? "expired at " : "are unusable", when,
				 k->last_why[0] ? ": " : "", k->last_why);
	}
	pthread_mutex_unlock(&k->m);
	return rc;
}

void bfs_cred_keeper_expired(struct bfs_cred_keeper *k, const struct bfs_cred *used)
{
	pthread_mutex_lock(&k->m);
	if (used && k->cur == used && !k->dropped) {
		k->dropped = true;
		k->refresh_now = true;
		k->st.expired_signals++;
		ensure_thread(k);
		pthread_cond_broadcast(&k->cv);
	}
	pthread_mutex_unlock(&k->m);
}

void bfs_cred_keeper_stats(struct bfs_cred_keeper *k, struct bfs_cred_stats *out)
{
	pthread_mutex_lock(&k->m);
	*out = k->st;
	out->valid = cur_usable(k, bfs_cred_now_ms());
	pthread_mutex_unlock(&k->m);
}

void bfs_cred_keeper_describe(struct bfs_cred_keeper *k, char *dst, size_t cap)
{
	char id[16] = "", when[64] = "", acct[160] = "", tail[200] = "";
	const struct bfs_cred *c;
	size_t n;

	pthread_mutex_lock(&k->m);
	c = k->cur;
	n = c && c->key_id ? strlen(c->key_id) : 0;
	if (n)
		snprintf(id, sizeof(id), "****%s", c->key_id + (n > 4 ? n - 4 : 0));
	if (c && c->account && !strstr(c->source, c->account))
		snprintf(acct, sizeof(acct), " `%s`", c->account);
	if (c && c->expires) {
		fmt_utc(c->expires, when, sizeof(when));
		snprintf(tail, sizeof(tail), ", expires %s, refreshed %" PRIu64 " time%s%s", when,
			 k->st.refreshes, k->st.refreshes == 1 ? "" : "s",
			 k->fail_streak ? " (refreshing fails now)" : "");
	}
	snprintf(dst, cap, "%s%s%s%s%s%s", c ? c->source : k->name, acct, n ? ", key id " : "", id,
		 c && c->kind == BFS_CRED_BEARER ? ", an OAuth access token"
		 : c && c->token		 ? ", with a session token"
						 : "",
		 tail);
	pthread_mutex_unlock(&k->m);
}

void bfs_cred_keeper_key_id(struct bfs_cred_keeper *k, char *dst, size_t cap)
{
	const char *id;
	size_t n;

	pthread_mutex_lock(&k->m);
	id = k->cur && k->cur->key_id ? k->cur->key_id : "";
	n = strlen(id);
	snprintf(dst, cap, "%s%s", n ? "****" : "", id + (n > 4 ? n - 4 : 0));
	pthread_mutex_unlock(&k->m);
}

bool bfs_cred_keeper_errline(struct bfs_cred_keeper *k, char *dst, size_t cap)
{
	int64_t now = bfs_cred_now_ms();
	bool due = false;

	pthread_mutex_lock(&k->m);
	if (k->unreported && (k->errline_ms == 0 || now - k->errline_ms >= ERRLINE_EVERY_MS)) {
		snprintf(dst, cap, "cannot refresh the credentials from %s: %s", k->name,
			 k->last_why);
		k->unreported = false;
		k->errline_ms = now;
		due = true;
	}
	pthread_mutex_unlock(&k->m);
	return due;
}
