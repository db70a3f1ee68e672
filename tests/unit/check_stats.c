/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_stats.c — stats.json (fs/stats.h): the table (names once, members
 * after their object), the text to the byte for each group of keys, the
 * padding to a fixed size, the read counters from many threads, and the
 * records' worth of a read.
 */
#include "stats.h"

#include "cache.h"
#include "cudapath.h"
#include "cudapool.h"
#include "diskcache.h"
#include "errlog.h"
#include "fetch.h"
#include "ioplan.h"
#include "tensor.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(every_key_is_named_once)
{
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++) {
		const struct bfs_stat_key *k = &bfs_stat_keys[i];

		ck_assert_msg(k->name && *k->name, "key %zu has no name", i);
		ck_assert_msg(k->label && *k->label, "%s has no label", k->name);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(bfs_stat_keys[j].name, k->name) != 0 ||
					      bfs_stat_keys[j].member != k->member,
				      "%s twice", k->name);
		/* a member follows its object or another member */
		if (k->member) {
			ck_assert_uint_gt(i, 0);
			ck_assert(bfs_stat_keys[i - 1].member ||
				  bfs_stat_keys[i - 1].type == BFS_STYPE_OBJECT);
			ck_assert_int_eq(k->group, bfs_stat_keys[i - 1].group);
			ck_assert_ptr_null(bfs_stat_find(k->name));
		} else {
			ck_assert_ptr_eq(bfs_stat_find(k->name), k);
		}
	}
	ck_assert_ptr_eq(bfs_stat_find("cache_waits"), &bfs_stat_keys[BFS_STAT_CACHE_WAITS]);
	ck_assert_ptr_null(bfs_stat_find("prefetch_hits"));
	ck_assert_ptr_null(bfs_stat_find(""));
}
END_TEST

/* The enum and the table are made from one list (stats_keys.def): every
 * line of it is one key, at its line's place in both. */
static const char *const listed[] = {
#define KEY(id, nm, ...) [BFS_STAT_##id] = nm,
#define MEMBER(id, nm, ...) [BFS_STAT_##id] = nm,
#include "stats_keys.def"
#undef KEY
#undef MEMBER
};

START_TEST(one_line_a_key_makes_the_enum_and_the_table)
{
	ck_assert_uint_eq(BFS_ARRAY_SIZE(listed), BFS_STAT_NKEYS);
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++)
		ck_assert_str_eq(listed[i], bfs_stat_keys[i].name);
	ck_assert_str_eq(bfs_stat_keys[BFS_STAT_RECORDS].name, "records");
	ck_assert_str_eq(bfs_stat_keys[BFS_STAT_IO_BACKEND].name, "io_backend");
	ck_assert_int_eq(bfs_stat_keys[BFS_STAT_IO_BACKEND].group, BFS_SGROUP_IO);
	ck_assert_str_eq(bfs_stat_keys[BFS_STAT_CUDA_DEVICE].name, "device");
	ck_assert(bfs_stat_keys[BFS_STAT_CUDA_DEVICE].member);
	ck_assert_int_eq(bfs_stat_keys[BFS_STAT_DISK_CACHE_USED].unit, BFS_SUNIT_BYTES);
	ck_assert_int_eq(bfs_stat_keys[BFS_STAT_UPTIME_SECONDS].type, BFS_STYPE_INT);
	ck_assert_uint_eq(BFS_STAT_UPTIME_SECONDS, BFS_STAT_NKEYS - 1);
}
END_TEST

/* Every plain key of the always-present group: 1000 + its place. */
static void fill(struct bfs_stats_snap *s)
{
	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++)
		s->v[i].u = 1000 + i;
	s->v[BFS_STAT_INDEX_REUSED].b = true;
	s->v[BFS_STAT_SCHEMA_REUSED].b = false;
	s->v[BFS_STAT_DECODE_SECONDS].f = 1.25;
	s->v[BFS_STAT_UPTIME_SECONDS].i = 42;
	s->v[BFS_STAT_IO_BACKEND_REASON].s = "why";
	s->v[BFS_STAT_IO_PLAN].s = "passes";
	s->v[BFS_STAT_IO_PLAN_REASON].s = "cheaper";
}

