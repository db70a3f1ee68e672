/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudapath.c — the daemon's side of the CUDA path (see cudapath.h). All
 * CUDA calls go through cuda/cudart.h, loaded at run time.
 */
#include "cudapath.h"

#include "common.h"
#include "cudart.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	void *dptr;
	size_t cap;
	cudaStream_t stream;
	cudaEvent_t event;
	char hex[BFS_CUDA_HANDLE_HEX + 1];
};

/* A pinned buffer starts PIN_HDR bytes into its cudaHostAlloc block; the
 * block's first bytes hold its capacity, so that a buffer given back can be
 * kept and handed out again without asking its size. */
#define PIN_HDR 64
/* Page-locking costs more than decoding a batch (on an H200, ~3 ms for 4.8
 * MB), so blocks given back are kept for the next batches: at most this
 * many, beside those the cache holds. */
#define PIN_SPARES 4

struct pin_spare {
	uint8_t *base;
	uint64_t cap;
};

struct bfs_cudapath {
	struct bfs_cudart rt;
	int device;
	unsigned n;
	struct slot *slots;
	bool ready;
	pthread_mutex_t lock; /* guards st, spare, nspare */
	struct bfs_cudapath_stats st;
	struct pin_spare spare[PIN_SPARES];
	unsigned nspare;
};

