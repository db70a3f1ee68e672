/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_decode — the decoder alone, without FUSE: how fast libbfsdecoder
 * turns TFRecord shards into batches on this machine.
 *
 *   bench_decode [--batch-size B] [--seed S] [--threads N] [--index-dir DIR]
 *                [--mode scan|build|all] [--order file|shuffled|both]
 *                [--max-batches K] [--hold BYTES] SOURCE
 *
 * build: bfs_dataset_open (infer) + bfs_batcher_new, then every batch of
 *        epoch 0 with test_batch_build (verify=crc, as a mount does by
 *        default), in file order (shuffle=false) and/or in the shuffled
 *        order, on 1 thread and on N threads (batches split round-robin).
 * scan:  framing + both CRCs + protobuf decode of every record
 *        (bfs_shard_scan + bfs_example_decode), no batch assembly: the
 *        parse alone. Shards are split round-robin over the threads.
 * all (default): scan, then build in both orders; each on 1 and N threads
 *        (N defaults to the number of online CPUs).
 *
 * --hold BYTES: keep the most recent built batches, up to BYTES per thread,
 *        before freeing them, as the daemon's cache keeps them; without it
 *        malloc hands the same warm memory back for every batch, which a
 *        cache holding 1 GiB of batches never gets (fresh pages: faults and
 *        zeroing). Reported as "hold" in the JSON.
 * One JSON line per run: mode, order, threads, seconds, cpu_seconds,
 * records, in_bytes (TFRecord input: record lengths + 16 framing bytes each),
 * out_bytes (.safetensors bytes built), examples_s, in_MB_s, out_MB_s
 * (MB = 10^6 bytes). The dataset is read through the page cache: run it
 * twice, or after a cat, to measure decoding rather than the disk.
 */
#include "batch.h"
#include "dataset.h"
#include "decodertest.h"
#include "example.h"
#include "record.h"
#include "bench_clock.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct opts {
	uint64_t batch_size, seed, max_batches, hold;
	unsigned threads;
	const char *index_dir, *source, *mode, *order;
};

struct result {
	uint64_t records, in_bytes, out_bytes;
	int rc;
	char err[256];
};

static void report(const char *mode, const char *order, unsigned threads, uint64_t hold,
		   double secs, double cpu, const struct result *r)
{
	printf("{\"mode\": \"%s\", \"order\": \"%s\", \"threads\": %u, \"hold\": %" PRIu64
	       ", \"seconds\": %.6f, "
	       "\"cpu_seconds\": %.3f, \"records\": %" PRIu64 ", \"in_bytes\": %" PRIu64
	       ", \"out_bytes\": %" PRIu64 ", \"examples_s\": %.1f, \"in_MB_s\": %.2f, "
	       "\"out_MB_s\": %.2f}\n",
	       mode, order, threads, hold, secs, cpu, r->records, r->in_bytes, r->out_bytes,
	       secs > 0 ? (double)r->records / secs : 0.0,
	       secs > 0 ? (double)r->in_bytes / secs / 1e6 : 0.0,
	       secs > 0 ? (double)r->out_bytes / secs / 1e6 : 0.0);
	fflush(stdout);
}

/* ------------------------------------------------------------ scan */

struct scan_job {
	char **paths;
	size_t npaths;
	unsigned t, nthreads;
	struct result r;
};

static int scan_record(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data,
		       uint32_t len)
{
	struct scan_job *j = ctx;
	struct bfs_example *ex = NULL;
	int rc = bfs_example_decode(&ex, data, len);

	(void)index;
	(void)offset;
	if (rc)
		return rc;
	bfs_example_free(ex);
	j->r.records++;
	j->r.in_bytes += (uint64_t)len + 16;
	return 0;
}

static void *scan_worker(void *arg)
{
	struct scan_job *j = arg;

	for (size_t i = j->t; i < j->npaths; i += j->nthreads) {
		struct bfs_shard *s = NULL;
		int rc = bfs_shard_open(&s, j->paths[i], BFS_COMP_AUTO);
		if (rc == 0)
			rc = bfs_shard_scan(s, true, scan_record, j);
		bfs_shard_close(s);
		if (rc) {
			j->r.rc = rc;
			snprintf(j->r.err, sizeof(j->r.err), "%s: %s", j->paths[i], bfs_err_msg());
			break;
		}
	}
	return NULL;
}

