/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_z.c — gzip and zlib record streams: the scan's input, inflated
 * with Z_BLOCK so that it stops at every deflate block boundary and can
 * save a seek point there (a 32 KiB window every ~1 MiB of output), and
 * random access, which restarts a raw inflate at the nearest seek point at
 * or before a record (priming the leftover bits and installing the
 * window), discards output up to the record and takes it; records read
 * together share one inflate pass when they lie close.
 *
 * The only file of the decoder that includes <zlib.h>.
 *
 * Does not: frame records (record_scan.c) or read plain ones
 * (record_read.c). All per-read state lives in the call, so concurrent
 * reads on one shard are safe.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record_impl.h"

#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define SCAN_IN_CHUNK ((size_t)256 << 10) /* compressed input per pread, scan */
#define DISCARD_CHUNK ((size_t)32 << 10) /* output skipped on the way to a record */
#define SEEK_SPAN ((uint64_t)1 << 20) /* uncompressed bytes between seek points */

/* The seek point span: SEEK_SPAN, or what bfs_shard_set_seek_span gave
 * (the mount's seek_span=, the index command's --seek-span). */
static _Atomic uint64_t span_set;

void bfs_shard_set_seek_span(uint64_t bytes)
{
	atomic_store(&span_set, bytes >= BFS_SEEK_SPAN_MIN ? bytes : 0);
}

static uint64_t seek_span(void)
{
	uint64_t v = atomic_load(&span_set);

	return v ? v : SEEK_SPAN;
}
#define WINSIZE 32768

static const char *stream_name(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? "zlib stream" : "gzip stream";
}

static int wrap_bits(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? 15 : 15 + 16;
}

static unsigned trailer_len(enum bfs_compression c)
{
	return c == BFS_COMP_ZLIB ? 4 : 8;
}

/* ---- compressed input -------------------------------------------------- */

struct bfs_zin {
	const struct bfs_shard *s; /* read with bfs_shard_src_pread: the I/O stage first */
	uint64_t file_size;
	uint64_t pos; /* file offset of the next byte to pread */
	uint8_t *buf;
	size_t cap;
	z_stream zs;
	bool live; /* zs initialised */
};

/* offset of the next compressed byte inflate will consume */
static inline uint64_t zin_off(const struct bfs_zin *z)
{
	return z->pos - z->zs.avail_in;
}

/* Refill the input if inflate consumed it all. Leaves avail_in 0 at end of file. */
static int zin_refill(struct bfs_zin *z)
{
	ssize_t n;
	size_t want;

	if (z->zs.avail_in || z->pos >= z->file_size)
		return 0;
	want = z->cap;
	if (z->file_size - z->pos < want)
		want = (size_t)(z->file_size - z->pos);
	n = bfs_shard_src_pread(z->s, z->buf, want, z->pos);
	if (n < 0) {
		char why[512];

		snprintf(why, sizeof(why), "%s",
			 (z->s->fetch || z->s->io) && bfs_err_msg()[0] ? bfs_err_msg()
								       : strerror((int)-n));
		return bfs_err_set((int)n, "read at compressed offset %" PRIu64 ": %s", z->pos,
				   why);
	}
	if ((size_t)n < want)
		z->file_size = z->pos + (uint64_t)n; /* shrank under us: treat as end */
	z->pos += (uint64_t)n;
	z->zs.next_in = z->buf;
	z->zs.avail_in = (uInt)n;
	return 0;
}

static int zin_init(struct bfs_zin *z, const struct bfs_shard *s, size_t cap)
{
	memset(z, 0, sizeof(*z));
	z->s = s;
	z->file_size = s->file_size;
	z->cap = cap;
	z->buf = malloc(cap);
	if (!z->buf)
		return bfs_err_set(-ENOMEM, "out of memory");
	return 0;
}

static void zin_destroy(struct bfs_zin *z)
{
	if (z->live)
		inflateEnd(&z->zs);
	z->live = false;
	free(z->buf);
	z->buf = NULL;
}

static int zin_inflate_init(struct bfs_zin *z, int window_bits)
{
	int ret = inflateInit2(&z->zs, window_bits);

	if (ret == Z_MEM_ERROR)
		return bfs_err_set(-ENOMEM, "out of memory (inflate)");
	if (ret != Z_OK)
		return bfs_err_set(-EIO, "inflateInit2 failed (%d)", ret);
	z->live = true;
	return 0;
}