int bfs_cudapath_load(struct bfs_cudapath **out, int device, unsigned pool, char *err,
		      size_t errlen)
{
	struct bfs_cudapath *cp = calloc(1, sizeof(*cp));

	if (!cp || !(cp->slots = calloc(pool ? pool : 1, sizeof(*cp->slots)))) {
		free(cp);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	cp->device = device;
	cp->n = pool ? pool : 1;
	pthread_mutex_init(&cp->lock, NULL);
	if (bfs_cudart_load(&cp->rt, err, errlen) != 0) {
		bfs_cudapath_free(cp);
		return -1;
	}
	*out = cp;
	return 0;
}

int bfs_cudapath_init(struct bfs_cudapath *cp, char *err, size_t errlen)
{
	int count = 0;
	cudaError_t rc = cp->rt.GetDeviceCount(&count);

	if (rc != cudaSuccess || count <= 0) {
		snprintf(err, errlen, "no usable GPU (%s: %s)", cp->rt.path,
			 rc != cudaSuccess ? bfs_cudart_strerror(&cp->rt, rc) : "0 devices");
		return -1;
	}
	if (cp->device >= count) {
		snprintf(err, errlen, "no CUDA device %d (this machine has %d)", cp->device, count);
		return -1;
	}
	rc = cp->rt.SetDevice(cp->device);
	for (unsigned i = 0; i < cp->n && rc == cudaSuccess; i++) {
		rc = cp->rt.StreamCreateWithFlags(&cp->slots[i].stream, cudaStreamNonBlocking);
		if (rc == cudaSuccess)
			rc = cp->rt.EventCreateWithFlags(&cp->slots[i].event,
							 cudaEventDisableTiming);
	}
	if (rc != cudaSuccess) {
		snprintf(err, errlen, "CUDA device %d: %s", cp->device,
			 bfs_cudart_strerror(&cp->rt, rc));
		return -1;
	}
	cp->ready = true;
	return 0;
}

void bfs_cudapath_free(struct bfs_cudapath *cp)
{
	if (!cp)
		return;
	if (cp->ready) {
		for (unsigned i = 0; i < cp->n; i++) {
			struct slot *s = &cp->slots[i];
			if (s->stream)
				cp->rt.StreamSynchronize(s->stream);
			if (s->dptr)
				cp->rt.Free(s->dptr);
			if (s->event)
				cp->rt.EventDestroy(s->event);
			if (s->stream)
				cp->rt.StreamDestroy(s->stream);
		}
	}
	for (unsigned i = 0; i < cp->nspare; i++)
		cp->rt.FreeHost(cp->spare[i].base);
	/* the runtime stays loaded: unloading it at exit races its own atexit work */
	pthread_mutex_destroy(&cp->lock);
	free(cp->slots);
	free(cp);
}

unsigned bfs_cudapath_pool(const struct bfs_cudapath *cp)
{
	return cp->n;
}

int bfs_cudapath_device(const struct bfs_cudapath *cp)
{
	return cp->device;
}

/* The smallest kept block of at least need bytes (and at most twice that),
 * or NULL; *cap gets its capacity. Lock held. */
static uint8_t *take_spare(struct bfs_cudapath *cp, uint64_t need, uint64_t *cap)
{
	unsigned best = PIN_SPARES;

	for (unsigned i = 0; i < cp->nspare; i++)
		if (cp->spare[i].cap >= need && cp->spare[i].cap / 2 <= need &&
		    (best == PIN_SPARES || cp->spare[i].cap < cp->spare[best].cap))
			best = i;
	if (best == PIN_SPARES)
		return NULL;
	uint8_t *base = cp->spare[best].base;
	*cap = cp->spare[best].cap;
	cp->spare[best] = cp->spare[--cp->nspare];
	return base;
}

/* Decoded batches are copied once into page-locked memory from the runtime,
 * so that the device copy is a DMA from pinned memory (a malloc'd buffer
 * cannot be registered in place: it may share pages with another one). A
 * block given back by unpin is reused before a new one is allocated. */
int bfs_cudapath_pin(void *arg, uint8_t **buf, uint64_t size)
{
	struct bfs_cudapath *cp = arg;
	uint64_t need = size ? size : 1, cap = 0;
	uint8_t *base;
	void *p = NULL;

	if (!cp->ready)
		return -ENOMEM;
	pthread_mutex_lock(&cp->lock);
	base = take_spare(cp, need, &cap);
	pthread_mutex_unlock(&cp->lock);
	if (!base) {
		if (need > UINT64_MAX - PIN_HDR ||
		    cp->rt.HostAlloc(&p, (size_t)(need + PIN_HDR), cudaHostAllocDefault) !=
			    cudaSuccess)
			return -ENOMEM;
		base = p;
		cap = need;
		memcpy(base, &cap, sizeof(cap));
		pthread_mutex_lock(&cp->lock);
		cp->st.host_allocs++;
		pthread_mutex_unlock(&cp->lock);
	}
	memcpy(base + PIN_HDR, *buf, size);
	free(*buf);
	*buf = base + PIN_HDR;
	pthread_mutex_lock(&cp->lock);
	cp->st.pinned++;
	cp->st.pinned_bytes += size;
	pthread_mutex_unlock(&cp->lock);
	return 0;
}

void bfs_cudapath_unpin(void *arg, uint8_t *buf)
{
	struct bfs_cudapath *cp = arg;
	uint8_t *base = buf - PIN_HDR;
	uint64_t cap;

	memcpy(&cap, base, sizeof(cap));
	pthread_mutex_lock(&cp->lock);
	cp->st.pinned--;
	if (cp->nspare < PIN_SPARES) {
		cp->spare[cp->nspare++] = (struct pin_spare){ base, cap };
		base = NULL;
	}
	pthread_mutex_unlock(&cp->lock);
	if (base)
		cp->rt.FreeHost(base);
}

int bfs_cudapath_copy(struct bfs_cudapath *cp, unsigned slot, const void *src, uint64_t n,
		      char *hex, char *err, size_t errlen)
{
	struct slot *s = &cp->slots[slot];
	cudaError_t rc = cudaSuccess;
	const char *what = "cudaMemcpyAsync";

	if (s->cap < n || !s->dptr) {
		/* grow in 1 MiB steps; the previous copy from this buffer is done
		 * (the slot was released only after its event) */
		size_t cap = (size_t)((n + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1));
		const uint64_t old = s->cap;
		if (cap == 0)
			cap = 1u << 20;
		if (s->dptr)
			cp->rt.Free(s->dptr);
		s->dptr = NULL;
		s->cap = 0;
		what = "cudaMalloc";
		rc = cp->rt.Malloc(&s->dptr, cap);
		if (rc == cudaSuccess) {
			cudaIpcMemHandle_t h;
			s->cap = cap;
			what = "cudaIpcGetMemHandle";
			rc = cp->rt.IpcGetMemHandle(&h, s->dptr);
			for (size_t i = 0; rc == cudaSuccess && i < sizeof(h.reserved); i++)
				snprintf(s->hex + 2 * i, 3, "%02x", (unsigned char)h.reserved[i]);
		}
		/* by difference: another slot's cap is its owner's, written
		 * without the lock, so summing the slots here would race */
		pthread_mutex_lock(&cp->lock);
		cp->st.device_bytes = cp->st.device_bytes - old + s->cap;
		pthread_mutex_unlock(&cp->lock);
		what = rc == cudaSuccess ? "cudaMemcpyAsync" : what;
	}
	if (rc == cudaSuccess && n)
		rc = cp->rt.MemcpyAsync(s->dptr, src, n, cudaMemcpyHostToDevice, s->stream);
	if (rc == cudaSuccess)
		rc = cp->rt.EventRecord(s->event, s->stream);
	if (rc != cudaSuccess) {
		snprintf(err, errlen, "CUDA device %d: %s: %s", cp->device, what,
			 bfs_cudart_strerror(&cp->rt, rc));
		return -EIO;
	}
	memcpy(hex, s->hex, sizeof(s->hex));
	pthread_mutex_lock(&cp->lock);
	cp->st.copies++;
	cp->st.bytes += n;
	pthread_mutex_unlock(&cp->lock);
	return 0;
}

int bfs_cudapath_wait(struct bfs_cudapath *cp, unsigned slot, char *err, size_t errlen)
{
	cudaError_t rc = cp->rt.EventSynchronize(cp->slots[slot].event);

	if (rc != cudaSuccess) {
		snprintf(err, errlen, "CUDA device %d: cudaEventSynchronize: %s", cp->device,
			 bfs_cudart_strerror(&cp->rt, rc));
		return -EIO;
	}
	return 0;
}

void bfs_cudapath_stats(struct bfs_cudapath *cp, struct bfs_cudapath_stats *st)
{
	pthread_mutex_lock(&cp->lock);
	*st = cp->st;
	pthread_mutex_unlock(&cp->lock);
}

/* ------------------------------------------------------------ descriptor */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t nc = (b->cap + (size_t)n + 1) * 2;
		char *q = realloc(b->p, nc);
		if (!q) {
			b->oom = true;
			return;
		}
		b->p = q;
		b->cap = nc;
	}
}

