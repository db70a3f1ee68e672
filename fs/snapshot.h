/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot.h — the files whose text changes under a mount (stats.json,
 * errors.txt), served as snapshots: each immutable, shared by references,
 * one current per file, replaced by a fresh one on demand with the next
 * generation number (which the caller shows as the file's mtime).
 *
 * Without OPEN requests the kernel reads these files through its page
 * cache: every GETATTR takes a fresh snapshot with a new mtime, and the
 * kernel drops the cached pages when the mtime moves (auto_inval_data,
 * attributes never cached), so each read(2) after it sees fresh text. A
 * read holds its snapshot across its reply: once the kernel has the reply
 * the reader may close the file, or another GETATTR replace the snapshot,
 * before the read handler returns.
 *
 * Does not: know FUSE or what the text says (the caller's make function
 * writes it). Thread-safety: every function may be called from any
 * thread; one mutex guards the current snapshots and the generation,
 * references are atomic.
 */
#ifndef BFS_SNAPSHOT_H
#define BFS_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

struct bfs_snapshot {
	char *text; /* immutable */
	size_t len;
	int refs; /* private: atomic */
};

/* File k's text now (malloc'd, *len bytes), or NULL without memory. */
typedef char *(*bfs_snapshot_fn)(void *ctx, unsigned k, size_t *len);

struct bfs_snapshot_set;

/* nfiles files, their text from make(ctx, k, &len). -ENOMEM. */
int bfs_snapshot_set_new(struct bfs_snapshot_set **out, unsigned nfiles, bfs_snapshot_fn make,
			 void *ctx);
/* Drops the current snapshots (references held elsewhere keep theirs).
 * Accepts NULL. */
void bfs_snapshot_set_free(struct bfs_snapshot_set *set);

/* A fresh snapshot of file k, made the current one; *gen gets its
 * generation (1, 2, ... across all the set's files). A reference for the
 * caller; NULL without memory. */
struct bfs_snapshot *bfs_snapshot_refresh(struct bfs_snapshot_set *set, unsigned k, uint64_t *gen);
/* File k's current snapshot (a reference), made when there is none. */
struct bfs_snapshot *bfs_snapshot_current(struct bfs_snapshot_set *set, unsigned k);

/* A snapshot of its own over text (taken; malloc'd), outside any set (an
 * OPEN's). A reference; NULL without memory (text is freed). */
struct bfs_snapshot *bfs_snapshot_new(char *text, size_t len);
void bfs_snapshot_get(struct bfs_snapshot *s);
/* The last reference frees it. Accepts NULL. */
void bfs_snapshot_put(struct bfs_snapshot *s);

#endif
