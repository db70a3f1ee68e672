/* SPDX-License-Identifier: Apache-2.0 */
/*
 * iostage.h — a mount's I/O stage: the source's reads kept in flight ahead
 * of the decoders (fetch.h), planned from the epochs' orders (ioplan.h),
 * with the bytes fetched kept on a local disk (diskcache.h, disk_cache=DIR).
 * docs/architecture.md tells the whole of it.
 *
 * Started in the daemon (its threads do not survive a fork), stopped when
 * the session ends (a signal, an unmount) so that every build waiting on a
 * hung source returns, freed once no build runs. A disk cache that cannot
 * be opened is left out with a note, and the mount goes on.
 *
 * Does not: know FUSE, decode, or decide whether a mount needs a stage
 * (mount/main.c does: io_depth). Thread-safety: bfs_iostage_stop and
 * bfs_iostage_stats from any thread; _new and _free from one.
 */
#ifndef BFS_IOSTAGE_H
#define BFS_IOSTAGE_H

#include "batch.h"
#include "fetch.h"
#include "ioplan.h"

struct bfs_stats_snap;
struct bfs_iostage;

struct bfs_iostage_opts {
	unsigned depth; /* io_depth: reads in flight at most (>= 1) */
	uint64_t readahead; /* bytes fetched ahead of the decoders at most */
	bool all; /* every shard through the stage, else the remote ones */
	unsigned lookahead; /* units builds run ahead of a reader (prefetch) */
	uint64_t epochs; /* epochs the mount lists: nothing is planned past them */
	enum bfs_fetch_backend backend;
	enum bfs_ioplan_mode plan; /* io_plan= (ioplan.h) */
	const char *disk_cache; /* DIR, or NULL: none */
	uint64_t disk_cache_size; /* its bound; 0: 10% of DIR's file system */
	/* one-line notes (a disk cache left out, copies found bad); may be NULL */
	void (*note)(void *ctx, const char *msg);
	void *ctx;
};

/* The stage over ds for the batchers b[nranks] (borrowed: they must
 * outlive it). Errors: those of the stage and the planner, with the detail
 * in bfs_err_msg (the caller reads the source from the decoders then). */
int bfs_iostage_new(struct bfs_iostage **out, const struct bfs_dataset *ds,
		    const struct bfs_batcher *const *b, size_t nranks,
		    const struct bfs_iostage_opts *o);
/* From now on every wait for the source returns (-ESHUTDOWN) and no read
 * starts. Accepts NULL; any thread. */
void bfs_iostage_stop(struct bfs_iostage *st);
/* After every build that used the planner ended. Accepts NULL. */
void bfs_iostage_free(struct bfs_iostage *st);

/* The planner, for the cache's builds (bfs_cache_set_io). */
struct bfs_ioplan *bfs_iostage_plan(const struct bfs_iostage *st);

/* The io_* keys, and disk_cache_* with a disk cache, into a snapshot. */
void bfs_iostage_stats(struct bfs_iostage *st, struct bfs_stats_snap *s);

#endif
