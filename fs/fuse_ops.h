/* SPDX-License-Identifier: Apache-2.0 */
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

#include "fs.h"

/* The mount's entry points (struct bfs_fs_config, bfs_fs_new, bfs_fs_run...)
 * are declared in fs.h, fs/'s front door; fuse_ops.c implements them. */

#endif
