/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c — a mount's setup, its FUSE session and the run loop (see
 * fuse_ops.h; its state is fuse_ops_impl.h's); the handlers are
 * fuse_ops.c's.
 */
#define FUSE_USE_VERSION 312

#include "fuse_ops_impl.h"

#include "lifecycle.h"

#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bfs_fs_report(void *arg, const char *msg, unsigned flags)
{
	struct bfs_fs *fs = arg;

	bfs_files_report(fs->files, msg, flags);
}

void bfs_fs_free(struct bfs_fs *fs)
{
	if (!fs)
		return;
	/* builds waiting on the source end first, then the cache's workers */
	bfs_iostage_stop(fs->io);
	bfs_files_free(fs->files);
	bfs_iostage_free(fs->io);
	free(fs);
}

int bfs_fs_new(struct bfs_fs **out, const struct bfs_fs_config *cfg)
{
	struct bfs_fs *fs = calloc(1, sizeof(*fs));
	int rc;

	if (!fs)
		return -ENOMEM;
	fs->cfg = *cfg;
	rc = bfs_files_new(&fs->files, cfg);
	if (rc) {
		free(fs);
		return rc;
	}
	fs->vfs = bfs_files_vfs(fs->files);
	fs->copen = bfs_files_cudaopen(fs->files);
	/* the CUDA path's descriptors need OPEN and RELEASE requests */
	fs->keep_open = cfg->cuda_device >= 0;
	*out = fs;
	return 0;
}

/* The CUDA runtime starts in the detached daemon: a CUDA context does not
 * survive a fork (bfs_lifecycle_daemonize). */
static int cuda_runtime_start(void *arg, char *msg, size_t cap)
{
	struct bfs_fs *fs = arg;
	char err[480];

	if (bfs_cudapath_init(bfs_files_cuda(fs->files), err, sizeof(err)) == 0)
		return 0;
	snprintf(msg, cap, "option 'cuda': %s", err);
	return -1;
}

static void session_unmount(void *arg)
{
	struct bfs_fs *fs = arg;

	fuse_session_unmount(fs->se);
}

/* A stopping signal (lifecycle.h): the session ends, and reads waiting on
 * the source give up, so that FUSE threads stuck on a hung source finish
 * and the loop returns. */
static void session_stop(void *arg)
{
	struct bfs_fs *fs = arg;

	fuse_session_exit(fs->se);
	bfs_iostage_stop(fs->io);
}

static bool session_ended(void *arg)
{
	struct bfs_fs *fs = arg;

	return fuse_session_exited(fs->se);
}

/* The kernel ended the session (an unmount): as a signal does, the I/O
 * stage stops, so that the loop can return. */
static void source_stop(void *arg)
{
	struct bfs_fs *fs = arg;

	bfs_iostage_stop(fs->io);
}

/* A line from the I/O stage or the disk cache: to the log. */
static void io_note(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "batchfs: %s\n", msg);
}

/* The I/O stage, when the mount has one. Its backend is chosen per source
 * (fetch.h, BFS_FETCH_AUTO) unless -o io_backend=threads or io_uring asks
 * for one (docs/architecture.md): stats.json then says "asked for". */
static void start_io(struct bfs_fs *fs)
{
	struct bfs_iostage_opts o = {
		.depth = fs->cfg.io_depth,
		.readahead = fs->cfg.readahead,
		.all = fs->cfg.io_all,
		.lookahead = fs->cfg.prefetch,
		.epochs = fs->cfg.epochs,
		.backend = fs->cfg.io_backend,
		.plan = fs->cfg.io_plan,
		.disk_cache = fs->cfg.disk_cache,
		.disk_cache_size = fs->cfg.disk_cache_size,
		.note = io_note,
	};

	if (!fs->cfg.io_depth)
		return;
	if (bfs_iostage_new(&fs->io, fs->cfg.ds, fs->cfg.nranks ? fs->cfg.ranks : &fs->cfg.batcher,
			    fs->cfg.nranks ? fs->cfg.nranks : 1, &o) != 0) {
		fprintf(stderr,
			"batchfs: the I/O stage did not start (%s); reading the source "
			"from the decoders\n",
			bfs_err_msg());
		return;
	}
	bfs_files_set_io(fs->files, fs->io);
}