/* ---- the scan's input ------------------------------------------------------ */

int bfs_scan_z_begin(struct bfs_scan *sc)
{
	int err;

	sc->z = malloc(sizeof(*sc->z));
	if (!sc->z)
		return bfs_err_set(-ENOMEM, "out of memory");
	err = zin_init(sc->z, sc->s, SCAN_IN_CHUNK);
	if (!err)
		err = zin_inflate_init(sc->z, wrap_bits(sc->s->comp));
	return err;
}

void bfs_scan_z_end(struct bfs_scan *sc)
{
	if (!sc->z)
		return;
	zin_destroy(sc->z);
	free(sc->z);
	sc->z = NULL;
}

static int scan_add_point(struct bfs_scan *sc)
{
	struct bfs_seek_point *p = bfs_index_add_point(sc->s->ix);
	uInt wl = 0;

	if (!p)
		return bfs_err_set(-ENOMEM, "out of memory growing the seek points");
	p->out_off = sc->produced;
	p->in_off = zin_off(sc->z);
	p->bits = (uint8_t)(sc->z->zs.data_type & 7);
	p->new_member = 0;
	if (inflateGetDictionary(&sc->z->zs, NULL, &wl) != Z_OK || wl > WINSIZE) {
		bfs_index_drop_point(sc->s->ix);
		return bfs_err_set(-EIO, "inflateGetDictionary failed");
	}
	memset(p->window, 0, WINSIZE - wl);
	inflateGetDictionary(&sc->z->zs, p->window + WINSIZE - wl, &wl);
	sc->last_point = sc->produced;
	return 0;
}

static int scan_zerr(struct bfs_scan *sc, int err, const char *what)
{
	return bfs_err_set(err,
			   "record %" PRIu64 " at offset %" PRIu64
			   ": %s: %s at compressed offset %" PRIu64 "%s%s%s",
			   sc->rec, sc->base, stream_name(sc->s->comp), what, zin_off(sc->z),
			   sc->z->zs.msg ? " (zlib: " : "", sc->z->zs.msg ? sc->z->zs.msg : "",
			   sc->z->zs.msg ? ")" : "");
}

/* Inflate until some output was produced or the stream ended. */
int bfs_scan_fill_z(struct bfs_scan *sc)
{
	z_stream *zs = &sc->z->zs;
	int err;

	for (;;) {
		size_t room = sc->cap - sc->end;
		size_t got;
		int ret;

		err = zin_refill(sc->z);
		if (err)
			return err;
		if (room > UINT_MAX)
			room = UINT_MAX;
		zs->next_out = sc->buf + sc->end;
		zs->avail_out = (uInt)room;
		ret = inflate(zs, Z_BLOCK);
		got = room - zs->avail_out;
		if (got && sc->s->sink)
			sc->s->sink(sc->s->sink_ctx, sc->buf + sc->end, got);
		sc->end += got;
		sc->produced += got;
		switch (ret) {
		case Z_OK:
			break;
		case Z_STREAM_END:
			err = zin_refill(sc->z);
			if (err)
				return err;
			if (!zs->avail_in) {
				sc->eof = true;
				return 0;
			}
			inflateReset(zs); /* another member follows */
			if (got)
				return 0;
			continue;
		case Z_BUF_ERROR:
			/* no progress: input exhausted (room is never 0 here) */
			sc->z_ended = true;
			return scan_zerr(sc, -EBADMSG,
					 "unexpected end of compressed data (truncated file?)");
		case Z_NEED_DICT:
			return scan_zerr(sc, -EBADMSG, "stream needs a preset dictionary");
		case Z_MEM_ERROR:
			return bfs_err_set(-ENOMEM, "out of memory (inflate)");
		default:
			return scan_zerr(sc, -EBADMSG, "invalid deflate data");
		}
		if ((zs->data_type & 128) && !(zs->data_type & 64) &&
		    sc->produced - sc->last_point >= seek_span()) {
			err = scan_add_point(sc);
			if (err)
				return err;
		}
		if (got)
			return 0;
	}
}

/* ---- reading records ------------------------------------------------------- */

