/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_scan.c — the scan: one walk over a shard's record stream from the
 * start that checks the framing (and both CRCs when asked), builds the
 * index (index.h) and, for a compressed shard, its seek points, and hands
 * each record to a callback.
 *
 * The uncompressed stream is produced into one growable buffer (plain:
 * pread in 1 MiB chunks; gzip/zlib: inflated by record_z.c, which stops at
 * every deflate block boundary to save a seek point there). Records are
 * parsed from that buffer; a record that spans chunks is made contiguous by
 * compacting and, if needed, growing the buffer. The buffer grows at most
 * by doubling, so a hostile declared length never makes us allocate much
 * more than the data actually present.
 *
 * Does not: decode protobufs, know threads or FUSE. A scan must not run
 * concurrently with anything else on its shard.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record_impl.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_CHUNK ((size_t)1 << 20) /* initial scan buffer, uncompressed */
#define SCAN_AHEAD ((off_t)4 << 20) /* plain scan: asked for ahead of the chunk read */
/* A length whose CRC fails is tried (its data's CRC may confirm it) only
 * up to this many bytes. */
#define SCAN_TRUST_MAX ((uint64_t)64 << 20)

static int scan_fill_plain(struct bfs_scan *sc)
{
	size_t want = sc->cap - sc->end;
	ssize_t n;

	/* the shard is the file as it was at open: ignore anything appended */
	if (sc->s->file_size - sc->produced < want)
		want = (size_t)(sc->s->file_size - sc->produced);
	/* the next chunks on their way while this one is parsed: a scan is
	 * CPU-bound on small records, and reads then overlap it */
	if (want && sc->s->file_size - sc->produced > want && !sc->s->io)
		(void)posix_fadvise(sc->s->fs.fd, (off_t)(sc->produced + want), SCAN_AHEAD,
				    POSIX_FADV_WILLNEED);
	n = want ? bfs_shard_pread(sc->s, sc->buf + sc->end, want, sc->produced) : 0;

	if (n < 0) {
		char why[512];

		return bfs_err_set((int)n, "record %" PRIu64 " at offset %" PRIu64 ": read: %s",
				   sc->rec, sc->base,
				   bfs_shard_read_why(sc->s, n, why, sizeof(why)));
	}
	if (n == 0)
		sc->eof = true;
	sc->end += (size_t)n;
	sc->produced += (uint64_t)n;
	return 0;
}

/* Make at least n bytes available at buf+start, unless the stream ends first.
 * Returns the bytes available (>= n, or fewer at end) or -errno. */
static int64_t scan_need(struct bfs_scan *sc, size_t n)
{
	while (sc->end - sc->start < n && !sc->eof) {
		int err;

		if (sc->start && (sc->end == sc->cap || sc->cap - sc->start < n)) {
			memmove(sc->buf, sc->buf + sc->start, sc->end - sc->start);
			sc->end -= sc->start;
			sc->start = 0;
		}
		if (sc->end == sc->cap) {
			/* grow by doubling, never past n: memory follows real data */
			size_t ncap;
			uint8_t *p;

			if (__builtin_mul_overflow(sc->cap, 2, &ncap))
				ncap = n;
			if (ncap > n)
				ncap = n;
			p = realloc(sc->buf, ncap);
			if (!p)
				return bfs_err_set(-ENOMEM,
						   "record %" PRIu64 " at offset %" PRIu64
						   ": out of memory (%zu bytes)",
						   sc->rec, sc->base, ncap);
			sc->buf = p;
			sc->cap = ncap;
		}
		err = sc->s->comp == BFS_COMP_NONE ? scan_fill_plain(sc) : bfs_scan_fill_z(sc);
		if (err)
			return err;
	}
	return (int64_t)(sc->end - sc->start);
}

#define REC_ERR(e, fmt, ...)                                                                       \
	bfs_err_set(e, "record %" PRIu64 " at offset %" PRIu64 ": " fmt, sc->rec, off, __VA_ARGS__)

