/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudart.c — the only file that loads the CUDA runtime (see cudart.h).
 */
#include "cudart.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const candidates[] = {
	"libcudart.so",
	"libcudart.so.13",
	"libcudart.so.12",
	"libcudart.so.11.0",
	"/usr/local/cuda/lib64/libcudart.so",
};

#define SYM(field, name)                                                                           \
	do {                                                                                       \
		*(void **)(&rt->field) = dlsym(rt->dl, name);                                      \
		if (!rt->field) {                                                                  \
			snprintf(err, errlen, "%s has no %s", rt->path, name);                     \
			goto fail;                                                                 \
		}                                                                                  \
	} while (0)

int bfs_cudart_load(struct bfs_cudart *rt, char *err, size_t errlen)
{
	const char *env = getenv("BATCHFS_CUDART");
	const char *why = "not found";

	memset(rt, 0, sizeof(*rt));
	if (env && *env) {
		rt->dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!rt->dl) {
			const char *e = dlerror();
			snprintf(err, errlen, "cannot load the CUDA runtime %s: %s", env,
				 e ? e : "dlopen failed");
			return -1;
		}
		snprintf(rt->path, sizeof(rt->path), "%s", env);
	} else {
		for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && !rt->dl; i++) {
			rt->dl = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
			if (rt->dl)
				snprintf(rt->path, sizeof(rt->path), "%s", candidates[i]);
			else if (dlerror())
				why = "not found or not loadable";
		}
		if (!rt->dl) {
			snprintf(err, errlen, "no CUDA runtime (libcudart.so): %s", why);
			return -1;
		}
	}
	SYM(GetDeviceCount, "cudaGetDeviceCount");
	SYM(SetDevice, "cudaSetDevice");
	SYM(Malloc, "cudaMalloc");
	SYM(Free, "cudaFree");
	SYM(HostAlloc, "cudaHostAlloc");
	SYM(FreeHost, "cudaFreeHost");
	SYM(Memcpy, "cudaMemcpy");
	SYM(MemcpyAsync, "cudaMemcpyAsync");
	SYM(StreamCreateWithFlags, "cudaStreamCreateWithFlags");
	SYM(StreamDestroy, "cudaStreamDestroy");
	SYM(StreamSynchronize, "cudaStreamSynchronize");
	SYM(EventCreateWithFlags, "cudaEventCreateWithFlags");
	SYM(EventRecord, "cudaEventRecord");
	SYM(EventSynchronize, "cudaEventSynchronize");
	SYM(EventDestroy, "cudaEventDestroy");
	SYM(IpcGetMemHandle, "cudaIpcGetMemHandle");
	SYM(IpcOpenMemHandle, "cudaIpcOpenMemHandle");
	SYM(IpcCloseMemHandle, "cudaIpcCloseMemHandle");
	SYM(GetErrorString, "cudaGetErrorString");
	return 0;
fail:
	dlclose(rt->dl);
	rt->dl = NULL;
	return -1;
}

const char *bfs_cudart_strerror(const struct bfs_cudart *rt, cudaError_t rc)
{
	static __thread char buf[32];
	const char *s = rt && rt->GetErrorString ? rt->GetErrorString(rc) : NULL;

	if (s)
		return s;
	snprintf(buf, sizeof(buf), "error %d", (int)rc);
	return buf;
}
