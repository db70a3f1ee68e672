/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topcmd.c — `batchfs top [--interval S] [--count N] MOUNTPOINT`: a
 * mount's stats.json read every interval, its counters shown as rates: on
 * a terminal, a view of its own screen redrawn each time (q or Ctrl-C
 * leaves it, the terminal restored); off one, one plain line per sample.
 * The snapshots and the units are watch.h's.
 */
#include "topcmd.h"

#include "watch.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static double sum_errors(const struct bfs_watch_snap *s)
{
	double e = 0;
	static const enum bfs_stat keys[] = { BFS_STAT_CORRUPT_RECORDS, BFS_STAT_SOURCE_ERRORS,
					      BFS_STAT_FAILED_READS, BFS_STAT_DECODE_ERRORS };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		double v = bfs_watch_val(s, keys[i]);
		if (!isnan(v))
			e += v;
	}
	return e;
}

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

static struct termios saved_tio;
static bool tio_saved, screen_on;

static void screen_leave(void)
{
	if (screen_on) {
		fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen */
		fflush(stdout);
		screen_on = false;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
		tio_saved = false;
	}
}

/* One frame of the terminal view, from the previous sample (may be empty)
 * and the current one; lines are cut to the terminal's width. */
static void draw_frame(const struct bfs_watch_snap *p, const struct bfs_watch_snap *s,
		       const char *mnt, double interval)
{
	char a[64], b[64], c[64], d[64], errs[256];
	const char *lines[32];
	char store[32][512];
	int nl = 0, cols = 80, rows = 24;
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
		cols = ws.ws_col;
		rows = ws.ws_row > 0 ? ws.ws_row : rows;
	}
#define LINE(...)                                                                                  \
	do {                                                                                       \
		snprintf(store[nl], sizeof(store[nl]), __VA_ARGS__);                               \
		lines[nl] = store[nl];                                                             \
		nl++;                                                                              \
	} while (0)
	LINE("batchfs top  %s   up %s s   every %.1f s   q quits", mnt,
	     bfs_watch_fmt_n(a, sizeof(a), bfs_watch_val(s, BFS_STAT_UPTIME_SECONDS)), interval);
	LINE("records %s%s, %s batches per epoch",
	     bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS),
	     bfs_watch_of_sources(c, sizeof(c), s),
	     bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_PER_EPOCH));
	LINE("%s", "");
	LINE("served   %11s records/s %8s MB/s %9s reads/s",
	     bfs_watch_fmt_n(a, sizeof(a), bfs_watch_rate(p, s, BFS_STAT_RECORDS_SERVED)),
	     bfs_watch_fmt_f(b, sizeof(b), bfs_watch_rate(p, s, BFS_STAT_BYTES_READ) / 1e6, 1),
	     bfs_watch_fmt_n(c, sizeof(c), bfs_watch_rate(p, s, BFS_STAT_READS)));
	LINE("decode   %11s records/s %8s batches/s %5s chunks/s  busy %s",
	     bfs_watch_fmt_n(a, sizeof(a), bfs_watch_rate(p, s, BFS_STAT_RECORDS_DECODED)),
	     bfs_watch_fmt_f(b, sizeof(b), bfs_watch_rate(p, s, BFS_STAT_BATCHES_DECODED), 1),
	     bfs_watch_fmt_f(c, sizeof(c), bfs_watch_rate(p, s, BFS_STAT_CHUNKS_DECODED), 1),
	     bfs_watch_fmt_f(d, sizeof(d), bfs_watch_rate(p, s, BFS_STAT_DECODE_SECONDS), 2));
	double ih = NAN;
	if (p && p->n) {
		ih = bfs_watch_hit_pct(bfs_watch_val(s, BFS_STAT_CACHE_HITS) -
					       bfs_watch_val(p, BFS_STAT_CACHE_HITS),
				       bfs_watch_val(s, BFS_STAT_CACHE_WAITS) -
					       bfs_watch_val(p, BFS_STAT_CACHE_WAITS),
				       bfs_watch_val(s, BFS_STAT_CACHE_MISSES) -
					       bfs_watch_val(p, BFS_STAT_CACHE_MISSES));
	}
	LINE("cache    %s%% hits now, %s%% since mount; %s entries",
	     bfs_watch_fmt_f(a, sizeof(a), ih, 1),
	     bfs_watch_fmt_f(b, sizeof(b),
			     bfs_watch_hit_pct(bfs_watch_val(s, BFS_STAT_CACHE_HITS),
					       bfs_watch_val(s, BFS_STAT_CACHE_WAITS),
					       bfs_watch_val(s, BFS_STAT_CACHE_MISSES)),
			     1),
	     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_ENTRIES));
	LINE("         %s held of %s (peak %s), %s evictions",
	     bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_CACHE_BYTES),
	     bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_BUDGET),
	     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_PEAK_BYTES),
	     bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_EVICTIONS));
	LINE("prefetch depth %s: %s ready ahead, %s queued; %s decoding now",
	     bfs_watch_fmt_n(a, sizeof(a),
			     bfs_watch_val(s, BFS_STAT_PREFETCH_READY) +
				     bfs_watch_val(s, BFS_STAT_PREFETCH_QUEUED)),
	     bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_PREFETCH_READY),
	     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_PREFETCH_QUEUED),
	     bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_DECODING));
	if (bfs_watch_key(s, BFS_STAT_IO_READS)) {
		LINE("source   %11s reads/s %10s MB/s  %s in flight, %s queued, %s buffered",
		     bfs_watch_fmt_n(a, sizeof(a), bfs_watch_rate(p, s, BFS_STAT_IO_READS)),
		     bfs_watch_fmt_f(b, sizeof(b), bfs_watch_rate(p, s, BFS_STAT_IO_BYTES) / 1e6,
				     1),
		     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_IO_INFLIGHT),
		     bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_IO_PENDING),
		     bfs_watch_fmt_key(errs, sizeof(errs), s, BFS_STAT_IO_BUFFERED));
		LINE("         %s source reads, %s retried, %s failed; decoders waited %s s",
		     bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_IO_READS),
		     bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_IO_RETRIES),
		     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_IO_FAILED),
		     bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_IO_WAIT_SECONDS));
	}
	LINE("errors   %s", bfs_watch_fmt_errors(errs, sizeof(errs), s));
	LINE("totals   %s records served, %s in %s reads",
	     bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_SERVED),
	     bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_BYTES_READ),
	     bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_READS));
