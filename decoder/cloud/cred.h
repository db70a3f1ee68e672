/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cred.h — cloud credentials as the clouds hand them out: a credential
 * value, the providers that fetch one (the AWS chain in credaws.h, Google's
 * Application Default Credentials in credgcp.h), and a keeper that holds the
 * current credential of a mount and refreshes it ahead of its expiry in a
 * thread of its own, so that no read waits for a refresh.
 *
 * What it does:
 *  - a credential (struct bfs_cred) is a SigV4 key (key id, secret, session
 *    token), an OAuth 2 Bearer access token, or nothing (anonymous
 *    requests); it has an expiry (0: never) and a description of where it
 *    came from for humans ("instance role `train-role` via IMDSv2"), never a
 *    secret. Once made it is immutable and reference-counted: a request
 *    signs with the snapshot it got, while the keeper publishes the next;
 *    the last unref wipes the secret and the token;
 *  - a provider (struct bfs_cred_provider) is a blocking fetch function, a
 *    context and a name; the keeper calls it from its thread (and once,
 *    from the caller, in bfs_cred_keeper_new);
 *  - a keeper (struct bfs_cred_keeper) refreshes ahead of expiry, as the
 *    AWS SDKs and google-auth do: bfs_cred_refresh_lead() ahead (15
 *    minutes for a credential that lasts an hour, half the lifetime for a
 *    short one: 2 s of a 4 s token); while the provider fails it retries
 *    with backoff (bfs_cred_retry_ms(): 0.5 s doubling to 30 s, jittered),
 *    and the current credential stays in use until it expires;
 *  - bfs_cred_keeper_get() never blocks and never returns an expired
 *    credential: past expiry (less a small guard for the request's flight,
 *    bfs_cred_guard_ms()) it fails with -EACCES and one line saying why (the
 *    provider's last error, with the expiry), until a refresh succeeds;
 *    while it fails so, a failing provider is asked again at most once a
 *    second rather than after its backoff (requests are waiting);
 *  - bfs_cred_keeper_expired(): a store answered 400/401/403 saying the
 *    token expired (S3's ExpiredToken, Google's 401 with an expired Bearer
 *    token): the credential that request used is dropped and one refresh
 *    starts at once (many requests saying so of the one credential start
 *    one refresh). The request is retried later with a new get();
 *  - counters for `batchfs stats` and README.txt: refreshes, failures, the
 *    last refresh, the expiry, the source (bfs_cred_keeper_stats,
 *    bfs_cred_keeper_describe);
 *  - error lines: bfs_cred_keeper_errline() hands out the provider's last
 *    failure at most once per minute, for errors.txt and the log.
 *
 * Does not: sign requests (s3sign.c) or send them (s3.c, http.c); know the S3 or
 * GCS protocols.
 *
 * Secrets: key ids are not secrets (messages may show their last 4
 * characters); the secret, the session token, Bearer tokens, refresh
 * tokens, private keys and assertions are, and nothing here writes them to
 * a message, a log or a file. A provider's `why` must not quote one either:
 * an error body that may echo a header goes through bfs_cred_scrub() first.
 *
 * Thread-safety: credentials are immutable and may be shared by any number
 * of threads; ref/unref are atomic. A keeper may be used from any number of
 * threads at once. Providers are called from one thread at a time.
 *
 * Fork: no keeper's thread runs while the process forks (a daemon detaching,
 * libfuse running fusermount3). cred.c's atfork handlers tell each thread to
 * leave (a fetch in progress gives up, see bfs_cred_fetch_cancelled) and
 * join it, then hold every keeper's lock through fork(): nothing a thread
 * held (a lock, its place among a condition variable's waiters, a half-done
 * fetch) is copied into the child. After the fork the parent's keepers start
 * their thread again at once, the child's at their next use.
 */
#ifndef BFS_CRED_H
#define BFS_CRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- credentials --------------------------------------------------------- */

enum bfs_cred_kind {
	BFS_CRED_NONE = 0, /* anonymous: requests carry no Authorization */
	BFS_CRED_SIGV4, /* AWS Signature V4: key_id, secret, token (the session token or NULL) */
	BFS_CRED_BEARER, /* OAuth 2: Authorization: Bearer <token> */
};

