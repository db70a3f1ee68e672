/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record.h — TFRecord shards: framing, compression, index, random access.
 *
 * A shard is one file of records. Each record is
 *     uint64 LE length | uint32 LE masked CRC32C(length bytes) |
 *     data[length]     | uint32 LE masked CRC32C(data)
 * possibly inside a GZIP (multi-member allowed) or ZLIB stream. Offsets below
 * are always offsets in the *uncompressed* record stream.
 *
 * The scan (bfs_shard_scan) walks every record once and yields it to a
 * callback; it builds the index (index.h: record offsets, ~2 bytes each) and, for
 * compressed shards, zran-style seek points (a 32 KiB window every ~1 MiB of
 * output) so that bfs_shard_read can reach any record without inflating from
 * the start.
 *
 * Does not: decode protobufs, know about schemas, threads or FUSE.
 *
 * Thread-safety: a struct bfs_shard is safe for concurrent bfs_shard_read
 * calls once its index is complete (read-only state, pread, per-call inflate
 * state). bfs_shard_scan must not run concurrently with anything else on the
 * same shard.
 */
#ifndef BFS_RECORD_H
#define BFS_RECORD_H

#include "common.h"
#include "index.h"
#include "tfrecord.h" /* enum bfs_compression, BFS_RECORD_MAX_LEN */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

const char *bfs_compression_name(enum bfs_compression c); /* "none","gzip","zlib","auto" */
int bfs_compression_parse(enum bfs_compression *out, const char *s);

/* Where one record is (a value computed from the index, index.h). */
struct bfs_record_loc {
	uint64_t offset; /* of the record's 12-byte header, in the uncompressed stream */
	uint32_t len; /* data length */
};

struct bfs_shard;

/* Open `path`. comp AUTO detects: plain if the first 12 bytes are a valid
 * length+CRC header (or the file is empty), else gzip magic 1f 8b, else a
 * zlib header; otherwise -EBADMSG "not a TFRecord file". Owns an fd.
 * Errors: -ENOENT/-EACCES/-EIO from open/read, -EINVAL not a regular file,
 * -EBADMSG, -ENOMEM. */
int bfs_shard_open(struct bfs_shard **out, const char *path, enum bfs_compression comp);
/* bfs_shard_open with comp AUTO that reads nothing yet: the compression
 * stays AUTO until bfs_shard_detect, and only the accessors (path, size,
 * mtime, compression) and close may be used before. A re-mount of many
 * shards takes it from their cached indexes instead of reading each
 * shard's first bytes (one random read per shard from a cold disk). */
int bfs_shard_open_undetected(struct bfs_shard **out, const char *path);
/* Set the compression of a shard opened undetected: `known` (from a cache
 * entry checked against the shard's size and mtime), or, with known AUTO,
 * detected from its first bytes as bfs_shard_open does (same errors). */
int bfs_shard_detect(struct bfs_shard *s, enum bfs_compression known);
void bfs_shard_close(struct bfs_shard *s); /* accepts NULL */
/* The compression that a shard's first n bytes (12 suffice) show, by the
 * rule of bfs_shard_open: NONE for a valid record header, GZIP, ZLIB; AUTO
 * when they begin no shard. */
enum bfs_compression bfs_shard_sniff(const uint8_t *b, size_t n);

const char *bfs_shard_path(const struct bfs_shard *s); /* borrowed */
enum bfs_compression bfs_shard_compression(const struct bfs_shard *s);
uint64_t bfs_shard_file_size(const struct bfs_shard *s); /* st_size at open */
int64_t bfs_shard_mtime_ns(const struct bfs_shard *s); /* st_mtim at open */

/* Callback for each record during a scan. data is borrowed, valid only during
 * the call. Return 0 to continue, <0 to stop the scan with that error. */
typedef int (*bfs_record_fn)(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data,
			     uint32_t len);

/* During a verifying scan a data CRC mismatch stops the scan with an error,
 * unless a bad-record function is set: then the record is indexed, reported
 * to fn (msg names record index, offset and reason; borrowed) and not
 * passed to the record callback, and the scan goes on. So is a record whose
 * length CRC fails when the data's CRC at that length holds (the length
 * is right, its CRC was hit). */
typedef void (*bfs_bad_record_fn)(void *ctx, uint64_t index, uint64_t offset, const char *msg);
void bfs_shard_set_bad_fn(struct bfs_shard *s, bfs_bad_record_fn fn, void *ctx);

