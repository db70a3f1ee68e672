/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle.h — a mount daemon's life around its session: detaching with a
 * step that must run in the detached process, the mount's readahead, the
 * thread that takes the stopping signals and wakes the session loop, the
 * watch for a session the kernel ended, the watch of a starter's pipe, and
 * the mount point's lock through the mount's life.
 *
 * Signals. SIGINT, SIGTERM, SIGHUP and SIGQUIT (bfs_stop_signals) are
 * blocked in every thread of a mount: the main thread blocks them
 * (bfs_lifecycle_signals) before any thread starts, and bfs_thread_start
 * blocks them for the helpers, so the kernel can only hand them to the one
 * thread that waits for them with sigwait. That thread ends the session
 * (ops.stop), then wakes the loop thread, which may sleep in a wait that
 * only a handled signal interrupts (libfuse's loop sleeps in sem_wait until
 * a worker leaves): BFS_WAKE_SIGNAL, whose handler does nothing. The loop
 * thread may go back to sleep just after a wake, so it is woken every few
 * milliseconds until it has returned (bfs_lifecycle_free).
 *
 * Does not: know FUSE (the session is the caller's, behind ops), mount or
 * unmount. Thread-safety: bfs_lifecycle_new and _free from the loop thread;
 * the callbacks run on the helper threads.
 */
#ifndef BFS_LIFECYCLE_H
#define BFS_LIFECYCLE_H

#include "fs.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define BFS_WAKE_SIGNAL SIGUSR1

/* Block the stopping signals in the calling thread (the threads it starts
 * inherit that), give BFS_WAKE_SIGNAL a handler that does nothing, without
 * SA_RESTART (so that it interrupts waits), and ignore SIGPIPE. Call before
 * any thread starts. The signals stay blocked: a second Ctrl-C while the
 * mount winds down must not turn a clean exit into death by signal. */
void bfs_lifecycle_signals(void);

/* What to do in the detached process before the command may exit 0 (start
 * CUDA: a CUDA context does not survive a fork): 0, or -1 with one line in
 * err (printed by the command, "batchfs: LINE"). */
typedef int (*bfs_lifecycle_start_fn)(void *ctx, char *err, size_t errlen);

/* Detach, unless foreground, and run start in the process that goes on:
 * the command waits for the daemon's word, "ok" (it exits 0) or the line
 * saying why start failed (it prints it and exits 1), so that a daemon that
 * cannot start fails the mount command itself. In the daemon, a failed
 * start calls undo(ctx) (unmount, so that the mount is gone when the command
 * exits) and the daemon exits 1; once start succeeded, stdin, stdout and
 * stderr go to /dev/null. `what` names the step in the line of a daemon
 * that died without a word ("the daemon exited before WHAT started").
 * Returns 0 in the daemon (or in the foreground) when start succeeded; -1
 * with a line on stderr when it did not in the foreground, or when the
 * process could not detach. Never returns in the command. */
int bfs_lifecycle_daemonize(bool foreground, bfs_lifecycle_start_fn start, void (*undo)(void *ctx),
			    void *ctx, const char *what);

/* The device (major:minor) of the topmost FUSE mount at the absolute path
 * `abs`, from mountinfo (/proc/self/mountinfo's format). true when found. */
bool bfs_lifecycle_mount_dev(FILE *mountinfo, const char *abs, unsigned *maj, unsigned *min);

/* The kernel caps a FUSE mount's readahead at its default (128 KiB),
 * whatever the session's max_readahead says; a root daemon can raise it to
 * kb KiB through the mount's bdi (BDI_DIR/MAJ:MIN/read_ahead_kb), found
 * through MOUNTINFO so that no request to the mount itself is needed.
 * Best effort: without it, sequential reads are 128-256 KiB requests.
 * Returns 0, or a negative errno (the mount not found: -ENOENT). */
int bfs_lifecycle_readahead(const char *mountpoint, unsigned kb);
#define BFS_LIFECYCLE_MOUNTINFO "/proc/self/mountinfo"
#define BFS_LIFECYCLE_BDI_DIR "/sys/class/bdi"
/* The same with other files in place of MOUNTINFO and BDI_DIR (tests). */
int bfs_lifecycle_readahead_at(const char *mountinfo, const char *bdi_dir, const char *mountpoint,
			       unsigned kb);

struct bfs_lifecycle_ops {
	/* a stopping signal came: end the session (once, on the signal
	 * thread; the loop thread is woken after it returns) */
	void (*stop)(void *ctx);
	/* NULL, or: has the session ended (an unmount)? Asked every 100 ms
	 * on a thread of its own until it says so or the mount ends... */
	bool (*ended)(void *ctx);
	/* ...and then called once there */
	void (*on_end)(void *ctx);
	void *ctx;
	/* NULL, or the mount point: a stopping signal, or the session's end
	 * seen by the watch, arms the exit's deadline for it
	 * (bfs_lifecycle_exit_deadline) */
	const char *mountpoint;
};

struct bfs_lifecycle;

/* Start the signal thread (and the watch of ops->ended, when set) for the
 * calling thread, the loop thread (ops is copied). A stopping signal that
 * came before waits, pending, and is taken then. Returns 0, or a positive
 * errno when the signal thread did not start (a watch that does not start
 * is done without). */
int bfs_lifecycle_new(struct bfs_lifecycle **out, const struct bfs_lifecycle_ops *ops);
/* The loop returned: stop waking it, end the threads. Accepts NULL. */
void bfs_lifecycle_free(struct bfs_lifecycle *lc);

/* The exit's deadline, a backstop. A daemon whose mount ended (an unmount,
 * a stopping signal) exits within a second or so: its threads stop, it frees
 * what it holds (LeakSanitizer checks it), it returns from main. Should a
 * thread of that exit be stuck (a bug, or a library waiting on a name
 * server), the process would stay: so, from the mount's end, it has
 * BFS_LIFECYCLE_EXIT_DEADLINE_MS; then the mount is taken away, lazily, if
 * the loop thread has not unmounted it yet, one line goes to stderr ("...
 * leaving without the rest of its exit") and the process leaves with
 * _exit(1). Armed once, by the first caller (NULL: nothing), from any
 * thread; a process that exits in time never notices it. A thread stuck
 * in the kernel itself (a read handed to a FUSE source whose server hangs
 * waits, uninterruptibly, for that server) keeps even an exiting process. */
#define BFS_LIFECYCLE_EXIT_DEADLINE_MS 1500
void bfs_lifecycle_exit_deadline(const char *mountpoint);
/* Who unmounts: the loop thread (fuse_session_unmount) or the exit's
 * deadline. true for the first caller only; the other leaves the mount
 * (and, the loop thread, the mount point's lock) alone. */
bool bfs_lifecycle_claim_unmount(void);

/* bfs_lifecycle_watch (a starter's pipe): declared in fs.h. */

/* The mount point's lock (mount/checks.h takes it, LOCK_EX, on a
 * descriptor of the folder before anything is mounted). Its mode tells a
 * batchfs started later on the same folder what the holder is doing:
 * exclusive while it mounts (a real second mount: refused), shared once it
 * has mounted (a mount point that is no longer mounted is one a daemon
 * that is only exiting holds: the newcomer waits for it, bounded), none
 * once its session ended (so that a slow exit never holds a re-mount
 * back). The descriptor is the caller's; a fork shares its lock. */
/* Mounted: exclusive -> shared. A newcomer that takes the lock in between
 * (the kernel converts in two steps) finds the mount and lets go; waited
 * for up to a second. Returns 0, or a negative errno (the lock is then
 * left as it was or dropped: harmless, the mount is there). */
int bfs_lifecycle_lock_mounted(int fd);
/* The session ended (unmounted): let go of the lock at once. */
void bfs_lifecycle_lock_release(int fd);

#endif
