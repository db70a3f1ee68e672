/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuse_ops_impl.h — private to the FUSE glue, the module of fuse_ops.h
 * written in two files: session.c (setup, the session and its run loop:
 * bfs_fs_new, bfs_fs_run, ...) and fuse_ops.c (the handlers of the
 * requests), which share the mount's state below. Everything else a mount
 * has is files.h's, FUSE-free.
 *
 * Thread-safety: set before the session's threads start, read-only while
 * they run (no_open, no_opendir: written by the INIT handler, before any
 * other request).
 */
#ifndef BFS_FUSE_OPS_IMPL_H
#define BFS_FUSE_OPS_IMPL_H

#include "files.h"
#include "fuse_ops.h"
#include "iostage.h"

#include <stdbool.h>

struct fuse_session;
struct fuse_lowlevel_ops;

struct bfs_fs {
	struct bfs_files *files;
	struct bfs_vfs *vfs; /* files' */
	struct bfs_cudaopen *copen; /* files'; NULL without -o cuda */
	/* the I/O stage (io_depth), started in the daemon; NULL when reads go
	 * to the source from the decoders */
	struct bfs_iostage *io;
	struct bfs_fs_config cfg;
	/* set before the helper threads start, cleared after they ended */
	struct fuse_session *se;
	/* answer OPEN/OPENDIR requests: the CUDA path's descriptors need them */
	bool keep_open;
	/* no OPEN/RELEASE (OPENDIR) round trips: the kernel took ENOSYS for them */
	bool no_open, no_opendir;
};

/* The handlers (fuse_ops.c), for fuse_session_new. */
extern const struct fuse_lowlevel_ops bfs_fuse_ops;
extern const size_t bfs_fuse_ops_size;

#endif