/* A credential. Read the fields; never change them (others share it). */
struct bfs_cred {
	enum bfs_cred_kind kind;
	const char *key_id; /* SIGV4; NULL otherwise */
	const char *secret; /* SIGV4; NULL otherwise */
	const char *token; /* SIGV4: the session token or NULL; BEARER: the access token */
	time_t expires; /* wall-clock seconds since the epoch; 0: never */
	const char *source; /* for humans: where it came from; never a secret; never NULL */
	const char *account; /* for humans, maybe NULL: "train-role", a service account's email */
};

/* A new credential holding copies of the strings (key_id, secret for
 * SIGV4; token for BEARER, optional for SIGV4; source required; account
 * optional), with one reference. 0, -EINVAL (a field its kind needs is
 * missing or empty, or one holds a control character: it could not go in
 * a header), -ENOMEM. Sets no message (the caller knows what it was
 * making). */
int bfs_cred_new(struct bfs_cred **out, enum bfs_cred_kind kind, const char *key_id,
		 const char *secret, const char *token, time_t expires, const char *source,
		 const char *account);
/* Another reference to c (returned); c may be NULL. */
struct bfs_cred *bfs_cred_ref(struct bfs_cred *c);
/* Drop a reference; the last one wipes the secret and token and frees.
 * Accepts NULL. */
void bfs_cred_unref(struct bfs_cred *c);

/* The wall clock in milliseconds (CLOCK_REALTIME), what expiries are
 * measured against. */
int64_t bfs_cred_now_ms(void);

/* ---- the timing policy (pure functions, for the keeper and its tests) --- */

/* How long before expiry a credential that lasted life_ms when fetched is
 * refreshed: min(15 minutes, life_ms / 2). 0 for life_ms <= 0. */
int64_t bfs_cred_refresh_lead(int64_t life_ms);
/* How long before expiry get() stops handing a credential out (a request
 * signed with it must still arrive in time): min(10 s, life_ms / 10). */
int64_t bfs_cred_guard_ms(int64_t life_ms);
/* The wait before retry number `retry` (1 for the first) of a failed
 * fetch: 500 ms doubling, capped at 30 s, half fixed and half drawn from
 * rnd. */
unsigned bfs_cred_retry_ms(unsigned retry, uint64_t rnd);

/* ---- providers ----------------------------------------------------------- */

/* Fetch a credential (blocking; it may take as long as its HTTP requests'
 * retries do). 0 with *out (one reference, for the caller); or a negative
 * errno with one line in why (no secret in it): -EACCES the place refused
 * (a role not allowed, a revoked grant), -ENOENT nothing there (no such
 * file, no metadata server: the chain goes on to the next place), -EIO
 * the place did not answer or answered nonsense (worth retrying), -EINVAL
 * a file or setting that is wrong, -ENOMEM. */
typedef int (*bfs_cred_fetch_fn)(void *ctx, struct bfs_cred **out, char *why, size_t whycap);

/* Whether the fetch running on this thread should give up now: the keeper
 * it runs for is being freed, or the process forks. A provider that waits
 * (a request, a process it runs) checks it every few tens of milliseconds
 * and then returns -ECANCELED; bfs_http_request does so itself. False on
 * any thread but a keeper's. */
bool bfs_cred_fetch_cancelled(void);

struct bfs_cred_provider {
	const char *name; /* for humans: "instance role via IMDSv2", copied by the keeper */
	bfs_cred_fetch_fn fetch;
	void *ctx;
	void (*ctx_free)(void *ctx); /* frees ctx with the keeper; may be NULL */
};

/* ---- the keeper ---------------------------------------------------------- */

struct bfs_cred_keeper;

/* A keeper over provider p (its name copied; its ctx owned by the keeper
 * from now on, even on failure, and freed with ctx_free). first: a
 * credential already fetched (a reference is taken), or NULL to fetch one
 * now, blocking. A credential that never expires needs no refresh, and no
 * thread is started for it. 0; the provider's error with its line in the
 * thread-local message (common.h), prefixed with p->name; -ENOMEM. One
 * reference. */
