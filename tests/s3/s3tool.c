/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3tool — drives the object-store client (decoder/cloud/s3.h) from the command
 * line, for tests/s3 (pytest against s3rver and s3proxy.py) and for trying
 * a real bucket by hand. Credentials come from the environment or the
 * profile files, never from the command line.
 *
 *   s3tool [-o OPTS] config URL          how the configuration resolved
 *   s3tool [-o OPTS] ls URL              KEY<TAB>SIZE<TAB>ETAG per object
 *   s3tool [-o OPTS] head URL            SIZE<TAB>ETAG
 *   s3tool [-o OPTS] get URL OFF LEN [ETAG]      the bytes, to stdout
 *   s3tool [-o OPTS] reads URL ETAG OFF:LEN...   every range submitted at once,
 *                                        written to stdout in argument order
 *   s3tool [-o OPTS] cat URL [CHUNK DEPTH [ETAG [OFF [END]]]]
 *                                        the object through a stream, to stdout;
 *                                        without END, size and ETag from a HEAD
 *                                        first; END "-": to the end, unknown
 *   s3tool [-o OPTS] pread URL CHUNK DEPTH OFF:LEN...
 *                                        stream preads (forward), to stdout
 *   s3tool [-o OPTS] bench URL SIZE COUNT
 *                                        COUNT reads of SIZE bytes at random
 *                                        offsets, conns in flight; one JSON line
 *   s3tool [-o OPTS] fetch URL CHUNK     every object the URL lists, whole, in
 *                                        ranged reads of CHUNK bytes, conns in
 *                                        flight (a parallel download); one JSON line
 *   s3tool [-o OPTS] sign METHOD HOST PATH DATE [q:NAME=VALUE | h:NAME:VALUE]...
 *                                        the Authorization header of a request
 *                                        (PATH and query raw, encoded here)
 *
 * OPTS: endpoint=URL, region=R, no_sign_request, profile=P, conns=N and the
 * policy: tries=N, retry_ms=N, backoff_ms=N, backoff_max_ms=N,
 * connect_ms=N, stall_ms=N, max_keys=N.
 *
 * On an error: "s3tool: MESSAGE (ENAME)" on stderr, exit status 1.
 */
#include "s3.h"
#include "s3sign.h"
#include "s3stream.h"
#include "sha256.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *ename(int err)
{
	switch (-err) {
	case ESTALE:
		return "ESTALE";
	case ENOENT:
		return "ENOENT";
	case EACCES:
		return "EACCES";
	case EIO:
		return "EIO";
	case EINVAL:
		return "EINVAL";
	case ENOMEM:
		return "ENOMEM";
	case EBADMSG:
		return "EBADMSG";
	case ECANCELED:
		return "ECANCELED";
	default:
		return "E?";
	}
}

static int fail(int err)
{
	fprintf(stderr, "s3tool: %s (%s)\n", bfs_err_msg(), ename(err));
	return 1;
}

static int usage(void)
{
	fprintf(stderr, "usage: s3tool [-o OPTS] config|creds|ls|head|get|reads|cat|pread|bench|"
			"sign ...\n");
	return 2;
}

struct tool {
	struct bfs_s3_options opt;
	struct bfs_s3_config cfg;
	unsigned conns;
	char *optbuf;
};

