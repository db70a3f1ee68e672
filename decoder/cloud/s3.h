/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3.h — an object-store client: Amazon S3 and the stores that speak its
 * API (MinIO, Ceph, R2 ...), and Google Cloud Storage through its XML API
 * with HMAC keys. The source layer reads shards with it; it knows nothing
 * of TFRecord, of FUSE, or of what the bytes are.
 *
 * What it does:
 *  - parses SOURCE URLs: s3://BUCKET/PREFIX/, s3://BUCKET/KEY, a glob on
 *    the last part (s3://BUCKET/train/part-*.gz), and the same with gs://;
 *  - resolves the endpoint and region the way the AWS tools do (options,
 *    then the environment, then ~/.aws/config), and the credentials through
 *    the clouds' default chains (cred.h: the AWS SDKs' for s3://; HMAC keys
 *    or Google's Application Default Credentials for gs://), kept fresh by a
 *    keeper that refreshes them ahead of expiry; signs every request with
 *    Signature Version 4 (s3sign.h) with the keeper's current credential, or
 *    sends it as an OAuth Bearer token, or sends none for no_sign_request;
 *  - a 400/401/403 saying the token expired (ExpiredToken,
 *    TokenRefreshRequired, ExpiredTokenException; a 401 to a Bearer token)
 *    tells the keeper, and the request is tried once more with the
 *    refreshed credential; while the keeper refreshes one that expired a
 *    request waits as for a transient failure, within its retries; when
 *    the credentials expired and the provider fails, requests fail at once
 *    with -EIO and the keeper's line (it goes on trying);
 *  - lists a prefix through every page of ListObjectsV2, heads an object,
 *    and reads byte ranges of objects, many at a time: a client is a libcurl
 *    multi handle driven by one thread of its own, with up to max_conns
 *    requests in flight over kept-alive connections (HTTP/1.1, TLS for
 *    https), the others queued in submission order;
 *  - reads a range of an object as a stream (chunks read ahead, in order)
 *    for a reader that wants it in one pass without holding it;
 *  - retries what may pass (connection refused or reset, timeouts, a body
 *    cut short, HTTP 5xx, 429, 503 SlowDown) with exponential backoff and
 *    jitter, for a bounded number of tries and time (by default 8 tries,
 *    6 to 11 s when each fails at once; no new try 30 s after the first);
 *    then fails with -EIO and one line naming the object, the byte range,
 *    the last reason and the tries (no time: the same failure is the same
 *    line). For as long again as those tries took (1 s to retry_ms), a
 *    ranged read of that object overlapping a range that gave up fails at
 *    once with the same line, unsent: a reader does not wait the budget
 *    again for what just failed. After a ranged read gave up, and until a
 *    request succeeds (or retry_ms passed), a new ranged read gets one try
 *    ("one try: a read gave up and nothing succeeded since"): a store that
 *    is down costs each range one request, not the whole budget;
 *  - sends If-Match with the ETag the caller indexed on every ranged read,
 *    and checks the ETag of what came back: a replaced object is never read
 *    as if it were the old one (-ESTALE, "the object changed ... re-mount").
 *
 * Errors: 0 or a negative errno: -EINVAL (a bad URL, option or argument; a
 * request S3 calls invalid: a wrong region or endpoint), -ENOENT (no
 * such bucket or key), -EACCES (access denied, a bad key id or signature,
 * an expired token, no credentials), -ESTALE (the object changed), -EIO
 * (the range is past the object's end, a transient failure that outlived
 * its retries, an unreachable endpoint, a reply that makes no sense),
 * -ENOMEM, -ECANCELED (cancelled, or the client freed). Blocking calls
 * leave a one-line message in the thread-local buffer (common.h);
 * asynchronous ones give it to their completion callback. Messages quote the
 * store's own Code and Message (AccessDenied, NoSuchBucket, NoSuchKey,
 * InvalidAccessKeyId, SignatureDoesNotMatch ...).
 *
 * Secrets: the secret key and the session token are never written to a
 * message, a URL or a log; curl's verbose output is off; a message that
 * would quote either (a store echoing a header back) has it replaced by
 * "[redacted]". The configuration wipes them when destroyed.
 *
 * Thread-safety: a client may be used from any number of threads at once;
 * completion callbacks run on the client's own thread, one at a time.
 * URLs, configurations and streams belong to one thread at a time.
 */
