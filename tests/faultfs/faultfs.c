/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faultfs — a read-only FUSE passthrough whose reads can be made to fail, to
 * stall, or to wait like a network source, for testing and benchmarking
 * batchfs over a failing or slow source.
 *
 *   faultfs SOURCE_DIR MOUNTPOINT CONTROL_FILE [--conc=N] [--max-background=N]
 *           [--cached] [FUSE options...]
 *
 * Serves SOURCE_DIR (one level: regular files) at MOUNTPOINT, read-only.
 * Every open uses direct_io (each read reaches this process) unless
 * --cached. Reads are answered asynchronously: a delayed read holds no
 * thread, so up to --conc reads (default 256) wait at once, each its own
 * delay, as on a network filesystem or an object store; reads past that
 * wait in order for a free place. The kernel's limit on the asynchronous
 * requests it sends (max_background: readahead, and the direct reads of
 * io_uring or AIO) is left at libfuse's default, as FUSE clients of
 * buckets leave it (libfuse 3 asks for none, so the kernel keeps its 12);
 * --max-background=N raises it (a server that asks for more, as this one
 * did before). The first line of CONTROL_FILE (outside
 * the mount; missing or empty = no fault; checked again whenever the file
 * changes) is one of
 *
 *   ok
 *   eio [SUBSTRING]        reads of files whose name contains SUBSTRING
 *                          (all files if none) fail with EIO
 *   delay MS [SUBSTRING]   those reads are answered MS milliseconds later
 *   stall [SUBSTRING]      those reads are held until the line changes
 *   short [SUBSTRING]      those reads return half the bytes asked for
 *
 * The hidden file `.faultfs-stats` at the top reads as counters of the
 * reads served: "reads N", "bytes N", "peak_inflight N", "failed N", and
 * "max_background N": what the kernel was told (0: libfuse asked for
 * nothing, the kernel's default of 12 holds).
 *
 * Runs in the foreground until unmounted. Test tool only.
 */
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATS_NAME ".faultfs-stats"
#define STATS_INO 2
#define TTL 3600.0

enum fault { F_NONE, F_EIO, F_DELAY, F_STALL, F_SHORT };

struct rule {
	enum fault what;
	long ms;
	char sub[256];
};

/* a read waiting for its answer */
struct pending {
	fuse_req_t req;
	char *buf;
	size_t len;
	int err;
	uint64_t due_ns; /* 0: not started (waits for a place) */
	char name[256];
	bool stall;
	struct pending *next;
};

static const char *source, *control;
static unsigned conc = 256;
static unsigned max_bg; /* 0: libfuse's default (the kernel's 12) */
static unsigned told_bg; /* what the init reply carries */
static bool cached;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct rule rule; /* lock */
static struct timespec rule_mtime; /* lock */
static ino_t rule_ino; /* lock */
static off_t rule_size; /* lock */
static struct pending *timed, *queued, *queued_tail; /* lock; timed: by due time */
static unsigned inflight, peak; /* lock */
static uint64_t nreads, nbytes, nfailed; /* lock */
static bool stopping; /* lock */

/* name table: inode = index + 3 */
static char **names; /* lock */
static size_t nnames, cap_names; /* lock */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void parse_rule(struct rule *r, const char *line)
{
	char what[16];
	int n;

	memset(r, 0, sizeof(*r));
	if (sscanf(line, "%15s", what) != 1)
		return;
	if (strcmp(what, "delay") == 0) {
		n = sscanf(line, "%*s %ld %255s", &r->ms, r->sub);
		if (n >= 1)
			r->what = F_DELAY;
		return;
	}
	if (strcmp(what, "eio") == 0)
		r->what = F_EIO;
	else if (strcmp(what, "stall") == 0)
		r->what = F_STALL;
	else if (strcmp(what, "short") == 0)
		r->what = F_SHORT;
	else
		return;
	(void)sscanf(line, "%*s %255s", r->sub);
}

/* Re-read the control file when it changed. Lock held. */
static void refresh_rule(void)
{
	struct stat st;
	char line[512];
	FILE *f;

	if (stat(control, &st) != 0) {
		memset(&rule, 0, sizeof(rule));
		rule_ino = 0;
		return;
	}
	if (st.st_ino == rule_ino && st.st_size == rule_size &&
	    st.st_mtim.tv_sec == rule_mtime.tv_sec && st.st_mtim.tv_nsec == rule_mtime.tv_nsec)
		return;
	rule_ino = st.st_ino;
	rule_size = st.st_size;
	rule_mtime = st.st_mtim;
	memset(&rule, 0, sizeof(rule));
	f = fopen(control, "re");
	if (!f)
		return;
	if (fgets(line, sizeof(line), f))
		parse_rule(&rule, line);
	fclose(f);
}

static enum fault fault_for(const char *name, long *ms)
{
	*ms = rule.ms;
	if (rule.what != F_NONE && rule.sub[0] && !strstr(name, rule.sub))
		return F_NONE;
	return rule.what;
}

static const char *name_of(fuse_ino_t ino)
{
	return ino >= 3 && ino - 3 < nnames ? names[ino - 3] : NULL;
}

/* The inode of `name`, adding it to the table. Lock held. 0: no memory. */
static fuse_ino_t ino_of(const char *name)
{
	for (size_t i = 0; i < nnames; i++)
		if (strcmp(names[i], name) == 0)
			return i + 3;
	if (nnames == cap_names) {
		size_t cap = cap_names ? cap_names * 2 : 64;
		char **n = realloc(names, cap * sizeof(*n));
		if (!n)
			return 0;
		names = n;
		cap_names = cap;
	}
	if (!(names[nnames] = strdup(name)))
		return 0;
	return ++nnames + 2;
}

static int stat_name(const char *name, struct stat *st)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/%s", source, name) >= sizeof(p))
		return -ENAMETOOLONG;
	if (lstat(p, st) != 0)
		return -errno;
	st->st_mode &= ~(mode_t)0222;
	return 0;
}

