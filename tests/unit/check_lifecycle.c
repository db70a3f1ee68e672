/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_lifecycle.c — a mount daemon's life (fs/lifecycle.h) without a
 * mount: detaching (the command's exit status and line, the daemon in a
 * session of its own at /, undo on a failed start), the FUSE mount found
 * in a mountinfo and its readahead written, the signal thread ending the
 * "session" once and waking the loop thread, the watch of an ended session,
 * the watch of a starter's pipe, and the exit's deadline.
 */
#include "lifecycle.h"

#include "testfiles.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* All of fd until its end (a pipe), NUL-terminated. */
static void slurp_fd(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t k;

	while (got < cap - 1 && (k = read(fd, buf + got, cap - 1 - got)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		ck_assert_int_gt(k, 0);
		got += (size_t)k;
	}
	buf[got] = '\0';
}

/* ----------------------------------------------------------- detaching */

static int report_fd = -1; /* the daemon tells the test what it saw */

static int start_ok(void *ctx, char *err, size_t errlen)
{
	(void)ctx, (void)err, (void)errlen;
	return 0;
}

static int start_fails(void *ctx, char *err, size_t errlen)
{
	snprintf(err, errlen, "option 'x': %s", (const char *)ctx);
	return -1;
}

static int start_dies(void *ctx, char *err, size_t errlen)
{
	(void)ctx, (void)err, (void)errlen;
	_exit(3);
}

static void undo(void *ctx)
{
	(void)ctx;
	if (write(report_fd, "undo;", 5) != 5)
		_exit(4);
}

struct detached {
	int status; /* the command's */
	char err[512]; /* what the command printed on stderr */
	char report[256]; /* what the daemon wrote */
};

/* Fork a "mount command" that detaches with start; the daemon it leaves
 * reports whether it is a session leader at / (and undo, when called). */
static void detach(struct detached *d, bfs_lifecycle_start_fn start, void *ctx)
{
	int rep[2], err[2];
	pid_t pid;

	ck_assert_int_eq(pipe(rep), 0);
	ck_assert_int_eq(pipe(err), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char cwd[PATH_MAX], line[PATH_MAX + 64];

		close(rep[0]);
		close(err[0]);
		dup2(err[1], 2);
		close(err[1]);
		report_fd = rep[1];
		if (bfs_lifecycle_daemonize(false, start, undo, ctx, "TEST") != 0)
			_exit(5);
		/* the daemon: its own session, at /, stderr gone */
		snprintf(line, sizeof(line), "leader=%d cwd=%s stderr=%s;", getsid(0) == getpid(),
			 getcwd(cwd, sizeof(cwd)) ? cwd : "?",
			 write(2, "x", 1) == 1 ? "dev-null" : "closed");
		if (write(rep[1], line, strlen(line)) < 0)
			_exit(6);
		_exit(0);
	}
	close(rep[1]);
	close(err[1]);
	ck_assert_int_eq(waitpid(pid, &d->status, 0), pid);
	slurp_fd(err[0], d->err, sizeof(d->err));
	/* until the daemon closed its end: it has exited */
	slurp_fd(rep[0], d->report, sizeof(d->report));
	close(rep[0]);
	close(err[0]);
}

START_TEST(the_command_exits_0_once_the_daemon_started)
{
	struct detached d;

	detach(&d, start_ok, NULL);
	ck_assert(WIFEXITED(d.status));
	ck_assert_int_eq(WEXITSTATUS(d.status), 0);
	ck_assert_str_eq(d.err, "");
	ck_assert_str_eq(d.report, "leader=1 cwd=/ stderr=dev-null;");
}
END_TEST

START_TEST(a_failed_start_is_the_commands_one_line)
{
	struct detached d;

	detach(&d, start_fails, "no usable GPU");
	ck_assert(WIFEXITED(d.status));
	ck_assert_int_eq(WEXITSTATUS(d.status), 1);
	ck_assert_str_eq(d.err, "batchfs: option 'x': no usable GPU\n");
	ck_assert_str_eq(d.report, "undo;"); /* unmounted before the word */

	detach(&d, start_dies, NULL);
	ck_assert_int_eq(WEXITSTATUS(d.status), 1);
	ck_assert_str_eq(d.err, "batchfs: the daemon exited before TEST started\n");
	ck_assert_str_eq(d.report, "");
}
END_TEST

START_TEST(in_the_foreground_start_runs_here)
{
	char cwd[PATH_MAX];
	int err[2], saved = dup(2), status;
	char line[256];
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		ck_assert_int_eq(bfs_lifecycle_daemonize(true, start_ok, undo, NULL, "TEST"), 0);
		_exit(getcwd(cwd, sizeof(cwd)) && strcmp(cwd, "/") == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	/* a failed start in the foreground: the line here, -1, no undo */
	ck_assert_int_eq(pipe(err), 0);
	dup2(err[1], 2);
	close(err[1]);
	ck_assert_int_eq(bfs_lifecycle_daemonize(true, start_fails, undo, "bad", "TEST"), -1);
	dup2(saved, 2);
	close(saved);
	slurp_fd(err[0], line, sizeof(line));
	close(err[0]);
	ck_assert_str_eq(line, "batchfs: option 'x': bad\n");
}
END_TEST

/* ----------------------------------------------------------- readahead */

static const char mountinfo[] =
	"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
	"40 22 0:41 / /mnt/data rw,nosuid,nodev - fuse.batchfs batchfs rw,user_id=0\n"
	"41 22 0:42 / /mnt/other rw - fuse.sshfs host:/x rw\n"
	"42 40 0:43 / /mnt/data rw,nosuid,nodev shared:9 - fuse.batchfs batchfs rw\n"
	"43 22 0:44 / /mnt/tmpfs rw - tmpfs tmpfs rw\n"
	"garbage that is not a mountinfo line\n";

START_TEST(the_topmost_fuse_mount_is_found)
{
	FILE *f = fmemopen((void *)mountinfo, sizeof(mountinfo) - 1, "r");
	unsigned maj = 9, min = 9;

	ck_assert_ptr_nonnull(f);
	ck_assert(bfs_lifecycle_mount_dev(f, "/mnt/data", &maj, &min));
	ck_assert_uint_eq(maj, 0);
	ck_assert_uint_eq(min, 43); /* mounted over 0:41 */
	rewind(f);
	ck_assert(bfs_lifecycle_mount_dev(f, "/mnt/other", &maj, &min));
	ck_assert_uint_eq(min, 42);
	rewind(f);
	ck_assert(!bfs_lifecycle_mount_dev(f, "/mnt/tmpfs", &maj, &min)); /* not FUSE */
	rewind(f);
	ck_assert(!bfs_lifecycle_mount_dev(f, "/mnt", &maj, &min));
	fclose(f);
}
END_TEST

START_TEST(the_readahead_is_written_to_the_mounts_bdi)
{
	char dir[128], mi[256], bdi[256], mnt[256], path[512];
	uint8_t *got;
	size_t len;
	FILE *f;

	test_mkdir(dir, sizeof(dir), "check_lifecycle");
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	snprintf(bdi, sizeof(bdi), "%s/bdi", dir);
	ck_assert_int_eq(mkdir(bdi, 0755), 0);
	snprintf(path, sizeof(path), "%s/0:77", bdi);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(mi, sizeof(mi), "%s/mountinfo", dir);
	f = fopen(mi, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s50 22 0:77 / %s rw - fuse.batchfs batchfs rw\n", mountinfo, mnt);
	ck_assert_int_eq(fclose(f), 0);

	/* the mount point as given (with a trailing slash): its real path */
	snprintf(path, sizeof(path), "%s/", mnt);
	ck_assert_int_eq(bfs_lifecycle_readahead_at(mi, bdi, path, 1024), 0);
	snprintf(path, sizeof(path), "%s/0:77/read_ahead_kb", bdi);
	got = test_slurp(path, &len);
	ck_assert_uint_eq(len, 5);
	ck_assert_int_eq(memcmp(got, "1024\n", 5), 0);
	free(got);
	/* not a FUSE mount; no such folder; no mountinfo */
	ck_assert_int_eq(bfs_lifecycle_readahead_at(mi, bdi, dir, 1024), -ENOENT);
	snprintf(path, sizeof(path), "%s/none", dir);
	ck_assert_int_eq(bfs_lifecycle_readahead_at(mi, bdi, path, 1024), -ENOENT);
	ck_assert_int_eq(bfs_lifecycle_readahead_at(path, bdi, mnt, 1024), -ENOENT);
	test_rmdir(dir);
}
END_TEST

/* ------------------------------------------------- the signal thread */

struct session {
	atomic_int stops, ends;
	atomic_bool ended;
};

static void stop(void *ctx)
{
	struct session *s = ctx;

	atomic_fetch_add(&s->stops, 1);
}

static bool has_ended(void *ctx)
{
	struct session *s = ctx;

	return atomic_load(&s->ended);
}

static void on_end(void *ctx)
{
	struct session *s = ctx;

	atomic_fetch_add(&s->ends, 1);
}

/* The loop thread's sleep: until a signal interrupts it, or `limit` s. */
static double sleep_until_woken(double limit)
{
	struct timespec ts = { (time_t)limit, 0 };
	double t0 = now();

	while (nanosleep(&ts, &ts) != 0 && errno != EINTR)
		;
	return now() - t0;
}

START_TEST(a_signal_ends_the_session_once_and_wakes_the_loop)
{
	struct session s = { 0 };
	struct bfs_lifecycle_ops ops = { .stop = stop, .ctx = &s };
	struct bfs_lifecycle *lc = NULL;

	bfs_lifecycle_signals();
	ck_assert_int_eq(bfs_lifecycle_new(&lc, &ops), 0);
	ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
	/* woken within a few wake periods, not after the 20 s sleep */
	ck_assert(sleep_until_woken(20) < 5);
	ck_assert_int_eq(atomic_load(&s.stops), 1);
	/* a second signal while the loop winds down changes nothing */
	ck_assert_int_eq(kill(getpid(), SIGINT), 0);
	bfs_lifecycle_free(lc);
	ck_assert_int_eq(atomic_load(&s.stops), 1);
	bfs_lifecycle_free(NULL);
}
END_TEST

START_TEST(a_signal_before_the_thread_is_taken_then)
{
	struct session s = { 0 };
	struct bfs_lifecycle_ops ops = { .stop = stop, .ctx = &s };
	struct bfs_lifecycle *lc = NULL;

	bfs_lifecycle_signals();
	ck_assert_int_eq(kill(getpid(), SIGHUP), 0); /* pending: blocked */
	ck_assert_int_eq(bfs_lifecycle_new(&lc, &ops), 0);
	ck_assert(sleep_until_woken(20) < 5);
	bfs_lifecycle_free(lc);
	ck_assert_int_eq(atomic_load(&s.stops), 1);
}
END_TEST

START_TEST(without_a_signal_the_threads_just_end)
{
	struct session s = { 0 };
	struct bfs_lifecycle_ops ops = {
		.stop = stop, .ended = has_ended, .on_end = on_end, .ctx = &s
	};
	struct bfs_lifecycle *lc = NULL;
	double t0;

	bfs_lifecycle_signals();
	ck_assert_int_eq(bfs_lifecycle_new(&lc, &ops), 0);
	t0 = now();
	bfs_lifecycle_free(lc);
	ck_assert(now() - t0 < 2);
	ck_assert_int_eq(atomic_load(&s.stops), 0);
	ck_assert_int_eq(atomic_load(&s.ends), 0);
}
END_TEST

START_TEST(an_ended_session_is_seen_by_the_watch)
{
	struct session s = { 0 };
	struct bfs_lifecycle_ops ops = {
		.stop = stop, .ended = has_ended, .on_end = on_end, .ctx = &s
	};
	struct bfs_lifecycle *lc = NULL;
	double t0;

	bfs_lifecycle_signals();
	ck_assert_int_eq(bfs_lifecycle_new(&lc, &ops), 0);
	atomic_store(&s.ended, true);
	t0 = now();
	while (atomic_load(&s.ends) == 0 && now() - t0 < 10)
		usleep(10000);
	ck_assert_int_eq(atomic_load(&s.ends), 1);
	ck_assert_int_eq(atomic_load(&s.stops), 0); /* not a signal */
	bfs_lifecycle_free(lc);
	ck_assert_int_eq(atomic_load(&s.ends), 1);
}
END_TEST

/* ------------------------------------------------ the exit's deadline */

/* A child that arms the deadline, then takes `stuck_s` seconds to exit:
 * its exit status, how long it lived (*secs) and its stderr (err). */
static int run_armed(unsigned stuck_s, double *secs, char *err, size_t cap)
{
	double t0 = now();
	int p[2], st = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		bfs_lifecycle_exit_deadline("/nonexistent/bfs-mnt");
		bfs_lifecycle_exit_deadline("/nonexistent/other"); /* armed once */
		sleep(stuck_s);
		_exit(0);
	}
	close(p[1]);
	slurp_fd(p[0], err, cap);
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	*secs = now() - t0;
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

START_TEST(an_exit_stuck_past_its_deadline_leaves_with_status_1_and_one_line)
{
	char err[1024];
	double secs;

	ck_assert_int_eq(run_armed(20, &secs, err, sizeof(err)), 1);
	ck_assert_msg(secs >= BFS_LIFECYCLE_EXIT_DEADLINE_MS / 1000.0 - 0.05 && secs < 5, "%.2f s",
		      secs);
	ck_assert_str_eq(err, "batchfs: /nonexistent/bfs-mnt: the daemon had not exited 1500 ms "
			      "after its mount ended (a thread stuck at exit); leaving without the "
			      "rest of its exit\n");
	/* one that exits in time never notices it (status 0: the deadline
	 * would have made it 1) */
	ck_assert_int_eq(run_armed(0, &secs, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "");
	ck_assert_msg(secs < BFS_LIFECYCLE_EXIT_DEADLINE_MS / 1000.0, "%.2f s", secs);
}
END_TEST

/* --------------------------------------------------------- the watch fd */

START_TEST(the_end_of_the_starters_pipe_is_a_sigterm)
{
	struct timespec wait = { 0, 300000000L };
	sigset_t term;
	int p[2];

	bfs_lifecycle_signals();
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(bfs_lifecycle_watch(p[0]), 0);
	/* bytes written mean nothing */
	ck_assert_int_eq(write(p[1], "hello", 5), 5);
	ck_assert_int_eq(sigtimedwait(&term, NULL, &wait), -1);
	ck_assert_int_eq(errno, EAGAIN);
	close(p[1]);
	wait.tv_sec = 10;
	ck_assert_int_eq(sigtimedwait(&term, NULL, &wait), SIGTERM);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("lifecycle");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, the_command_exits_0_once_the_daemon_started);
	tcase_add_test(tc, a_failed_start_is_the_commands_one_line);
	tcase_add_test(tc, in_the_foreground_start_runs_here);
	tcase_add_test(tc, the_topmost_fuse_mount_is_found);
	tcase_add_test(tc, the_readahead_is_written_to_the_mounts_bdi);
	tcase_add_test(tc, a_signal_ends_the_session_once_and_wakes_the_loop);
	tcase_add_test(tc, a_signal_before_the_thread_is_taken_then);
	tcase_add_test(tc, without_a_signal_the_threads_just_end);
	tcase_add_test(tc, an_ended_session_is_seen_by_the_watch);
	tcase_add_test(tc, the_end_of_the_starters_pipe_is_a_sigterm);
	tcase_add_test(tc, an_exit_stuck_past_its_deadline_leaves_with_status_1_and_one_line);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