static const char always[] = "{\n"
			     "  \"records\": 1000,\n"
			     "  \"batches_per_epoch\": 1001,\n"
			     "  \"index_reused\": true,\n"
			     "  \"schema_reused\": false,\n"
			     "  \"index_bytes\": 1004,\n"
			     "  \"index_corrupt_records\": 1005,\n"
			     "  \"reads\": 1006,\n"
			     "  \"bytes_read\": 1007,\n"
			     "  \"cache_hits\": 1008,\n"
			     "  \"cache_misses\": 1009,\n"
			     "  \"cache_waits\": 1010,\n"
			     "  \"cache_evictions\": 1011,\n"
			     "  \"cache_entries\": 1012,\n"
			     "  \"cache_bytes\": 1013,\n"
			     "  \"cache_peak_bytes\": 1014,\n"
			     "  \"cache_budget\": 1015,\n"
			     "  \"prefetch_issued\": 1016,\n"
			     "  \"batches_decoded\": 1017,\n"
			     "  \"chunks_decoded\": 1018,\n"
			     "  \"decode_seconds\": 1.250000,\n"
			     "  \"decode_errors\": 1020,\n"
			     "  \"corrupt_records\": 1021,\n"
			     "  \"skipped_records\": 1022,\n"
			     "  \"failed_reads\": 1023,\n"
			     "  \"records_served\": 1024,\n"
			     "  \"records_decoded\": 1025,\n"
			     "  \"prefetch_ready\": 1026,\n"
			     "  \"prefetch_queued\": 1027,\n"
			     "  \"decoding\": 1028,\n"
			     "  \"buffers_reused\": 1029,\n";

START_TEST(the_keys_of_every_mount_to_the_byte)
{
	struct bfs_stats_snap s;
	char want[4096];
	size_t len;
	char *t;

	fill(&s);
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	snprintf(want, sizeof(want),
		 "%s  \"source_records\": %d,\n  \"source_errors\": %d,\n  \"uptime_seconds\": "
		 "42\n}\n",
		 always, 1000 + BFS_STAT_SOURCE_RECORDS, 1000 + BFS_STAT_SOURCE_ERRORS);
	ck_assert_str_eq(t, want);
	ck_assert_uint_eq(len, strlen(want));
	free(t);
}
END_TEST

START_TEST(a_buckets_credential_keys_to_the_byte)
{
	struct bfs_stats_snap s;
	char want[4096];
	size_t len;
	char *t;

	fill(&s);
	s.has[BFS_SGROUP_CRED] = true;
	s.v[BFS_STAT_CREDENTIALS].s = "instance role `train-role` via IMDSv2";
	s.v[BFS_STAT_CREDENTIALS_EXPIRES].u = 1795775152;
	s.v[BFS_STAT_CREDENTIALS_VALID].b = true;
	s.v[BFS_STAT_CREDENTIALS_KEY_ID].s = "****WXYZ";
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	snprintf(want, sizeof(want),
		 "%s"
		 "  \"credentials\": \"instance role `train-role` via IMDSv2\",\n"
		 "  \"credentials_expires\": 1795775152,\n  \"credentials_valid\": true,\n"
		 "  \"credentials_refreshes\": %d,\n  \"credentials_refresh_failures\": %d,\n"
		 "  \"credentials_expired_answers\": %d,\n"
		 "  \"credentials_key_id\": \"****WXYZ\",\n"
		 "  \"source_records\": %d,\n"
		 "  \"source_errors\": %d,\n  \"uptime_seconds\": 42\n}\n",
		 always, 1000 + BFS_STAT_CREDENTIALS_REFRESHES,
		 1000 + BFS_STAT_CREDENTIALS_REFRESH_FAILURES,
		 1000 + BFS_STAT_CREDENTIALS_EXPIRED_ANSWERS, 1000 + BFS_STAT_SOURCE_RECORDS,
		 1000 + BFS_STAT_SOURCE_ERRORS);
	ck_assert_str_eq(t, want);
	free(t);
}
END_TEST

