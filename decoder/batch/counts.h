/* SPDX-License-Identifier: Apache-2.0 */
/*
 * counts.h — the ragged count cache file of one shard: for every record,
 * the counts a batcher gathers by decoding it (values of each ragged
 * feature, and bytes of each ragged bytes feature: batch.c's "slots"), kept
 * in index_dir so that a later mount of the unchanged shard with the same
 * ragged features reads them back instead of decoding every record.
 *
 * What the counts depend on, and the file records and checks: the shard
 * (absolute path, compression, size, mtime: the index's key) and its record
 * count, and a description of the slots (bfs_counts_desc: each slot's
 * feature name, kind, and whether it counts values or bytes), since another
 * schema= or an inferred schema that changed counts something else.
 *
 * File (version 1, magic "BFSCNT01"), little-endian:
 *     header, 64 bytes (struct bfs_counts_hdr in counts.c; its own CRC-32C)
 *     the shard's absolute path (pathlen bytes), then the description
 *     (desclen bytes), zero-padded to a multiple of 8 from the file's start
 *     nslots columns of nrecords uint32: column s holds slot s of every
 *     record, in record order
 * The header carries a CRC-32C of everything after it. A load checks the
 * header (magic, version, CRC), then the key, then the exact file size, and
 * reads the columns into the caller's arrays while computing the body CRC:
 * those arrays hold nothing usable unless the load says LOADED (checksum
 * first: no count is trusted before the CRC passes).
 *
 * Does not: know shards, datasets or the cache directory's naming (batch.c
 * and dataset.c do), decode records, log.
 *
 * Thread-safety: no shared state; calls on different files may run at once.
 */
#ifndef BFS_COUNTS_H
#define BFS_COUNTS_H

#include "tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a counts file is for. */
struct bfs_counts_key {
	const char *path; /* the shard's absolute path */
	uint32_t comp; /* enum bfs_compression */
	uint64_t file_size;
	int64_t mtime_ns;
	uint64_t nrecords; /* the shard's records */
	uint32_t nslots;
	const char *desc; /* bfs_counts_desc of the plan */
	size_t desclen;
};

/* The description of what a plan's slots count (malloc'd, *len bytes, no
 * NUL inside; caller frees). -ENOMEM. */
int bfs_counts_desc(const struct bfs_plan *p, char **out, size_t *len);

/* Write cols[s][0 .. k->nrecords) for s < k->nslots to `path` (via a
 * temporary file and rename). 0 or -errno (-ENOSPC, -EROFS, -EACCES ...). */
int bfs_counts_save(const char *path, const struct bfs_counts_key *k, const uint32_t *const *cols);

/* The bytes such a file would hold (its size: UINT64_MAX when it would
 * not fit the format), and those bytes in memory (*out malloc'd, *len
 * bytes; an entry of a counts pack, cntcache.h). -EINVAL, -ENOMEM. */
uint64_t bfs_counts_file_bytes(const struct bfs_counts_key *k);
int bfs_counts_image(const struct bfs_counts_key *k, const uint32_t *const *cols, uint8_t **out,
		     size_t *len);

/* The key that a file's bytes claim (path copied into path[cap], NUL
 * ended; k->desc points into p), if its header is sound (magic, CRC) and
 * the path and description lie inside the bytes; false otherwise. The
 * claim is unchecked beyond that: bfs_counts_from_bytes with it tells. */
bool bfs_counts_image_key(const uint8_t *p, size_t len, struct bfs_counts_key *k, char *path,
			  size_t cap);

enum bfs_counts_result {
	BFS_COUNTS_LOADED = 0,
	BFS_COUNTS_ABSENT, /* no file (or unreadable) */
	BFS_COUNTS_STALE, /* a sound file made for another shard version or slots */
	BFS_COUNTS_BAD, /* an old format, truncated or corrupt file: why says which */
};

/* Read `path` into cols[s][0 .. k->nrecords) if it is a valid counts file
 * for k. On anything but LOADED the arrays may have been written and must
 * be filled again; why is set for STALE and BAD. */
enum bfs_counts_result bfs_counts_load(const char *path, const struct bfs_counts_key *k,
				       uint32_t *const *cols, char *why, size_t whycap);

/* The same checks on a file's bytes in memory (a counts pack's entry, tests
 * and the fuzzer); cols may be NULL: the checks only, nothing copied. */
enum bfs_counts_result bfs_counts_from_bytes(const uint8_t *p, size_t len,
					     const struct bfs_counts_key *k, uint32_t *const *cols,
					     char *why, size_t whycap);

#endif
