/* SPDX-License-Identifier: Apache-2.0 */
/*
 * index.h — the compact record index of one shard: where each record starts
 * in the (uncompressed) record stream, in about 2-3 bytes per record, built
 * in memory during a scan or mapped from a cache file, never loaded.
 *
 * Records of a TFRecord stream are contiguous: record i+1 starts 16 bytes
 * (header and footer) past the end of record i's data. So the index keeps
 * offsets only, n + 1 of them (the last is the end of the last record), and a
 * length is the difference of two offsets minus 16.
 *
 * Layout: offsets in blocks of BFS_INDEX_BLOCK (64). Block b has a 16-byte
 * directory entry { u64 base; u64 meta } with meta = pos (bits 0-39, where
 * its packed residuals start in the delta area) | width (bits 40-43, 0 to 8
 * bytes) | stride (bits 44-63). Offset j of the block is
 *     base + j * stride + residual[j]
 * with residual[j] a little-endian integer of `width` bytes at pos + j *
 * width. The builder takes the smallest gap between consecutive offsets of
 * the block as stride, so the residuals only carry how far records differ
 * from the shortest one: fixed-size records cost no residual at all (width
 * 0, 0.25 B/record for the directory), 150 +- 50-byte records two bytes.
 * A lookup is one directory load and one residual load: O(1), no decoding.
 * The delta area ends with 8 zero bytes so that every residual is read as
 * one unaligned 64-bit load and masked.
 *
 * A compressed shard's zran seek points (32 KiB windows) ride along in the
 * same object and the same file.
 *
 * File (version 3, magic "BFSIDX03"), little-endian, native layout:
 *     header, 128 bytes (see struct bfs_index_hdr in index.c; its own CRC)
 *     the shard's absolute path (pathlen bytes), zero-padded to 16
 *     directory: nblocks x 16 bytes
 *     delta area: deltas_bytes (its last 8 bytes zero), zero-padded to 8
 *     seek points: nseek x sizeof(struct bfs_seek_point)
 * The header holds what a mount needs (records, max record length, the
 * shard's size, mtime and compression to check the entry against) and a
 * CRC-32C of everything after it. Loading checks the header, the size the
 * counts imply, the body CRC, every directory entry (widths, positions,
 * increasing bases) and every seek point: O(file size), sequential, no
 * per-record decode. An accessor never reads outside the object and never
 * returns a length above max_len, whatever the file holds; a record the
 * index misplaces fails the read's header check like a changed file.
 *
 * Does not: read shards, know about datasets or the cache directory's
 * naming, log.
 *
 * Thread-safety: building is single-threaded; a finished or loaded index is
 * immutable and its accessors are safe from any number of threads.
 */
#ifndef BFS_INDEX_H
#define BFS_INDEX_H

#include "common.h"
#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define BFS_INDEX_BLOCK 64u

/* A zran seek point: enough state to restart inflate mid-stream. */
struct bfs_seek_point {
	uint64_t out_off; /* uncompressed offset this point restarts at */
	uint64_t in_off; /* compressed byte offset of the first full byte */
	uint8_t bits; /* bits (0-7) of the byte before in_off still to use */
	uint8_t new_member; /* 1: in_off starts a new gzip/zlib member header (window empty) */
	uint8_t window[32768]; /* the 32 KiB of output preceding out_off; zero-filled
				* at the front when the member produced less */
};

struct bfs_index_entry {
	uint64_t base;
	uint64_t meta; /* pos | width << 40 | stride << 44 */
};

struct bfs_index_build; /* private to index.c */

struct bfs_index {
	/* read side: set by bfs_index_finish or bfs_index_load */
	const struct bfs_index_entry *dir; /* (n + 1 + 63) / 64 entries */
	const uint8_t *deltas;
	uint64_t n; /* records */
	uint32_t max_len; /* largest record length (0 when n is 0) */
	const struct bfs_seek_point *pts;
	size_t npts;
	/* storage (private) */
	void *map; /* the mapped file, or NULL */
	size_t map_len;
	void *mem; /* the file read into memory (small files), or NULL */
	uint64_t data_bytes; /* dir + deltas + seek points */
	uint32_t comp; /* a loaded index: its shard's enum bfs_compression (else 0) */
	uint64_t deltas_bytes;
	struct bfs_index_build *b; /* while building, and the built arrays after */
};

