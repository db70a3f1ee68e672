/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfrecord.h — what the TFRecord format fixes, shared by the shard reader
 * (record.h) and the index of a shard's records (index.h): how a shard's
 * record stream is compressed, and the largest record either accepts.
 *
 * The index sits below the reader (a shard holds an index) and its cache
 * file records the shard's compression: the two facts live here, below
 * both, so that the index needs nothing of the reader.
 *
 * Declarations only.
 */
#ifndef BFS_TFRECORD_H
#define BFS_TFRECORD_H

#include <stdint.h>

enum bfs_compression {
	BFS_COMP_AUTO = 0, /* detect from the bytes */
	BFS_COMP_NONE,
	BFS_COMP_GZIP,
	BFS_COMP_ZLIB,
};

/* Caps applied to every length read from disk before allocation. */
#define BFS_RECORD_MAX_LEN ((uint64_t)1 << 30) /* 1 GiB per record */

#endif
