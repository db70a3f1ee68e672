/* SPDX-License-Identifier: Apache-2.0 */
/*
 * objsrc.c — a dataset's shards in a bucket (see objsrc.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "objsrc.h"

#include "common.h"
#include "s3stream.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_CHUNK ((size_t)8 << 20) /* a scan's reads ahead: 4 of 8 MiB */
#define STREAM_DEPTH 4

struct obj {
	struct bfs_objsrc *src;
	char *key, *etag;
	uint64_t size;
	/* while the scan reads the object in order */
	struct bfs_s3_stream *stream;
};

struct bfs_objsrc {
	struct bfs_s3_url url;
	struct bfs_s3_config cfg;
	unsigned max_conns;
	pthread_mutex_t lock;
	struct bfs_s3 *client; /* lock; NULL until used, and after a fork */
	struct bfs_s3_object *objs; /* listed shards, [nobjs] */
	size_t nobjs;
	/* the stage's reads in the client, under reqs_lock (taken after lock,
	 * never before: the client's thread takes it to end a read, also while
	 * a fork's handler holds lock and stops the client) */
	pthread_mutex_t reqs_lock;
	struct sreq *reqs;
	pthread_cond_t reqs_gone; /* reqs emptied */
	struct bfs_objsrc *next; /* every source alive, for the fork handlers */
};

/* ------------------------------------------------------------------ fork */

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_objsrc *all; /* all_lock */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Before a fork: every client stops (its thread would not be in the
 * child); the next use starts it again. No object-store call may run
 * while the process forks. */
static void before_fork(void)
{
	pthread_mutex_lock(&all_lock);
	for (struct bfs_objsrc *s = all; s; s = s->next) {
		pthread_mutex_lock(&s->lock);
		bfs_s3_free(s->client);
		s->client = NULL;
		pthread_mutex_unlock(&s->lock);
	}
}

static void after_fork(void)
{
	pthread_mutex_unlock(&all_lock);
}

static void register_atfork(void)
{
	(void)pthread_atfork(before_fork, after_fork, after_fork);
}

/* The client, started on first use. NULL with a message when it cannot. */
static struct bfs_s3 *client(struct bfs_objsrc *s)
{
	struct bfs_s3 *c;

	pthread_mutex_lock(&s->lock);
	if (!s->client && bfs_s3_new(&s->client, &s->cfg, s->max_conns) != 0)
		s->client = NULL;
	c = s->client;
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* ----------------------------------------------------------- the shards */

static ssize_t obj_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	struct obj *o = arg;
	struct bfs_s3 *c;
	size_t got = 0;
	int rc;

	if (off >= o->size || n == 0)
		return 0;
	if (n > o->size - off)
		n = (size_t)(o->size - off);
	if (o->stream) {
		rc = bfs_s3_stream_pread(o->stream, buf, n, off, &got);
		if (rc != -EINVAL) /* behind the stream: a read of its own */
			return rc ? rc : (ssize_t)got;
	}
	c = client(o->src);
	if (!c)
		return -EIO;
	rc = bfs_s3_get(c, o->src->url.bucket, o->key, o->etag, off, buf, n);
	return rc ? rc : (ssize_t)n;
}

static void obj_stream_begin(void *arg, uint64_t off)
{
	struct obj *o = arg;
	struct bfs_s3 *c = client(o->src);

	if (c && !o->stream && off < o->size &&
	    bfs_s3_stream_open(&o->stream, c, o->src->url.bucket, o->key, o->etag, off, o->size,
			       STREAM_CHUNK, STREAM_DEPTH) != 0)
		o->stream = NULL; /* ranged reads then */
}

static void obj_stream_end(void *arg)
{
	struct obj *o = arg;

	bfs_s3_stream_close(o->stream);
	o->stream = NULL;
}

static void obj_close(void *arg)
{
	struct obj *o = arg;

	if (!o)
		return;
	bfs_s3_stream_close(o->stream);
	free(o->key);
	free(o->etag);
	free(o);
}

static const struct bfs_shard_io obj_io = {
	.pread = obj_pread,
	.stream_begin = obj_stream_begin,
	.stream_end = obj_stream_end,
	.close = obj_close,
};

static const char *scheme_name(const struct bfs_objsrc *s)
{
	return s->url.scheme == BFS_S3_SCHEME_GS ? "gs" : "s3";
}

int bfs_objsrc_open_shard(struct bfs_objsrc *s, size_t i, struct bfs_shard **out)
{
	const struct bfs_s3_object *lo = &s->objs[i];
	struct obj *o = calloc(1, sizeof(*o));
	char *name = NULL;
	uint64_t v;
	int rc;

	if (!o || !(o->key = strdup(lo->key)) || !(o->etag = strdup(lo->etag)) ||
	    asprintf(&name, "%s://%s/%s", scheme_name(s), s->url.bucket, lo->key) < 0) {
		obj_close(o);
		return bfs_err_set(-ENOMEM, "out of memory");
	}
	o->src = s;
	o->size = lo->size;
	/* the ETag stands for the mtime in every cache key */
	v = bfs_fnv1a(0xcbf29ce484222325ull, lo->etag, strlen(lo->etag)) >> 1;
	rc = bfs_shard_open_io(out, name, lo->size, (int64_t)v, &obj_io, o);
	free(name);
	return rc;
}

