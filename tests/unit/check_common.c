/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for decoder/util/common.c: bfs_write_file_atomic, the one way a
 * cache file is written (index, index pack, counts, schema); and
 * bfs_sorted_u64_floor, the search of the index packs' and counts packs'
 * directory groups; decoder/util/cachehdr.c, the header those cache files
 * begin with; and decoder/util/workers.c, the life of a pool of threads.
 *
 * write(2) and writev(2) are wrapped below: while `chop` is set, a call on
 * a file under the test's directory first fails with EINTR, then writes at
 * most CHOP bytes, so that the helper's resumption is what is tested. */
#include "testfiles.h"
#include "cachehdr.h"
#include "common.h"
#include "crc32c.h"
#include "workers.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHOP 5

static char dir[128];
static bool chop;
static unsigned chopped_calls, eintr_calls;

/* Is fd a file under dir (the temporary being written)? */
static bool ours(int fd)
{
	char link[64], target[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = '\0';
	return strncmp(target, dir, strlen(dir)) == 0;
}

/* Every other call on our file fails with EINTR (nothing written). */
static bool interrupt_now(void)
{
	static unsigned calls;

	if (calls++ % 2)
		return false;
	eintr_calls++;
	errno = EINTR;
	return true;
}

ssize_t write(int fd, const void *p, size_t n);
ssize_t writev(int fd, const struct iovec *iov, int cnt);

ssize_t write(int fd, const void *p, size_t n)
{
	if (chop && ours(fd)) {
		if (interrupt_now())
			return -1;
		chopped_calls++;
		if (n > CHOP)
			n = CHOP;
	}
	return syscall(SYS_write, fd, p, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct iovec cut[8];
	size_t left = CHOP;
	int k = 0;

	if (!chop || !ours(fd))
		return syscall(SYS_writev, fd, iov, cnt);
	if (interrupt_now())
		return -1;
	chopped_calls++;
	/* the first CHOP bytes of the pieces, whatever their lengths */
	for (int i = 0; i < cnt && left && k < (int)BFS_ARRAY_SIZE(cut); i++) {
		size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;

		cut[k++] = (struct iovec){ iov[i].iov_base, l };
		left -= l;
	}
	return syscall(SYS_writev, fd, cut, k);
}

/* n pieces of assorted lengths (zero among them) over buf; their bytes
 * concatenated in *want (malloc'd), *wlen bytes. */
static struct iovec *pieces(size_t n, uint8_t *buf, uint8_t **want, size_t *wlen)
{
	struct iovec *iov = malloc(n * sizeof(*iov));
	size_t off = 0;

	ck_assert_ptr_nonnull(iov);
	for (size_t i = 0; i < n; i++) {
		size_t len = (i * 7) % 13; /* 0 .. 12 */

		for (size_t j = 0; j < len; j++)
			buf[off + j] = (uint8_t)(i * 31 + j);
		iov[i] = (struct iovec){ buf + off, len };
		off += len;
	}
	*want = malloc(off ? off : 1);
	ck_assert_ptr_nonnull(*want);
	memcpy(*want, buf, off);
	*wlen = off;
	return iov;
}

/* Files in dir whose name holds ".tmp.". */
static unsigned temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL)
		n += strstr(de->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

static void check_file(const char *path, const uint8_t *want, size_t wlen)
{
	size_t len;
	uint8_t *got = test_slurp(path, &len);

	ck_assert_uint_eq(len, wlen);
	ck_assert(memcmp(got, want, len) == 0);
	free(got);
}

START_TEST(more_pieces_than_iov_max_land_in_order_mode_0644)
{
	const size_t n = 3 * IOV_MAX + 5;
	uint8_t *buf = malloc(n * 13), *want;
	struct iovec *iov;
	char path[256];
	struct stat st;
	size_t wlen;

	test_mkdir(dir, sizeof(dir), "check_common");
	snprintf(path, sizeof(path), "%s/f.idx", dir);
	iov = pieces(n, buf, &want, &wlen);
	umask(077); /* the file is 0644 whatever the umask */
	ck_assert_int_eq(bfs_write_file_atomic(path, iov, n), 0);
	check_file(path, want, wlen);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
	ck_assert_uint_eq(temporaries(), 0);
	/* over an existing file: replaced (a new inode), no piece at all: empty */
	test_spit(path, (const uint8_t *)"old", 3);
	ck_assert_int_eq(bfs_write_file_atomic(path, iov, 0), 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	free(iov);
	free(want);
	free(buf);
	test_rmdir(dir);
}
END_TEST

START_TEST(short_writes_and_eintr_are_resumed)
{
	const size_t n = IOV_MAX + 300;
	uint8_t *buf = malloc(n * 13), *want;
	struct iovec *iov;
	char path[256];
	size_t wlen;

	test_mkdir(dir, sizeof(dir), "check_common");
	snprintf(path, sizeof(path), "%s/f.idx", dir);
	iov = pieces(n, buf, &want, &wlen);
	chop = true;
	ck_assert_int_eq(bfs_write_file_atomic(path, iov, n), 0);
	chop = false;
	check_file(path, want, wlen);
	/* every call wrote CHOP bytes at most, and half of them failed */
	ck_assert_uint_ge(chopped_calls, wlen / CHOP);
	ck_assert_uint_ge(eintr_calls, wlen / CHOP);
	ck_assert_uint_eq(temporaries(), 0);
	free(iov);
	free(want);
	free(buf);
	test_rmdir(dir);
}
END_TEST

START_TEST(a_failure_leaves_the_old_file_and_no_temporary)
{
	static const uint8_t big[20000];
	struct iovec iov = { (void *)(uintptr_t)big, sizeof(big) };
	struct rlimit rl, was;
	char path[256], sub[256], longname[PATH_MAX + 64];

	test_mkdir(dir, sizeof(dir), "check_common");
	snprintf(path, sizeof(path), "%s/f.idx", dir);
	test_spit(path, (const uint8_t *)"old", 3);

	/* a write that stops half-way (a file size limit: EFBIG after a
	 * short write) */
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &was), 0);
	rl = was;
	rl.rlim_cur = 8192; /* the soft limit only: raised back without privilege */
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	ck_assert_int_eq(bfs_write_file_atomic(path, &iov, 1), -EFBIG);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &was), 0);
	check_file(path, (const uint8_t *)"old", 3);
	ck_assert_uint_eq(temporaries(), 0);

	/* the rename fails: a directory (not empty) holds the name */
	snprintf(sub, sizeof(sub), "%s/d.idx", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	snprintf(longname, sizeof(longname), "%s/keep", sub);
	test_spit(longname, (const uint8_t *)"x", 1);
	ck_assert_int_eq(bfs_write_file_atomic(sub, &iov, 1), -EISDIR);
	ck_assert_uint_eq(temporaries(), 0);

	/* no directory to hold the temporary; a name too long for it */
	snprintf(sub, sizeof(sub), "%s/none/f.idx", dir);
	ck_assert_int_eq(bfs_write_file_atomic(sub, &iov, 1), -ENOENT);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(bfs_write_file_atomic(longname, &iov, 1), -ENAMETOOLONG);
	check_file(path, (const uint8_t *)"old", 3);
	test_rmdir(dir);
}
END_TEST