static char *stats_text(size_t *len)
{
	char *s = NULL;
	int n;

	pthread_mutex_lock(&lock);
	n = asprintf(&s,
		     "reads %llu\nbytes %llu\npeak_inflight %u\nfailed %llu\n"
		     "max_background %u\n",
		     (unsigned long long)nreads, (unsigned long long)nbytes, peak,
		     (unsigned long long)nfailed, told_bg);
	pthread_mutex_unlock(&lock);
	*len = n > 0 ? (size_t)n : 0;
	return n > 0 ? s : NULL;
}

static void stats_attr(struct stat *st)
{
	size_t len = 0;
	char *s = stats_text(&len);

	free(s);
	memset(st, 0, sizeof(*st));
	st->st_ino = STATS_INO;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = 4096; /* read with direct_io: the real length comes back */
	(void)len;
}

static void ff_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int rc;

	memset(&e, 0, sizeof(e));
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (strcmp(name, STATS_NAME) == 0) {
		stats_attr(&e.attr);
		e.ino = STATS_INO;
		fuse_reply_entry(req, &e);
		return;
	}
	rc = stat_name(name, &e.attr);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	pthread_mutex_lock(&lock);
	e.ino = ino_of(name);
	pthread_mutex_unlock(&lock);
	if (!e.ino) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	e.attr.st_ino = e.ino;
	e.attr_timeout = e.entry_timeout = cached ? TTL : 0;
	fuse_reply_entry(req, &e);
}

