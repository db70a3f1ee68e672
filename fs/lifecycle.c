/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle.c — detaching, readahead, the signal thread and the watches
 * (see lifecycle.h).
 */
#include "lifecycle.h"

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAKE_EVERY_NS 5000000L
#define WATCH_EVERY_NS 100000000L /* the watch looks for an ended session */

static void wake_handler(int sig)
{
	(void)sig;
}

void bfs_lifecycle_signals(void)
{
	struct sigaction sa;
	sigset_t stop;

	/* from here on, only the signal thread takes a stopping signal; one
	 * that comes before it starts waits, pending, and is taken then */
	bfs_stop_signals(&stop);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wake_handler; /* no SA_RESTART: sem_wait returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(BFS_WAKE_SIGNAL, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ---------------------------------------------------------- detaching */

int bfs_lifecycle_daemonize(bool foreground, bfs_lifecycle_start_fn start, void (*undo)(void *ctx),
			    void *ctx, const char *what)
{
	char msg[512];
	int p[2], nullfd;
	pid_t pid;

	if (foreground) {
		if (start(ctx, msg, sizeof(msg)) != 0) {
			fprintf(stderr, "batchfs: %s\n", msg);
			return -1;
		}
		if (chdir("/") != 0) {
			/* as fuse_daemonize in the foreground: not expected to fail */
		}
		return 0;
	}
	if (pipe(p) != 0) {
		fprintf(stderr, "batchfs: cannot detach: %s\n", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "batchfs: cannot detach: %s\n", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid > 0) { /* the mount command: wait for the daemon's word */
		size_t got = 0;
		ssize_t k;

		close(p[1]);
		while (got < sizeof(msg) - 1 &&
		       ((k = read(p[0], msg + got, sizeof(msg) - 1 - got)) > 0 ||
			(k < 0 && errno == EINTR)))
			got += k > 0 ? (size_t)k : 0;
		msg[got] = '\0';
		if (got == 2 && strcmp(msg, "ok") == 0)
			_exit(0);
		if (got)
			fprintf(stderr, "batchfs: %s\n", msg);
		else
			fprintf(stderr, "batchfs: the daemon exited before %s started\n", what);
		_exit(1);
	}
	close(p[0]);
	if (setsid() == -1 || chdir("/") != 0) {
		/* as fuse_daemonize: neither is expected to fail */
	}
	if (start(ctx, msg, sizeof(msg)) != 0) {
		/* unmount first, so that the mount is gone when the command exits */
		if (undo)
			undo(ctx);
		if (write(p[1], msg, strlen(msg)) < 0) {
			/* the command is gone: nothing to tell */
		}
		close(p[1]);
		_exit(1);
	}
	nullfd = open("/dev/null", O_RDWR);
	if (nullfd >= 0) {
		dup2(nullfd, 0);
		dup2(nullfd, 1);
		dup2(nullfd, 2);
		if (nullfd > 2)
			close(nullfd);
	}
	if (write(p[1], "ok", 2) != 2) {
		/* the command is gone: serve anyway */
	}
	close(p[1]);
	return 0;
}

/* ----------------------------------------------------------- readahead */

bool bfs_lifecycle_mount_dev(FILE *mountinfo, const char *abs, unsigned *maj, unsigned *min)
{
	char line[4096];
	bool found = false;

	while (fgets(line, sizeof(line), mountinfo)) {
		char mnt[4096], fstype[256];
		unsigned a, b;
		char *dash;

		/* id parent maj:min root mountpoint opts ... - fstype source super */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, mnt) != 3)
			continue;
		dash = strstr(line, " - ");
		if (!dash || sscanf(dash, " - %255s", fstype) != 1)
			continue;
		if (strcmp(mnt, abs) == 0 && strncmp(fstype, "fuse", 4) == 0) {
			*maj = a;
			*min = b;
			found = true; /* the last match is the topmost mount */
		}
	}
	return found;
}

int bfs_lifecycle_readahead_at(const char *mountinfo, const char *bdi_dir, const char *mountpoint,
			       unsigned kb)
{
	char abs[PATH_MAX], path[PATH_MAX];
	unsigned maj = 0, min = 0;
	bool found;
	FILE *f;

	if (!realpath(mountpoint, abs))
		return -errno;
	f = fopen(mountinfo, "r");
	if (!f)
		return -errno;
	found = bfs_lifecycle_mount_dev(f, abs, &maj, &min);
	fclose(f);
	if (!found)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%u:%u/read_ahead_kb", bdi_dir, maj, min);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%u\n", kb);
	return fclose(f) == 0 ? 0 : -errno;
}

int bfs_lifecycle_readahead(const char *mountpoint, unsigned kb)
{
	return bfs_lifecycle_readahead_at(BFS_LIFECYCLE_MOUNTINFO, BFS_LIFECYCLE_BDI_DIR,
					  mountpoint, kb);
}

/* ------------------------------------------------ the exit's deadline */

static atomic_bool unmount_claimed;
static atomic_flag deadline_armed = ATOMIC_FLAG_INIT;
static char deadline_mnt[PATH_MAX];

bool bfs_lifecycle_claim_unmount(void)
{
	return !atomic_exchange(&unmount_claimed, true);
}

/* Take the mount at mnt away, lazily (it may be busy), as libfuse does:
 * umount2 when we may, else fusermount3 (waited for a moment). */
static void lazy_unmount(const char *mnt)
{
	static const struct timespec step = { 0, 10000000L };
	char *argv[] = { "fusermount3", "-u", "-q", "-z", "--", (char *)mnt, NULL };
	pid_t pid;

	if (umount2(mnt, MNT_DETACH) == 0 || errno != EPERM)
		return;
	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return;
	for (int i = 0; i < 50 && waitpid(pid, NULL, WNOHANG) == 0; i++)
		nanosleep(&step, NULL);
}

