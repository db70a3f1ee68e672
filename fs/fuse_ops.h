/*
 * fuse_ops.h — the mounted filesystem: the FUSE session and its low-level
 * handlers, glue over FUSE-free modules: the files, their sizes and bytes
 * (files.h, over the namespace vfs.h, decoded batches cache.h, the epoch
 * views of all/ views.h, errors.txt errlog.h, stats.json stats.h, the CUDA
 * path cudaopen.h), the I/O stage (iostage.h) and the daemon's life
 * (lifecycle.h).
 *
 * Two files include <fuse_lowlevel.h>: session.c (setup, the session and
 * its run loop: the functions below) and fuse_ops.c (the handlers). Every
 * handler replies exactly once, from one place; an OPEN of batch-B.cuda
 * may wait for a device buffer without a thread and is answered by the
 * CUDA path (cudaopen.h).
 *
 * Thread-safety: bfs_fs_report from any thread; the rest from the main
 * thread.
 */
#ifndef BFS_FUSE_OPS_H
#define BFS_FUSE_OPS_H

#include "batch.h"
#include "dataset.h"
#include "files.h" /* struct bfs_fs_config */

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