#undef LINE
	/* the other keys, as many lines of them as the terminal has left */
	int room = rows - 1 - nl < 32 - nl ? rows - 1 - nl : 32 - nl;
	int k = bfs_watch_others(store + nl, room > 0 ? room : 0, (size_t)cols, 9, p, s);
	for (int i = 0; i < k; i++, nl++)
		lines[nl] = store[nl];
	fputs("\033[H", stdout);
	for (int i = 0; i < nl; i++) {
		int w = (int)strlen(lines[i]);
		fwrite(lines[i], 1, (size_t)(w < cols ? w : cols), stdout);
		fputs("\033[K\n", stdout);
	}
	fputs("\033[J", stdout);
	fflush(stdout);
}

static const char plain_head[] =
	"uptime     rec/s     MB/s   reads/s  dec_rec/s  busy   hit%"
	"  cache_MiB  ahead queued errors src_reads/s src_MB/s       served\n";

static void plain_line(const struct bfs_watch_snap *p, const struct bfs_watch_snap *s)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];

	printf("%6.0f %9s %8s %9s %10s %5s %6s %10.1f %6.0f %6.0f %6.0f %11s %8s %12.0f\n",
	       bfs_watch_val(s, BFS_STAT_UPTIME_SECONDS),
	       bfs_watch_fmt_f(a, sizeof(a), bfs_watch_rate(p, s, BFS_STAT_RECORDS_SERVED), 1),
	       bfs_watch_fmt_f(b, sizeof(b), bfs_watch_rate(p, s, BFS_STAT_BYTES_READ) / 1e6, 1),
	       bfs_watch_fmt_f(c, sizeof(c), bfs_watch_rate(p, s, BFS_STAT_READS), 0),
	       bfs_watch_fmt_f(d, sizeof(d), bfs_watch_rate(p, s, BFS_STAT_RECORDS_DECODED), 0),
	       bfs_watch_fmt_f(e, sizeof(e), bfs_watch_rate(p, s, BFS_STAT_DECODE_SECONDS), 2),
	       bfs_watch_fmt_f(f, sizeof(f),
			       bfs_watch_hit_pct(bfs_watch_val(s, BFS_STAT_CACHE_HITS) -
							 bfs_watch_val(p, BFS_STAT_CACHE_HITS),
						 bfs_watch_val(s, BFS_STAT_CACHE_WAITS) -
							 bfs_watch_val(p, BFS_STAT_CACHE_WAITS),
						 bfs_watch_val(s, BFS_STAT_CACHE_MISSES) -
							 bfs_watch_val(p, BFS_STAT_CACHE_MISSES)),
			       1),
	       bfs_watch_val(s, BFS_STAT_CACHE_BYTES) / 1048576.0,
	       bfs_watch_val(s, BFS_STAT_PREFETCH_READY),
	       bfs_watch_val(s, BFS_STAT_PREFETCH_QUEUED), sum_errors(s),
	       bfs_watch_fmt_f(g, sizeof(g),
			       bfs_watch_key(s, BFS_STAT_IO_READS)
				       ? bfs_watch_rate(p, s, BFS_STAT_IO_READS)
				       : NAN,
			       0),
	       bfs_watch_fmt_f(h, sizeof(h),
			       bfs_watch_key(s, BFS_STAT_IO_BYTES)
				       ? bfs_watch_rate(p, s, BFS_STAT_IO_BYTES) / 1e6
				       : NAN,
			       1),
	       bfs_watch_val(s, BFS_STAT_RECORDS_SERVED));
	fflush(stdout);
}

struct top_args {
	const char *mnt;
	double interval;
	long count; /* 0: until q, Ctrl-C or a signal */
};

/* top's arguments. *done: exit now with the status returned (--help, or
 * a bad argument after its usage line). */