static int run_scan(const struct opts *o, unsigned nthreads)
{
	char **paths = NULL;
	size_t n = 0;
	int rc = bfs_source_resolve(&paths, &n, o->source, false);
	struct scan_job *jobs;
	pthread_t *tids;
	struct result total = { 0 };
	double t0, c0;

	if (rc) {
		fprintf(stderr, "bench_decode: %s\n", bfs_err_msg());
		return 1;
	}
	jobs = calloc(nthreads, sizeof(*jobs));
	tids = calloc(nthreads, sizeof(*tids));
	if (!jobs || !tids)
		abort();
	t0 = now();
	c0 = cpu_now();
	for (unsigned t = 0; t < nthreads; t++) {
		jobs[t] = (struct scan_job){
			.paths = paths, .npaths = n, .t = t, .nthreads = nthreads
		};
		if (pthread_create(&tids[t], NULL, scan_worker, &jobs[t]) != 0)
			abort();
	}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(tids[t], NULL);
		total.records += jobs[t].r.records;
		total.in_bytes += jobs[t].r.in_bytes;
		if (jobs[t].r.rc && !total.rc) {
			total.rc = jobs[t].r.rc;
			memcpy(total.err, jobs[t].r.err, sizeof(total.err));
		}
	}
	double secs = now() - t0, cpu = cpu_now() - c0;
	free(jobs);
	free(tids);
	bfs_source_free(paths, n);
	if (total.rc) {
		fprintf(stderr, "bench_decode: scan: %s\n", total.err);
		return 1;
	}
	report("scan", "file", nthreads, 0, secs, cpu, &total);
	return 0;
}

/* ------------------------------------------------------------ build */

struct build_job {
	const struct bfs_batcher *b;
	uint64_t nbatches, hold;
	unsigned t, nthreads;
	struct result r;
};

/* Built batches still held (--hold): a FIFO ring. */
struct held {
	uint8_t **buf;
	uint64_t *size;
	size_t cap, head, len;
	uint64_t bytes;
};

static void hold_pop(struct held *h)
{
	free(h->buf[h->head]);
	h->bytes -= h->size[h->head];
	h->head = (h->head + 1) % h->cap;
	h->len--;
}

static void hold_push(struct held *h, uint8_t *buf, uint64_t size, uint64_t limit)
{
	while (h->len && (h->bytes + size > limit || h->len == h->cap))
		hold_pop(h);
	if (size > limit || h->cap == 0) {
		free(buf);
		return;
	}
	size_t at = (h->head + h->len) % h->cap;
	h->buf[at] = buf;
	h->size[at] = size;
	h->len++;
	h->bytes += size;
}

static void *build_worker(void *arg)
{
	struct build_job *j = arg;
	struct held h = { 0 };

	if (j->hold) {
		h.cap = 1 << 16;
		h.buf = calloc(h.cap, sizeof(*h.buf));
		h.size = calloc(h.cap, sizeof(*h.size));
		if (!h.buf || !h.size)
			abort();
	}
	for (uint64_t k = j->t; k < j->nbatches; k += j->nthreads) {
		uint8_t *buf = NULL;
		struct bfs_geom *g = NULL;
		int rc = test_batch_build(&buf, &g, j->b, 0, k, NULL, NULL);
		if (rc) {
			j->r.rc = rc;
			snprintf(j->r.err, sizeof(j->r.err), "batch %" PRIu64 ": %s", k,
				 bfs_err_msg());
			break;
		}
		j->r.records += g->batch;
		j->r.out_bytes += g->st_size;
		if (j->hold)
			hold_push(&h, buf, g->st_size, j->hold);
		else
			free(buf);
		bfs_geom_free(g);
	}
	while (h.len)
		hold_pop(&h);
	free(h.buf);
	free(h.size);
	return NULL;
}

/* Input bytes of the records of the first `nbatches` batches. With every
 * batch of the epoch that is every record once, in any order; with fewer,
 * the count is scaled by the share of records built. */
static uint64_t dataset_in_bytes(const struct bfs_dataset *ds)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++) {
		const struct bfs_shard *s = bfs_dataset_shard(ds, i);
		/* records are contiguous: their bytes are the span they cover */
		sum += bfs_shard_record_offset(s, bfs_shard_nrecords(s)) -
		       bfs_shard_record_offset(s, 0);
	}
	return sum;
}

