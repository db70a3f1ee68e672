/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3stream.h — streams: an object's bytes read ahead in ranged reads, over
 * the object-store client (s3.h).
 */
#ifndef BFS_S3STREAM_H
#define BFS_S3STREAM_H

#include "s3.h"

#include <stddef.h>
#include <stdint.h>

/* A forward reader of bytes [off, end) of one object: `depth` ranged reads of
 * `chunk` bytes each are kept in flight ahead of the reader, each retried on
 * its own, all with If-Match on one ETag (etag, or the one the first chunk
 * found), so a stream never mixes two versions of an object. end
 * UINT64_MAX: to the object's end. Memory: chunk * depth. */
struct bfs_s3_stream;

/* chunk 0: 8 MiB; depth 0: 4. Starts reading at once. 0, -EINVAL, -ENOMEM;
 * the errors of a first read when etag is NULL or end is UINT64_MAX (it
 * is waited for, to learn them). */
int bfs_s3_stream_open(struct bfs_s3_stream **out, struct bfs_s3 *c, const char *bucket,
		       const char *key, const char *etag, uint64_t off, uint64_t end, size_t chunk,
		       unsigned depth);
/* The next bytes, in order: up to cap into dst; *got 0 at the end. */
int bfs_s3_stream_read(struct bfs_s3_stream *s, void *dst, size_t cap, size_t *got);
/* Like pread(2), forward only: n bytes at off (fewer at the end), where off is
 * at or after the start of the chunk last read from; reading there moves
 * the stream (the chunks before are let go; skipped ones are read and
 * dropped). -EINVAL for an offset behind that. */
int bfs_s3_stream_pread(struct bfs_s3_stream *s, void *dst, size_t n, uint64_t off, size_t *got);
/* Cancel what is in flight, wait for it, free. Accepts NULL. */
void bfs_s3_stream_close(struct bfs_s3_stream *s);

#endif