static void *deadline_thread(void *arg)
{
	struct timespec at;
	char line[PATH_MAX + 160];
	int n;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &at);
	at.tv_sec += BFS_LIFECYCLE_EXIT_DEADLINE_MS / 1000;
	at.tv_nsec += (BFS_LIFECYCLE_EXIT_DEADLINE_MS % 1000) * 1000000L;
	at.tv_sec += at.tv_nsec / 1000000000L;
	at.tv_nsec %= 1000000000L;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
	/* still here: a thread of the exit is stuck */
	if (bfs_lifecycle_claim_unmount())
		lazy_unmount(deadline_mnt);
	n = snprintf(line, sizeof(line),
		     "batchfs: %s: the daemon had not exited %d ms after its mount ended "
		     "(a thread stuck at exit); leaving without the rest of its exit\n",
		     deadline_mnt, BFS_LIFECYCLE_EXIT_DEADLINE_MS);
	if (n > 0 && write(2, line, (size_t)n) < 0) {
		/* no log: nothing to tell */
	}
	_exit(1);
}

void bfs_lifecycle_exit_deadline(const char *mountpoint)
{
	pthread_t tid;

	if (!mountpoint || atomic_flag_test_and_set(&deadline_armed))
		return;
	snprintf(deadline_mnt, sizeof(deadline_mnt), "%s", mountpoint);
	if (bfs_thread_start(&tid, deadline_thread, NULL) == 0)
		pthread_detach(tid);
}

/* ------------------------------------------------ the signal thread */

struct bfs_lifecycle {
	struct bfs_lifecycle_ops ops;
	pthread_t loop_thread;
	pthread_t tid, watch;
	bool watching;
	atomic_bool loop_done; /* the loop returned: stop waking it */
	atomic_bool quit; /* the mount ended: the helpers leave */
};

static void *signal_thread(void *arg)
{
	struct bfs_lifecycle *lc = arg;
	const struct timespec pause = { 0, WAKE_EVERY_NS };
	sigset_t set;
	int sig = 0;

	bfs_stop_signals(&set);
	do {
		if (sigwait(&set, &sig) != 0)
			continue;
	} while (sig == 0);
	if (atomic_load(&lc->quit))
		return NULL;
	bfs_lifecycle_exit_deadline(lc->ops.mountpoint);
	lc->ops.stop(lc->ops.ctx);
	while (!atomic_load(&lc->loop_done)) {
		pthread_kill(lc->loop_thread, BFS_WAKE_SIGNAL);
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* Its own thread, all signals blocked, so that the signal thread alone
 * waits for them. */
static void *session_watch(void *arg)
{
	struct bfs_lifecycle *lc = arg;
	const struct timespec look = { 0, WATCH_EVERY_NS };

	while (!atomic_load(&lc->quit)) {
		if (lc->ops.ended(lc->ops.ctx)) {
			bfs_lifecycle_exit_deadline(lc->ops.mountpoint);
			lc->ops.on_end(lc->ops.ctx);
			break;
		}
		nanosleep(&look, NULL);
	}
	return NULL;
}

int bfs_lifecycle_new(struct bfs_lifecycle **out, const struct bfs_lifecycle_ops *ops)
{
	struct bfs_lifecycle *lc = calloc(1, sizeof(*lc));
	int rc;

	if (!lc)
		return ENOMEM;
	lc->ops = *ops;
	lc->loop_thread = pthread_self();
	atomic_init(&lc->loop_done, false);
	atomic_init(&lc->quit, false);
	rc = bfs_thread_start(&lc->tid, signal_thread, lc);
	if (rc) {
		free(lc);
		return rc;
	}
	if (ops->ended && bfs_thread_start(&lc->watch, session_watch, lc) == 0)
		lc->watching = true;
	*out = lc;
	return 0;
}

void bfs_lifecycle_free(struct bfs_lifecycle *lc)
{
	if (!lc)
		return;
	atomic_store(&lc->loop_done, true);
	atomic_store(&lc->quit, true);
	/* wakes a signal thread still in sigwait; one that took a signal
	 * leaves on its own now that loop_done is set */
	pthread_kill(lc->tid, SIGTERM);
	pthread_join(lc->tid, NULL);
	if (lc->watching)
		pthread_join(lc->watch, NULL);
	free(lc);
}

/* ------------------------------------------------------ the watch fd */

static void *watch_thread(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!(p.revents & POLLIN))
			break; /* POLLHUP, POLLERR, POLLNVAL */
		n = read(fd, buf, sizeof(buf)); /* bytes written to us mean nothing */
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			break;
	}
	/* the signal thread unmounts; before the mount, SIGTERM just ends us */
	kill(getpid(), SIGTERM);
	return NULL;
}

int bfs_lifecycle_watch(int fd)
{
	pthread_t tid;
	int rc = bfs_thread_start(&tid, watch_thread, (void *)(intptr_t)fd);

	if (!rc)
		pthread_detach(tid);
	return rc;
}

/* ------------------------------------------------ the mount point's lock */

#define LOCK_TRY_NS 1000000L
#define LOCK_TRIES 1000 /* a second */

int bfs_lifecycle_lock_mounted(int fd)
{
	const struct timespec pause = { 0, LOCK_TRY_NS };

	for (int i = 0; i < LOCK_TRIES; i++) {
		if (flock(fd, LOCK_SH | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		nanosleep(&pause, NULL);
	}
	return -EWOULDBLOCK;
}

void bfs_lifecycle_lock_release(int fd)
{
	(void)flock(fd, LOCK_UN);
}