static int run_build(const struct opts *o, const struct bfs_dataset *ds, bool shuffle,
		     unsigned nthreads)
{
	struct bfs_batcher_opts bo = {
		.batch_size = o->batch_size,
		.seed = o->seed,
		.shuffle = shuffle,
		.world = 1,
		.verify = true,
		.on_corrupt = BFS_ON_CORRUPT_FAIL,
		.jobs = nthreads,
	};
	struct bfs_batcher *b = NULL;
	struct build_job *jobs;
	pthread_t *tids;
	struct result total = { 0 };
	uint64_t nb;
	double t0, c0;
	int rc = bfs_batcher_new(&b, ds, bfs_dataset_schema(ds), &bo);

	if (rc) {
		fprintf(stderr, "bench_decode: %s\n", bfs_err_msg());
		return 1;
	}
	nb = bfs_batcher_nbatches(b);
	if (o->max_batches && o->max_batches < nb)
		nb = o->max_batches;
	jobs = calloc(nthreads, sizeof(*jobs));
	tids = calloc(nthreads, sizeof(*tids));
	if (!jobs || !tids)
		abort();
	t0 = now();
	c0 = cpu_now();
	for (unsigned t = 0; t < nthreads; t++) {
		jobs[t] = (struct build_job){
			.b = b, .nbatches = nb, .hold = o->hold, .t = t, .nthreads = nthreads
		};
		if (pthread_create(&tids[t], NULL, build_worker, &jobs[t]) != 0)
			abort();
	}
	for (unsigned t = 0; t < nthreads; t++) {
		pthread_join(tids[t], NULL);
		total.records += jobs[t].r.records;
		total.out_bytes += jobs[t].r.out_bytes;
		if (jobs[t].r.rc && !total.rc) {
			total.rc = jobs[t].r.rc;
			memcpy(total.err, jobs[t].r.err, sizeof(total.err));
		}
	}
	double secs = now() - t0, cpu = cpu_now() - c0;
	free(jobs);
	free(tids);
	bfs_batcher_free(b);
	if (total.rc) {
		fprintf(stderr, "bench_decode: build: %s\n", total.err);
		return 1;
	}
	uint64_t n = bfs_dataset_nrecords(ds);
	uint64_t in = dataset_in_bytes(ds);
	total.in_bytes = total.records == n ? in
			 : n ? (uint64_t)((double)in * (double)total.records / (double)n)
			     : 0;
	report("build", shuffle ? "shuffled" : "file", nthreads, o->hold, secs, cpu, &total);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_decode [--batch-size B] [--seed S] [--threads N] [--index-dir DIR]\n"
		"                    [--mode scan|build|all] [--order file|shuffled|both]\n"
		"                    [--max-batches K] [--hold BYTES] SOURCE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .batch_size = 32, .mode = "all", .order = "both" };
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct bfs_dataset *ds = NULL;
	int ret = 0;

	o.threads = ncpu > 0 ? (unsigned)ncpu : 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--batch-size") == 0 && v)
			o.batch_size = strtoull(v, NULL, 0), i++;
		else if (strcmp(a, "--seed") == 0 && v)
			o.seed = strtoull(v, NULL, 0), i++;
		else if (strcmp(a, "--threads") == 0 && v)
			o.threads = (unsigned)strtoul(v, NULL, 0), i++;
		else if (strcmp(a, "--index-dir") == 0 && v)
			o.index_dir = v, i++;
		else if (strcmp(a, "--mode") == 0 && v)
			o.mode = v, i++;
		else if (strcmp(a, "--order") == 0 && v)
			o.order = v, i++;
		else if (strcmp(a, "--max-batches") == 0 && v)
			o.max_batches = strtoull(v, NULL, 0), i++;
		else if (strcmp(a, "--hold") == 0 && v)
			o.hold = strtoull(v, NULL, 0), i++;
		else if (a[0] == '-' || o.source)
			usage();
		else
			o.source = a;
	}
	if (!o.source || o.threads == 0 || o.batch_size == 0)
		usage();
	bool scan = !strcmp(o.mode, "scan") || !strcmp(o.mode, "all");
	bool build = !strcmp(o.mode, "build") || !strcmp(o.mode, "all");
	bool ofile = !strcmp(o.order, "file") || !strcmp(o.order, "both");
	bool oshuf = !strcmp(o.order, "shuffled") || !strcmp(o.order, "both");
	if ((!scan && !build) || (!ofile && !oshuf))
		usage();
	unsigned tcounts[2] = { 1, o.threads };
	unsigned ntc = o.threads > 1 ? 2 : 1;

	if (scan)
		for (unsigned k = 0; k < ntc && !ret; k++)
			ret = run_scan(&o, tcounts[k]);
	if (build && !ret) {
		struct bfs_dataset_opts dopt = {
			.comp = BFS_COMP_AUTO,
			.index_dir = o.index_dir,
			.jobs = o.threads,
			.infer = true,
		};
		double t0 = now();
		if (bfs_dataset_open(&ds, o.source, &dopt) != 0) {
			fprintf(stderr, "bench_decode: %s\n", bfs_err_msg());
			return 1;
		}
		printf("{\"mode\": \"open\", \"seconds\": %.6f, \"records\": %" PRIu64
		       ", \"index_reused\": %s, \"schema_reused\": %s, \"index_bytes\": %" PRIu64
		       "}\n",
		       now() - t0, bfs_dataset_nrecords(ds),
		       bfs_dataset_index_reused(ds) ? "true" : "false",
		       bfs_dataset_schema_reused(ds) ? "true" : "false",
		       bfs_dataset_index_bytes(ds));
		fflush(stdout);
		for (int sh = 0; sh < 2 && !ret; sh++) {
			if ((sh == 0 && !ofile) || (sh == 1 && !oshuf))
				continue;
			for (unsigned k = 0; k < ntc && !ret; k++)
				ret = run_build(&o, ds, sh == 1, tcounts[k]);
		}
		bfs_dataset_close(ds);
	}
	return ret;
}