/* ---- bfs_sorted_u64_floor ------------------------------------------------ */

struct grp {
	char *name; /* the key not first: off matters */
	uint64_t dirhash;
	int tag;
};

/* The answer by a walk: the last record whose key is <= key, else 0. */
static size_t floor_by_walk(const struct grp *g, size_t n, uint64_t key)
{
	size_t at = 0;

	for (size_t i = 0; i < n; i++)
		if (g[i].dirhash <= key)
			at = i;
	return at;
}

START_TEST(floor_finds_the_last_key_at_or_below)
{
	struct grp g[40];
	uint64_t rnd = bfs_rand_seed(7);

	/* no records; a key below them all */
	ck_assert_uint_eq(
		bfs_sorted_u64_floor(NULL, 0, sizeof(*g), offsetof(struct grp, dirhash), 5), 0);
	for (size_t n = 1; n <= BFS_ARRAY_SIZE(g); n++) {
		uint64_t h = 10;

		for (size_t i = 0; i < n; i++) {
			h += bfs_rand_next(&rnd) % 3; /* repeats too */
			g[i] = (struct grp){ NULL, h, (int)i };
		}
		for (uint64_t key = 0; key <= h + 2; key++)
			ck_assert_uint_eq(bfs_sorted_u64_floor(g, n, sizeof(*g),
							       offsetof(struct grp, dirhash), key),
					  floor_by_walk(g, n, key));
		/* every key present finds a record holding it */
		for (size_t i = 0; i < n; i++)
			ck_assert_uint_eq(
				g[bfs_sorted_u64_floor(g, n, sizeof(*g),
						       offsetof(struct grp, dirhash), g[i].dirhash)]
					.dirhash,
				g[i].dirhash);
	}
	/* the top of the range */
	g[0].dirhash = 1;
	g[1].dirhash = UINT64_MAX;
	ck_assert_uint_eq(
		bfs_sorted_u64_floor(g, 2, sizeof(*g), offsetof(struct grp, dirhash), UINT64_MAX),
		1);
	ck_assert_uint_eq(bfs_sorted_u64_floor(g, 2, sizeof(*g), offsetof(struct grp, dirhash),
					       UINT64_MAX - 1),
			  0);
}
END_TEST

