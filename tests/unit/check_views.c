/*
 * check_views.c — the epoch views of all/ (fs/views.h) over a real dataset:
 * one view per rank without ragged tensors, one per epoch with them, the
 * least recently used out first, a reference outliving its place in the
 * table, and many threads asking at once.
 */
#include "views.h"

#include "crc32c.h"
#include "dataset.h"
#include "pbtest.h"
#include "schema.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORDS 300
#define BATCH 37
#define KEEP 4

static const char fixed_schema[] = "{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]}}}";
static const char ragged_schema[] =
	"{\"features\": {\"x\": {\"kind\": \"float\", \"shape\": [2]},"
	" \"tok\": {\"kind\": \"int64\", \"shape\": [-1], \"ragged\": true}}}";

static void put_record(FILE *f, const struct pb *m)
{
	uint8_t hdr[12], tail[4];
	uint64_t len = m->n;
	uint32_t c;

	memcpy(hdr, &len, 8);
	c = bfs_crc32c_mask(bfs_crc32c(0, hdr, 8));
	memcpy(hdr + 8, &c, 4);
	c = bfs_crc32c_mask(bfs_crc32c(0, m->d, m->n));
	memcpy(tail, &c, 4);
	ck_assert(fwrite(hdr, 1, 12, f) == 12 && fwrite(m->d, 1, m->n, f) == m->n &&
		  fwrite(tail, 1, 4, f) == 4);
}

/* x float [2]; tok: 0..5 int64 values, so that epochs differ in totals */
static void write_records(const char *path)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	for (long i = 0; i < RECORDS; i++) {
		struct pb feats = { 0 }, fx, ft, ex;
		float x[2] = { (float)i, (float)-i };
		int64_t v[6] = { i, i + 1, i + 2, i + 3, i + 4, i + 5 };

		fx = pb_float_feature(x, 2, true);
		ft = pb_int_feature(v, (size_t)(i * 7 % 6), true);
		pb_add(&feats, "x", &fx);
		pb_add(&feats, "tok", &ft);
		ex = pb_example(&feats, NULL);
		put_record(f, &ex);
	}
	ck_assert_int_eq(fclose(f), 0);
}

/* A dataset, its batcher and a second rank's, under one of the schemas. */
struct fixture {
	char path[64];
	struct bfs_dataset *ds;
	struct bfs_schema *sc;
	struct bfs_batcher *b[2];
};

static void setup(struct fixture *fx, const char *schema)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO };
	struct bfs_batcher_opts bopt = { .batch_size = BATCH,
					 .seed = 9,
					 .shuffle = true,
					 .world = 2,
					 .verify = true,
					 .jobs = 1,
					 .chunk_rows = 50 };
	int fd;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->path, sizeof(fx->path), "/tmp/check_views_XXXXXX");
	fd = mkstemp(fx->path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_records(fx->path);
	ck_assert_int_eq(bfs_dataset_open(&fx->ds, fx->path, &dopt), 0);
	ck_assert_msg(bfs_schema_from_json(&fx->sc, schema, strlen(schema)) == 0, "%s",
		      bfs_err_msg());
	ck_assert_msg(bfs_batcher_new(&fx->b[0], fx->ds, fx->sc, &bopt) == 0, "%s", bfs_err_msg());
	ck_assert_int_eq(bfs_batcher_new_rank(&fx->b[1], fx->b[0], 1), 0);
}

static void teardown(struct fixture *fx)
{
	bfs_batcher_free(fx->b[1]);
	bfs_batcher_free(fx->b[0]);
	bfs_schema_free(fx->sc);
	bfs_dataset_close(fx->ds);
	unlink(fx->path);
}

/* The rows of (rank, epoch)'s view, made afresh. */
static uint64_t rows_of(struct fixture *fx, uint64_t rank, uint64_t epoch)
{
	struct bfs_epoch_view *v = NULL;
	uint64_t rows;

	ck_assert_int_eq(bfs_epoch_view_new(&v, fx->b[rank], epoch), 0);
	rows = v->rows;
	bfs_epoch_view_free(v);
	return rows;
}

static struct bfs_view_ref *get(struct bfs_views *vs, uint64_t rank, uint64_t epoch)
{
	struct bfs_view_ref *r = NULL;

	ck_assert_int_eq(bfs_views_get(&r, vs, rank, epoch), 0);
	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(r->v);
	return r;
}

START_TEST(without_ragged_tensors_a_rank_has_one_view)
{
	struct fixture fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *a, *b, *c;

	setup(&fx, fixed_schema);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	a = get(vs, 0, 0);
	b = get(vs, 0, 7);
	ck_assert_ptr_eq(a, b);
	c = get(vs, 1, 7); /* another rank: its own */
	ck_assert_ptr_ne(a, c);
	ck_assert_uint_eq(c->v->rows, rows_of(&fx, 1, 0));
	for (uint64_t e = 0; e < 3 * KEEP; e++) { /* epochs never push it out */
		struct bfs_view_ref *r = get(vs, 0, e);

		ck_assert_ptr_eq(r, a);
		bfs_views_put(vs, r);
	}
	bfs_views_put(vs, a);
	bfs_views_put(vs, b);
	bfs_views_put(vs, c);
	bfs_views_put(vs, NULL);
	bfs_views_free(vs);
	bfs_views_free(NULL);
	teardown(&fx);
}
END_TEST

