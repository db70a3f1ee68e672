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

#include "fs.h"

/* The mount's entry points (struct bfs_fs_config, bfs_fs_new, bfs_fs_run...)
 * are declared in fs.h, fs/'s front door; fuse_ops.c implements them. */

#endif
