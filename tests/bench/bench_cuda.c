/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_cuda.c — part (a) of scripts/gpu-check, no FUSE: decode batches of a
 * dataset in-process, then time host→device copies of them three ways:
 *   pageable  cudaMemcpy from the decoder's malloc'd buffer
 *   pinned    cudaMemcpy from a cudaHostAlloc'd copy of it
 *   path      what the daemon does for batch-B.cuda: cudaMemcpyAsync from
 *             the pinned buffer on a pool buffer's stream, then the event
 * and print GB/s for each and path/pinned (target >= 0.80).
 *   bench_cuda SOURCE INDEX_DIR BATCH_SIZE [BATCHES] [ROUNDS] [DEVICE]
 * The runtime is libcudart.so (or $BATCHFS_CUDART): against the host double
 * it only shows that the program works, not any speed.
 */
#include "batch.h"
#include "common.h"
#include "cudart.h"
#include "dataset.h"
#include "decodertest.h"
#include "bench_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL 4

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t rc_ = (call);                                                          \
		if (rc_ != cudaSuccess) {                                                          \
			fprintf(stderr, "bench_cuda: %s: %s\n", #call,                             \
				bfs_cudart_strerror(&rt, rc_));                                    \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	struct bfs_dataset_opts dopt = { .comp = BFS_COMP_AUTO, .jobs = 4, .infer = true };
	struct bfs_dataset *ds = NULL;
	struct bfs_batcher *b = NULL;
	struct bfs_cudart rt;
	char err[400];
	uint64_t nb, want, total = 0;
	int rounds, dev;

	if (argc < 4) {
		fprintf(stderr, "usage: bench_cuda SOURCE INDEX_DIR BATCH_SIZE [BATCHES] [ROUNDS] "
				"[DEVICE]\n");
		return 2;
	}
	dopt.index_dir = argv[2];
	want = argc > 4 ? strtoull(argv[4], NULL, 10) : 32;
	rounds = argc > 5 ? atoi(argv[5]) : 5;
	dev = argc > 6 ? atoi(argv[6]) : 0;
	struct bfs_batcher_opts bo = { .batch_size = strtoull(argv[3], NULL, 10),
				       .world = 1,
				       .verify = true,
				       .on_corrupt = BFS_ON_CORRUPT_FAIL,
				       .jobs = 4,
				       .shuffle = true };
	if (bfs_dataset_open(&ds, argv[1], &dopt) != 0 ||
	    bfs_batcher_new(&b, ds, bfs_dataset_schema(ds), &bo) != 0) {
		fprintf(stderr, "bench_cuda: %s\n", bfs_err_msg());
		return 1;
	}
	if (bfs_cudart_load(&rt, err, sizeof(err)) != 0) {
		fprintf(stderr, "bench_cuda: %s\n", err);
		return 1;
	}
	CK(rt.SetDevice(dev));
	nb = bfs_batcher_nbatches(b);
	if (want > nb)
		want = nb;
	uint8_t **page = calloc(want, sizeof(*page)), **pin = calloc(want, sizeof(*pin));
	uint64_t *size = calloc(want, sizeof(*size)), maxsz = 0;
	if (!page || !pin || !size)
		return 1;
	double t0 = now();
	for (uint64_t k = 0; k < want; k++) {
		struct bfs_geom *g = NULL;
		if (test_batch_build(&page[k], &g, b, 0, k, NULL, NULL) != 0) {
			fprintf(stderr, "bench_cuda: batch %llu: %s\n", (unsigned long long)k,
				bfs_err_msg());
			return 1;
		}
		size[k] = g->st_size;
		total += size[k];
		maxsz = size[k] > maxsz ? size[k] : maxsz;
		bfs_geom_free(g);
		CK(rt.HostAlloc((void **)&pin[k], size[k], cudaHostAllocDefault));
		memcpy(pin[k], page[k], size[k]);
	}
	printf("decoded %llu batches (%.1f MB) in %.2f s\n", (unsigned long long)want,
	       (double)total / 1e6, now() - t0);
	void *dbuf[POOL];
	cudaStream_t st[POOL];
	cudaEvent_t ev[POOL];
	for (int i = 0; i < POOL; i++) {
		CK(rt.Malloc(&dbuf[i], maxsz ? maxsz : 1));
		CK(rt.StreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
		CK(rt.EventCreateWithFlags(&ev[i], cudaEventDisableTiming));
	}
	double best[3] = { 1e30, 1e30, 1e30 };
	for (int r = 0; r < rounds; r++) {
		double t = now();
		for (uint64_t k = 0; k < want; k++)
			CK(rt.Memcpy(dbuf[k % POOL], page[k], size[k], cudaMemcpyHostToDevice));
		t = now() - t;
		best[0] = t < best[0] ? t : best[0];
		t = now();
		for (uint64_t k = 0; k < want; k++)
			CK(rt.Memcpy(dbuf[k % POOL], pin[k], size[k], cudaMemcpyHostToDevice));
		t = now() - t;
		best[1] = t < best[1] ? t : best[1];
		/* the daemon's way: each batch on its buffer's stream; a buffer is
		 * reused once its previous copy's event has completed */
		t = now();
		for (uint64_t k = 0; k < want; k++) {
			int i = (int)(k % POOL);
			if (k >= POOL)
				CK(rt.EventSynchronize(ev[i]));
			CK(rt.MemcpyAsync(dbuf[i], pin[k], size[k], cudaMemcpyHostToDevice, st[i]));
			CK(rt.EventRecord(ev[i], st[i]));
		}
		for (int i = 0; i < POOL; i++)
			CK(rt.EventSynchronize(ev[i]));
		t = now() - t;
		best[2] = t < best[2] ? t : best[2];
	}
	const char *names[3] = { "cudaMemcpy pageable", "cudaMemcpy pinned", "batchfs copy path" };
	for (int i = 0; i < 3; i++)
		printf("%-22s %8.2f GB/s\n", names[i], (double)total / best[i] / 1e9);
	double ratio = best[1] / best[2];
	printf("copy path / pinned cudaMemcpy: %.2f (target >= 0.80: %s)\n", ratio,
	       ratio >= 0.80 ? "met" : "MISSED");
	return 0;
}