START_TEST(the_io_disk_cache_and_cuda_keys_to_the_byte)
{
	struct bfs_stats_snap s;
	char want[8192];
	size_t len;
	char *t;

	fill(&s);
	s.has[BFS_SGROUP_IO] = s.has[BFS_SGROUP_DISK] = s.has[BFS_SGROUP_CUDA] = true;
	s.v[BFS_STAT_IO_BACKEND].s = "io_uring";
	s.v[BFS_STAT_IO_WAIT_SECONDS].f = 0.5;
	s.v[BFS_STAT_CUDA_DEVICE].i = 0;
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	snprintf(want, sizeof(want),
		 "%s"
		 "  \"io_backend\": \"io_uring\",\n  \"io_backend_reason\": \"why\",\n"
		 "  \"io_depth\": 1032,\n"
		 "  \"io_readahead\": 1033,\n  \"io_reads\": 1034,\n"
		 "  \"io_bytes\": 1035,\n  \"io_inflight\": 1036,\n"
		 "  \"io_peak_inflight\": 1037,\n  \"io_pending\": 1038,\n"
		 "  \"io_buffered\": 1039,\n  \"io_peak_buffered\": 1040,\n"
		 "  \"io_ranges\": 1041,\n  \"io_merged\": 1042,\n"
		 "  \"io_waits\": 1043,\n  \"io_wait_seconds\": 0.500000,\n"
		 "  \"io_retries\": 1045,\n  \"io_failed\": 1046,\n"
		 "  \"io_dropped\": 1047,\n  \"io_refused\": 1048,\n"
		 "  \"io_planned\": 1049,\n  \"io_claimed\": 1050,\n"
		 "  \"io_unplanned\": 1051,\n  \"io_plans_dropped\": 1052,\n"
		 "  \"io_groups\": 1053,\n  \"io_streams\": 1054,\n"
		 "  \"io_local\": 1055,\n  \"io_local_bytes\": 1056,\n"
		 "  \"io_plan\": \"passes\",\n  \"io_plan_reason\": \"cheaper\",\n"
		 "  \"io_windows\": 1059,\n  \"io_passes\": 1060,\n"
		 "  \"io_pass_reads\": 1061,\n  \"io_pass_bytes\": 1062,\n"
		 "  \"disk_cache_hits\": 1063,\n  \"disk_cache_misses\": 1064,\n"
		 "  \"disk_cache_hit_bytes\": 1065,\n  \"disk_cache_bytes\": 1066,\n"
		 "  \"disk_cache_evictions\": 1067,\n  \"disk_cache_corrupt\": 1068,\n"
		 "  \"disk_cache_dropped\": 1069,\n  \"disk_cache_used\": 1070,\n"
		 "  \"disk_cache_limit\": 1071,\n"
		 "  \"cuda\": {\"device\": 0, \"pool\": 1074, \"busy\": 1075, \"opens\": 1076, "
		 "\"waits\": 1077, \"eagain\": 1078, \"errors\": 1079, \"copies\": 1080, "
		 "\"bytes_copied\": 1081, \"pinned_buffers\": 1082, \"host_allocs\": 1083, "
		 "\"device_bytes\": 1084},\n"
		 "  \"source_records\": %d,\n"
		 "  \"source_errors\": %d,\n  \"uptime_seconds\": 42\n}\n",
		 always, 1000 + BFS_STAT_SOURCE_RECORDS, 1000 + BFS_STAT_SOURCE_ERRORS);
	ck_assert_str_eq(t, want);
	ck_assert_uint_eq(len, strlen(want));
	free(t);

	/* one group alone: the others leave no trace */
	s.has[BFS_SGROUP_IO] = s.has[BFS_SGROUP_CUDA] = false;
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	ck_assert(strstr(t, "\"io_") == NULL && strstr(t, "\"cuda\"") == NULL);
	snprintf(want, sizeof(want),
		 "  \"disk_cache_limit\": 1071,\n  \"source_records\": %d,\n"
		 "  \"source_errors\": %d,\n  \"uptime_seconds\": 42\n}\n",
		 1000 + BFS_STAT_SOURCE_RECORDS, 1000 + BFS_STAT_SOURCE_ERRORS);
	ck_assert(strstr(t, want));
	free(t);
}
END_TEST

START_TEST(a_name_is_a_json_string)
{
	struct bfs_stats_snap s;
	size_t len;
	char *t;

	fill(&s);
	s.has[BFS_SGROUP_IO] = true;
	s.v[BFS_STAT_IO_BACKEND].s = "a\"b\\c\n";
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	ck_assert(strstr(t, "  \"io_backend\": \"a\\\"b\\\\c\\u000a\",\n") != NULL);
	free(t);
}
END_TEST