/* ------------------------------------------------------------ the stage */

/* A read in the client's queue. It holds copies of its key and ETag: a
 * read the I/O stage abandoned (the mount ending with reads in flight) is
 * ended by the client's shutdown after the shards, whose names they were,
 * are closed (bfs_dataset_close). */
struct sreq {
	struct bfs_s3_req r;
	struct bfs_fetch_read *fr;
	struct bfs_objsrc *src;
	struct sreq *prev, *next; /* src->reqs */
	char names[]; /* the key, then the ETag */
};

static void sreq_link(struct bfs_objsrc *s, struct sreq *q)
{
	pthread_mutex_lock(&s->reqs_lock);
	q->prev = NULL;
	q->next = s->reqs;
	if (s->reqs)
		s->reqs->prev = q;
	s->reqs = q;
	pthread_mutex_unlock(&s->reqs_lock);
}

static void sreq_unlink(struct bfs_objsrc *s, struct sreq *q)
{
	pthread_mutex_lock(&s->reqs_lock);
	if (q->prev)
		q->prev->next = q->next;
	else
		s->reqs = q->next;
	if (q->next)
		q->next->prev = q->prev;
	if (!s->reqs)
		pthread_cond_broadcast(&s->reqs_gone);
	pthread_mutex_unlock(&s->reqs_lock);
}

static void sreq_done(struct bfs_s3_req *r, int err, const char *msg)
{
	struct sreq *q = r->ctx;

	/* the read ends first: once unlinked, its stage may be freed */
	bfs_fetch_read_done(q->fr, err ? err : (int64_t)r->got, msg);
	sreq_unlink(q->src, q);
	free(q);
}

bool bfs_objsrc_end_reads(struct bfs_objsrc *s, unsigned wait_ms)
{
	struct timespec dl;
	bool none_left;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += wait_ms / 1000;
	dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	dl.tv_sec += dl.tv_nsec / 1000000000L;
	dl.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&s->lock);
	pthread_mutex_lock(&s->reqs_lock);
	for (struct sreq *q = s->reqs; q && s->client; q = q->next)
		bfs_s3_cancel(s->client, &q->r);
	pthread_mutex_unlock(&s->lock);
	while (s->reqs)
		if (pthread_cond_timedwait(&s->reqs_gone, &s->reqs_lock, &dl) == ETIMEDOUT)
			break;
	none_left = !s->reqs;
	pthread_mutex_unlock(&s->reqs_lock);
	return none_left;
}

void bfs_objsrc_submit(struct bfs_objsrc *s, struct bfs_fetch_read *fr, struct bfs_shard *shard)
{
	struct obj *o = bfs_shard_io_obj(shard);
	size_t kl = o ? strlen(o->key) + 1 : 0, el = o ? strlen(o->etag) + 1 : 0;
	struct sreq *q = o ? calloc(1, sizeof(*q) + kl + el) : NULL;
	struct bfs_s3 *c = client(s);
	uint64_t off, len;
	uint32_t id;
	uint8_t *dst;
	int rc;

	if (!q || !c) {
		free(q);
		bfs_fetch_read_done(fr, -EIO, !c ? bfs_err_msg() : "out of memory");
		return;
	}
	bfs_fetch_read_target(fr, &id, &off, &dst, &len);
	memcpy(q->names, o->key, kl);
	memcpy(q->names + kl, o->etag, el);
	q->fr = fr;
	q->src = s;
	q->r.bucket = s->url.bucket; /* freed after the client */
	q->r.key = q->names;
	q->r.etag = q->names + kl;
	q->r.off = off;
	q->r.len = (size_t)len;
	q->r.dst = dst;
	q->r.done = sreq_done;
	q->r.ctx = q;
	sreq_link(s, q); /* before: done may come before the submit returns */
	rc = bfs_s3_submit(c, &q->r);
	if (rc) {
		sreq_unlink(s, q);
		free(q);
		bfs_fetch_read_done(fr, rc, "the object store client is stopping");
	}
}

/* --------------------------------------------------------------- listing */

int bfs_objsrc_new(struct bfs_objsrc **out, const char *url, const struct bfs_s3_options *opt,
		   unsigned max_conns)
{
	struct bfs_objsrc *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->reqs_lock, NULL);
	pthread_cond_init(&s->reqs_gone, NULL);
	bfs_s3_config_init(&s->cfg);
	s->max_conns = max_conns ? max_conns : 64;
	rc = bfs_s3_url_parse(&s->url, url);
	if (!rc)
		rc = bfs_s3_config_resolve(&s->cfg, s->url.scheme, opt);
	if (rc) {
		bfs_objsrc_free(s);
		return rc;
	}
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&all_lock);
	s->next = all;
	all = s;
	pthread_mutex_unlock(&all_lock);
	*out = s;
	return 0;
}