static void ff_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	char name[NAME_MAX + 1];
	const char *n;
	int rc;

	(void)fi;
	memset(&st, 0, sizeof(st));
	if (ino == FUSE_ROOT_ID) {
		if (stat(source, &st) != 0) {
			fuse_reply_err(req, errno);
			return;
		}
		st.st_ino = FUSE_ROOT_ID;
		st.st_mode &= ~(mode_t)0222;
		fuse_reply_attr(req, &st, 0);
		return;
	}
	if (ino == STATS_INO) {
		stats_attr(&st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	pthread_mutex_lock(&lock);
	n = name_of(ino);
	if (n)
		snprintf(name, sizeof(name), "%s", n);
	pthread_mutex_unlock(&lock);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = stat_name(name, &st);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	st.st_ino = ino;
	fuse_reply_attr(req, &st, cached ? TTL : 0);
}

static void ff_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	char *buf = calloc(1, size ? size : 1);
	size_t used = 0;
	struct dirent *de;
	off_t k = 0;
	DIR *d;

	(void)fi;
	if (ino != FUSE_ROOT_ID || !buf) {
		free(buf);
		fuse_reply_err(req, ino != FUSE_ROOT_ID ? ENOTDIR : ENOMEM);
		return;
	}
	d = opendir(source);
	if (!d) {
		free(buf);
		fuse_reply_err(req, errno);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st = { 0 };
		size_t need;

		if (k++ < off)
			continue;
		st.st_ino = de->d_ino ? de->d_ino : 1;
		st.st_mode = (mode_t)(de->d_type << 12);
		need = fuse_add_direntry(req, buf + used, size - used, de->d_name, &st, k);
		if (need > size - used)
			break;
		used += need;
	}
	closedir(d);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ff_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char p[PATH_MAX], name[NAME_MAX + 1];
	const char *n;
	int fd;

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ino == STATS_INO) {
		fi->fh = (uint64_t)-1;
		fi->direct_io = 1;
		fuse_reply_open(req, fi);
		return;
	}
	pthread_mutex_lock(&lock);
	n = name_of(ino);
	if (n)
		snprintf(name, sizeof(name), "%s", n);
	pthread_mutex_unlock(&lock);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	snprintf(p, sizeof(p), "%s/%s", source, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->direct_io = !cached;
	fi->keep_cache = cached;
	fuse_reply_open(req, fi);
}

static void ff_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (fi->fh != (uint64_t)-1)
		close((int)fi->fh);
	fuse_reply_err(req, 0);
}

/* Answer p and free it. Lock not held. */
static void answer(struct pending *p)
{
	if (p->err)
		fuse_reply_err(p->req, p->err);
	else
		fuse_reply_buf(p->req, p->buf, p->len);
	free(p->buf);
	free(p);
}

/* Insert p into the timed list by due time. Lock held. */
static void add_timed(struct pending *p)
{
	struct pending **pp = &timed;

	while (*pp && (*pp)->due_ns <= p->due_ns)
		pp = &(*pp)->next;
	p->next = *pp;
	*pp = p;
}

static void start(struct pending *p, uint64_t delay_ns)
{
	inflight++;
	if (inflight > peak)
		peak = inflight;
	p->due_ns = now_ns() + delay_ns;
	add_timed(p);
	pthread_cond_broadcast(&wake);
}

static void ff_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pending *p;
	enum fault f;
	long ms = 0;
	ssize_t n;

	if (ino == STATS_INO) {
		size_t len = 0;
		char *s = stats_text(&len);

		if (!s) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		if ((size_t)off >= len)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_buf(req, s + off,
				       len - (size_t)off < size ? len - (size_t)off : size);
		free(s);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	p->req = req;
	pthread_mutex_lock(&lock);
	snprintf(p->name, sizeof(p->name), "%s", name_of(ino) ? name_of(ino) : "");
	refresh_rule();
	f = fault_for(p->name, &ms);
	pthread_mutex_unlock(&lock);

	if (f == F_EIO) {
		p->err = EIO;
	} else if (!(p->buf = malloc(size ? size : 1))) {
		p->err = ENOMEM;
	} else {
		n = pread((int)fi->fh, p->buf, size, off);
		if (n < 0)
			p->err = errno;
		else
			p->len = f == F_SHORT ? (size_t)n / 2 : (size_t)n;
	}
	pthread_mutex_lock(&lock);
	nreads++;
	nbytes += p->len;
	nfailed += p->err != 0;
	p->stall = f == F_STALL;
	if (f != F_DELAY && f != F_STALL) {
		pthread_mutex_unlock(&lock);
		answer(p);
		return;
	}
	if (p->stall)
		ms = 0;
	if (inflight < conc) {
		start(p, (uint64_t)ms * 1000000ull);
	} else {
		p->due_ns = (uint64_t)ms; /* kept as ms until it starts */
		if (queued_tail)
			queued_tail->next = p;
		else
			queued = p;
		queued_tail = p;
	}
	pthread_mutex_unlock(&lock);
}

