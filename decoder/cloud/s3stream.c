/* SPDX-License-Identifier: Apache-2.0 */
/* s3stream.c — a forward reader of a range of one object, built on the
 * client's ranged reads (s3.h): `depth` chunks in flight ahead of the
 * reader, delivered in order. Each chunk is retried on its own by the
 * client, and all carry If-Match on one ETag. */
#include "s3stream.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CHUNK ((size_t)8 << 20)
#define DEFAULT_DEPTH 4u
#define STREAM_MSG 768

struct slot {
	struct bfs_s3_req req;
	uint8_t *buf;
	bool busy; /* submitted, done not yet called */
	int err;
	char msg[STREAM_MSG];
	struct bfs_s3_stream *s;
};

struct bfs_s3_stream {
	struct bfs_s3 *c;
	char *bucket, *key;
	char etag[BFS_S3_ETAG_MAX]; /* "" until known */
	uint64_t end; /* UINT64_MAX until known */
	uint64_t next_off; /* where the next chunk to submit starts */
	uint64_t pos; /* bfs_s3_stream_read's position */
	size_t chunk;
	unsigned depth;
	struct slot *slots;
	unsigned head, nused; /* slots[head .. head + nused) hold ranges, in order */
	int err; /* sticky: the first failure */
	char msg[STREAM_MSG];
	pthread_mutex_t m; /* guards busy, err and msg of the slots */
	pthread_cond_t cv;
};

static void slot_done(struct bfs_s3_req *r, int err, const char *msg)
{
	struct slot *sl = r->ctx;
	struct bfs_s3_stream *s = sl->s;

	pthread_mutex_lock(&s->m);
	sl->err = err;
	snprintf(sl->msg, sizeof(sl->msg), "%s", msg ? msg : "");
	sl->busy = false;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->m);
}

static struct slot *slot_at(struct bfs_s3_stream *s, unsigned i)
{
	return &s->slots[(s->head + i) % s->depth];
}

static void slot_wait(struct bfs_s3_stream *s, struct slot *sl)
{
	pthread_mutex_lock(&s->m);
	while (sl->busy)
		pthread_cond_wait(&s->cv, &s->m);
	pthread_mutex_unlock(&s->m);
}

/* Submit one more chunk at next_off; false when nothing is left to read
 * or the submission failed (then s->err is set). */
static bool submit_next(struct bfs_s3_stream *s, unsigned flags)
{
	struct slot *sl;
	uint64_t left;
	int rc;

	if (s->nused == s->depth || s->next_off >= s->end || s->err)
		return false;
	sl = slot_at(s, s->nused);
	left = s->end - s->next_off;
	memset(&sl->req, 0, sizeof(sl->req));
	sl->req.bucket = s->bucket;
	sl->req.key = s->key;
	sl->req.etag = s->etag[0] ? s->etag : NULL;
	sl->req.off = s->next_off;
	sl->req.len = left < s->chunk ? (size_t)left : s->chunk;
	sl->req.dst = sl->buf;
	sl->req.flags = flags;
	sl->req.done = slot_done;
	sl->req.ctx = sl;
	sl->err = 0;
	sl->msg[0] = '\0';
	sl->busy = true;
	rc = bfs_s3_submit(s->c, &sl->req);
	if (rc) {
		sl->busy = false;
		s->err = rc;
		snprintf(s->msg, sizeof(s->msg), "s3 stream %s/%s: %s", s->bucket, s->key,
			 rc == -ECANCELED ? "the client is stopping" : "a bad request");
		return false;
	}
	s->nused++;
	s->next_off += sl->req.len;
	return true;
}

static void fill(struct bfs_s3_stream *s)
{
	while (submit_next(s, 0))
		;
}

/* Let the head slot go (it is not busy). */
static void retire_head(struct bfs_s3_stream *s)
{
	s->head = (s->head + 1) % s->depth;
	s->nused--;
}

void bfs_s3_stream_close(struct bfs_s3_stream *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nused; i++) {
		struct slot *sl = slot_at(s, i);
		bool busy;

		pthread_mutex_lock(&s->m);
		busy = sl->busy;
		pthread_mutex_unlock(&s->m);
		if (busy)
			bfs_s3_cancel(s->c, &sl->req);
	}
	for (unsigned i = 0; i < s->nused; i++)
		slot_wait(s, slot_at(s, i));
	for (unsigned i = 0; s->slots && i < s->depth; i++)
		free(s->slots[i].buf);
	free(s->slots);
	free(s->bucket);
	free(s->key);
	pthread_mutex_destroy(&s->m);
	pthread_cond_destroy(&s->cv);
	free(s);
}

