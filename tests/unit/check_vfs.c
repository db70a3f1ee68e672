/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_vfs.c — a mount's namespace (fs/vfs.h) over a real plan: the
 * listings in their order, every listed name found again by lookup and by
 * its inode with the same node, inodes unique, ".." of each folder,
 * non-canonical and out-of-range names not found, files not folders,
 * batch-B.cuda only with the CUDA path and never in all/, epochs past the
 * listed ones found by name, rank folders.
 */
#include "vfs.h"

#include "fstest.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 296 /* 4 batches of 37 per rank (world=2) */

struct seen {
	uint64_t *ino;
	size_t n, cap;
	size_t cuda, npy, dirs;
};

static bool same(const struct bfs_vnode *a, const struct bfs_vnode *b)
{
	return a->type == b->type && a->ino == b->ino && a->rank == b->rank &&
	       a->epoch == b->epoch && (bfs_vnode_is_dir(a) || a->batch == b->batch) &&
	       a->tensor == b->tensor && a->all == b->all;
}

static void walk(const struct bfs_vfs *v, const struct bfs_vnode *dir, struct seen *s, int depth)
{
	struct bfs_vnode n, m;
	char name[256];
	uint64_t i;

	ck_assert_int_lt(depth, 8);
	for (i = 0; bfs_vfs_child(v, dir, i, &n, name, sizeof(name)) == 0; i++) {
		ck_assert_msg(bfs_vfs_lookup(v, dir, name, &m) == 0, "%s: not found", name);
		ck_assert_msg(same(&n, &m), "%s: lookup gives another node", name);
		ck_assert_int_eq(bfs_vfs_get(v, n.ino, &m), 0);
		ck_assert_msg(same(&n, &m), "%s: its inode gives another node", name);
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 256;
			s->ino = realloc(s->ino, s->cap * sizeof(*s->ino));
		}
		s->ino[s->n++] = n.ino;
		s->cuda += n.type == BFS_V_CUDA;
		s->npy += n.type == BFS_V_NPY;
		if (n.type == BFS_V_CUDA) {
			ck_assert(!n.all);
			ck_assert_uint_eq(n.batch, dir->batch);
		}
		if (bfs_vnode_is_dir(&n)) {
			s->dirs++;
			ck_assert_uint_eq(bfs_vfs_parent(v, &n), dir->ino);
			walk(v, &n, s, depth + 1);
		} else {
			ck_assert_int_eq(bfs_vfs_lookup(v, &n, "x", &m), -ENOTDIR);
			ck_assert_int_eq(bfs_vfs_child(v, &n, 0, &m, name, sizeof(name)), -ENOTDIR);
		}
	}
	ck_assert_int_eq(bfs_vfs_child(v, dir, i + 1, &n, name, sizeof(name)), -ENOENT);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void child_name(const struct bfs_vfs *v, const struct bfs_vnode *dir, uint64_t i,
		       const char *want)
{
	struct bfs_vnode n;
	char name[256];

	ck_assert_int_eq(bfs_vfs_child(v, dir, i, &n, name, sizeof(name)), 0);
	ck_assert_str_eq(name, want);
}

static void lookup(const struct bfs_vfs *v, const struct bfs_vnode *dir, const char *name,
		   struct bfs_vnode *out)
{
	ck_assert_msg(bfs_vfs_lookup(v, dir, name, out) == 0, "%s: not found", name);
}

static void absent(const struct bfs_vfs *v, const struct bfs_vnode *dir, const char *name)
{
	struct bfs_vnode n;

	ck_assert_msg(bfs_vfs_lookup(v, dir, name, &n) == -ENOENT, "%s: found", name);
}

