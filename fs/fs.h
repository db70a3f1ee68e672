/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fs.h — fs/'s front door: all that mount/ (the batchfs command) uses of
 * the mounted file system. mount/ includes no other fs/ header.
 *
 * What is here: the mount's configuration and its life (bfs_fs_new,
 * bfs_fs_run, bfs_fs_free, bfs_fs_check_args, bfs_fs_report: session.c),
 * the heap set-up to call before any thread (bfs_cache_malloc_setup:
 * cache.c), the watch of a starter's pipe (bfs_lifecycle_watch:
 * lifecycle.c), and the table of stats.json's keys that `batchfs stats`
 * and `batchfs top` read the file with (stats.c). The mount point's lock
 * is taken exclusive by mount/checks.c; the fs/ side of it, from mounted
 * to released, is bfs_fs_run's (cfg.mount_lock_fd, lifecycle.h).
 *
 * The modules' own headers (fuse_ops.h, cache.h, lifecycle.h, stats.h)
 * include this one and hold what only fs/ and its tests use.
 *
 * Thread-safety: bfs_fs_report and the key table from any thread; the
 * rest from the main thread.
 */
#ifndef BFS_FS_H
#define BFS_FS_H

#include "batch.h"
#include "dataset.h"
#include "fetch.h" /* enum bfs_fetch_backend */
#include "ioplan.h" /* enum bfs_ioplan_mode */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the mount (fuse_ops.c) */

struct bfs_fs_config {
	const struct bfs_dataset *ds; /* borrowed */
	const struct bfs_batcher *batcher; /* borrowed */
	/* world=W without rank: the batcher of each rank (ranks[0] may be
	 * `batcher`), shown as rank-0000/ ... ; nranks 0: no rank folders */
	const struct bfs_batcher *const *ranks;
	size_t nranks;
	uint64_t epochs; /* epoch directories listed */
	uint64_t cache_size;
	unsigned threads, prefetch;
	const char *readme; /* README.txt contents (copied) */
	const char *schema_json; /* schema.json contents (copied) */
	const char *options_text; /* effective options, for stats.json (copied) */
	unsigned fuse_threads; /* max FUSE worker threads */
	int cuda_device; /* -1: off */
	unsigned cuda_pool; /* device buffers (0: BFS_CUDA_POOL_DEFAULT) */
	/* the I/O stage (fetch.h, ioplan.h): io_depth reads in flight at most
	 * into readahead bytes; io_depth 0: none (the decoders read the
	 * source); io_all: every shard through it, else the remote ones */
	unsigned io_depth;
	uint64_t readahead;
	bool io_all;
	/* io_backend=: the stage's backend, BFS_FETCH_AUTO (chosen per source)
	 * unless asked for (stats.json then says "asked for") */
	enum bfs_fetch_backend io_backend;
	/* io_plan=: how the global shuffle's windows read, BFS_IOPLAN_AUTO
	 * (from the source's measured cost) unless asked for */
	enum bfs_ioplan_mode io_plan;
	/* disk_cache=DIR (NULL: none) and its bound (0: 10% of DIR's file
	 * system): the source bytes the stage fetches, kept on a local disk */
	const char *disk_cache;
	uint64_t disk_cache_size;
	const char *ready; /* printed on stderr (one line) when a foreground mount is ready */
	unsigned max_read; /* the FUSE option max_read= given, else 0 */
	bool watch; /* stop the mount as SIGTERM does at watch_fd's end of file */
	int watch_fd;
	/* the mount point's lock (lifecycle.h): shared once mounted, let go
	 * once the session ends; the descriptor stays the caller's */
	bool mount_lock;
	int mount_lock_fd;
};

struct bfs_fs;

int bfs_fs_new(struct bfs_fs **out, const struct bfs_fs_config *cfg);
void bfs_fs_free(struct bfs_fs *fs);

/* The on_corrupt callback of the batcher/cache: logs one line to stderr and
 * errors.txt (deduplicated) and counts it; flags: BFS_REPORT_SKIPPED and
 * BFS_REPORT_SOURCE (batch.h). Thread-safe. */
void bfs_fs_report(void *fs, const char *msg, unsigned flags);

