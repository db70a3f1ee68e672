/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c — libbatchfs-cuda (see batchfs/cuda.h).
 */
#include "batchfs/cuda.h"
#include "cudart.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

struct bfs_cuda_batch {
	int fd;
	int device;
	void *base;
	uint64_t bytes;
	size_t n;
	struct bfs_cuda_tensor *t;
	json_t *doc; /* owns the name and dtype strings */
};

static __thread char errbuf[512];
static struct bfs_cudart rt;
static int rt_state; /* 0 not tried, 1 loaded, -1 failed */
static char rt_err[400];
static pthread_mutex_t rt_lock = PTHREAD_MUTEX_INITIALIZER;

static int fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	errno = err;
	return -1;
}

static int runtime(void)
{
	pthread_mutex_lock(&rt_lock);
	if (rt_state == 0)
		rt_state = bfs_cudart_load(&rt, rt_err, sizeof(rt_err)) == 0 ? 1 : -1;
	pthread_mutex_unlock(&rt_lock);
	return rt_state;
}

API const char *bfs_cuda_error(void)
{
	return errbuf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int parse(struct bfs_cuda_batch *b, const char *path, const char *text, size_t len,
		 cudaIpcMemHandle_t *h)
{
	json_error_t je;
	json_t *ts, *v;
	const char *hex;
	size_t i;

	b->doc = json_loadb(text, len, 0, &je);
	if (!b->doc)
		return fail(EPROTO, "%s: not a batchfs descriptor: %s", path, je.text);
	hex = json_string_value(json_object_get(b->doc, "handle"));
	ts = json_object_get(b->doc, "tensors");
	if (!hex || strlen(hex) != 2 * sizeof(h->reserved) || !json_is_array(ts) ||
	    !json_is_integer(json_object_get(b->doc, "bytes")) ||
	    !json_is_integer(json_object_get(b->doc, "device")))
		return fail(EPROTO, "%s: not a batchfs descriptor (handle, device, bytes, tensors)",
			    path);
	for (i = 0; i < sizeof(h->reserved); i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return fail(EPROTO, "%s: field 'handle': not hex", path);
		h->reserved[i] = (char)(hi << 4 | lo);
	}
	b->device = (int)json_integer_value(json_object_get(b->doc, "device"));
	b->bytes = (uint64_t)json_integer_value(json_object_get(b->doc, "bytes"));
	b->n = json_array_size(ts);
	b->t = calloc(b->n ? b->n : 1, sizeof(*b->t));
	if (!b->t)
		return fail(ENOMEM, "out of memory");
	json_array_foreach(ts, i, v)
	{
		struct bfs_cuda_tensor *t = &b->t[i];
		json_t *shape = json_object_get(v, "shape"), *d;
		size_t k;
		t->name = json_string_value(json_object_get(v, "name"));
		t->dtype = json_string_value(json_object_get(v, "dtype"));
		if (!t->name || !t->dtype || !json_is_array(shape) ||
		    json_array_size(shape) > BFS_CUDA_MAX_DIMS ||
		    !json_is_integer(json_object_get(v, "offset")) ||
		    !json_is_integer(json_object_get(v, "nbytes")))
			return fail(EPROTO,
				    "%s: tensor %zu: needs name, dtype, shape, offset, nbytes",
				    path, i);
		t->ndim = (int)json_array_size(shape);
		json_array_foreach(shape, k, d) t->shape[k] = (int64_t)json_integer_value(d);
		t->offset = (uint64_t)json_integer_value(json_object_get(v, "offset"));
		t->nbytes = (uint64_t)json_integer_value(json_object_get(v, "nbytes"));
		if (t->offset > b->bytes || t->nbytes > b->bytes - t->offset)
			return fail(EPROTO,
				    "%s: tensor '%s': bytes %llu+%llu lie outside the buffer", path,
				    t->name, (unsigned long long)t->offset,
				    (unsigned long long)t->nbytes);
	}
	return 0;
}

API int bfs_cuda_open(struct bfs_cuda_batch **out, const char *path, int flags)
{
	struct bfs_cuda_batch *b;
	cudaIpcMemHandle_t h;
	char *text = NULL;
	size_t len = 0, cap = 0;
	ssize_t k;
	cudaError_t rc;
	int e;

	*out = NULL;
	if (runtime() < 0)
		return fail(ENOSYS, "%s", rt_err);
	b = calloc(1, sizeof(*b));
	if (!b)
		return fail(ENOMEM, "out of memory");
	b->fd = open(path, O_RDONLY | O_CLOEXEC | ((flags & BFS_CUDA_NONBLOCK) ? O_NONBLOCK : 0));
	if (b->fd < 0) {
		e = errno;
		free(b);
		return fail(e, "%s: %s", path,
			    e == EAGAIN ? "every device buffer is in use" : strerror(e));
	}
	/* the read returns once the daemon's copy is complete */
	for (;;) {
		if (len == cap) {
			char *q = realloc(text, cap = cap ? 2 * cap : 4096);
			if (!q) {
				fail(ENOMEM, "out of memory");
				goto bad;
			}
			text = q;
		}
		k = pread(b->fd, text + len, cap - len, (off_t)len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			fail(errno, "%s: %s", path, strerror(errno));
			goto bad;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	if (parse(b, path, text, len, &h) != 0)
		goto bad;
	rc = rt.SetDevice(b->device);
	if (rc == cudaSuccess)
		rc = rt.IpcOpenMemHandle(&b->base, h, cudaIpcMemLazyEnablePeerAccess);
	if (rc != cudaSuccess) {
		b->base = NULL;
		fail(EIO, "%s: cudaIpcOpenMemHandle on device %d: %s", path, b->device,
		     bfs_cudart_strerror(&rt, rc));
		goto bad;
	}
	for (size_t i = 0; i < b->n; i++)
		b->t[i].dptr = (char *)b->base + b->t[i].offset;
	free(text);
	*out = b;
	return 0;
bad:
	e = errno;
	free(text);
	bfs_cuda_close(b);
	errno = e;
	return -1;
}

API size_t bfs_cuda_ntensors(const struct bfs_cuda_batch *b)
{
	return b->n;
}

API const struct bfs_cuda_tensor *bfs_cuda_tensor(const struct bfs_cuda_batch *b, size_t i)
{
	return i < b->n ? &b->t[i] : NULL;
}

API const struct bfs_cuda_tensor *bfs_cuda_find(const struct bfs_cuda_batch *b, const char *name)
{
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(b->t[i].name, name) == 0)
			return &b->t[i];
	return NULL;
}

API int bfs_cuda_device(const struct bfs_cuda_batch *b)
{
	return b->device;
}

API void *bfs_cuda_base(const struct bfs_cuda_batch *b)
{
	return b->base;
}

API uint64_t bfs_cuda_bytes(const struct bfs_cuda_batch *b)
{
	return b->bytes;
}

API int bfs_cuda_to_host(const struct bfs_cuda_batch *b, const struct bfs_cuda_tensor *t, void *dst)
{
	cudaError_t rc = rt.Memcpy(dst, t->dptr, t->nbytes, cudaMemcpyDeviceToHost);

	if (rc != cudaSuccess)
		return fail(EIO, "tensor '%s': cudaMemcpy: %s", t->name,
			    bfs_cudart_strerror(&rt, rc));
	return 0;
}

API void bfs_cuda_close(struct bfs_cuda_batch *b)
{
	if (!b)
		return;
	if (b->base)
		rt.IpcCloseMemHandle(b->base);
	if (b->fd >= 0)
		close(b->fd);
	free(b->t);
	json_decref(b->doc);
	free(b);
}