START_TEST(the_tree_without_ranks)
{
	struct fstest t;
	struct bfs_vfs *v = NULL;
	const struct bfs_plan *plan;
	struct bfs_vnode root, ep, b, all, n;
	struct seen s = { 0 };
	uint64_t nb;
	bool cuda = _i == 1;

	fstest_setup(&t, RECORDS, FSTEST_RAGGED);
	plan = bfs_batcher_plan(t.b[0]);
	nb = bfs_batcher_nbatches(t.b[0]);
	ck_assert_uint_eq(nb, 4);
	ck_assert_int_eq(bfs_vfs_new(&v, plan, nb, 3, cuda, 0), 0);
	ck_assert_int_eq(bfs_vfs_get(v, 1, &root), 0);
	ck_assert_int_eq(root.type, BFS_V_ROOT);
	ck_assert_uint_eq(bfs_vfs_parent(v, &root), 1);
	child_name(v, &root, 0, "README.txt");
	child_name(v, &root, 1, "schema.json");
	child_name(v, &root, 2, "stats.json");
	child_name(v, &root, 3, "errors.txt");
	child_name(v, &root, 4, "epoch-0000");
	child_name(v, &root, 6, "epoch-0002");
	ck_assert_int_eq(bfs_vfs_child(v, &root, 7, &n, (char[64]){ 0 }, 64), -ENOENT);
	lookup(v, &root, "stats.json", &n);
	ck_assert_int_eq(n.type, BFS_V_STATS);
	lookup(v, &root, "epoch-0001", &ep);
	child_name(v, &ep, 0, "all");
	child_name(v, &ep, 1, "all.safetensors");
	child_name(v, &ep, 2, "batch-000000");
	child_name(v, &ep, 3, "batch-000000.safetensors");
	child_name(v, &ep, 9, "batch-000003.safetensors");
	lookup(v, &ep, "batch-000002", &b);
	ck_assert_uint_eq(b.batch, 2);
	ck_assert_uint_eq(b.epoch, 1);
	lookup(v, &b, "x.npy", &n);
	ck_assert_int_eq(n.type, BFS_V_NPY);
	ck_assert_str_eq(plan->t[n.tensor].name, "x");
	lookup(v, &ep, "all", &all);
	ck_assert(all.all);
	lookup(v, &all, "x.npy", &n);
	ck_assert(n.all);
	absent(v, &all, "batch-000004.cuda");
	if (cuda)
		lookup(v, &b, "batch-000002.cuda", &n);
	else
		absent(v, &b, "batch-000002.cuda");
	absent(v, &b, "batch-000001.cuda");
	/* names that are not the canonical ones, or past the end */
	absent(v, &root, "epoch-1");
	absent(v, &root, "epoch-00001");
	absent(v, &root, "epoch-000a");
	absent(v, &root, "rank-0000");
	absent(v, &root, "README");
	absent(v, &ep, "batch-000004");
	absent(v, &ep, "batch-4");
	absent(v, &ep, "batch-000001.npy");
	absent(v, &ep, "all.npy");
	absent(v, &b, "y.npy");
	absent(v, &b, "x");
	/* an epoch past the listed ones is there by name */
	lookup(v, &root, "epoch-0007", &n);
	ck_assert_uint_eq(n.epoch, 7);
	lookup(v, &n, "batch-000003", &b);
	ck_assert_int_eq(bfs_vfs_get(v, b.ino, &n), 0);
	ck_assert_uint_eq(n.epoch, 7);
	/* inodes that are no node */
	for (uint64_t ino = 6; ino < 16; ino++)
		ck_assert_int_eq(bfs_vfs_get(v, ino, &n), -ENOENT);
	ck_assert_int_eq(bfs_vfs_get(v, 0, &n), -ENOENT);
	/* the whole listed tree, every node found again, inodes unique */
	walk(v, &root, &s, 0);
	ck_assert_uint_eq(s.cuda, cuda ? 3 * nb : 0);
	ck_assert_uint_eq(s.npy, 3 * (nb + 1) * plan->ntensors);
	qsort(s.ino, s.n, sizeof(*s.ino), cmp_u64);
	for (size_t i = 1; i < s.n; i++)
		ck_assert_uint_ne(s.ino[i], s.ino[i - 1]);
	free(s.ino);
	bfs_vfs_free(v);
	fstest_teardown(&t);
}
END_TEST

START_TEST(rank_folders)
{
	struct fstest t;
	struct bfs_vfs *v = NULL;
	struct bfs_vnode root, r1, ep, b, n;
	struct seen s = { 0 };

	fstest_setup(&t, RECORDS, FSTEST_FIXED);
	ck_assert_int_eq(bfs_vfs_new(&v, bfs_batcher_plan(t.b[0]), 4, 2, false, 2), 0);
	ck_assert_int_eq(bfs_vfs_get(v, 1, &root), 0);
	child_name(v, &root, 4, "rank-0000");
	child_name(v, &root, 5, "rank-0001");
	ck_assert_int_eq(bfs_vfs_child(v, &root, 6, &n, (char[64]){ 0 }, 64), -ENOENT);
	absent(v, &root, "epoch-0000");
	absent(v, &root, "rank-0002");
	absent(v, &root, "rank-1");
	lookup(v, &root, "rank-0001", &r1);
	ck_assert_int_eq(r1.type, BFS_V_RANK);
	ck_assert_uint_eq(bfs_vfs_parent(v, &r1), 1);
	child_name(v, &r1, 1, "epoch-0001");
	lookup(v, &r1, "epoch-0001", &ep);
	ck_assert_uint_eq(ep.rank, 1);
	ck_assert_uint_eq(bfs_vfs_parent(v, &ep), r1.ino);
	lookup(v, &ep, "batch-000003", &b);
	lookup(v, &b, "x.npy", &n);
	ck_assert_uint_eq(n.rank, 1);
	ck_assert_uint_eq(n.epoch, 1);
	ck_assert_uint_eq(n.batch, 3);
	walk(v, &root, &s, 0);
	ck_assert_uint_eq(s.npy, 2 * 2 * (4 + 1));
	qsort(s.ino, s.n, sizeof(*s.ino), cmp_u64);
	for (size_t i = 1; i < s.n; i++)
		ck_assert_uint_ne(s.ino[i], s.ino[i - 1]);
	free(s.ino);
	bfs_vfs_free(v);
	fstest_teardown(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("vfs");
	TCase *tc = tcase_create("vfs");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, the_tree_without_ranks, 0, 2); /* without, with cuda */
	tcase_add_test(tc, rank_folders);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
