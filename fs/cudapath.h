/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudapath.h — the daemon's side of the CUDA path (-o cuda[=DEV]):
 * pinned host buffers for decoded batches, a bounded pool of device buffers,
 * one stream and one event per buffer, and the JSON descriptor read from
 * batch-NNNNNN.cuda.
 *
 * Lifecycle: bfs_cudapath_load (dlopen only, before the daemon forks) →
 * bfs_cudapath_init (the first CUDA call: only in the detached daemon) →
 * ... → bfs_cudapath_free. The pool's accounting (which buffer is free, who
 * waits) is cudapool.h's; a buffer's slot belongs to the one caller that
 * holds it there, so these calls do not lock, except the pinned allocator
 * and the counters.
 */
#ifndef BFS_CUDAPATH_H
#define BFS_CUDAPATH_H

#include "tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_CUDA_POOL_DEFAULT 4
#define BFS_CUDA_HANDLE_HEX 128 /* a cudaIpcMemHandle_t in hex */

struct bfs_cudapath;

/* Load the runtime (no CUDA call). -1 with one line in err. */
int bfs_cudapath_load(struct bfs_cudapath **out, int device, unsigned pool, char *err,
		      size_t errlen);
/* Select the device and create the pool's streams and events (buffers are
 * allocated on first use, sized to the batch). -1 with one line in err. */
int bfs_cudapath_init(struct bfs_cudapath *cp, char *err, size_t errlen);
void bfs_cudapath_free(struct bfs_cudapath *cp); /* accepts NULL */

unsigned bfs_cudapath_pool(const struct bfs_cudapath *cp);
int bfs_cudapath_device(const struct bfs_cudapath *cp);

/* The cache's pinning hooks (cache.h): replace a decoded buffer by a pinned
 * copy / free a pinned buffer. Thread-safe. */
int bfs_cudapath_pin(void *cp, uint8_t **buf, uint64_t size);
void bfs_cudapath_unpin(void *cp, uint8_t *buf);

/* Start copying n bytes of pinned src into pool buffer `slot` on its stream
 * (growing the buffer first if needed) and record its event; hex gets the
 * buffer's IPC handle (BFS_CUDA_HANDLE_HEX chars + NUL). The caller owns the
 * slot. -EIO with a line in err. */
int bfs_cudapath_copy(struct bfs_cudapath *cp, unsigned slot, const void *src, uint64_t n,
		      char *hex, char *err, size_t errlen);
/* Wait until the slot's last copy is complete. -EIO with a line in err. */
int bfs_cudapath_wait(struct bfs_cudapath *cp, unsigned slot, char *err, size_t errlen);

/* The descriptor of a batch (malloc'd, *len bytes): handle hex (NULL:
 * zeros, for its size), device, the buffer's bytes and every tensor's name,
 * dtype, shape, offset and nbytes within it (the .safetensors layout). Its
 * length depends only on the geometry, so stat needs no copy. */
char *bfs_cudapath_describe(const struct bfs_plan *plan, const struct bfs_geom *g, int device,
			    const char *hex, size_t *len);

struct bfs_cudapath_stats {
	uint64_t copies, bytes, pinned, pinned_bytes, device_bytes;
	uint64_t host_allocs; /* cudaHostAlloc calls: pinned blocks are reused */
};
void bfs_cudapath_stats(struct bfs_cudapath *cp, struct bfs_cudapath_stats *st);

#endif