/* Answers delayed reads when due; stalled ones once their rule is gone. */
static void *timer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		uint64_t t = now_ns();
		struct pending *done = NULL, **pp = &timed;
		long ms;

		refresh_rule();
		while (*pp && (*pp)->due_ns <= t) {
			struct pending *p = *pp;

			if (p->stall && fault_for(p->name, &ms) == F_STALL) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			p->next = done;
			done = p;
			inflight--;
			if (queued) { /* its place goes to the oldest waiting read */
				struct pending *q = queued;

				queued = q->next;
				if (!queued)
					queued_tail = NULL;
				start(q, (uint64_t)q->due_ns * 1000000ull);
			}
		}
		if (done) {
			pthread_mutex_unlock(&lock);
			while (done) {
				struct pending *n = done->next;
				answer(done);
				done = n;
			}
			pthread_mutex_lock(&lock);
			continue;
		}
		{
			/* sleep until the first due read, at most 20 ms (stalls) */
			struct timespec ts;
			uint64_t wait = 20000000ull;
			struct pending *first = timed;

			while (first && first->stall)
				first = first->next;
			if (first && first->due_ns > t && first->due_ns - t < wait)
				wait = first->due_ns - t;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)(wait % 1000000000ull);
			ts.tv_sec += (time_t)(wait / 1000000000ull) + ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&wake, &lock, &ts);
		}
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void ff_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* --max-background: more asynchronous reads at once from the kernel;
	 * else libfuse's default stands */
	if (max_bg) {
		conn->max_background = max_bg > 65535 ? 65535 : max_bg;
		conn->congestion_threshold = conn->max_background;
	}
	told_bg = conn->max_background;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_DIO;
}

static const struct fuse_lowlevel_ops ops = {
	.init = ff_init,
	.lookup = ff_lookup,
	.getattr = ff_getattr,
	.readdir = ff_readdir,
	.open = ff_open,
	.release = ff_release,
	.read = ff_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc = NULL;
	struct fuse_session *se = NULL;
	const char *mnt;
	pthread_t tid;
	int rc = 1;

	if (argc < 4) {
		fprintf(stderr, "usage: faultfs SOURCE_DIR MOUNTPOINT CONTROL_FILE [--conc=N] "
				"[--max-background=N] [--cached] [FUSE options]\n");
		return 2;
	}
	source = realpath(argv[1], NULL);
	mnt = argv[2];
	control = argv[3];
	if (!source) {
		perror(argv[1]);
		return 1;
	}
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-oro"))
		return 1;
	for (int i = 4; i < argc; i++) {
		if (strncmp(argv[i], "--conc=", 7) == 0)
			conc = (unsigned)strtoul(argv[i] + 7, NULL, 10);
		else if (strncmp(argv[i], "--max-background=", 17) == 0)
			max_bg = (unsigned)strtoul(argv[i] + 17, NULL, 10);
		else if (strcmp(argv[i], "--cached") == 0)
			cached = true;
		else if (fuse_opt_add_arg(&args, argv[i]))
			return 1;
	}
	if (!conc)
		conc = 1;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt))
		goto out;
	if (pthread_create(&tid, NULL, timer, NULL) != 0)
		goto out_unmount;
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_stop;
	fuse_loop_cfg_set_max_threads(lc, 8);
	rc = fuse_session_loop_mt(se, lc) ? 1 : 0;
	fuse_loop_cfg_destroy(lc);
out_stop:
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(tid, NULL);
out_unmount:
	fuse_session_unmount(se);
out:
	if (se) {
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
	}
	fuse_opt_free_args(&args);
	return rc;
}