/* Walk every record once from the start, verifying both CRCs if `verify`.
 * Builds the shard's index and seek points (replacing any previous). fn may
 * be NULL. On a framing/CRC/decompression error returns -EBADMSG (-EFBIG for
 * a declared length over BFS_RECORD_MAX_LEN) with a message naming the record
 * index, byte offset and what is wrong; records before it stay indexed.
 * Anything after the last record (garbage, a truncated or corrupt gzip/zlib
 * trailer) is an error too. A callback's error stops the scan and is returned
 * as is. */
int bfs_shard_scan(struct bfs_shard *s, bool verify, bfs_record_fn fn, void *ctx);

/* Uncompressed bytes between the seek points a scan of a compressed shard
 * makes from now on, for every shard of the process: at least
 * BFS_SEEK_SPAN_MIN; smaller (0) restores the default, about 1 MiB. Denser
 * points make reads through them cheaper and the index larger. Call before
 * the scans (a scan running meanwhile may use either). */
#define BFS_SEEK_SPAN_MIN ((uint64_t)64 << 10)
void bfs_shard_set_seek_span(uint64_t bytes);

/* Whether the last scan failed at a record cut short: the file (or the
 * compressed stream) ends inside it. Its error says where; the records
 * before it are indexed and can be read. */
bool bfs_shard_cut(const struct bfs_shard *s);

/* The index (index.h), after a scan or bfs_shard_set_index: NULL before.
 * Borrowed; its inline accessors are the fast path for many lookups. */
uint64_t bfs_shard_nrecords(const struct bfs_shard *s);
const struct bfs_index *bfs_shard_get_index(const struct bfs_shard *s);
/* Offset of record i (i == nrecords: the end of the last one), 0 out of range. */
uint64_t bfs_shard_record_offset(const struct bfs_shard *s, uint64_t i);
uint32_t bfs_shard_record_len(const struct bfs_shard *s, uint64_t i); /* 0 out of range */
/* Seek points: the index's (index.h). */
uint32_t bfs_shard_max_len(const struct bfs_shard *s);

/* Install an index (built, or loaded from a cache): finishes it and takes
 * it over on success (the caller frees it on error: -EINVAL a seek point
 * past the file's end). */
int bfs_shard_set_index(struct bfs_shard *s, struct bfs_index *ix);

/* Read record `i` (per the index) into dst (dst_cap >= its len), verifying
 * both CRCs if `verify` and that the header length matches the index.
 * Thread-safe. Errors: -ENOENT bad i, -EBADMSG corrupt (message names record
 * index, offset, reason), -EIO short read / I/O error, -EFBIG dst too small. */
int bfs_shard_read(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, bool verify);

/* Read records idx[0..n) (no duplicates; ascending for a compressed shard, any
 * order for a plain one) into dst[k]
 * (each at least its indexed length). A compressed shard is inflated in one
 * pass over nearby records instead of once per record. errs[k] gets 0 or a
 * negative errno; a failed record's msgs[k] gets a malloc'd message naming
 * the file, record index, offset and reason (caller frees), else NULL.
 * Thread-safe like bfs_shard_read. */
void bfs_shard_read_many(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			 bool verify, int *errs, char **msgs);

/* ---- shards that are not local files ----
 *
 * An object in a bucket (objsrc.h) is a shard whose bytes come through
 * these functions instead of a descriptor. Such a shard is remote: never
 * mapped, read through an I/O stage when one is set. */
struct bfs_shard_io {
	/* n bytes at off into buf: bytes read (fewer only at the end of the
	 * object) or a negative errno with a message naming the object */
	ssize_t (*pread)(void *obj, void *buf, size_t n, uint64_t off);
	/* a pass over the object in order begins at off / ends (the scan): the
	 * source may read ahead; NULL: nothing to do */
	void (*stream_begin)(void *obj, uint64_t off);
	void (*stream_end)(void *obj);
	void (*close)(void *obj); /* the shard is closed: obj goes */
};
/* A shard named `name` (a URL: messages and cache keys) of `size` bytes,
 * whose version is `version` (stands for the mtime in cache keys: a hash
 * of an object's ETag), read through io with obj, which the shard owns
 * from now on (io->close frees it, on failure too). Its compression is
 * detected later, as for bfs_shard_open_undetected. -ENOMEM. */