START_TEST(padded_to_a_size_that_holds_still)
{
	struct bfs_stats_snap s;
	size_t len, plain_len;
	char *t, *plain;

	fill(&s);
	plain = bfs_stats_json(&s, 0, &plain_len);
	t = bfs_stats_json(&s, BFS_STATS_SIZE, &len);
	ck_assert_ptr_nonnull(plain);
	ck_assert_ptr_nonnull(t);
	ck_assert_uint_eq(len, BFS_STATS_SIZE);
	ck_assert_uint_eq(strlen(t), BFS_STATS_SIZE);
	/* the same JSON up to its closing brace, spaces, one newline at the end */
	ck_assert_int_eq(memcmp(t, plain, plain_len - 1), 0);
	for (size_t i = plain_len - 1; i < len - 1; i++)
		ck_assert_msg(t[i] == ' ', "byte %zu", i);
	ck_assert(t[len - 1] == '\n');
	free(t);
	/* text longer than the pad is left as it is */
	t = bfs_stats_json(&s, 16, &len);
	ck_assert_uint_eq(len, plain_len);
	ck_assert_str_eq(t, plain);
	free(t);
	free(plain);
}
END_TEST

/* Each module's stats land in their keys: every field a different number,
 * read back by key name. */
START_TEST(the_put_functions_fill_their_keys)
{
	struct bfs_cache_stats c = { .hits = 1,
				     .misses = 2,
				     .evictions = 3,
				     .prefetch_issued = 4,
				     .waits = 5,
				     .batches_decoded = 6,
				     .chunks_decoded = 7,
				     .decode_ns = 8500000000u,
				     .decode_errors = 9,
				     .bytes = 10,
				     .peak_bytes = 11,
				     .budget = 12,
				     .entries = 13,
				     .records_decoded = 14,
				     .prefetch_ready = 15,
				     .prefetch_queued = 16,
				     .decoding = 17,
				     .buffers_reused = 18 };
	struct bfs_errlog_counts e = { .corrupt = 19, .skipped = 20, .source = 64 };
	struct bfs_fetch_stats f = { .reads = 21,
				     .bytes = 22,
				     .ranges = 23,
				     .merged = 24,
				     .inflight = 25,
				     .peak_inflight = 26,
				     .pending = 27,
				     .buffered = 28,
				     .peak_buffered = 29,
				     .waits = 30,
				     .wait_ns = 31000000000u,
				     .retries = 32,
				     .failed = 33,
				     .dropped = 34,
				     .local = 35,
				     .local_bytes = 36,
				     .refused = 37,
				     .backend = "threads" };
	struct bfs_ioplan_stats pl = { .planned = 38,
				       .claimed = 39,
				       .unplanned = 40,
				       .dropped = 41,
				       .groups = 42,
				       .streams = 43 };
	struct bfs_diskcache_stats d = { .hits = 44,
					 .misses = 45,
					 .hit_bytes = 46,
					 .bytes = 47,
					 .evictions = 48,
					 .corrupt = 49,
					 .dropped = 50,
					 .used = 51,
					 .limit = 52 };
	struct bfs_cudapool_stats cp = {
		.pool = 53, .busy = 54, .opens = 55, .waits = 56, .eagain = 57, .errors = 58
	};
	struct bfs_cudapath_stats cc = {
		.copies = 59, .bytes = 60, .pinned = 61, .host_allocs = 62, .device_bytes = 63
	};
	static const char *const want[] = {
		"\"cache_hits\": 1,",
		"\"cache_misses\": 2,",
		"\"cache_evictions\": 3,",
		"\"prefetch_issued\": 4,",
		"\"cache_waits\": 5,",
		"\"batches_decoded\": 6,",
		"\"chunks_decoded\": 7,",
		"\"decode_seconds\": 8.500000,",
		"\"decode_errors\": 9,",
		"\"cache_bytes\": 10,",
		"\"cache_peak_bytes\": 11,",
		"\"cache_budget\": 12,",
		"\"cache_entries\": 13,",
		"\"records_decoded\": 14,",
		"\"prefetch_ready\": 15,",
		"\"prefetch_queued\": 16,",
		"\"decoding\": 17,",
		"\"buffers_reused\": 18,",
		"\"corrupt_records\": 19,",
		"\"skipped_records\": 20,",
		"\"io_backend\": \"threads\",",
		"\"io_depth\": 7,",
		"\"io_readahead\": 65536,",
		"\"io_reads\": 21,",
		"\"io_bytes\": 22,",
		"\"io_ranges\": 23,",
		"\"io_merged\": 24,",
		"\"io_inflight\": 25,",
		"\"io_peak_inflight\": 26,",
		"\"io_pending\": 27,",
		"\"io_buffered\": 28,",
		"\"io_peak_buffered\": 29,",
		"\"io_waits\": 30,",
		"\"io_wait_seconds\": 31.000000,",
		"\"io_retries\": 32,",
		"\"io_failed\": 33,",
		"\"io_dropped\": 34,",
		"\"io_local\": 35,",
		"\"io_local_bytes\": 36,",
		"\"io_refused\": 37,",
		"\"io_planned\": 38,",
		"\"io_claimed\": 39,",
		"\"io_unplanned\": 40,",
		"\"io_plans_dropped\": 41,",
		"\"io_groups\": 42,",
		"\"io_streams\": 43,",
		"\"disk_cache_hits\": 44,",
		"\"disk_cache_misses\": 45,",
		"\"disk_cache_hit_bytes\": 46,",
		"\"disk_cache_bytes\": 47,",
		"\"disk_cache_evictions\": 48,",
		"\"disk_cache_corrupt\": 49,",
		"\"disk_cache_dropped\": 50,",
		"\"disk_cache_used\": 51,",
		"\"disk_cache_limit\": 52,",
		"\"cuda\": {\"device\": 2, \"pool\": 53, \"busy\": 54, \"opens\": 55, \"waits\": "
		"56, "
		"\"eagain\": 57, \"errors\": 58, \"copies\": 59, \"bytes_copied\": 60, "
		"\"pinned_buffers\": 61, \"host_allocs\": 62, \"device_bytes\": 63},",
		"\"source_errors\": 64,",
	};
	struct bfs_stats_snap s;
	size_t len;
	char *t;

	memset(&s, 0, sizeof(s));
	bfs_stats_put_cache(&s, &c);
	bfs_stats_put_errors(&s, &e);
	bfs_stats_put_io(&s, &f, &pl, 7, 65536);
	bfs_stats_put_diskcache(&s, &d);
	bfs_stats_put_cuda(&s, 2, &cp, &cc);
	t = bfs_stats_json(&s, 0, &len);
	ck_assert_ptr_nonnull(t);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(strstr(t, want[i]) != NULL, "%s not in %s", want[i], t);
	free(t);
}
END_TEST