/* Create the session with FUSE arguments argv (argv[0] = program name),
 * mount on `mountpoint`, detach unless `foreground` (only once the mount is
 * ready), start the prefetch workers and serve until unmounted or
 * SIGINT/SIGTERM/SIGHUP. Returns 0 on a clean unmount, 1 on failure (one
 * line on stderr). */
int bfs_fs_run(struct bfs_fs *fs, int argc, char **argv, const char *mountpoint, bool foreground);

/* Check that libfuse accepts these arguments (unknown -o options) without
 * mounting anything. Returns 0, or 1 after libfuse printed why. */
int bfs_fs_check_args(int argc, char **argv);

/* ---- before any thread (cache.c) */

/* Set glibc's malloc up so that the daemon's memory follows the cache's
 * budget (anonymous RSS within cache_size plus some tens of MiB): buffers
 * of BFS_CACHE_MAP_MIN bytes or more are mapped (M_MMAP_THRESHOLD), and
 * the heap's free top is returned past 16 MiB; the cache trims the rest
 * of the heap as it frees smaller buffers (cache.c, trim_due). Call once
 * at daemon start, before any thread. */
void bfs_cache_malloc_setup(void);

/* ---- the starter's pipe (lifecycle.c) */

/* Watch fd (a pipe or socket whose other end the process that started us
 * holds) from a thread: its end of file, or a hangup, sends this process
 * SIGTERM, which unmounts cleanly once the mount runs and ends the process
 * before. Returns 0, or a positive errno. */
int bfs_lifecycle_watch(int fd);

/* ---- stats.json's keys (stats.c; the values and the JSON are stats.h's) */

/* In stats.json's order. */
enum bfs_stat {
#define KEY(id, ...) BFS_STAT_##id,
#define MEMBER(id, ...) BFS_STAT_##id,
#include "stats_keys.def"
#undef KEY
#undef MEMBER
	BFS_STAT_NKEYS
};

/* A value's JSON form. */
enum bfs_stat_type {
	BFS_STYPE_UINT, /* 123 */
	BFS_STYPE_INT, /* -1 */
	BFS_STYPE_REAL, /* 1.250000 (six decimals) */
	BFS_STYPE_BOOL, /* true, false */
	BFS_STYPE_TEXT, /* "io_uring" */
	BFS_STYPE_OBJECT, /* {"a": 1, "b": 2}: the member keys that follow it */
};

/* When a key is in stats.json. */
enum bfs_stat_group {
	BFS_SGROUP_ALWAYS,
	BFS_SGROUP_IO, /* the I/O stage runs */
	BFS_SGROUP_DISK, /* disk_cache=DIR is in use */
	BFS_SGROUP_CUDA, /* -o cuda */
	BFS_SGROUP_CRED, /* a bucket read with credentials */
	BFS_SGROUP_N
};

/* How to read a value. */
enum bfs_stat_kind {
	BFS_SKIND_FACT, /* fixed for the life of the mount */
	BFS_SKIND_TOTAL, /* a count since mount: two readings give a rate */
	BFS_SKIND_LEVEL, /* a level now (or its peak): read as it is */
};

enum bfs_stat_unit {
	BFS_SUNIT_COUNT,
	BFS_SUNIT_BYTES,
	BFS_SUNIT_SECONDS,
	BFS_SUNIT_FLAG, /* yes or no */
	BFS_SUNIT_NAME, /* a word */
	BFS_SUNIT_TIME, /* a moment: seconds since the epoch (UTC), 0 never */
};

struct bfs_stat_key {
	const char *name; /* the JSON key */
	enum bfs_stat_type type;
	enum bfs_stat_group group;
	enum bfs_stat_kind kind;
	enum bfs_stat_unit unit;
	const char *label; /* a few words for people: "cache hits" */
	bool member; /* a member of the object key before it, not a key of stats.json */
};

/* [BFS_STAT_NKEYS], indexed by enum bfs_stat. */
extern const struct bfs_stat_key bfs_stat_keys[BFS_STAT_NKEYS];

/* The top-level key of that name (members are not found), or NULL. */
const struct bfs_stat_key *bfs_stat_find(const char *name);

#endif
