/* SPDX-License-Identifier: Apache-2.0 */
/*
 * batchfs/cuda.h — libbatchfs-cuda: a batch of a batchfs mount, in GPU
 * memory, from its batch-NNNNNN.cuda descriptor (mounted with -o cuda).
 *
 *   struct bfs_cuda_batch *b;
 *   if (bfs_cuda_open(&b, "/mnt/ds/epoch-0000/batch-000000/batch-000000.cuda", 0) != 0)
 *           errx(1, "%s", bfs_cuda_error());
 *   const struct bfs_cuda_tensor *x = bfs_cuda_find(b, "image");
 *   ... use x->dptr (device memory, x->nbytes bytes, x->dtype, x->shape) ...
 *   bfs_cuda_close(b);   (the daemon's buffer goes back to its pool)
 *
 * The descriptor stays open while the batch is held: closing it (or the
 * process ending) returns the buffer. The CUDA runtime is loaded at run time
 * (libcudart.so, or $BATCHFS_CUDART). Link with `pkg-config --libs batchfs-cuda`.
 */
#ifndef BATCHFS_CUDA_H
#define BATCHFS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BFS_CUDA_MAX_DIMS 8
#define BFS_CUDA_NONBLOCK 1 /* fail with EAGAIN instead of waiting for a free buffer */

struct bfs_cuda_tensor {
	const char *name; /* "image", "tokens.lengths", "feature_lists/s" */
	const char *dtype; /* numpy name: "float32", "int64", "uint8", ... */
	int ndim;
	int64_t shape[BFS_CUDA_MAX_DIMS];
	uint64_t offset; /* within the batch's buffer */
	uint64_t nbytes;
	void *dptr; /* device pointer: the buffer's base + offset */
};

struct bfs_cuda_batch;

/* Open a descriptor, map the daemon's buffer (cudaIpcOpenMemHandle, on the
 * descriptor's device) and parse the tensors. Returns 0, or -1 with errno set
 * (EAGAIN under BFS_CUDA_NONBLOCK when the pool is exhausted) and a message
 * in bfs_cuda_error(). */
int bfs_cuda_open(struct bfs_cuda_batch **out, const char *path, int flags);
size_t bfs_cuda_ntensors(const struct bfs_cuda_batch *b);
const struct bfs_cuda_tensor *bfs_cuda_tensor(const struct bfs_cuda_batch *b, size_t i);
const struct bfs_cuda_tensor *bfs_cuda_find(const struct bfs_cuda_batch *b, const char *name);
int bfs_cuda_device(const struct bfs_cuda_batch *b);
void *bfs_cuda_base(const struct bfs_cuda_batch *b); /* the whole buffer */
uint64_t bfs_cuda_bytes(const struct bfs_cuda_batch *b);
/* Copy a tensor's bytes to host memory (cudaMemcpy, synchronous). 0 or -1. */
int bfs_cuda_to_host(const struct bfs_cuda_batch *b, const struct bfs_cuda_tensor *t, void *dst);
/* Unmap the buffer and close the descriptor; accepts NULL. */
void bfs_cuda_close(struct bfs_cuda_batch *b);
/* This thread's last error, one line. */
const char *bfs_cuda_error(void);

#ifdef __cplusplus
}
#endif
#endif