void bfs_objsrc_free(struct bfs_objsrc *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&all_lock);
	for (struct bfs_objsrc **pp = &all; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&all_lock);
	bfs_s3_free(s->client);
	bfs_s3_objects_free(s->objs, s->nobjs);
	bfs_s3_url_destroy(&s->url);
	bfs_s3_config_destroy(&s->cfg);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->reqs_lock);
	pthread_cond_destroy(&s->reqs_gone);
	free(s);
}

static int push(char ***v, size_t *n, const char *scheme, const char *bucket, const char *key)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (asprintf(&nv[*n], "%s://%s/%s", scheme, bucket, key) < 0)
		return -ENOMEM;
	(*n)++;
	return 0;
}

int bfs_objsrc_list(struct bfs_objsrc *s, bool (*not_shard)(const char *name), char ***names,
		    size_t *n, char ***passed, size_t *npassed)
{
	struct bfs_s3_object *objs = NULL;
	struct bfs_s3 *c = client(s);
	size_t nobjs = 0, keep = 0;
	char *folder = NULL; /* the last subfolder passed over */
	bool folder_of_key = false; /* s3://B/K where K/ holds objects */
	int rc;

	*names = *passed = NULL;
	*n = *npassed = 0;
	if (!c)
		return -EIO;
	rc = bfs_s3_list(c, s->url.bucket, s->url.prefix, &objs, &nobjs);
	if (rc)
		return rc;
	for (size_t i = 0; i < nobjs; i++) {
		const char *key = objs[i].key, *base = strrchr(key, '/');
		size_t kl = strlen(key), pl = strlen(s->url.key);
		const char *sub = NULL;
		bool pass;

		base = base ? base + 1 : key;
		if (s->url.kind == BFS_S3_URL_KEY && kl > pl && key[pl] == '/' &&
		    strncmp(key, s->url.key, pl) == 0)
			folder_of_key = true;
		/* s3://B/PREFIX/ is a directory: its "subfolders" (keys past a
		 * '/' under the prefix, "folder/" markers) are passed over, as a
		 * directory's folders are; each named once */
		if (!rc && s->url.kind == BFS_S3_URL_PREFIX && bfs_s3_url_match(&s->url, key) &&
		    kl > pl)
			sub = strchr(key + pl, '/');
		if (sub) {
			size_t fl = (size_t)(sub - key) + 1;

			/* keys under one folder are listed one after another */
			if (!folder || strncmp(folder, key, fl) != 0 || folder[fl] != '\0') {
				free(folder);
				folder = strndup(key, fl);
				rc = folder ? push(passed, npassed, scheme_name(s), s->url.bucket,
						   folder)
					    : -ENOMEM;
			}
			bfs_s3_object_destroy(&objs[i]);
			continue;
		}
		if (rc || !bfs_s3_url_match(&s->url, key) || kl == 0 || key[kl - 1] == '/') {
			bfs_s3_object_destroy(&objs[i]); /* not named, or the prefix's own marker */
			continue;
		}
		pass = *base == '.' || (not_shard && not_shard(base));
		rc = pass ? push(passed, npassed, scheme_name(s), s->url.bucket, key)
			  : push(names, n, scheme_name(s), s->url.bucket, key);
		if (pass || rc)
			bfs_s3_object_destroy(&objs[i]);
		else
			objs[keep++] = objs[i];
	}
	free(folder);
	if (!rc && keep == 0 && folder_of_key) /* a folder named without its '/' */
		rc = bfs_err_set(-ENOENT,
				 "%s://%s/%s: no shard files found (did you mean %s://%s/%s/ ?)",
				 scheme_name(s), s->url.bucket, s->url.key, scheme_name(s),
				 s->url.bucket, s->url.key);
	else if (!rc && keep == 0)
		rc = bfs_err_set(-ENOENT, "%s://%s/%s: no shard files found", scheme_name(s),
				 s->url.bucket, s->url.key);
	if (rc) {
		bfs_s3_objects_free(objs, keep);
		for (size_t i = 0; i < *n; i++)
			free((*names)[i]);
		for (size_t i = 0; i < *npassed; i++)
			free((*passed)[i]);
		free(*names);
		free(*passed);
		*names = *passed = NULL;
		*n = *npassed = 0;
		return rc == -ENOMEM ? bfs_err_set(rc, "out of memory") : rc;
	}
	s->objs = objs;
	s->nobjs = keep;
	return 0;
}

struct bfs_cred_keeper *bfs_objsrc_keeper(const struct bfs_objsrc *s)
{
	return s->cfg.anonymous ? NULL : s->cfg.keeper;
}

void bfs_objsrc_describe(const struct bfs_objsrc *s, char *dst, size_t cap)
{
	bfs_s3_config_describe(&s->cfg, dst, cap);
}