int bfs_cred_keeper_new(struct bfs_cred_keeper **out, const struct bfs_cred_provider *p,
			struct bfs_cred *first);
/* A keeper of c, a credential that never changes (keys from the
 * environment or a file): bfs_cred_keeper_new over a provider that hands c
 * out (a reference is taken). */
int bfs_cred_keeper_static(struct bfs_cred_keeper **out, struct bfs_cred *c);
struct bfs_cred_keeper *bfs_cred_keeper_ref(struct bfs_cred_keeper *k); /* accepts NULL */
/* The provider's name (the first credential's source): the same string for
 * the keeper's life. */
const char *bfs_cred_keeper_name(const struct bfs_cred_keeper *k);
/* Drop a reference; the last stops the thread (a fetch in progress gives
 * up: bfs_cred_fetch_cancelled) and frees. Accepts NULL. */
void bfs_cred_keeper_unref(struct bfs_cred_keeper *k);

/* The current credential (a reference for the caller: bfs_cred_unref), never
 * one that expires within its guard. Never blocks on a fetch. When there is
 * none valid, one line in why (cap bytes) and: -EAGAIN while a refresh is
 * due or running and none has failed since ("... are being refreshed":
 * right after bfs_cred_keeper_expired, or after a wait the keeper could not
 * run earlier): worth waiting a little; -EACCES when the provider failed
 * ("the credentials from <source> expired at 2026-11-27 13:05:02 UTC and
 * could not be refreshed: <the provider's last error>"). */
int bfs_cred_keeper_get(struct bfs_cred_keeper *k, struct bfs_cred **out, char *why, size_t cap);

/* The store said the token of `used` (the credential a request signed
 * with) expired: unless a newer credential is already current, drop it and
 * refresh at once. Any thread; never blocks. */
void bfs_cred_keeper_expired(struct bfs_cred_keeper *k, const struct bfs_cred *used);

/* What the keeper has done, for stats.json and README.txt. */
struct bfs_cred_stats {
	uint64_t refreshes; /* fetches that succeeded, the first one included */
	uint64_t failures; /* fetches that failed */
	uint64_t expired_signals; /* bfs_cred_keeper_expired calls that dropped a credential */
	int64_t last_refresh_ms; /* wall clock of the last success */
	time_t expires; /* the current credential's; 0: never */
	bool valid; /* get() would succeed now */
};
void bfs_cred_keeper_stats(struct bfs_cred_keeper *k, struct bfs_cred_stats *out);

/* One line: "instance role `train-role` via IMDSv2, key id ****ABCD, with a
 * session token, expires 2026-11-27 13:05:02 UTC, refreshed 41 times" (keys
 * that never expire: the source and the key id). Never a secret. Truncated
 * to cap. */
void bfs_cred_keeper_describe(struct bfs_cred_keeper *k, char *dst, size_t cap);

/* The current credential's key id by its last 4 characters, "****ABCD"
 * (docs/credentials.md), or "" when it has none (an OAuth token). */
void bfs_cred_keeper_key_id(struct bfs_cred_keeper *k, char *dst, size_t cap);

/* The provider's last failure, once per minute at most: true with the line
 * in dst when one is due (a failure since the last line, and a minute
 * since it), false otherwise. For errors.txt. */
bool bfs_cred_keeper_errline(struct bfs_cred_keeper *k, char *dst, size_t cap);

/* ---- helpers for providers ----------------------------------------------- */

/* Replace every occurrence of each of secrets[0..n) (NULL and strings of
 * fewer than 4 characters are passed over) in msg (NUL-terminated, in a
 * buffer of cap bytes) by "[redacted]", and control characters by spaces. */
void bfs_cred_scrub(char *msg, size_t cap, const char *const *secrets, size_t n);

/* Parse an ISO 8601 / RFC 3339 UTC time ("2026-11-27T13:05:02Z", with
 * optional fractional seconds, or a "+00:00" offset) into *out. 0 or
 * -EINVAL. */
int bfs_cred_parse_time(const char *s, time_t *out);

#endif