#ifndef BFS_S3_H
#define BFS_S3_H

#include "common.h"
#include "cred.h"
#include "s3obj.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bfs_s3_scheme {
	BFS_S3_SCHEME_S3 = 0, /* s3:// */
	BFS_S3_SCHEME_GS, /* gs://: Google Cloud Storage's XML API */
};

/* ---- URLs --------------------------------------------------------------- */

enum bfs_s3_url_kind {
	BFS_S3_URL_PREFIX = 0, /* s3://B, s3://B/, s3://B/P/: every object under prefix */
	BFS_S3_URL_KEY, /* s3://B/K: the one object K */
	BFS_S3_URL_GLOB, /* s3://B/D/PAT: objects D/NAME whose NAME matches PAT */
};

struct bfs_s3_url {
	enum bfs_s3_scheme scheme;
	enum bfs_s3_url_kind kind;
	char *bucket;
	char *key; /* KEY: the key; PREFIX: "" or a prefix ending in '/'; GLOB: the whole pattern */
	char *prefix; /* what to list: PREFIX and KEY: key; GLOB: D/ and the pattern's literal start */
};

/* True when s names an object store (starts with s3:// or gs://). */
bool bfs_s3_url_is(const char *s);
/* Parse url (taken literally: no %-decoding; keys may hold spaces, '+',
 * any UTF-8). A glob (*, ?, [...], fnmatch(3), '\' escapes) is allowed in
 * the last part only. 0 or -EINVAL (with a message) or -ENOMEM. */
int bfs_s3_url_parse(struct bfs_s3_url *out, const char *url);
void bfs_s3_url_destroy(struct bfs_s3_url *u); /* accepts a zeroed one */
/* Whether a listed key belongs to the source: PREFIX every key under it;
 * KEY that key; GLOB D/NAME with NAME matching (no '/' in NAME). */
bool bfs_s3_url_match(const struct bfs_s3_url *u, const char *key);

/* ---- configuration ------------------------------------------------------ */

/* What the mount's options say (NULL/false: not given). */
struct bfs_s3_options {
	const char *endpoint; /* endpoint=URL */
	const char *region; /* region=R */
	bool no_sign_request; /* no_sign_request: anonymous requests */
	const char *profile; /* a profile name; NULL: $AWS_PROFILE or "default" */
};

struct bfs_s3_config {
	enum bfs_s3_scheme scheme; /* how objects are named in messages */
	char *endpoint; /* "http[s]://host[:port][/base]", no '/' at the end */
	char *region;
	bool path_style; /* ENDPOINT/BUCKET/KEY; else BUCKET.HOST/KEY where the bucket allows */
	bool anonymous; /* no_sign_request: no Authorization */
	char *key_id, *secret, *session_token; /* NULL when anonymous; token NULL when none */
	char *source; /* where the credentials came from, for messages (never a value) */
	/* the credentials' keeper (a reference), or NULL: bfs_s3_new then keeps
	 * key_id, secret and session_token, which never expire. Resolved
	 * configurations have one (and, for keys that never expire, the three
	 * fields too). */
	struct bfs_cred_keeper *keeper;
	char *ca_file; /* $AWS_CA_BUNDLE, or NULL: the system's CAs */
	/* the transfer policy; bfs_s3_config_init sets the defaults */
	unsigned tries; /* attempts per request, at least 1 (default 8; AWS_MAX_ATTEMPTS) */
	unsigned retry_ms; /* no new attempt starts this long after the first (30000) */
	unsigned backoff_ms; /* the first retry waits about this long, doubling (100) */
	unsigned backoff_max_ms; /* the most one wait is (5000) */
	unsigned connect_timeout_ms; /* (5000) */
	unsigned stall_timeout_ms; /* an attempt that gets no byte for this long fails (20000) */
	unsigned max_keys; /* keys per listing page asked for; 0: the store's (1000) */
};