int bfs_shard_open_io(struct bfs_shard **out, const char *name, uint64_t size, int64_t version,
		      const struct bfs_shard_io *io, void *obj);
/* The obj of a shard opened with bfs_shard_open_io; NULL for a file. */
void *bfs_shard_io_obj(const struct bfs_shard *s);

/* ---- the I/O stage (fetch.h) ----
 *
 * A shard on a network or FUSE filesystem (statfs at open: NFS, SMB,
 * FUSE, Lustre, Ceph, 9p, ...) is remote: it is never mapped, and its
 * reads are meant to go through an I/O stage. Once a stage is set (before
 * any read), bfs_shard_read(_many) take the bytes it holds and read the
 * others from the file themselves; a read that failed in the stage fails
 * the records it carried. */
struct bfs_fetch;
bool bfs_shard_is_remote(const struct bfs_shard *s);
/* The filesystem the file is on (st_dev at open); 0 for a shard that is
 * not a file (a bucket's object). */
uint64_t bfs_shard_dev(const struct bfs_shard *s);
void bfs_shard_set_fetch(struct bfs_shard *s, struct bfs_fetch *f, uint32_t id);
/* The bytes of the file that reading records [i, j) takes: plain, their
 * framing exactly; compressed, from the seek point before record i to an
 * input chunk past the one after record j - 1. false when the shard's
 * reads do not go through a stage (none set, or a shadow copy serves
 * them) or the records are out of range. */
bool bfs_shard_span(const struct bfs_shard *s, uint64_t i, uint64_t j, uint64_t *off,
		    uint64_t *len);
/* The shard's descriptor, pinned for one read by the stage (0, or a
 * negative errno with a message), and unpinned. */
int bfs_shard_pin_fd(struct bfs_shard *s, int *fd);
void bfs_shard_unpin_fd(struct bfs_shard *s);

/* ---- hooks for store/shadow.c: a plain copy of a compressed stream ----
 *
 * A sink set on a compressed shard gets the whole uncompressed stream, in
 * order, in pieces, while bfs_shard_scan produces it (nothing is re-read);
 * the scan's result says whether it got all of it. A view is a plain shard
 * over such a copy (file `path`, absolute, opened as `fd`, which it takes)
 * that borrows the index of the shard it copies: same offsets. Once set as
 * the shard's shadow, bfs_shard_read(_many) read the view first, with both
 * CRCs checked whatever `verify` says; a record the view fails (bad CRC,
 * short file, I/O error) is read from the compressed shard as before, and
 * when that read succeeds (the copy was bad) `fn` gets the view's message
 * (borrowed). The shard owns the view; a new scan or
 * index drops it. Set sink and shadow only while no read or scan runs. */
typedef void (*bfs_stream_sink_fn)(void *ctx, const uint8_t *data, size_t n);
void bfs_shard_set_sink(struct bfs_shard *s, bfs_stream_sink_fn fn, void *ctx);
/* Bytes of the uncompressed stream the index covers (end of the last record). */
uint64_t bfs_shard_stream_size(const struct bfs_shard *s);
/* -EINVAL when the file is shorter than that stream or path is relative. */
int bfs_shard_open_view(struct bfs_shard **out, const char *path, int fd,
			const struct bfs_shard *of);
/* fn(ctx, s, i, msg): the view failed record i of s (which s gave). */
typedef void (*bfs_shadow_fail_fn)(void *ctx, const struct bfs_shard *s, uint64_t i,
				   const char *msg);
void bfs_shard_set_shadow(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
			  void *ctx);
bool bfs_shard_has_shadow(const struct bfs_shard *s);
/* Records read from s's shadow (not from s after the shadow failed
 * them), and their data bytes, since s was opened. */
void bfs_shard_shadow_served(const struct bfs_shard *s, uint64_t *records, uint64_t *bytes);
/* The same while reads run: set view as s's shadow (taking it) when s has
 * none yet, and return true; else false (the caller keeps view). Only
 * one promotion can win; fn and ctx must then stay valid. */
bool bfs_shard_promote(struct bfs_shard *s, struct bfs_shard *view, bfs_shadow_fail_fn fn,
		       void *ctx);
/* While reads run: the view bfs_shard_promote set stops serving them (they
 * go to s, and its I/O stage, again) until a view is promoted again. It
 * is freed with s, a read being perhaps still in it. Nothing when s has no
 * view. */
void bfs_shard_demote(struct bfs_shard *s);

#endif