START_TEST(with_ragged_tensors_each_epoch_has_its_view)
{
	struct fixture fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *r[3];

	setup(&fx, ragged_schema);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	r[0] = get(vs, 0, 0);
	r[1] = get(vs, 0, 1);
	r[2] = get(vs, 0, 1);
	ck_assert_ptr_ne(r[0], r[1]);
	ck_assert_ptr_eq(r[1], r[2]);
	ck_assert_uint_eq(r[0]->v->rows, rows_of(&fx, 0, 0));
	/* the totals of the chunks depend on the epoch's order */
	ck_assert_uint_eq(r[0]->v->nchunks, r[1]->v->nchunks);
	ck_assert(memcmp(r[0]->v->prefix, r[1]->v->prefix,
			 (r[0]->v->nchunks + 1) * r[0]->v->nslots * sizeof(uint64_t)) != 0);
	for (int i = 0; i < 3; i++)
		bfs_views_put(vs, r[i]);
	bfs_views_free(vs);
	teardown(&fx);
}
END_TEST

/* The table holds KEEP views: the least recently asked for goes first, and
 * a reference held keeps its view whole after it left the table. */
START_TEST(the_least_recently_used_view_goes_first)
{
	struct fixture fx;
	struct bfs_views *vs = NULL;
	struct bfs_view_ref *held[KEEP], *r;

	setup(&fx, ragged_schema);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	for (uint64_t e = 0; e < KEEP; e++)
		held[e] = get(vs, 0, e);
	bfs_views_put(vs, get(vs, 0, 0)); /* epoch 0 used again: epoch 1 is the oldest */
	bfs_views_put(vs, get(vs, 0, KEEP)); /* pushes epoch 1 out */
	r = get(vs, 0, 0);
	ck_assert_ptr_eq(r, held[0]);
	bfs_views_put(vs, r);
	r = get(vs, 0, 1); /* made again; the old one lives on in held[1] */
	ck_assert_ptr_ne(r, held[1]);
	ck_assert_uint_eq(r->v->rows, held[1]->v->rows);
	ck_assert_int_eq(memcmp(r->v->prefix, held[1]->v->prefix,
				(r->v->nchunks + 1) * r->v->nslots * sizeof(uint64_t)),
			 0);
	bfs_views_put(vs, r);
	for (uint64_t e = 0; e < KEEP; e++)
		bfs_views_put(vs, held[e]);
	/* many epochs through a table of KEEP: nothing leaks (ASan) */
	for (uint64_t e = 0; e < 5 * KEEP; e++)
		bfs_views_put(vs, get(vs, e % 2, e));
	bfs_views_free(vs);
	teardown(&fx);
}
END_TEST

#define THREADS 8
#define GETS 400

struct asker {
	struct bfs_views *vs;
	const uint64_t *rows; /* [2][EPOCHS] */
	unsigned seed;
};

#define EPOCHS (2 * KEEP)

static void *ask_many(void *arg)
{
	struct asker *a = arg;
	struct bfs_view_ref *held = NULL;

	for (int i = 0; i < GETS; i++) {
		unsigned k = (a->seed + (unsigned)i * 40503u) % (2 * EPOCHS);
		uint64_t rank = k % 2, epoch = k / 2;
		struct bfs_view_ref *r = NULL;

		ck_assert_int_eq(bfs_views_get(&r, a->vs, rank, epoch), 0);
		ck_assert_uint_eq(r->v->rows, a->rows[rank * EPOCHS + epoch]);
		/* hold every third one across the next gets */
		if (i % 3 == 0) {
			bfs_views_put(a->vs, held);
			held = r;
		} else {
			bfs_views_put(a->vs, r);
		}
	}
	bfs_views_put(a->vs, held);
	return NULL;
}

START_TEST(threads_share_the_views)
{
	struct fixture fx;
	struct bfs_views *vs = NULL;
	struct asker a[THREADS];
	pthread_t tid[THREADS];
	uint64_t rows[2 * EPOCHS];

	setup(&fx, ragged_schema);
	for (uint64_t k = 0; k < 2 * EPOCHS; k++)
		rows[k] = rows_of(&fx, k / EPOCHS, k % EPOCHS);
	ck_assert_int_eq(bfs_views_new(&vs, (const struct bfs_batcher *const *)fx.b, 2, KEEP), 0);
	for (int i = 0; i < THREADS; i++) {
		a[i] = (struct asker){ .vs = vs, .rows = rows, .seed = (unsigned)i * 7u };
		ck_assert_int_eq(pthread_create(&tid[i], NULL, ask_many, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	bfs_views_free(vs);
	teardown(&fx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("views");
	TCase *tc = tcase_create("views");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, without_ragged_tensors_a_rank_has_one_view);
	tcase_add_test(tc, with_ragged_tensors_each_epoch_has_its_view);
	tcase_add_test(tc, the_least_recently_used_view_goes_first);
	tcase_add_test(tc, threads_share_the_views);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