#define THREADS 8
#define READS 20000

static void *read_many(void *arg)
{
	struct bfs_stats_reads *r = arg;

	for (int i = 0; i < READS; i++) {
		if (i % 100 == 99) { /* each a read of its own file */
			bfs_stats_read_failed(r, (uint64_t)i, (uint64_t)pthread_self(), 0, 4096);
			continue;
		}
		/* a batch of 3 records read as three files */
		bfs_stats_read(r, 10, 1.0);
		if (i % 1000 == 0) { /* stats.json meanwhile */
			struct bfs_stats_snap s;

			bfs_stats_put_reads(&s, r);
		}
	}
	return NULL;
}

START_TEST(reads_from_many_threads_add_up)
{
	struct bfs_stats_reads r;
	struct bfs_stats_snap s;
	pthread_t tid[THREADS];

	bfs_stats_reads_init(&r);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&tid[i], NULL, read_many, &r), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(tid[i], NULL);
	memset(&s, 0, sizeof(s));
	bfs_stats_put_reads(&s, &r);
	ck_assert_uint_eq(s.v[BFS_STAT_READS].u, THREADS * (READS - READS / 100));
	ck_assert_uint_eq(s.v[BFS_STAT_BYTES_READ].u, 10u * THREADS * (READS - READS / 100));
	ck_assert_uint_eq(s.v[BFS_STAT_FAILED_READS].u, THREADS * (READS / 100));
	ck_assert_uint_eq(s.v[BFS_STAT_RECORDS_SERVED].u, THREADS * (READS - READS / 100));
	bfs_stats_reads_destroy(&r);
}
END_TEST

static uint64_t failed_now(struct bfs_stats_reads *r)
{
	struct bfs_stats_snap s;

	memset(&s, 0, sizeof(s));
	bfs_stats_put_reads(&s, r);
	return s.v[BFS_STAT_FAILED_READS].u;
}

/* The kernel asks twice for one read(2) that fails: its readahead, then
 * the reader's page again. failed_reads counts the reader's failures. */