static void put_json_string(struct sbuf *b, const char *s)
{
	char tmp[7];

	put(b, "\"");
	for (; *s; s++) {
		int k = (int)bfs_json_char(tmp, (unsigned char)*s);
		put(b, "%.*s", k, tmp);
	}
	put(b, "\"");
}

char *bfs_cudapath_describe(const struct bfs_plan *plan, const struct bfs_geom *g, int device,
			    const char *hex, size_t *len)
{
	struct sbuf b = { .cap = 512 };
	char zeros[BFS_CUDA_HANDLE_HEX + 1];

	b.p = malloc(b.cap);
	if (!b.p)
		return NULL;
	memset(zeros, '0', BFS_CUDA_HANDLE_HEX);
	zeros[BFS_CUDA_HANDLE_HEX] = '\0';
	put(&b,
	    "{\"version\":1,\"handle\":\"%s\",\"device\":%d,\"bytes\":%" PRIu64 ",\"tensors\":[",
	    hex ? hex : zeros, device, g->st_size);
	for (size_t t = 0; t < g->ntensors; t++) {
		const struct bfs_tensor_geom *tg = &g->g[t];
		put(&b, "%s{\"name\":", t ? "," : "");
		put_json_string(&b, plan->t[t].name);
		put(&b, ",\"dtype\":\"%s\",\"shape\":[", bfs_dtype_name(plan->t[t].dtype));
		for (int d = 0; d < tg->ndim; d++)
			put(&b, "%s%" PRId64, d ? "," : "", tg->shape[d]);
		put(&b, "],\"offset\":%" PRIu64 ",\"nbytes\":%" PRIu64 "}", tg->offset, tg->nbytes);
	}
	put(&b, "]}\n");
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