/* ---- bfs_cachehdr ---------------------------------------------------------- */

struct fmt_hdr {
	struct bfs_cachehdr head;
	uint32_t a;
	uint64_t b;
	uint8_t reserved[12];
	uint32_t hdr_crc;
};
_Static_assert(sizeof(struct fmt_hdr) == 40, "a 40-byte header");

static bool hdr_ok(const struct fmt_hdr *h, uint64_t file_size, char *why, size_t cap)
{
	return bfs_cachehdr_check(h, sizeof(*h), file_size, "BFSTST02", "test file", "test", why,
				  cap);
}

START_TEST(cachehdr_is_begun_sealed_and_checked)
{
	struct fmt_hdr h, bad;
	char why[160];

	memset(&h, 0xee, sizeof(h));
	bfs_cachehdr_init(&h, sizeof(h), "BFSTST02");
	ck_assert_mem_eq(h.head.magic, "BFSTST02", 8);
	ck_assert_uint_eq(h.head.hdr_bytes, sizeof(h));
	ck_assert_uint_eq(h.a, 0);
	ck_assert_uint_eq(h.b, 0);
	ck_assert_uint_eq(h.hdr_crc, 0);
	h.a = 7;
	h.b = 1ull << 40;
	bfs_cachehdr_seal(&h, sizeof(h));
	ck_assert_uint_eq(h.hdr_crc, bfs_crc32c(0, &h, offsetof(struct fmt_hdr, hdr_crc)));
	ck_assert(hdr_ok(&h, 4096, why, sizeof(why)));
	ck_assert(hdr_ok(&h, sizeof(h), why, sizeof(why)));
	ck_assert(bfs_cachehdr_check(&h, sizeof(h), sizeof(h), "BFSTST02", "x", "x", NULL, 0));

	/* each check, in its order, with its message */
	ck_assert(!hdr_ok(&h, 7, why, sizeof(why)));
	ck_assert_str_eq(why, "not a batchfs test file");
	bad = h;
	memcpy(bad.head.magic, "BFSIDX03", 8);
	ck_assert(!hdr_ok(&bad, 4096, why, sizeof(why)));
	ck_assert_str_eq(why, "not a batchfs test file");
	bad = h;
	memcpy(bad.head.magic, "BFSTST01", 8);
	ck_assert(!hdr_ok(&bad, 4096, why, sizeof(why)));
	ck_assert_str_eq(why, "old test format BFSTST01 (this batchfs writes BFSTST02)");
	ck_assert(!hdr_ok(&h, sizeof(h) - 1, why, sizeof(why)));
	ck_assert_str_eq(why, "truncated (39 bytes, the header alone is 40)");
	ck_assert(!hdr_ok(&h, 8, why, sizeof(why)));
	ck_assert_str_eq(why, "truncated (8 bytes, the header alone is 40)");
	for (size_t i = 0; i < sizeof(h); i++) {
		bad = h;
		((uint8_t *)&bad)[i] ^= 0x10;
		if (i < 8)
			continue; /* the magic: told above */
		ck_assert_msg(!hdr_ok(&bad, 4096, why, sizeof(why)), "byte %zu flipped", i);
		ck_assert_str_eq(why, "corrupt header (checksum mismatch)");
	}
	/* a message longer than its room is cut, not overrun */
	ck_assert(!hdr_ok(&h, 7, why, 10));
	ck_assert_str_eq(why, "not a bat");
}
END_TEST

/* ---- bfs_workers ----------------------------------------------------------- */

/* An owner as the pools' owners are: a lock, a stop flag, a condition its
 * threads wait on, and what they did. */
struct owner {
	pthread_mutex_t lock;
	pthread_cond_t work, other;
	bool stop; /* lock */
	unsigned waiting, ended; /* lock */
	bool blocked_ok; /* lock: every thread had the stop signals blocked */
	struct bfs_workers w;
	bool hang; /* detached: the threads do not end until released */
	bool release; /* lock */
};

static void owner_init(struct owner *o)
{
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->work, NULL);
	pthread_cond_init(&o->other, NULL);
	o->blocked_ok = true;
}