static int top_args(struct top_args *a, int argc, char **argv, bool *done)
{
	*a = (struct top_args){ .interval = 1.0 };
	*done = true;
	for (int i = 1; i < argc; i++) {
		char *endp;
		if (strcmp(argv[i], "--interval") == 0 || strcmp(argv[i], "-n") == 0) {
			if (++i == argc)
				return bfs_watch_bad_arg("top", "--interval needs SECONDS", NULL);
			errno = 0;
			a->interval = strtod(argv[i], &endp);
			if (*endp || errno || !(a->interval >= 0.05 && a->interval <= 3600))
				return bfs_watch_bad_arg(
					"top", "--interval: seconds from 0.05 to 3600, got",
					argv[i]);
		} else if (strcmp(argv[i], "--count") == 0 || strcmp(argv[i], "-c") == 0) {
			if (++i == argc)
				return bfs_watch_bad_arg("top", "--count needs N", NULL);
			errno = 0;
			a->count = strtol(argv[i], &endp, 10);
			if (*endp || errno || a->count < 1)
				return bfs_watch_bad_arg("top", "--count: a positive integer, got",
							 argv[i]);
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: batchfs top [--interval SECONDS] [--count N] MOUNTPOINT\n");
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return bfs_watch_bad_arg("top", "unknown option", argv[i]);
		} else if (a->mnt) {
			return bfs_watch_bad_arg("top", "one MOUNTPOINT only, got another",
						 argv[i]);
		} else {
			a->mnt = argv[i];
		}
	}
	if (!a->mnt)
		return bfs_watch_bad_arg("top", "MOUNTPOINT missing", NULL);
	*done = false;
	return 0;
}

/* SIGINT, SIGTERM and SIGHUP stop top: they stay blocked except inside
 * ppoll, so none is lost between a check of stop_sig and the wait. *orig:
 * the mask before. */
static void top_signals(sigset_t *orig)
{
	struct sigaction sa;
	sigset_t block;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, orig);
}

/* The terminal: keys one by one when stdin is one too, our own screen
 * with the first frame; off a terminal, the plain lines' header. */
static void top_screen(const struct top_args *a, const struct bfs_watch_snap *first, bool tty,
		       bool keys)
{
	if (keys && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios t = saved_tio;
		t.c_lflag &=
			(tcflag_t) ~(ICANON | ECHO); /* keys one by one, unechoed; ISIG stays */
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	}
	if (tty) {
		fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout); /* own screen, no cursor */
		screen_on = true;
		draw_frame(NULL, first, a->mnt, a->interval);
	} else {
		fputs(plain_head, stdout);
		fflush(stdout);
	}
}

/* Wait until `due` (seconds of bfs_now_ns): false when a stopping signal came
 * or q (or Ctrl-C) was pressed meanwhile. */
static bool top_wait(double due, bool keys, const sigset_t *orig)
{
	double left;

	while (!stop_sig && (left = due - (double)bfs_now_ns() / 1e9) > 0) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		struct timespec ts = { .tv_sec = (time_t)left,
				       .tv_nsec = (long)((left - (double)(time_t)left) * 1e9) };
		int r = ppoll(&pfd, keys ? 1 : 0, &ts, orig);
		if (r > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
			char ch;
			ssize_t k = read(STDIN_FILENO, &ch, 1);
			if (k <= 0 || ch == 'q' || ch == 'Q' || ch == 3 /* ^C */)
				return false;
		}
	}
	return !stop_sig;
}

int bfs_tool_top(int argc, char **argv)
{
	struct top_args a;
	struct bfs_watch_snap prev = { 0 }, cur = { 0 };
	sigset_t orig;
	bool tty, keys, done;
	char err[4400];
	int ret = top_args(&a, argc, argv, &done);

	if (done)
		return ret;
	if (bfs_watch_read(&cur, a.mnt, err, sizeof(err)) != 0) {
		fprintf(stderr, "batchfs: %s\n", err);
		return 1;
	}
	top_signals(&orig);
	tty = isatty(STDOUT_FILENO);
	keys = tty && isatty(STDIN_FILENO);
	top_screen(&a, &cur, tty, keys);
	ret = 0; /* q, Ctrl-C, a signal or the count done */
	for (long n = 0; !a.count || n < a.count; n++) {
		if (!top_wait(cur.t + a.interval, keys, &orig))
			break;
		bfs_watch_clear(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
		if (bfs_watch_read(&cur, a.mnt, err, sizeof(err)) != 0) {
			/* the mount went away: say so on the restored screen */
			screen_leave();
			fprintf(stderr, "batchfs: %s\n", err);
			ret = 1;
			break;
		}
		if (tty)
			draw_frame(&prev, &cur, a.mnt, a.interval);
		else
			plain_line(&prev, &cur);
		if (ferror(stdout)) { /* a closed pipe */
			ret = 1;
			break;
		}
	}
	screen_leave();
	sigprocmask(SIG_SETMASK, &orig, NULL);
	bfs_watch_clear(&prev);
	bfs_watch_clear(&cur);
	return ret;
}