START_TEST(a_failed_read_counts_once_for_its_reader)
{
	struct bfs_stats_reads r;

	bfs_stats_reads_init(&r);
	bfs_stats_read_failed(&r, 5, 100, 0, 131072); /* the readahead */
	bfs_stats_read_failed(&r, 5, 100, 0, 4096); /* the reader's page */
	ck_assert_uint_eq(failed_now(&r), 1);
	/* the reader tries again: its pages are still in the kernel's cache,
	 * each read is one request, each counted */
	bfs_stats_read_failed(&r, 5, 100, 0, 4096);
	bfs_stats_read_failed(&r, 5, 100, 0, 4096);
	bfs_stats_read_failed(&r, 5, 100, 8192, 4096);
	ck_assert_uint_eq(failed_now(&r), 4);
	/* another reader of the same file */
	bfs_stats_read_failed(&r, 5, 101, 0, 4096);
	ck_assert_uint_eq(failed_now(&r), 5);
	/* a small file: the readahead is one page too */
	bfs_stats_read_failed(&r, 6, 100, 0, 4096);
	bfs_stats_read_failed(&r, 6, 100, 0, 4096);
	ck_assert_uint_eq(failed_now(&r), 6);
	/* a readahead split in two requests, then the reader's page */
	bfs_stats_read_failed(&r, 7, 100, 0, 262144);
	bfs_stats_read_failed(&r, 7, 100, 262144, 262144);
	bfs_stats_read_failed(&r, 7, 100, 0, 4096);
	ck_assert_uint_eq(failed_now(&r), 7);
	/* reads of different files never absorb each other */
	for (uint64_t ino = 1000; ino < 1100; ino++)
		bfs_stats_read_failed(&r, ino, 100, 0, 4096);
	ck_assert_uint_eq(failed_now(&r), 107);
	bfs_stats_reads_destroy(&r);
}
END_TEST

/* A batch of 3 records, 64 bytes of header and 300 of data: thirds of it
 * count a record each, the header nothing, and the parts add up. */
START_TEST(a_read_counts_the_records_its_data_holds)
{
	struct bfs_geom g = { .batch = 3, .st_hlen = 64, .st_size = 364 };
	struct bfs_stats_reads r;
	struct bfs_stats_snap s;

	ck_assert(bfs_stats_rows(&g, 64, 0, 64) == 0.0);
	ck_assert(bfs_stats_rows(&g, 64, 0, 364) == 3.0);
	ck_assert(bfs_stats_rows(&g, 64, 64, 164) == 1.0);
	ck_assert(bfs_stats_rows(&g, 64, 10, 10) == 0.0);
	/* a .npy file of the batch: its own header, then its slice of data */
	ck_assert(bfs_stats_rows(&g, 128, 0, 228) == 1.0);
	g.st_size = g.st_hlen; /* no tensor data: nothing to count */
	ck_assert(bfs_stats_rows(&g, 64, 0, 64) == 0.0);

	g.st_size = 364;
	bfs_stats_reads_init(&r);
	for (uint64_t pos = 64; pos < 364; pos += 50) /* six reads, half a record each */
		bfs_stats_read(&r, 50, bfs_stats_rows(&g, 64, pos, pos + 50));
	bfs_stats_put_reads(&s, &r);
	ck_assert_uint_eq(s.v[BFS_STAT_RECORDS_SERVED].u, 3);
	ck_assert_uint_eq(s.v[BFS_STAT_READS].u, 6);
	bfs_stats_reads_destroy(&r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_key_is_named_once);
	tcase_add_test(tc, one_line_a_key_makes_the_enum_and_the_table);
	tcase_add_test(tc, the_keys_of_every_mount_to_the_byte);
	tcase_add_test(tc, the_io_disk_cache_and_cuda_keys_to_the_byte);
	tcase_add_test(tc, a_buckets_credential_keys_to_the_byte);
	tcase_add_test(tc, a_name_is_a_json_string);
	tcase_add_test(tc, the_put_functions_fill_their_keys);
	tcase_add_test(tc, padded_to_a_size_that_holds_still);
	tcase_add_test(tc, reads_from_many_threads_add_up);
	tcase_add_test(tc, a_read_counts_the_records_its_data_holds);
	tcase_add_test(tc, a_failed_read_counts_once_for_its_reader);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
