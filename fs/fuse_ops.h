/*
 * fuse_ops.h — the mounted filesystem: the FUSE session and its low-level
 * handlers, glue over FUSE-free modules: the namespace (vfs.h), decoded
 * batches (cache.h), the epoch views of all/ (views.h), errors.txt
 * (errlog.h), stats.json (stats.h), the I/O stage (iostage.h), the CUDA
 * path (cudapath.h, cudapool.h) and the daemon's life (lifecycle.h).
 *
 * fuse_ops.c is the only file that includes <fuse_lowlevel.h>. Every
 * handler calls a do_ function and replies exactly once, from one place;
 * an OPEN of batch-B.cuda may wait for a device buffer without a thread and
 * is answered on the CUDA path's own (fuse_ops.c says where).
 *
 * Thread-safety: bfs_fs_report from any thread; the rest from the main
 * thread.
 */
#ifndef BFS_FUSE_OPS_H
#define BFS_FUSE_OPS_H

#include "batch.h"
#include "dataset.h"

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
	bool keep_open; /* answer OPEN/OPENDIR requests (set by the
					 * environment's BATCHFS_OPEN_REQUESTS=1, for
					 * measuring what skipping them saves) */
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

#endif