/* Zero everything, set the default policy. */
void bfs_s3_config_init(struct bfs_s3_config *cfg);
/* Free the strings, wiping the secret and the session token first, drop the
 * keeper, and leave cfg as bfs_s3_config_init does. */
void bfs_s3_config_destroy(struct bfs_s3_config *cfg);
/* A deep copy of src into dst (dst's old strings are not freed; the keeper
 * is shared: one more reference). */
int bfs_s3_config_copy(struct bfs_s3_config *dst, const struct bfs_s3_config *src);

/* Fill cfg (initialized; its policy fields are kept) for scheme, in this
 * order, the first that gives a value winning:
 *  endpoint: opt->endpoint; for s3, $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL,
 *    the profile's endpoint_url (or its "s3 =" section's); else AWS itself,
 *    https://s3.REGION.amazonaws.com, virtual-hosted. gs: opt->endpoint or
 *    https://storage.googleapis.com. A custom endpoint, and gs, are
 *    path-style (the profile's s3 addressing_style = virtual says otherwise).
 *  region: opt->region, $AWS_REGION, $AWS_DEFAULT_REGION, the profile's
 *    region; else us-east-1 (gs: auto).
 *  credentials: none with opt->no_sign_request; else for s3 the AWS chain
 *    (bfs_credaws_chain: $AWS_ACCESS_KEY_ID ..., roles, web identity, the
 *    profile (opt->profile, $AWS_PROFILE, "default") in the credentials file
 *    ($AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials) and the config file
 *    ($AWS_CONFIG_FILE, ~/.aws/config, section "profile NAME"),
 *    credential_process, container credentials, IMDSv2); for gs HMAC keys
 *    from the environment or the profile, else Google's ADC
 *    (bfs_credgcp_chain, when linked in). The chain's first fetch is made
 *    here (blocking).
 *  tries: $AWS_MAX_ATTEMPTS (1 to 100), else cfg's.
 * Errors (a message, naming no secret): -EINVAL a bad endpoint or region,
 * or AWS_MAX_ATTEMPTS, half a key pair, a named profile found nowhere, a
 * bad setting; -EACCES no credentials (the line names every place looked
 * in), a place that refused (a role, SSO profiles: out of scope); -EIO a
 * place that has credentials but did not give them; -ENOMEM. cfg is
 * changed only on success. */
int bfs_s3_config_resolve(struct bfs_s3_config *cfg, enum bfs_s3_scheme scheme,
			  const struct bfs_s3_options *opt);

/* One line for README.txt or a log: endpoint, addressing, region, and where
 * the credentials came from with the key id's last 4 characters. Never the
 * secret or the token. Truncated to cap. */
void bfs_s3_config_describe(const struct bfs_s3_config *cfg, char *dst, size_t cap);

/* ---- the client --------------------------------------------------------- */

struct bfs_s3;

/* A client over a copy of cfg, with up to max_conns (1..1024) requests in
 * flight, each on its own connection. Starts its thread. 0, -EINVAL (a
 * config that does not resolve: no endpoint; max_conns out of range),
 * -ENOMEM, -EIO (curl or the thread would not start). */
int bfs_s3_new(struct bfs_s3 **out, const struct bfs_s3_config *cfg, unsigned max_conns);
/* Stop the thread, fail requests still queued or in flight with -ECANCELED
 * (their callbacks run before this returns), close the connections. Must not
 * be called from a completion callback. Accepts NULL. */