struct zreader {
	const struct bfs_shard *s;
	struct bfs_zin z;
	bool raw; /* started mid-member: the trailer is skipped by hand */
	uint8_t *scratch;
	uint64_t rec, rec_off;
};

static int zr_err(struct zreader *r, int err, const char *what)
{
	return bfs_err_set(err,
			   "record %" PRIu64 " at offset %" PRIu64
			   ": %s: %s at compressed offset %" PRIu64 "%s%s%s",
			   r->rec, r->rec_off, stream_name(r->s->comp), what, zin_off(&r->z),
			   r->z.zs.msg ? " (zlib: " : "", r->z.zs.msg ? r->z.zs.msg : "",
			   r->z.zs.msg ? ")" : "");
}

/* zin_refill for a record's read: a failure names the record. */
static int zr_refill(struct zreader *r)
{
	int err = zin_refill(&r->z);

	if (err)
		bfs_err_prefix("record %" PRIu64 " at offset %" PRIu64, r->rec, r->rec_off);
	return err;
}

static int zr_start(struct zreader *r, const struct bfs_seek_point *pt)
{
	int err;

	r->z.pos = pt ? pt->in_off : 0;
	if (pt && !pt->new_member) {
		int ret;

		err = zin_inflate_init(&r->z, -15);
		if (err)
			return err;
		r->raw = true;
		if (pt->bits) {
			uint8_t b;
			ssize_t n = bfs_shard_src_pread(r->s, &b, 1, pt->in_off - 1);

			if (n != 1)
				return zr_err(r, n < 0 ? (int)n : -EIO,
					      "cannot read seek point byte");
			ret = inflatePrime(&r->z.zs, pt->bits, b >> (8 - pt->bits));
			if (ret != Z_OK)
				return zr_err(r, -EBADMSG, "bad seek point");
		}
		ret = inflateSetDictionary(&r->z.zs, pt->window, WINSIZE);
		if (ret != Z_OK)
			return zr_err(r, -EBADMSG, "bad seek point window");
		return 0;
	}
	r->raw = false;
	return zin_inflate_init(&r->z, wrap_bits(r->s->comp));
}

/* A member ended: skip its trailer if inflate did not, start the next one. */
static int zr_next_member(struct zreader *r)
{
	int err;

	if (r->raw) {
		unsigned left = trailer_len(r->s->comp);

		while (left) {
			unsigned k;

			err = zr_refill(r);
			if (err)
				return err;
			if (!r->z.zs.avail_in)
				return zr_err(r, -EBADMSG, "truncated member trailer");
			k = r->z.zs.avail_in < left ? r->z.zs.avail_in : left;
			r->z.zs.next_in += k;
			r->z.zs.avail_in -= k;
			left -= k;
		}
	}
	err = zr_refill(r);
	if (err)
		return err;
	if (!r->z.zs.avail_in)
		return zr_err(r, -EBADMSG, "stream ends before the record");
	if (inflateReset2(&r->z.zs, wrap_bits(r->s->comp)) != Z_OK)
		return zr_err(r, -EIO, "inflateReset2 failed");
	r->raw = false;
	return 0;
}

/* Inflate exactly n bytes into dst, or discard them when dst is NULL. */
static int zr_read(struct zreader *r, uint8_t *dst, size_t n)
{
	z_stream *zs = &r->z.zs;
	int err;

	while (n) {
		size_t want = n;
		uint8_t *o = dst;
		size_t got;
		int ret;

		if (!dst) {
			o = r->scratch;
			if (want > DISCARD_CHUNK)
				want = DISCARD_CHUNK;
		} else if (want > UINT_MAX) {
			want = UINT_MAX;
		}
		err = zr_refill(r);
		if (err)
			return err;
		zs->next_out = o;
		zs->avail_out = (uInt)want;
		ret = inflate(zs, Z_NO_FLUSH);
		got = want - zs->avail_out;
		n -= got;
		if (dst)
			dst += got;
		if (!n && ret != Z_MEM_ERROR)
			break; /* what we need was produced; a later error is not ours */
		switch (ret) {
		case Z_OK:
			break;
		case Z_STREAM_END:
			err = zr_next_member(r);
			if (err)
				return err;
			break;
		case Z_BUF_ERROR:
			return zr_err(r, -EBADMSG, "unexpected end of compressed data");
		case Z_NEED_DICT:
			return zr_err(r, -EBADMSG, "stream needs a preset dictionary");
		case Z_MEM_ERROR:
			return bfs_err_set(-ENOMEM, "out of memory (inflate)");
		default:
			return zr_err(r, -EBADMSG, "invalid deflate data");
		}
	}
	return 0;
}

