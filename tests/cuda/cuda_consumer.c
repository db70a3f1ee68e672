/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda_consumer.c — a consumer of batch-NNNNNN.cuda through libbatchfs-cuda,
 * for tests/integration/test_cuda.py:
 *   cuda_consumer [-n] DESCRIPTOR OUTDIR [HOLD_SECONDS]
 * writes each tensor's bytes, copied back from the device buffer, to
 * OUTDIR/<i>.bin and prints one line per tensor: "name dtype d0,d1,.. nbytes".
 * -n opens with BFS_CUDA_NONBLOCK. HOLD_SECONDS keeps the batch open
 * (printing "holding" first) before closing it.
 */
#include "batchfs/cuda.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct bfs_cuda_batch *b;
	int flags = 0, a = 1;

	if (argc > 1 && strcmp(argv[1], "-n") == 0) {
		flags = BFS_CUDA_NONBLOCK;
		a++;
	}
	if (argc - a < 2) {
		fprintf(stderr, "usage: cuda_consumer [-n] DESCRIPTOR OUTDIR [HOLD_SECONDS]\n");
		return 2;
	}
	if (bfs_cuda_open(&b, argv[a], flags) != 0) {
		fprintf(stderr, "cuda_consumer: %s\n", bfs_cuda_error());
		return errno == EAGAIN ? 11 : 1;
	}
	for (size_t i = 0; i < bfs_cuda_ntensors(b); i++) {
		const struct bfs_cuda_tensor *t = bfs_cuda_tensor(b, i);
		char path[4096];
		void *host = malloc(t->nbytes ? t->nbytes : 1);
		FILE *f;

		if (!host || bfs_cuda_to_host(b, t, host) != 0) {
			fprintf(stderr, "cuda_consumer: %s\n",
				host ? bfs_cuda_error() : "out of memory");
			return 1;
		}
		snprintf(path, sizeof(path), "%s/%zu.bin", argv[a + 1], i);
		f = fopen(path, "wb");
		if (!f || fwrite(host, 1, t->nbytes, f) != t->nbytes || fclose(f) != 0) {
			fprintf(stderr, "cuda_consumer: %s: cannot write\n", path);
			return 1;
		}
		free(host);
		printf("%s %s ", t->name, t->dtype);
		for (int d = 0; d < t->ndim; d++)
			printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
		printf(" %llu\n", (unsigned long long)t->nbytes);
	}
	if (argc - a > 2) {
		printf("holding\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[a + 2]));
	}
	fflush(stdout);
	bfs_cuda_close(b);
	return 0;
}
