/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_impl.h — the shard object and what the record module's files
 * share: record.c (open, identity, the shard's bytes, its index and
 * mapping, the shadow view), record_scan.c (the scan), record_read.c
 * (reading records) and record_z.c (gzip and zlib streams, the only file
 * that includes <zlib.h>). Internal to the module: users include record.h.
 *
 * A record is uint64 length | uint32 masked CRC | data | uint32 masked CRC
 * (record.h); HDR_LEN and FOOT_LEN are its framing.
 */
#ifndef BFS_RECORD_IMPL_H
#define BFS_RECORD_IMPL_H

#include "crc32c.h"
#include "fdcache.h"
#include "index.h"
#include "record.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define HDR_LEN 12
#define FOOT_LEN 4
#define READ_IN_CHUNK ((size_t)64 << 10) /* compressed input per pread, read */

struct bfs_shard {
	struct bfs_fdslot
		fs; /* the descriptor, through the LRU cache: use fs.fd only while pinned */
	char *path;
	char *open_path; /* path made absolute: the daemon reopens shards after chdir("/") */
	enum bfs_compression comp;
	uint64_t file_size;
	int64_t mtime_ns;
	struct bfs_index *ix; /* the record index (index.h), or NULL before a scan */
	uint64_t nlocs; /* records indexed: ix->n once the index is finished */
	const struct bfs_seek_point *pts; /* ix's seek points */
	size_t npts;
	const uint8_t *map; /* plain shards: the file mapped read-only (file_size bytes), or NULL */
	bfs_bad_record_fn bad_fn; /* see bfs_shard_set_bad_fn */
	void *bad_ctx;
	/* shadow.c's hooks (see record.h): the scan's output sink, and a plain
	 * view of the stream that reads go to first */
	bfs_stream_sink_fn sink;
	void *sink_ctx;
	/* owned; set while reads run only by bfs_shard_promote (an atomic
	 * store after the fail function: a reader sees a view whole) */
	struct bfs_shard *_Atomic shadow;
	bfs_shadow_fail_fn shadow_fail;
	void *shadow_ctx;
	/* views demoted (bfs_shard_demote), chained by this same field of
	 * each: freed with the shard, as a read may still be in one */
	struct bfs_shard *_Atomic retired;
	bool ix_borrowed; /* a view: ix belongs to the shard it shadows */
	bool remote; /* on a network or FUSE filesystem, or not a file: never mapped */
	/* a shard that is not a local file (an object in a bucket): its bytes
	 * come through io with obj, and fs holds no descriptor */
	const struct bfs_shard_io *io;
	void *io_obj;
	/* the I/O stage reads of this shard go through (fetch.h), as object
	 * fetch_id; NULL: reads go to the file */
	struct bfs_fetch *fetch;
	uint32_t fetch_id;
	bool cut; /* the last scan stopped at a record cut short (bfs_shard_cut) */
	/* records the shadow served, and their bytes (bfs_shard_shadow_served);
	 * a cache line away from the fields every read reads */
	char pad_[64];
	atomic_uint_least64_t shadow_reads, shadow_bytes;
};

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint32_t masked_crc(const uint8_t *p, size_t n)
{
	return bfs_crc32c_mask(bfs_crc32c(0, p, n));
}

/* A record's framing check, the one every reader makes: whether the
 * masked CRC-32C of the n bytes at p is the one stored at crc (a header's
 * 8 length bytes against its next 4; a record's data against its footer).
 * *stored and *calc are set either way, for the message. */
static inline bool frame_crc_ok(const uint8_t *p, size_t n, const uint8_t *crc, uint32_t *stored,
				uint32_t *calc)
{
	*stored = get_le32(crc);
	*calc = masked_crc(p, n);
	return *calc == *stored;
}

/* Record i < nlocs as an offset and a length. */
static inline struct bfs_record_loc loc_of(const struct bfs_shard *s, uint64_t i)
{
	return (struct bfs_record_loc){ bfs_index_offset(s->ix, i), bfs_index_len(s->ix, i) };
}

/* The last seek point at or before `off`, or NULL for the stream start. */
static inline const struct bfs_seek_point *find_point(const struct bfs_shard *s, uint64_t off)
{
	size_t lo = 0, hi = s->npts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->pts[mid].out_off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &s->pts[lo - 1] : NULL;
}