int bfs_shard_read_z(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		     uint8_t *dst, bool verify)
{
	const struct bfs_seek_point *pt = find_point(s, loc->offset);
	struct zreader r;
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	int err;

	memset(&r, 0, sizeof(r));
	r.s = s;
	r.rec = i;
	r.rec_off = loc->offset;
	err = zin_init(&r.z, s, READ_IN_CHUNK);
	if (err)
		return err;
	r.scratch = malloc(DISCARD_CHUNK);
	if (!r.scratch) {
		err = bfs_err_set(-ENOMEM, "out of memory");
		goto out;
	}
	err = zr_start(&r, pt);
	if (err)
		goto out;
	err = zr_read(&r, NULL, loc->offset - (pt ? pt->out_off : 0));
	if (err)
		goto out;
	err = zr_read(&r, hdr, HDR_LEN);
	if (err)
		goto out;
	err = bfs_record_check_frame(i, loc, hdr, NULL, NULL, verify);
	if (err)
		goto out;
	err = zr_read(&r, dst, loc->len);
	if (err)
		goto out;
	err = zr_read(&r, foot, FOOT_LEN);
	if (err)
		goto out;
	err = bfs_record_check_frame(i, loc, NULL, dst, foot, verify);
out:
	free(r.scratch);
	zin_destroy(&r.z);
	return err;
}

/* Restart inflate at a later seek point rather than discard more than this. */
#define RESTART_GAP ((uint64_t)256 << 10)

void bfs_shard_read_many_z(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			   bool verify, int *errs, char **msgs)
{
	struct zreader r;
	uint64_t pos = 0;
	bool live = false;
	int err;

	memset(&r, 0, sizeof(r));
	r.s = s;
	r.scratch = malloc(DISCARD_CHUNK);
	if (!r.scratch) {
		for (size_t k = 0; k < n; k++)
			bfs_shard_fail_one(s, bfs_err_set(-ENOMEM, "out of memory"), errs, msgs, k);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct bfs_record_loc l;
		const struct bfs_record_loc *loc = &l;
		const struct bfs_seek_point *pt;
		uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
		uint64_t i = idx[k];

		if (i >= s->nlocs) {
			bfs_shard_fail_one(
				s, bfs_err_set(-ENOENT, "record %" PRIu64 ": no such record", i),
				errs, msgs, k);
			continue;
		}
		l = loc_of(s, i);
		pt = find_point(s, loc->offset);
		/* continue the running inflate when the record lies ahead of it and
		 * no seek point would save much of the way */
		if (!live || pos > loc->offset ||
		    (pt && pt->out_off > pos && pt->out_off - pos > RESTART_GAP)) {
			if (live)
				zin_destroy(&r.z);
			live = false;
			err = zin_init(&r.z, s, READ_IN_CHUNK);
			if (!err) {
				live = true;
				err = zr_start(&r, pt);
			}
			pos = pt ? pt->out_off : 0;
			if (err) {
				bfs_shard_fail_one(s, err, errs, msgs, k);
				continue;
			}
		}
		r.rec = i;
		r.rec_off = loc->offset;
		err = zr_read(&r, NULL, loc->offset - pos);
		if (!err)
			err = zr_read(&r, hdr, HDR_LEN);
		if (!err)
			err = bfs_record_check_frame(i, loc, hdr, NULL, NULL, verify);
		if (!err)
			err = zr_read(&r, dst[k], loc->len);
		if (!err)
			err = zr_read(&r, foot, FOOT_LEN);
		if (err) {
			/* the stream position is unknown now: restart for the next */
			zin_destroy(&r.z);
			live = false;
			bfs_shard_fail_one(s, err, errs, msgs, k);
			continue;
		}
		pos = loc->offset + HDR_LEN + loc->len + FOOT_LEN;
		if ((err = bfs_record_check_frame(i, loc, NULL, dst[k], foot, verify)) != 0)
			bfs_shard_fail_one(s, err, errs, msgs, k);
	}
	if (live)
		zin_destroy(&r.z);
	free(r.scratch);
}