static int set_policy(struct tool *t, const char *k, const char *v)
{
	static const struct {
		const char *name;
		size_t off;
	} nums[] = {
		{ "tries", offsetof(struct bfs_s3_config, tries) },
		{ "retry_ms", offsetof(struct bfs_s3_config, retry_ms) },
		{ "backoff_ms", offsetof(struct bfs_s3_config, backoff_ms) },
		{ "backoff_max_ms", offsetof(struct bfs_s3_config, backoff_max_ms) },
		{ "connect_ms", offsetof(struct bfs_s3_config, connect_timeout_ms) },
		{ "stall_ms", offsetof(struct bfs_s3_config, stall_timeout_ms) },
		{ "max_keys", offsetof(struct bfs_s3_config, max_keys) },
	};

	if (strcmp(k, "conns") == 0) {
		t->conns = (unsigned)strtoul(v, NULL, 10);
		return 0;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		if (strcmp(k, nums[i].name) == 0) {
			*(unsigned *)((char *)&t->cfg + nums[i].off) =
				(unsigned)strtoul(v, NULL, 10);
			return 0;
		}
	fprintf(stderr, "s3tool: unknown option '%s'\n", k);
	return -1;
}

static int parse_opts(struct tool *t, const char *s)
{
	char *save = NULL;

	t->optbuf = strdup(s);
	if (!t->optbuf)
		return -1;
	for (char *kv = strtok_r(t->optbuf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (eq)
			*eq++ = '\0';
		if (strcmp(kv, "endpoint") == 0 && eq)
			t->opt.endpoint = eq;
		else if (strcmp(kv, "region") == 0 && eq)
			t->opt.region = eq;
		else if (strcmp(kv, "profile") == 0 && eq)
			t->opt.profile = eq;
		else if (strcmp(kv, "no_sign_request") == 0)
			t->opt.no_sign_request = true;
		else if (!eq || set_policy(t, kv, eq) != 0)
			return -1;
	}
	return 0;
}

static int write_all(const void *p, size_t n)
{
	return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

static int parse_range(const char *s, uint64_t *off, size_t *len)
{
	char *end;

	*off = strtoull(s, &end, 10);
	if (*end != ':')
		return -1;
	*len = (size_t)strtoull(end + 1, &end, 10);
	return *end ? -1 : 0;
}

/* ---- reads: every range at once ---- */

struct many {
	pthread_mutex_t m;
	pthread_cond_t cv;
	size_t left;
	int err;
	char msg[1024];
};

static void many_done(struct bfs_s3_req *r, int err, const char *msg)
{
	struct many *w = r->ctx;

	pthread_mutex_lock(&w->m);
	if (err && !w->err) {
		w->err = err;
		snprintf(w->msg, sizeof(w->msg), "%s", msg);
	}
	w->left--;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

static int cmd_reads(struct bfs_s3 *c, const struct bfs_s3_url *u, const char *etag, int n,
		     char **ranges)
{
	struct bfs_s3_req *r = calloc((size_t)n, sizeof(*r));
	struct many w = { .left = 0 };
	int rc = 0;

	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&w.m, NULL);
	pthread_cond_init(&w.cv, NULL);
	for (int i = 0; i < n; i++) {
		if (parse_range(ranges[i], &r[i].off, &r[i].len) != 0 || !r[i].len) {
			rc = bfs_err_set(-EINVAL, "bad range '%s'", ranges[i]);
			break;
		}
		r[i].bucket = u->bucket;
		r[i].key = u->key;
		r[i].etag = etag && *etag ? etag : NULL;
		r[i].dst = malloc(r[i].len);
		r[i].done = many_done;
		r[i].ctx = &w;
		if (!r[i].dst) {
			rc = bfs_err_set(-ENOMEM, "out of memory");
			break;
		}
		pthread_mutex_lock(&w.m);
		w.left++;
		pthread_mutex_unlock(&w.m);
		rc = bfs_s3_submit(c, &r[i]);
		if (rc) {
			pthread_mutex_lock(&w.m);
			w.left--;
			pthread_mutex_unlock(&w.m);
			bfs_err_format("submit: %d", rc);
			break;
		}
	}
	pthread_mutex_lock(&w.m);
	while (w.left)
		pthread_cond_wait(&w.cv, &w.m);
	pthread_mutex_unlock(&w.m);
	if (rc == 0 && w.err)
		rc = bfs_err_set(w.err, "%s", w.msg);
	for (int i = 0; rc == 0 && i < n; i++)
		if (write_all(r[i].dst, r[i].len))
			rc = bfs_err_set(-EIO, "stdout: write error");
	for (int i = 0; i < n; i++)
		free(r[i].dst);
	free(r);
	return rc;
}

/* ---- bench: COUNT reads of SIZE, conns in flight ---- */

struct bench {
	struct bfs_s3 *c;
	const struct bfs_s3_url *u;
	const char *etag;
	uint64_t objsize;
	size_t size;
	uint64_t count, submitted, finished, bytes, rng;
	int err;
	char msg[1024];
	pthread_mutex_t m;
	pthread_cond_t cv;
};

static uint64_t bench_off(struct bench *b)
{
	b->rng ^= b->rng << 13;
	b->rng ^= b->rng >> 7;
	b->rng ^= b->rng << 17;
	return b->objsize > b->size ? b->rng % (b->objsize - b->size + 1) : 0;
}

static void bench_done(struct bfs_s3_req *r, int err, const char *msg);

/* Submit the next read in slot r (under b->m). */
static void bench_next(struct bench *b, struct bfs_s3_req *r)
{
	if (b->submitted >= b->count || b->err)
		return;
	r->off = bench_off(b);
	r->got = 0;
	if (bfs_s3_submit(b->c, r) == 0)
		b->submitted++;
	else
		b->err = -EIO;
}

static void bench_done(struct bfs_s3_req *r, int err, const char *msg)
{
	struct bench *b = r->ctx;

	pthread_mutex_lock(&b->m);
	b->finished++;
	if (err && !b->err) {
		b->err = err;
		snprintf(b->msg, sizeof(b->msg), "%s", msg);
	}
	b->bytes += r->got;
	bench_next(b, r);
	pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->m);
}

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- fetch: every listed object whole, in ranges of CHUNK, conns in flight ---- */

struct fetch {
	struct bfs_s3 *c;
	const char *bucket;
	struct bfs_s3_object *objs;
	size_t nobjs, obj; /* the next range: objs[obj] from off */
	uint64_t off, chunk, bytes, inflight, requests;
	int err;
	char msg[1024];
	pthread_mutex_t m;
	pthread_cond_t cv;
};

static void fetch_done(struct bfs_s3_req *r, int err, const char *msg);

/* Submit the next range in slot r (under f->m), or nothing when none is left. */
static void fetch_next(struct fetch *f, struct bfs_s3_req *r)
{
	while (f->obj < f->nobjs && f->off >= f->objs[f->obj].size) {
		f->obj++;
		f->off = 0;
	}
	if (f->obj >= f->nobjs || f->err)
		return;
	r->key = f->objs[f->obj].key;
	r->etag = f->objs[f->obj].etag;
	r->off = f->off;
	r->len = (size_t)(f->objs[f->obj].size - f->off < f->chunk ? f->objs[f->obj].size - f->off
								   : f->chunk);
	r->got = 0;
	f->off += r->len;
	if (bfs_s3_submit(f->c, r) == 0) {
		f->inflight++;
		f->requests++;
	} else {
		f->err = -EIO;
	}
}

static void fetch_done(struct bfs_s3_req *r, int err, const char *msg)
{
	struct fetch *f = r->ctx;

	pthread_mutex_lock(&f->m);
	f->inflight--;
	if (err && !f->err) {
		f->err = err;
		snprintf(f->msg, sizeof(f->msg), "%s", msg);
	}
	f->bytes += r->got;
	fetch_next(f, r);
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->m);
}

static int cmd_fetch(struct bfs_s3 *c, const struct bfs_s3_url *u, uint64_t chunk, unsigned conns)
{
	struct fetch f = { .c = c, .bucket = u->bucket, .chunk = chunk };
	struct bfs_s3_req *r;
	double t0, t1;
	int rc;

	if (chunk == 0)
		return bfs_err_set(-EINVAL, "CHUNK must be at least 1 byte");
	t0 = mono_s();
	rc = bfs_s3_list(c, u->bucket, u->prefix, &f.objs, &f.nobjs);
	if (rc)
		return rc;
	r = calloc(conns, sizeof(*r));
	if (!r) {
		bfs_s3_objects_free(f.objs, f.nobjs);
		return -ENOMEM;
	}
	pthread_mutex_init(&f.m, NULL);
	pthread_cond_init(&f.cv, NULL);
	pthread_mutex_lock(&f.m);
	for (unsigned i = 0; i < conns; i++) {
		r[i] = (struct bfs_s3_req){
			.bucket = u->bucket, .dst = malloc(chunk), .done = fetch_done, .ctx = &f
		};
		if (r[i].dst)
			fetch_next(&f, &r[i]);
	}
	while (f.inflight)
		pthread_cond_wait(&f.cv, &f.m);
	pthread_mutex_unlock(&f.m);
	t1 = mono_s();
	if (f.err)
		rc = bfs_err_set(f.err, "%s", f.msg);
	else
		printf("{\"conns\": %u, \"chunk\": %" PRIu64
		       ", \"objects\": %zu, \"requests\": %" PRIu64 ", \"bytes\": %" PRIu64
		       ", \"seconds\": %.4f, \"MBps\": %.2f}\n",
		       conns, chunk, f.nobjs, f.requests, f.bytes, t1 - t0,
		       (double)f.bytes / 1e6 / (t1 - t0));
	for (unsigned i = 0; i < conns; i++)
		free(r[i].dst);
	free(r);
	bfs_s3_objects_free(f.objs, f.nobjs);
	pthread_mutex_destroy(&f.m);
	pthread_cond_destroy(&f.cv);
	return rc;
}

static int cmd_bench(struct bfs_s3 *c, const struct bfs_s3_url *u, size_t size, uint64_t count,
		     unsigned conns)
{
	struct bfs_s3_object o = { 0 };
	struct bench b = {
		.c = c, .u = u, .size = size, .count = count, .rng = 88172645463325252ULL
	};
	struct bfs_s3_req *r;
	struct bfs_s3_stats st;
	unsigned slots = conns * 2;
	double t0, t1;
	int rc = bfs_s3_head(c, u->bucket, u->key, &o);

	if (rc)
		return rc;
	if (o.size < size || size == 0) {
		bfs_s3_object_destroy(&o);
		return bfs_err_set(-EINVAL, "the object is smaller than SIZE");
	}
	b.objsize = o.size;
	b.etag = o.etag;
	r = calloc(slots, sizeof(*r));
	if (!r) {
		bfs_s3_object_destroy(&o);
		return -ENOMEM;
	}
	pthread_mutex_init(&b.m, NULL);
	pthread_cond_init(&b.cv, NULL);
	t0 = mono_s();
	pthread_mutex_lock(&b.m);
	for (unsigned i = 0; i < slots; i++) {
		r[i] = (struct bfs_s3_req){ .bucket = u->bucket,
					    .key = u->key,
					    .etag = b.etag,
					    .len = size,
					    .dst = malloc(size),
					    .done = bench_done,
					    .ctx = &b };
		if (r[i].dst)
			bench_next(&b, &r[i]);
	}
	while (b.finished < b.submitted)
		pthread_cond_wait(&b.cv, &b.m);
	pthread_mutex_unlock(&b.m);
	t1 = mono_s();
	bfs_s3_stats(c, &st);
	if (b.err)
		rc = bfs_err_set(b.err, "%s", b.msg);
	else
		printf("{\"conns\": %u, \"size\": %zu, \"reads\": %" PRIu64 ", \"bytes\": %" PRIu64
		       ", \"seconds\": %.3f, \"MBps\": %.1f, "
		       "\"reads_per_s\": %.1f, \"requests\": %" PRIu64 ", \"retries\": %" PRIu64
		       "}\n",
		       conns, size, b.finished, b.bytes, t1 - t0, (double)b.bytes / 1e6 / (t1 - t0),
		       (double)b.finished / (t1 - t0), st.requests, st.retries);
	for (unsigned i = 0; i < slots; i++)
		free(r[i].dst);
	free(r);
	bfs_s3_object_destroy(&o);
	return rc;
}

/* ---- sign ---- */

static int cmd_sign(struct tool *t, int argc, char **argv)
{
	struct bfs_s3_kv q[16], h[16];
	size_t nq = 0, nh = 0;
	char *path = NULL, *query = NULL, *creq = NULL, *sts = NULL;
	struct bfs_s3_signed sig;
	struct tm tm = { 0 };
	int rc;

	if (argc < 4)
		return usage();
	if (!strptime(argv[3], "%Y%m%dT%H%M%SZ", &tm))
		return usage();
	for (int i = 4; i < argc; i++) {
		char *a = argv[i], *sep;

		if (strncmp(a, "q:", 2) == 0 && nq < 16 && (sep = strchr(a + 2, '='))) {
			*sep = '\0';
			q[nq++] = (struct bfs_s3_kv){ a + 2, sep + 1 };
		} else if (strncmp(a, "h:", 2) == 0 && nh < 16 && (sep = strchr(a + 2, ':'))) {
			*sep = '\0';
			h[nh++] = (struct bfs_s3_kv){ a + 2, sep + 1 };
		} else {
			return usage();
		}
	}
	if (bfs_s3_uri_encode(&path, argv[2], true) || bfs_s3_query_build(&query, q, nq))
		return -ENOMEM;
	{
		struct bfs_s3_sigreq sr = { .method = argv[0],
					    .host = argv[1],
					    .path = path,
					    .query = query,
					    .headers = h,
					    .nheaders = nh,
					    .region = t->cfg.region,
					    .service = "s3",
					    .when = timegm(&tm) };
		struct bfs_s3_creds cr = { t->cfg.key_id, t->cfg.secret, t->cfg.session_token };

		rc = bfs_s3_sign(&sig, &sr, &cr);
		if (rc == 0)
			rc = bfs_s3_sign_canonical(&creq, &sts, &sr, &cr);
	}
	if (rc == 0) {
		printf("%s%s%s\n%s\n", path, *query ? "?" : "", query, sig.authorization);
		if (getenv("S3TOOL_CANONICAL"))
			printf("%s\n--\n%s\n", creq, sts);
	} else {
		bfs_err_format("cannot sign");
	}
	free(creq);
	free(sts);
	free(path);
	free(query);
	return rc;
}

int main(int argc, char **argv)
{
	struct tool t = { .conns = 16 };
	struct bfs_s3_url u = { 0 };
	struct bfs_s3 *c = NULL;
	const char *cmd;
	int a = 1, rc = 0;

	bfs_s3_config_init(&t.cfg);
	if (argc > 2 && strcmp(argv[1], "-o") == 0) {
		if (parse_opts(&t, argv[2]) != 0)
			return usage();
		a = 3;
	}
	if (argc - a < 2)
		return usage();
	cmd = argv[a++];
	if (strcmp(cmd, "sign") == 0) {
		rc = bfs_s3_config_resolve(&t.cfg, BFS_S3_SCHEME_S3, &t.opt);
		if (rc == 0)
			rc = cmd_sign(&t, argc - a, argv + a);
		goto out;
	}
	rc = bfs_s3_url_parse(&u, argv[a++]);
	if (rc == 0)
		rc = bfs_s3_config_resolve(&t.cfg, u.scheme, &t.opt);
	if (rc == 0 && strcmp(cmd, "creds") == 0) {
		/* the credential the chain found: its kind, source, the SHA-256 of
		 * its key id (for comparing with botocore's without printing it) and
		 * expiry; never the secret or the token */
		struct bfs_cred *cr = NULL;
		char why[512], fp[2 * BFS_SHA256_LEN + 1] = "-";
		uint8_t d[BFS_SHA256_LEN];

		if (t.cfg.anonymous || !t.cfg.keeper) {
			printf("none\t-\t-\t0\n");
			goto out;
		}
		rc = bfs_cred_keeper_get(t.cfg.keeper, &cr, why, sizeof(why));
		if (rc) {
			bfs_err_format("%s", why);
			goto out;
		}
		if (cr->key_id) {
			bfs_sha256_digest(d, cr->key_id, strlen(cr->key_id));
			bfs_sha256_hex(fp, d);
		}
		printf("%s\t%s\t%s\t%lld\n", cr->kind == BFS_CRED_SIGV4 ? "sigv4" : "bearer",
		       cr->source, fp, (long long)cr->expires);
		bfs_cred_unref(cr);
		goto out;
	}
	if (rc == 0 && strcmp(cmd, "config") == 0) {
		char line[1024];

		bfs_s3_config_describe(&t.cfg, line, sizeof(line));
		printf("%s\n", line);
		goto out;
	}
	if (rc == 0)
		rc = bfs_s3_new(&c, &t.cfg, t.conns);
	if (rc)
		goto out;
	if (strcmp(cmd, "ls") == 0) {
		struct bfs_s3_object *v = NULL;
		size_t n = 0;

		if (u.kind == BFS_S3_URL_KEY) {
			v = calloc(1, sizeof(*v));
			rc = v ? bfs_s3_head(c, u.bucket, u.key, v) : -ENOMEM;
			n = rc == 0;
		} else {
			rc = bfs_s3_list(c, u.bucket, u.prefix, &v, &n);
		}
		for (size_t i = 0; rc == 0 && i < n; i++)
			if (bfs_s3_url_match(&u, v[i].key))
				printf("%s\t%" PRIu64 "\t%s\n", v[i].key, v[i].size, v[i].etag);
		bfs_s3_objects_free(v, n);
	} else if (strcmp(cmd, "head") == 0) {
		struct bfs_s3_object o = { 0 };

		rc = bfs_s3_head(c, u.bucket, u.key, &o);
		if (rc == 0)
			printf("%" PRIu64 "\t%s\n", o.size, o.etag);
		bfs_s3_object_destroy(&o);
	} else if (strcmp(cmd, "get") == 0 && argc - a >= 2) {
		size_t len = (size_t)strtoull(argv[a + 1], NULL, 10);
		void *buf = malloc(len ? len : 1);

		rc = buf ? bfs_s3_get(c, u.bucket, u.key, argc - a > 2 ? argv[a + 2] : NULL,
				      strtoull(argv[a], NULL, 10), buf, len)
			 : -ENOMEM;
		if (rc == 0 && write_all(buf, len))
			rc = bfs_err_set(-EIO, "stdout: write error");
		free(buf);
	} else if (strcmp(cmd, "reads") == 0 && argc - a >= 2) {
		rc = cmd_reads(c, &u, argv[a], argc - a - 1, argv + a + 1);
	} else if ((strcmp(cmd, "cat") == 0 || strcmp(cmd, "pread") == 0) &&
		   (strcmp(cmd, "cat") == 0 || argc - a >= 2)) {
		bool cat = strcmp(cmd, "cat") == 0;
		size_t chunk = argc - a > 0 ? (size_t)strtoull(argv[a], NULL, 10) : 0;
		unsigned depth = argc - a > 1 ? (unsigned)strtoul(argv[a + 1], NULL, 10) : 0;
		const char *etag = cat && argc - a > 2 && *argv[a + 2] ? argv[a + 2] : NULL;
		uint64_t off = cat && argc - a > 3 ? strtoull(argv[a + 3], NULL, 10) : 0;
		uint64_t end = UINT64_MAX;
		struct bfs_s3_object o = { 0 };
		struct bfs_s3_stream *s = NULL;
		static char buf[1 << 16];

		if (cat && argc - a > 4 && strcmp(argv[a + 4], "-") != 0) {
			end = strtoull(argv[a + 4], NULL, 10);
		} else if (!cat || argc - a <= 4) {
			/* as a shard source would: size and ETag from the store first */
			rc = bfs_s3_head(c, u.bucket, u.key, &o);
			end = o.size;
			if (!etag)
				etag = o.etag;
		}
		if (rc == 0)
			rc = bfs_s3_stream_open(&s, c, u.bucket, u.key, etag, off, end, chunk,
						depth);
		if (rc == 0 && cat) {
			size_t got;

			while ((rc = bfs_s3_stream_read(s, buf, sizeof(buf), &got)) == 0 && got)
				if (write_all(buf, got)) {
					rc = bfs_err_set(-EIO, "stdout: write error");
					break;
				}
		}
		for (int i = a + 2; rc == 0 && !cat && i < argc; i++) {
			uint64_t at;
			size_t len, got;
			char *p;

			if (parse_range(argv[i], &at, &len) != 0 || !(p = malloc(len ? len : 1))) {
				rc = bfs_err_set(-EINVAL, "bad range '%s'", argv[i]);
				break;
			}
			rc = bfs_s3_stream_pread(s, p, len, at, &got);
			if (rc == 0 && write_all(p, got))
				rc = bfs_err_set(-EIO, "stdout: write error");
			free(p);
		}
		bfs_s3_stream_close(s);
		bfs_s3_object_destroy(&o);
	} else if (strcmp(cmd, "fetch") == 0 && argc - a >= 1) {
		rc = cmd_fetch(c, &u, strtoull(argv[a], NULL, 10), t.conns);
	} else if (strcmp(cmd, "bench") == 0 && argc - a >= 2) {
		rc = cmd_bench(c, &u, (size_t)strtoull(argv[a], NULL, 10),
			       strtoull(argv[a + 1], NULL, 10), t.conns);
	} else {
		rc = usage();
		goto out;
	}
out:
	if (rc < 0)
		rc = fail(rc);
	fflush(stdout);
	bfs_s3_free(c);
	bfs_s3_url_destroy(&u);
	bfs_s3_config_destroy(&t.cfg);
	free(t.optbuf);
	return rc;
}