static void owner_destroy(struct owner *o)
{
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->work);
	pthread_cond_destroy(&o->other);
}

static void *owner_thread(void *arg)
{
	struct owner *o = arg;
	sigset_t now;

	pthread_sigmask(SIG_SETMASK, NULL, &now);
	pthread_mutex_lock(&o->lock);
	if (!sigismember(&now, SIGTERM) || !sigismember(&now, SIGINT))
		o->blocked_ok = false;
	o->waiting++;
	while (!o->stop || (o->hang && !o->release))
		pthread_cond_wait(o->hang ? &o->other : &o->work, &o->lock);
	o->ended++;
	pthread_mutex_unlock(&o->lock);
	if (o->w.detached)
		bfs_workers_exit(&o->w);
	return NULL;
}

static void wait_waiting(struct owner *o, unsigned n)
{
	pthread_mutex_lock(&o->lock);
	while (o->waiting < n) {
		pthread_mutex_unlock(&o->lock);
		usleep(1000);
		pthread_mutex_lock(&o->lock);
	}
	pthread_mutex_unlock(&o->lock);
}

START_TEST(workers_start_stop_and_join)
{
	struct owner o;

	owner_init(&o);
	ck_assert_int_eq(bfs_workers_start(&o.w, 4, owner_thread, &o, 0, false), 0);
	ck_assert_uint_eq(o.w.n, 4);
	wait_waiting(&o, 4);
	ck_assert_uint_eq(o.ended, 0);
	bfs_workers_stop(&o.lock, &o.stop, &o.work, NULL);
	ck_assert(bfs_workers_join(&o.w, 0));
	ck_assert_uint_eq(o.ended, 4); /* joined: every one ended */
	ck_assert(o.stop);
	ck_assert(o.blocked_ok);
	ck_assert_ptr_null(o.w.tid);
	ck_assert(bfs_workers_join(&o.w, 0)); /* a second join: nothing */
	/* none to start: an error, w left empty */
	ck_assert_int_eq(bfs_workers_start(&o.w, 0, owner_thread, &o, 0, false), -EAGAIN);
	ck_assert_uint_eq(o.w.n, 0);
	ck_assert(bfs_workers_join(&o.w, 0));
	owner_destroy(&o);
}
END_TEST

START_TEST(detached_workers_are_waited_for_a_bounded_time)
{
	struct owner o;

	/* they end once stopped: all counted out */
	owner_init(&o);
	ck_assert_int_eq(bfs_workers_start(&o.w, 3, owner_thread, &o, 128 << 10, true), 0);
	wait_waiting(&o, 3);
	/* the second condition is the one they wait on: both are woken */
	o.hang = false;
	bfs_workers_stop(&o.lock, &o.stop, &o.other, &o.work);
	ck_assert(bfs_workers_join(&o.w, 5000000000ull));
	ck_assert_uint_eq(o.ended, 3);
	ck_assert(o.blocked_ok);
	owner_destroy(&o);

	/* one that does not end is left behind after the wait */
	owner_init(&o);
	o.hang = true;
	ck_assert_int_eq(bfs_workers_start(&o.w, 2, owner_thread, &o, 0, true), 0);
	wait_waiting(&o, 2);
	bfs_workers_stop(&o.lock, &o.stop, &o.work, NULL);
	ck_assert(!bfs_workers_join(&o.w, 20000000)); /* 20 ms */
	ck_assert_uint_eq(o.w.n, 2); /* kept: they still use it */
	pthread_mutex_lock(&o.lock);
	o.release = true;
	pthread_cond_broadcast(&o.other);
	pthread_mutex_unlock(&o.lock);
	ck_assert(bfs_workers_join(&o.w, 5000000000ull));
	ck_assert_uint_eq(o.ended, 2);
	owner_destroy(&o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("write_file_atomic");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, more_pieces_than_iov_max_land_in_order_mode_0644);
	tcase_add_test(tc, short_writes_and_eintr_are_resumed);
	tcase_add_test(tc, a_failure_leaves_the_old_file_and_no_temporary);
	suite_add_tcase(s, tc);
	tc = tcase_create("sorted_u64_floor");
	tcase_add_test(tc, floor_finds_the_last_key_at_or_below);
	suite_add_tcase(s, tc);
	tc = tcase_create("cachehdr");
	tcase_add_test(tc, cachehdr_is_begun_sealed_and_checked);
	suite_add_tcase(s, tc);
	tc = tcase_create("workers");
	tcase_add_test(tc, workers_start_stop_and_join);
	tcase_add_test(tc, detached_workers_are_waited_for_a_bounded_time);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
