/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudart.h — the few CUDA runtime types, constants and calls batchfs uses,
 * and the loader that finds them in libcudart.so.* at run time.
 *
 * cuda/cudart.c is the one file that dlopen()s the CUDA runtime (the
 * "firewall" for CUDA): nothing links libcudart, so one binary runs with and
 * without a GPU. With the toolkit's headers present (configure defines
 * BFS_HAVE_CUDA_HEADERS and adds its include folder) the types come from
 * <cuda_runtime_api.h>; without them they are declared here, with the
 * runtime's ABI (values and layouts as in CUDA 11-13).
 *
 * BFS_CUDA_OWN_TYPES forces the declarations below even where the headers
 * exist: the test double (tests/cuda/cudart_double.c) defines functions named
 * like the runtime's and must not see their prototypes.
 */
#ifndef BFS_CUDART_H
#define BFS_CUDART_H

#include <stdbool.h>
#include <stddef.h>

#if defined(BFS_HAVE_CUDA_HEADERS) && !defined(BFS_CUDA_OWN_TYPES)
#include <cuda_runtime_api.h>
#else
typedef int cudaError_t;
enum {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInitializationError = 3,
	cudaErrorInsufficientDriver = 35,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorNotReady = 600,
	cudaErrorHostMemoryAlreadyRegistered = 712,
	cudaErrorHostMemoryNotRegistered = 713,
};
enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4,
};
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#define CUDA_IPC_HANDLE_SIZE 64
typedef struct cudaIpcMemHandle_st {
	char reserved[CUDA_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;
#define cudaHostAllocDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
#define cudaIpcMemLazyEnablePeerAccess 0x01
#endif

/* The calls used, resolved by bfs_cudart_load. */
struct bfs_cudart {
	void *dl;
	char path[256]; /* the library loaded */
	cudaError_t (*GetDeviceCount)(int *);
	cudaError_t (*SetDevice)(int);
	cudaError_t (*Malloc)(void **, size_t);
	cudaError_t (*Free)(void *);
	cudaError_t (*HostAlloc)(void **, size_t, unsigned int);
	cudaError_t (*FreeHost)(void *);
	cudaError_t (*Memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
	cudaError_t (*MemcpyAsync)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
	cudaError_t (*StreamCreateWithFlags)(cudaStream_t *, unsigned int);
	cudaError_t (*StreamDestroy)(cudaStream_t);
	cudaError_t (*StreamSynchronize)(cudaStream_t);
	cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned int);
	cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
	cudaError_t (*EventSynchronize)(cudaEvent_t);
	cudaError_t (*EventDestroy)(cudaEvent_t);
	cudaError_t (*IpcGetMemHandle)(cudaIpcMemHandle_t *, void *);
	cudaError_t (*IpcOpenMemHandle)(void **, cudaIpcMemHandle_t, unsigned int);
	cudaError_t (*IpcCloseMemHandle)(void *);
	const char *(*GetErrorString)(cudaError_t);
};

/* dlopen the runtime and resolve every call; no CUDA call is made, so this
 * may run before a fork. The library: $BATCHFS_CUDART when set (tests point
 * it at the host double), else libcudart.so, libcudart.so.13/.12/.11, then
 * /usr/local/cuda/lib64/libcudart.so. Returns 0, or -1 with a reason in err. */
int bfs_cudart_load(struct bfs_cudart *rt, char *err, size_t errlen);

/* The runtime's message for rc ("error N" when it has none). */
const char *bfs_cudart_strerror(const struct bfs_cudart *rt, cudaError_t rc);

#endif