/* The first seek point after off, or NULL. */
static inline const struct bfs_seek_point *point_after(const struct bfs_shard *s, uint64_t off)
{
	size_t lo = 0, hi = s->npts;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->pts[mid].out_off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->npts ? &s->pts[lo] : NULL;
}

/* ---- record.c: the shard's bytes ------------------------------------------ */

/* The shard's bytes, pinned for one use: a file's descriptor is then
 * valid (fs.fd); a shard read through io needs nothing. 0 or -errno. */
int bfs_shard_pin(struct bfs_shard *s);
void bfs_shard_unpin(struct bfs_shard *s);
/* n bytes at off (pinned): bytes read, fewer only at the end, or -errno
 * (io: with its message set). */
ssize_t bfs_shard_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off);
/* preadv through the shard (pinned): bytes read or -errno. */
ssize_t bfs_shard_preadv(const struct bfs_shard *s, const struct iovec *v, int nv, uint64_t off);
/* Why a read returned n < 0, in buf: io's own message, else strerror. */
const char *bfs_shard_read_why(const struct bfs_shard *s, ssize_t n, char *buf, size_t cap);
/* Bytes [off, off + n) (pinned): from the I/O stage when it holds them,
 * else read. Bytes read or a negative errno. */
ssize_t bfs_shard_src_pread(const struct bfs_shard *s, void *buf, size_t n, uint64_t off);
/* Map a plain shard of small records once it is indexed (when the budget
 * allows; nothing otherwise). */
void bfs_shard_maybe_map(struct bfs_shard *s);
/* The index is about to change: a view borrowing it goes first. */
void bfs_shard_drop_shadow(struct bfs_shard *s);

/* ---- record_check.c: checks every read makes ------------------------------- */

/* Record i's frame, read for its index entry loc: its header hdr
 * (HDR_LEN bytes) against loc (the length; its length CRC too if verify),
 * then, if verify, its data (loc->len bytes) against the CRC in its footer
 * foot (FOOT_LEN bytes). A reader that streams a record checks its header
 * before it reads on: hdr NULL skips the header (checked before), foot
 * NULL the data (not read yet). 0 or -EBADMSG with a message naming the
 * record. */
int bfs_record_check_frame(uint64_t i, const struct bfs_record_loc *loc, const uint8_t *hdr,
			   const uint8_t *data, const uint8_t *foot, bool verify);
/* Entry k of a batched read failed with err: its message, naming the shard. */
void bfs_shard_fail_one(const struct bfs_shard *s, int err, int *errs, char **msgs, size_t k);

/* ---- the scan (record_scan.c), its compressed input (record_z.c) ---------- */

struct bfs_zin;

struct bfs_scan {
	struct bfs_shard *s;
	uint8_t *buf;
	size_t cap, start, end; /* buf[start..end) holds stream bytes base.. */
	uint64_t base;
	uint64_t produced; /* stream offset of buf[end] */
	bool eof;
	uint64_t rec; /* record being read, for messages */
	struct bfs_zin *z; /* a compressed shard's inflate state (record_z.c); NULL: plain */
	uint64_t last_point;
	bool z_ended; /* the compressed input ended inside its stream */
};

/* A compressed scan's inflate state, made and dropped (0 or -ENOMEM,
 * -EIO); and more of the stream into sc->buf, until some output was
 * produced or the stream ended (sink and seek points on the way). */
int bfs_scan_z_begin(struct bfs_scan *sc);
void bfs_scan_z_end(struct bfs_scan *sc);
int bfs_scan_fill_z(struct bfs_scan *sc);

/* ---- record_z.c: reading records of a compressed shard -------------------- */

/* Record i (at loc) into dst, inflated from the seek point before it;
 * checked like a plain read. */
int bfs_shard_read_z(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		     uint8_t *dst, bool verify);
/* Records idx[0..n) (ascending) in one inflate pass over nearby ones, as
 * bfs_shard_read_many does for a compressed shard (pinned). */
void bfs_shard_read_many_z(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			   bool verify, int *errs, char **msgs);

#endif
