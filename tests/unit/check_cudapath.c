/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cudapath.c — the daemon's side of the CUDA path (fs/cudapath.h)
 * through the host double of the CUDA runtime (tests/cuda/cudart_double.c,
 * whose "device memory" is shared memory named in its IPC handle): a
 * runtime that cannot be loaded, or a device the machine lacks, is one
 * line; pinned copies keep their bytes and are reused; a copy lands in
 * the slot's buffer, whole, once waited for, and its handle names it; a
 * copy from memory that is not pinned fails with a line; the descriptor's
 * length depends only on the geometry; the counters; threads pinning and
 * copying at once.
 */
#include "cudapath.h"

#include "fstest.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAGIC "bfs-cuda-double:"

static struct bfs_cudapath *start(unsigned pool)
{
	struct bfs_cudapath *cp = NULL;
	char err[400];

	ck_assert_int_eq(setenv("BATCHFS_CUDART", CUDA_DOUBLE, 1), 0);
	ck_assert_msg(bfs_cudapath_load(&cp, 0, pool, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(bfs_cudapath_init(cp, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(bfs_cudapath_pool(cp), pool);
	ck_assert_int_eq(bfs_cudapath_device(cp), 0);
	return cp;
}

/* The n bytes of device memory a handle (hex) names, as another process
 * would map them (the double's handle: MAGIC and a shared memory name). */
static void check_device_bytes(const char *hex, const void *want, size_t n)
{
	char h[BFS_CUDA_HANDLE_HEX / 2 + 1] = { 0 };
	int fd;
	void *p;

	ck_assert_uint_eq(strlen(hex), BFS_CUDA_HANDLE_HEX);
	for (size_t i = 0; i < BFS_CUDA_HANDLE_HEX / 2; i++) {
		unsigned v;

		ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
		h[i] = (char)v;
	}
	ck_assert_msg(strncmp(h, MAGIC, strlen(MAGIC)) == 0, "not the double's handle");
	fd = shm_open(h + strlen(MAGIC), O_RDONLY, 0);
	ck_assert_int_ge(fd, 0);
	p = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert(memcmp(p, want, n) == 0);
	munmap(p, n);
	close(fd);
}

START_TEST(no_runtime_or_no_such_device_is_one_line)
{
	struct bfs_cudapath *cp = NULL;
	char err[400] = "";

	ck_assert_int_eq(setenv("BATCHFS_CUDART", "/nonexistent/libcudart-none.so", 1), 0);
	ck_assert_int_ne(bfs_cudapath_load(&cp, 0, 2, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "libcudart-none.so"));
	ck_assert_ptr_null(strchr(err, '\n'));
	ck_assert_int_eq(setenv("BATCHFS_CUDART", CUDA_DOUBLE, 1), 0);
	ck_assert_int_eq(bfs_cudapath_load(&cp, 3, 2, err, sizeof(err)), 0);
	ck_assert_int_ne(bfs_cudapath_init(cp, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, "device 3") != NULL, "%s", err);
	bfs_cudapath_free(cp);
	bfs_cudapath_free(NULL);
}
END_TEST

START_TEST(pinned_copies_land_in_the_slot)
{
	struct bfs_cudapath *cp = start(2);
	struct bfs_cudapath_stats st;
	char hex[BFS_CUDA_HANDLE_HEX + 1], hex2[BFS_CUDA_HANDLE_HEX + 1], err[400];
	size_t n = 3u << 20, m = 5000;
	uint8_t *a = malloc(n), *b = malloc(m), *want_a = malloc(n), *want_b = malloc(m);
	uint8_t plain[64] = { 1 };

	for (size_t i = 0; i < n; i++)
		want_a[i] = a[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < m; i++)
		want_b[i] = b[i] = (uint8_t)(i * 13 + 1);
	/* pinned copies keep the bytes */
	ck_assert_int_eq(bfs_cudapath_pin(cp, &a, n), 0);
	ck_assert_int_eq(bfs_cudapath_pin(cp, &b, m), 0);
	ck_assert(memcmp(a, want_a, n) == 0);
	ck_assert(memcmp(b, want_b, m) == 0);
	bfs_cudapath_stats(cp, &st);
	ck_assert_uint_eq(st.pinned, 2);
	ck_assert_uint_ge(st.pinned_bytes, n + m);
	/* a copy, waited for, is in the buffer its handle names */
	ck_assert_int_eq(bfs_cudapath_copy(cp, 0, a, n, hex, err, sizeof(err)), 0);
	ck_assert_int_eq(bfs_cudapath_copy(cp, 1, b, m, hex2, err, sizeof(err)), 0);
	ck_assert_str_ne(hex, hex2);
	ck_assert_int_eq(bfs_cudapath_wait(cp, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(bfs_cudapath_wait(cp, 1, err, sizeof(err)), 0);
	check_device_bytes(hex, want_a, n);
	check_device_bytes(hex2, want_b, m);
	/* a smaller copy into slot 0 keeps its buffer (and handle) */
	ck_assert_int_eq(bfs_cudapath_copy(cp, 0, b, m, hex2, err, sizeof(err)), 0);
	ck_assert_int_eq(bfs_cudapath_wait(cp, 0, err, sizeof(err)), 0);
	ck_assert_str_eq(hex, hex2);
	check_device_bytes(hex, want_b, m);
	bfs_cudapath_stats(cp, &st);
	ck_assert_uint_eq(st.copies, 3);
	ck_assert_uint_eq(st.bytes, n + 2 * m);
	ck_assert_uint_ge(st.device_bytes, n + m);
	/* memory that is not pinned: refused, one line */
	ck_assert_int_eq(bfs_cudapath_copy(cp, 1, plain, sizeof(plain), hex2, err, sizeof(err)),
			 -EIO);
	ck_assert_ptr_nonnull(strstr(err, "CUDA device 0: "));
	ck_assert_ptr_null(strchr(err, '\n'));
	(void)bfs_cudapath_wait(cp, 1, err, sizeof(err));
	/* unpinned blocks are reused by the next pin */
	bfs_cudapath_unpin(cp, a);
	bfs_cudapath_stats(cp, &st);
	ck_assert_uint_eq(st.pinned, 1);
	{
		uint64_t allocs = st.host_allocs;
		uint8_t *c = malloc(n);

		memset(c, 9, n);
		ck_assert_int_eq(bfs_cudapath_pin(cp, &c, n), 0);
		ck_assert_uint_eq(c[n - 1], 9);
		bfs_cudapath_stats(cp, &st);
		ck_assert_uint_eq(st.host_allocs, allocs);
		bfs_cudapath_unpin(cp, c);
	}
	bfs_cudapath_unpin(cp, b);
	free(want_a);
	free(want_b);
	bfs_cudapath_free(cp);
}
END_TEST

START_TEST(the_descriptor_is_sized_by_its_geometry)
{
	struct fstest t;
	struct bfs_geom *g = NULL;
	char hex[BFS_CUDA_HANDLE_HEX + 1];
	size_t a = 0, b = 0;
	char *d0, *d1;

	fstest_setup(&t, 100, FSTEST_RAGGED);
	ck_assert_int_eq(bfs_batcher_geom(&g, t.b[0], 0, 0), 0);
	memset(hex, 'f', BFS_CUDA_HANDLE_HEX);
	hex[BFS_CUDA_HANDLE_HEX] = 0;
	d0 = bfs_cudapath_describe(bfs_batcher_plan(t.b[0]), g, 0, NULL, &a);
	d1 = bfs_cudapath_describe(bfs_batcher_plan(t.b[0]), g, 0, hex, &b);
	ck_assert_ptr_nonnull(d0);
	ck_assert_ptr_nonnull(d1);
	ck_assert_uint_eq(a, b);
	ck_assert_uint_eq(strlen(d1), b);
	ck_assert_ptr_nonnull(strstr(d1, hex));
	for (size_t i = 0; i < bfs_batcher_plan(t.b[0])->ntensors; i++) {
		char key[256];

		snprintf(key, sizeof(key), "\"%s\"", bfs_batcher_plan(t.b[0])->t[i].name);
		ck_assert_msg(strstr(d1, key) != NULL, "%s: not described", key);
	}
	free(d0);
	free(d1);
	bfs_geom_free(g);
	fstest_teardown(&t);
}
END_TEST

struct worker {
	struct bfs_cudapath *cp;
	unsigned slot;
	int bad;
	char why[400]; /* the first failure's line, for the assertion */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char hex[BFS_CUDA_HANDLE_HEX + 1], err[400];

	for (unsigned i = 0; i < 20; i++) {
		size_t n = 1000 + 4096 * (size_t)(i % 5);
		uint8_t *buf = malloc(n);

		memset(buf, (int)(w->slot + i), n);
		if (bfs_cudapath_pin(w->cp, &buf, n) != 0) {
			if (!w->bad++)
				snprintf(w->why, sizeof(w->why), "pin %u of %zu bytes failed", i,
					 n);
			free(buf);
			continue;
		}
		err[0] = '\0';
		if (bfs_cudapath_copy(w->cp, w->slot, buf, n, hex, err, sizeof(err)) != 0 ||
		    bfs_cudapath_wait(w->cp, w->slot, err, sizeof(err)) != 0) {
			if (!w->bad++)
				snprintf(w->why, sizeof(w->why), "copy %u: %s", i, err);
		}
		bfs_cudapath_unpin(w->cp, buf);
	}
	return NULL;
}

START_TEST(threads_pin_and_copy_at_once)
{
	struct bfs_cudapath *cp = start(4);
	struct worker w[4];
	pthread_t th[4];
	struct bfs_cudapath_stats st;

	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct worker){ .cp = cp, .slot = i, .why = "" };
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(w[i].bad == 0, "worker %u: %d failed, first: %s", i, w[i].bad,
			      w[i].why);
	}
	bfs_cudapath_stats(cp, &st);
	ck_assert_uint_eq(st.copies, 80);
	ck_assert_uint_eq(st.pinned, 0);
	bfs_cudapath_free(cp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cudapath");
	TCase *tc = tcase_create("cudapath");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, no_runtime_or_no_such_device_is_one_line);
	tcase_add_test(tc, pinned_copies_land_in_the_slot);
	tcase_add_test(tc, the_descriptor_is_sized_by_its_geometry);
	tcase_add_test(tc, threads_pin_and_copy_at_once);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