/* The header of the record at sc->base: its length, checked against the
 * limit and, in a plain shard, the bytes left. A length CRC mismatch that
 * the data's CRC may still overrule (with a bad_fn, a length small enough
 * to try) leaves its message in bad_len[cap] and returns 0. Returns 0 with
 * *lenp set, 1 at a clean end (a record boundary), or -errno. */
static int scan_header(struct bfs_scan *sc, bool verify, uint64_t *lenp, char *bad_len, size_t cap)
{
	struct bfs_shard *s = sc->s;
	bool plain = s->comp == BFS_COMP_NONE;
	uint64_t off = sc->base, len;
	uint32_t stored, calc;
	const uint8_t *p;
	int64_t have = scan_need(sc, HDR_LEN);

	if (have < 0) {
		s->cut = sc->z_ended;
		return (int)have;
	}
	if (have == 0)
		return 1;
	if (have < HDR_LEN)
		s->cut = true;
	if (have < 8)
		return REC_ERR(-EBADMSG, "truncated length (%" PRId64 " of 8 bytes)", have);
	if (have < HDR_LEN)
		return REC_ERR(-EBADMSG, "truncated length CRC (%" PRId64 " of 4 bytes)", have - 8);
	p = sc->buf + sc->start;
	len = bfs_get_le64(p);
	if (verify && !frame_crc_ok(p, 8, p + 8, &stored, &calc)) {
		int err = REC_ERR(-EBADMSG,
				  "length CRC mismatch (stored 0x%08" PRIx32
				  ", computed 0x%08" PRIx32 ")",
				  stored, calc);
		/* the length may still be right (its CRC was hit): the data's
		 * CRC at that length says so. A length too large to try is not
		 * believed. */
		if (!s->bad_fn || len > SCAN_TRUST_MAX ||
		    (plain && len > s->file_size - off - HDR_LEN))
			return err;
		snprintf(bad_len, cap, "%s", bfs_err_msg());
	}
	if (len > BFS_RECORD_MAX_LEN)
		return REC_ERR(-EFBIG, "declared length %" PRIu64 " exceeds limit %" PRIu64, len,
			       (uint64_t)BFS_RECORD_MAX_LEN);
	if (plain) {
		/* check against the file before allocating anything */
		uint64_t left = s->file_size > off + HDR_LEN ? s->file_size - off - HDR_LEN : 0;

		if (len > left) {
			s->cut = true;
			return REC_ERR(-EBADMSG,
				       "truncated data (declared %" PRIu64 " bytes, %" PRIu64
				       " left)",
				       len, left);
		}
	}
	*lenp = len;
	return 0;
}

/* The data and footer of the record at off (its header read: len, and
 * bad_len from scan_header): indexed and handed to fn, or, where the
 * framing holds but a CRC does not (with a bad_fn), indexed and reported.
 * Returns 0 to go on, or -errno. */