int bfs_s3_stream_open(struct bfs_s3_stream **out, struct bfs_s3 *c, const char *bucket,
		       const char *key, const char *etag, uint64_t off, uint64_t end, size_t chunk,
		       unsigned depth)
{
	struct bfs_s3_stream *s;
	int rc = 0;

	if (!bucket || !key || end < off || (etag && strlen(etag) >= BFS_S3_ETAG_MAX))
		return bfs_err_set(-EINVAL, "s3 stream: a bad range or argument");
	s = calloc(1, sizeof(*s));
	if (!s)
		return bfs_err_set(-ENOMEM, "out of memory");
	pthread_mutex_init(&s->m, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->c = c;
	s->chunk = chunk ? chunk : DEFAULT_CHUNK;
	s->depth = depth ? depth : DEFAULT_DEPTH;
	s->end = end;
	s->next_off = s->pos = off;
	if (etag)
		snprintf(s->etag, sizeof(s->etag), "%s", etag);
	s->bucket = strdup(bucket);
	s->key = strdup(key);
	s->slots = calloc(s->depth, sizeof(*s->slots));
	if (!s->bucket || !s->key || !s->slots) {
		rc = bfs_err_set(-ENOMEM, "out of memory");
		goto fail;
	}
	for (unsigned i = 0; i < s->depth; i++) {
		s->slots[i].s = s;
		s->slots[i].buf = malloc(s->chunk);
		if (!s->slots[i].buf) {
			rc = bfs_err_set(-ENOMEM, "out of memory");
			goto fail;
		}
	}
	if (off == end) {
		*out = s;
		return 0;
	}
	if (!s->etag[0] || end == UINT64_MAX) {
		/* one chunk first, for the ETag and the size that the rest will use */
		struct slot *sl;

		if (!submit_next(s, end == UINT64_MAX ? BFS_S3_REQ_TO_END : 0)) {
			rc = bfs_err_set(s->err, "%s", s->msg);
			goto fail;
		}
		sl = slot_at(s, 0);
		slot_wait(s, sl);
		if (sl->err) {
			rc = bfs_err_set(sl->err, "%s", sl->msg);
			goto fail;
		}
		snprintf(s->etag, sizeof(s->etag), "%s", sl->req.etag_got);
		if (end == UINT64_MAX) {
			s->end = sl->req.off + sl->req.got;
			if (sl->req.got == sl->req.len && sl->req.object_size > s->end)
				s->end = sl->req.object_size;
		}
	}
	fill(s);
	*out = s;
	return 0;
fail:
	bfs_s3_stream_close(s);
	return rc;
}

int bfs_s3_stream_pread(struct bfs_s3_stream *s, void *dst, size_t n, uint64_t off, size_t *got)
{
	size_t total = 0;

	*got = 0;
	if (s->err)
		return bfs_err_set(s->err, "%s", s->msg);
	if (s->nused && off < slot_at(s, 0)->req.off)
		return bfs_err_set(-EINVAL, "s3 stream: offset %llu is behind the stream",
				   (unsigned long long)off);
	if (!s->nused && off < s->next_off && off < s->end)
		return bfs_err_set(-EINVAL, "s3 stream: offset %llu is behind the stream",
				   (unsigned long long)off);
	while (total < n) {
		uint64_t cur = off + total, have;
		struct slot *sl;
		size_t k;

		if (cur >= s->end)
			break;
		/* let go of the chunks wholly before cur */
		while (s->nused) {
			sl = slot_at(s, 0);
			if (sl->req.off + sl->req.len > cur)
				break;
			slot_wait(s, sl);
			retire_head(s);
		}
		if (!s->nused && s->next_off < cur)
			s->next_off = cur; /* skip ahead without reading */
		fill(s);
		if (s->err)
			return bfs_err_set(s->err, "%s", s->msg);
		if (!s->nused)
			break;
		sl = slot_at(s, 0);
		slot_wait(s, sl);
		if (sl->err) {
			s->err = sl->err;
			snprintf(s->msg, sizeof(s->msg), "%s", sl->msg);
			return bfs_err_set(s->err, "%s", s->msg);
		}
		have = sl->req.off + sl->req.got;
		if (cur >= have) { /* a chunk that ended early: the object's end */
			s->end = have;
			break;
		}
		k = (size_t)(have - cur) < n - total ? (size_t)(have - cur) : n - total;
		memcpy((uint8_t *)dst + total, sl->buf + (cur - sl->req.off), k);
		total += k;
	}
	*got = total;
	return 0;
}

int bfs_s3_stream_read(struct bfs_s3_stream *s, void *dst, size_t cap, size_t *got)
{
	int rc = bfs_s3_stream_pread(s, dst, cap, s->pos, got);

	if (rc == 0)
		s->pos += *got;
	return rc;
}