int bfs_fs_run(struct bfs_fs *fs, int argc, char **argv, const char *mountpoint, bool foreground)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct bfs_lifecycle *life = NULL;
	struct bfs_lifecycle_ops ops = {
		.stop = session_stop,
		.on_end = source_stop,
		.ctx = fs,
		.mountpoint = mountpoint,
	};
	int ret = 1;

	bfs_lifecycle_signals();
	for (int i = 0; i < argc; i++)
		if (fuse_opt_add_arg(&args, argv[i]) != 0)
			goto out;
	fs->se = fuse_session_new(&args, &bfs_fuse_ops, bfs_fuse_ops_size, fs);
	if (!fs->se) {
		fprintf(stderr, "batchfs: could not create the FUSE session (bad FUSE option?)\n");
		goto out;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		fprintf(stderr, "batchfs: %s: could not mount\n", mountpoint);
		goto out_session;
	}
	(void)bfs_lifecycle_readahead(mountpoint, BFS_FILES_BLKSIZE >> 10); /* best effort */
	/* mounted: a batchfs started on the folder from now on finds the
	 * mount (or, once unmounted, a daemon that is only exiting) */
	if (fs->cfg.mount_lock)
		(void)bfs_lifecycle_lock_mounted(fs->cfg.mount_lock_fd);
	/* detach only now that the mount is ready; threads start after fork */
	if (bfs_files_cuda(fs->files)) {
		if (bfs_lifecycle_daemonize(foreground, cuda_runtime_start, session_unmount, fs,
					    "CUDA") != 0)
			goto out_unmount;
	} else if (fuse_daemonize(foreground) != 0) {
		goto out_unmount;
	}
	/* a detached daemon is a new process: its own watch (main.c started
	 * the foreground's) */
	if (!foreground && fs->cfg.watch && bfs_lifecycle_watch(fs->cfg.watch_fd) != 0)
		goto out_unmount;
	/* the stage first: the signal thread reads fs->io (a signal that
	 * comes meanwhile waits, blocked, and is taken once it starts) */
	start_io(fs);
	/* with the I/O stage, an unmount must stop it too (session_ended) */
	ops.ended = fs->io ? session_ended : NULL;
	if (bfs_lifecycle_new(&life, &ops) != 0) {
		fprintf(stderr, "batchfs: could not start the signal thread\n");
		goto out_unmount;
	}
	if (bfs_cache_start(bfs_files_cache(fs->files)) != 0)
		fprintf(stderr, "batchfs: prefetch workers did not start; decoding on demand\n");
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_max_threads(lc, fs->cfg.fuse_threads ? fs->cfg.fuse_threads : 16);
	fuse_loop_cfg_set_clone_fd(lc, 0);
	if (foreground && fs->cfg.ready)
		fprintf(stderr, "%s\n", fs->cfg.ready);
	/* a signal ends the loop too: that is a clean unmount */
	fuse_session_loop_mt(fs->se, lc);
	/* the mount ended: the rest of the exit has a deadline */
	bfs_lifecycle_exit_deadline(mountpoint);
	ret = 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	bfs_lifecycle_free(life);
	if (bfs_lifecycle_claim_unmount()) {
		fuse_session_unmount(fs->se);
		/* the folder is free for a re-mount now, however long the rest
		 * of the exit takes (bfs_fs_free) */
		if (fs->cfg.mount_lock)
			bfs_lifecycle_lock_release(fs->cfg.mount_lock_fd);
	} /* else the deadline passed: it unmounts, and the process leaves */
out_session:
	fuse_session_destroy(fs->se);
	fs->se = NULL;
out:
	fuse_opt_free_args(&args);
	/* the stopping signals stay blocked (and the wake handler in place):
	 * a second Ctrl-C while the mount winds down must not turn a clean
	 * exit into death by signal */
	return ret;
}

int bfs_fs_check_args(int argc, char **argv)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;

	for (int i = 0; i < argc; i++)
		if (fuse_opt_add_arg(&args, argv[i]) != 0) {
			fuse_opt_free_args(&args);
			return 1;
		}
	se = fuse_session_new(&args, &none, sizeof(none), NULL);
	fuse_opt_free_args(&args);
	if (!se)
		return 1;
	fuse_session_destroy(se);
	return 0;
}