static int scan_body(struct bfs_scan *sc, bool verify, uint64_t off, uint64_t len,
		     const char *bad_len, bfs_record_fn fn, void *ctx)
{
	struct bfs_shard *s = sc->s;
	size_t total = HDR_LEN + (size_t)len + FOOT_LEN;
	int64_t have = scan_need(sc, total);
	bool bad = bad_len[0] != '\0';
	uint32_t stored, calc;
	const uint8_t *p;
	int err = 0;

	if (have >= 0 && (uint64_t)have < HDR_LEN + len)
		err = REC_ERR(-EBADMSG,
			      "truncated data (declared %" PRIu64 " bytes, %" PRId64 " left)", len,
			      have - HDR_LEN);
	else if (have >= 0 && (size_t)have < total)
		err = REC_ERR(-EBADMSG, "truncated data CRC (%" PRIu64 " of 4 bytes)",
			      (uint64_t)have - HDR_LEN - len);
	else if (have < 0)
		err = (int)have;
	if (have < 0 || (size_t)have < total) {
		/* the stream ends inside the record, unless its length was wrong */
		s->cut = (have >= 0 || sc->z_ended) && !bad;
		if (bad && err != -ENOMEM)
			err = bfs_err_set(-EBADMSG, "%s", bad_len);
		return err;
	}
	p = sc->buf + sc->start;
	if (verify && !frame_crc_ok(p + HDR_LEN, (size_t)len, p + HDR_LEN + len, &stored, &calc)) {
		err = REC_ERR(-EBADMSG,
			      "data CRC mismatch (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32
			      ")",
			      stored, calc);
		if (bad) /* no sign that the length is right */
			return bfs_err_set(-EBADMSG, "%s", bad_len);
		if (!s->bad_fn)
			return err;
		bad = true;
	}
	err = bfs_index_push(s->ix, off, (uint32_t)len);
	if (err)
		return err;
	if (bad) {
		/* the framing holds (a data CRC over its declared length, or a
		 * length CRC hit where the data's CRC confirms the length):
		 * indexed, reported, and the scan goes on */
		if (bad_len[0])
			(void)bfs_err_set(-EBADMSG, "%s", bad_len);
		s->bad_fn(s->bad_ctx, sc->rec, off, bfs_err_msg());
	} else if (fn) {
		err = fn(ctx, sc->rec, off, p + HDR_LEN, (uint32_t)len);
		if (err)
			return err;
	}
	sc->start += total;
	sc->base += total;
	return 0;
}
#undef REC_ERR

/* A scan's start: the shard's index dropped for a new one, its source
 * pinned, the buffer made. -errno with nothing held. */
static int scan_begin(struct bfs_shard *s, struct bfs_scan *sc)
{
	int err;

	memset(sc, 0, sizeof(*sc));
	sc->s = s;
	s->cut = false;
	bfs_shard_drop_shadow(s); /* it borrows the index */
	bfs_index_free(s->ix);
	s->ix = NULL;
	s->nlocs = 0;
	s->pts = NULL;
	s->npts = 0;
	err = bfs_index_new(&s->ix);
	if (err)
		return err;
	sc->cap = SCAN_CHUNK;
	sc->buf = malloc(sc->cap);
	if (!sc->buf)
		return bfs_err_set(-ENOMEM, "out of memory");
	err = bfs_shard_pin(s);
	if (err) {
		free(sc->buf);
		return err;
	}
	if (s->io && s->io->stream_begin)
		s->io->stream_begin(s->io_obj, 0); /* one pass, in order: read ahead */
	return 0;
}

/* A scan's end, after err (0: the whole shard): the records before an
 * error stay indexed; the source is let go of. Returns err, or the
 * index's own error. */
static int scan_end(struct bfs_shard *s, struct bfs_scan *sc, int err)
{
	int ferr;

	bfs_scan_z_end(sc);
	free(sc->buf);
	ferr = bfs_index_finish(s->ix);
	if (!err)
		err = ferr;
	if (!ferr) {
		s->nlocs = s->ix->n;
		s->pts = s->ix->pts;
		s->npts = s->ix->npts;
	}
	if (!err || s->cut)
		bfs_shard_maybe_map(s);
	if (s->io && s->io->stream_end)
		s->io->stream_end(s->io_obj);
	bfs_shard_unpin(s);
	return err;
}

int bfs_shard_scan(struct bfs_shard *s, bool verify, bfs_record_fn fn, void *ctx)
{
	struct bfs_scan sc;
	int err = scan_begin(s, &sc);

	if (err)
		return err;
	if (s->comp != BFS_COMP_NONE)
		err = bfs_scan_z_begin(&sc);
	for (sc.rec = 0; !err; sc.rec++) {
		uint64_t off = sc.base, len = 0;
		char bad_len[160] = ""; /* a length CRC mismatch, while its data decides */

		err = scan_header(&sc, verify, &len, bad_len, sizeof(bad_len));
		if (err == 1) {
			err = 0; /* a clean end at a record boundary */
			break;
		}
		if (!err)
			err = scan_body(&sc, verify, off, len, bad_len, fn, ctx);
		if (err)
			break;
	}
	return scan_end(s, &sc, err);
}

bool bfs_shard_cut(const struct bfs_shard *s)
{
	return s->cut;
}