void bfs_s3_free(struct bfs_s3 *c);

/* Every object whose key starts with prefix ("" for all), through every page
 * of ListObjectsV2, sorted by key (bytewise, as S3 does). *out (an array of
 * *n, NULL when none) belongs to the caller: bfs_s3_objects_free. Blocking;
 * not from a callback. Errors as above, the message naming the bucket and
 * prefix; -EBADMSG a listing that does not parse. */
int bfs_s3_list(struct bfs_s3 *c, const char *bucket, const char *prefix,
		struct bfs_s3_object **out, size_t *n);

/* Size and ETag of one object (HEAD; on a failure, one more request learns
 * the store's reason: HEAD replies carry none). out->key is a copy of key.
 * Blocking; not from a callback. */
int bfs_s3_head(struct bfs_s3 *c, const char *bucket, const char *key, struct bfs_s3_object *out);

struct bfs_s3_req;
/* Called once per submitted request, on the client's thread: err 0 or a
 * negative errno; msg (borrowed, for the call only) one line naming the
 * object and the byte range, NULL on success. It may submit or cancel
 * requests, and must not block: no blocking call of this API in it. */
typedef void (*bfs_s3_done_fn)(struct bfs_s3_req *r, int err, const char *msg);

enum {
	/* The range may run past the object's end: read what there is (got
	 * says how much; an empty object read from 0 gives 0 bytes). */
	BFS_S3_REQ_TO_END = 1u << 0,
};

/* A ranged read: bytes [off, off + len) of bucket/key into dst. The caller
 * owns it; it and what it points to must live until done is called. */
struct bfs_s3_req {
	const char *bucket;
	const char *key;
	const char *etag; /* If-Match: the version indexed; NULL: any version */
	uint64_t off;
	size_t len; /* at least 1 */
	void *dst; /* len bytes */
	unsigned flags; /* BFS_S3_REQ_* */
	bfs_s3_done_fn done;
	void *ctx; /* the caller's */
	/* written before done is called with 0 */
	size_t got; /* bytes in dst: len, unless BFS_S3_REQ_TO_END */
	uint64_t object_size; /* the whole object's, from Content-Range */
	char etag_got[BFS_S3_ETAG_MAX]; /* the ETag of what was read */
};

/* Queue r; done is called later, exactly once, on the client's thread
 * (never inside this call). 0, or -EINVAL (len 0, an offset that overflows,
 * no bucket, key, dst or done) or -ECANCELED (the client is stopping), and
 * then done is never called. Any thread, callbacks included. */
int bfs_s3_submit(struct bfs_s3 *c, struct bfs_s3_req *r);
/* Ask that r, submitted and not yet done, end with -ECANCELED as soon as
 * possible (one in flight is dropped from its connection). done is still
 * called exactly once, maybe with the result it was about to have. Any
 * thread. */
void bfs_s3_cancel(struct bfs_s3 *c, struct bfs_s3_req *r);
/* bfs_s3_submit, waiting for the result; the message, if any, goes to the
 * thread-local buffer. Not from a callback (-EDEADLK). */
int bfs_s3_get(struct bfs_s3 *c, const char *bucket, const char *key, const char *etag,
	       uint64_t off, void *dst, size_t len);

/* Counters since bfs_s3_new (approximate while requests run). */
struct bfs_s3_stats {
	uint64_t requests; /* HTTP requests sent, attempts and retries alike */
	uint64_t retries; /* of those, the retries */
	uint64_t failed; /* requests (of the API) that ended in an error */
	uint64_t bytes; /* body bytes received into callers' memory */
	unsigned in_flight; /* requests on connections now */
	unsigned queued; /* requests waiting for a connection or a retry */
	uint64_t expired; /* answers saying the token expired (each tried once more) */
};
void bfs_s3_stats(struct bfs_s3 *c, struct bfs_s3_stats *out);

#endif