/* Offset of record i in the uncompressed stream, for i <= n (n: the end of
 * the last record). */
static inline uint64_t bfs_index_offset(const struct bfs_index *ix, uint64_t i)
{
	const struct bfs_index_entry *e = &ix->dir[i / BFS_INDEX_BLOCK];
	uint64_t j = i % BFS_INDEX_BLOCK;
	uint64_t m = e->meta;
	unsigned w = (unsigned)(m >> 40) & 15;
	uint64_t v;

	memcpy(&v, ix->deltas + (m & (((uint64_t)1 << 40) - 1)) + j * w, 8);
	v = le64toh(v) & (w ? ~(uint64_t)0 >> (64 - 8 * w) : 0);
	return e->base + j * (m >> 44) + v;
}

/* Data length of record i < n (never above max_len). */
static inline uint32_t bfs_index_len(const struct bfs_index *ix, uint64_t i)
{
	uint64_t d = bfs_index_offset(ix, i + 1) - bfs_index_offset(ix, i) - 16;

	return d <= ix->max_len ? (uint32_t)d : ix->max_len;
}

/* ---- building ------------------------------------------------------------ */

/* An empty index to push records into. */
int bfs_index_new(struct bfs_index **out);
/* Append a record; offsets must be contiguous (each at the end of the one
 * before): -EINVAL otherwise, -EFBIG for a length over BFS_RECORD_MAX_LEN. */
int bfs_index_push(struct bfs_index *ix, uint64_t offset, uint32_t len);
/* A new seek point slot at the end (NULL: out of memory), or drop the last. */
struct bfs_seek_point *bfs_index_add_point(struct bfs_index *ix);
void bfs_index_drop_point(struct bfs_index *ix);
/* Close the index: readable from now on, pushes refused. Idempotent. */
int bfs_index_finish(struct bfs_index *ix);
void bfs_index_free(struct bfs_index *ix); /* accepts NULL */

/* Bytes of the index itself (directory, deltas, seek points). */
uint64_t bfs_index_bytes(const struct bfs_index *ix);

/* ---- the cache file -------------------------------------------------------- */

/* What an index file is for: a load checks it against the file's header. */
struct bfs_index_key {
	const char *path; /* the shard's absolute path */
	/* enum bfs_compression; AUTO (0) on a load: any of the others, the one
	 * the file says going to the index's comp */
	uint32_t comp;
	uint64_t file_size;
	int64_t mtime_ns;
};

/* Write a finished index to `path` (via a temporary file and rename). */
int bfs_index_save(const struct bfs_index *ix, const char *path, const struct bfs_index_key *k);

/* The bytes bfs_index_save would write, in memory (*out malloc'd, *len
 * bytes; for an entry of an index pack, ixpack.h). -EINVAL, -ENOMEM. */
int bfs_index_image(const struct bfs_index *ix, const struct bfs_index_key *k, uint8_t **out,
		    size_t *len);
/* Their count, without making them (UINT64_MAX if it overflows). */
uint64_t bfs_index_file_bytes(const struct bfs_index *ix, const struct bfs_index_key *k);
/* What an index file's bytes say they are for, unchecked (their header's
 * size, mtime and compression, path copied into path[pathcap] and k->path
 * pointing at it): false when too short or the path does not fit. A load
 * with this key still checks everything. */
bool bfs_index_image_key(const uint8_t *p, size_t len, struct bfs_index_key *k, char *path,
			 size_t pathcap);

enum bfs_index_load_result {
	BFS_INDEX_LOADED = 0,
	BFS_INDEX_ABSENT, /* no file, or one for another version of the shard */
	BFS_INDEX_BAD, /* an old format, truncated or corrupt file: why says which */
};

/* Load `path` (mapped, or read when under a page) if it is a valid index for
 * key; *out is set only on BFS_INDEX_LOADED. Never fails otherwise. */
enum bfs_index_load_result bfs_index_load(struct bfs_index **out, const char *path,
					  const struct bfs_index_key *k, char *why, size_t whycap);

/* The same checks on a file's bytes in memory (copied; for tests and the
 * fuzzer). */
enum bfs_index_load_result bfs_index_from_bytes(struct bfs_index **out, const uint8_t *p,
						size_t len, const struct bfs_index_key *k,
						char *why, size_t whycap);

#endif
