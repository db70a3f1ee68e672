/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudart_double.c — a host test double of the CUDA runtime calls batchfs
 * uses, loaded in place of libcudart.so through BATCHFS_CUDART (tests only).
 *
 * "Device memory" is POSIX shared memory (shm_open, one object per
 * cudaMalloc), so an IPC handle (the object's name) opened in another
 * process maps the same bytes, as real CUDA IPC does. Streams are worker
 * threads running their copies in order; events mark a point in a stream.
 * It is stricter than the runtime where that proves something:
 *  - an async host-to-device copy from memory that is neither cudaHostAlloc'd
 *    nor cudaHostRegister'ed fails (the real runtime would silently stage it
 *    through a pageable copy): set BFS_CUDA_DOUBLE_PAGEABLE=1 to allow it;
 *  - copies must lie inside one allocation (device or pinned) when they name
 *    device memory;
 *  - a process that did not initialise the runtime (a fork after the first
 *    call) gets cudaErrorInitializationError, as a forked CUDA context would;
 *  - opening an IPC handle in the process that made it fails.
 * BFS_CUDA_DOUBLE_DEVICES=N (default 1) devices; 0 makes every call fail with
 * cudaErrorNoDevice. BFS_CUDA_DOUBLE_DELAY_US=N delays each async copy, so a
 * reader that does not wait for the copy sees stale bytes.
 * BFS_CUDA_DOUBLE_LOG=FILE appends "pid call" for each init and IPC call.
 */
#define BFS_CUDA_OWN_TYPES 1
#include "cudart.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAGIC "bfs-cuda-double:"

enum kind { DEV, IMPORTED, PINNED_ALLOC, PINNED_REG };

struct region {
	uintptr_t base;
	size_t size;
	enum kind kind;
	char name[48]; /* shm object of DEV */
	struct region *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static pid_t init_pid;
static int cur_dev;
static unsigned long seq;

static void logcall(const char *what)
{
	const char *p = getenv("BFS_CUDA_DOUBLE_LOG");
	FILE *f;

	if (!p || !*p)
		return;
	f = fopen(p, "a");
	if (f) {
		fprintf(f, "%d %s\n", (int)getpid(), what);
		fclose(f);
	}
}

static int ndevices(void)
{
	const char *s = getenv("BFS_CUDA_DOUBLE_DEVICES");
	return s && *s ? atoi(s) : 1;
}

/* Every call starts here: the first one initialises the runtime in this
 * process; a forked child of an initialised process cannot use it. */
static cudaError_t enter(void)
{
	pid_t me = getpid();
	cudaError_t rc = cudaSuccess;

	if (ndevices() <= 0)
		return cudaErrorNoDevice;
	pthread_mutex_lock(&lock);
	if (init_pid == 0) {
		init_pid = me;
		pthread_mutex_unlock(&lock);
		logcall("init");
		return cudaSuccess;
	}
	if (init_pid != me)
		rc = cudaErrorInitializationError;
	pthread_mutex_unlock(&lock);
	return rc;
}

/* The region holding [p, p+n) of one of the kinds in mask, or NULL. Lock held. */
static struct region *find(const void *p, size_t n, unsigned mask)
{
	uintptr_t a = (uintptr_t)p;

	for (struct region *r = regions; r; r = r->next)
		if ((mask & (1u << r->kind)) && a >= r->base && a - r->base <= r->size &&
		    n <= r->size - (a - r->base))
			return r;
	return NULL;
}

static struct region *add(uintptr_t base, size_t size, enum kind k)
{
	struct region *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->base = base;
	r->size = size;
	r->kind = k;
	r->next = regions;
	regions = r;
	return r;
}

static struct region *take(uintptr_t base, unsigned mask)
{
	for (struct region **pp = &regions; *pp; pp = &(*pp)->next)
		if ((*pp)->base == base && (mask & (1u << (*pp)->kind))) {
			struct region *r = *pp;
			*pp = r->next;
			return r;
		}
	return NULL;
}

#define M(k) (1u << (k))

EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
	cudaError_t rc = enter();
	if (rc)
		return rc;
	*n = ndevices();
	return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int d)
{
	cudaError_t rc = enter();
	if (rc)
		return rc;
	if (d < 0 || d >= ndevices())
		return cudaErrorInvalidDevice;
	cur_dev = d;
	logcall("setdevice");
	return cudaSuccess;
}

EXPORT const char *cudaGetErrorString(cudaError_t rc)
{
	switch (rc) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInitializationError:
		return "initialization error";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	case cudaErrorNotReady:
		return "device not ready";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "part or all of the requested memory range is already mapped";
	case cudaErrorHostMemoryNotRegistered:
		return "pointer does not correspond to a registered memory region";
	default:
		return "unknown error";
	}
}

EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
	char name[48];
	void *m;
	int fd;
	cudaError_t rc = enter();

	if (rc)
		return rc;
	if (!p)
		return cudaErrorInvalidValue;
	if (size == 0)
		size = 1;
	pthread_mutex_lock(&lock);
	snprintf(name, sizeof(name), "/bfs-cuda-double-%d-%lu", (int)getpid(), ++seq);
	pthread_mutex_unlock(&lock);
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0)
		return cudaErrorMemoryAllocation;
	if (ftruncate(fd, (off_t)size) != 0 ||
	    (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		close(fd);
		shm_unlink(name);
		return cudaErrorMemoryAllocation;
	}
	close(fd);
	pthread_mutex_lock(&lock);
	struct region *r = add((uintptr_t)m, size, DEV);
	if (r)
		snprintf(r->name, sizeof(r->name), "%s", name);
	pthread_mutex_unlock(&lock);
	if (!r) {
		munmap(m, size);
		shm_unlink(name);
		return cudaErrorMemoryAllocation;
	}
	*p = m;
	return cudaSuccess;
}

EXPORT cudaError_t cudaFree(void *p)
{
	cudaError_t rc = enter();
	struct region *r;

	if (rc)
		return rc;
	if (!p)
		return cudaSuccess;
	pthread_mutex_lock(&lock);
	r = take((uintptr_t)p, M(DEV));
	pthread_mutex_unlock(&lock);
	if (!r)
		return cudaErrorInvalidValue;
	munmap(p, r->size);
	shm_unlink(r->name);
	free(r);
	return cudaSuccess;
}

EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	cudaError_t rc = enter();
	void *m = NULL;

	(void)flags;
	if (rc)
		return rc;
	if (!p)
		return cudaErrorInvalidValue;
	if (posix_memalign(&m, 4096, size ? size : 1) != 0)
		return cudaErrorMemoryAllocation;
	pthread_mutex_lock(&lock);
	struct region *r = add((uintptr_t)m, size ? size : 1, PINNED_ALLOC);
	pthread_mutex_unlock(&lock);
	if (!r) {
		free(m);
		return cudaErrorMemoryAllocation;
	}
	*p = m;
	return cudaSuccess;
}

EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
	return cudaHostAlloc(p, size, 0);
}

EXPORT cudaError_t cudaFreeHost(void *p)
{
	cudaError_t rc = enter();
	struct region *r;

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	r = take((uintptr_t)p, M(PINNED_ALLOC));
	pthread_mutex_unlock(&lock);
	if (!r)
		return cudaErrorInvalidValue;
	free(p);
	free(r);
	return cudaSuccess;
}

EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	cudaError_t rc = enter();
	uintptr_t a = (uintptr_t)p;

	(void)flags;
	if (rc)
		return rc;
	if (!p || !size)
		return cudaErrorInvalidValue;
	pthread_mutex_lock(&lock);
	for (struct region *r = regions; r; r = r->next)
		if ((r->kind == PINNED_REG || r->kind == PINNED_ALLOC) && a < r->base + r->size &&
		    r->base < a + size) {
			pthread_mutex_unlock(&lock);
			return cudaErrorHostMemoryAlreadyRegistered;
		}
	struct region *r = add(a, size, PINNED_REG);
	pthread_mutex_unlock(&lock);
	return r ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaHostUnregister(void *p)
{
	cudaError_t rc = enter();
	struct region *r;

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	r = take((uintptr_t)p, M(PINNED_REG));
	pthread_mutex_unlock(&lock);
	if (!r)
		return cudaErrorHostMemoryNotRegistered;
	free(r);
	return cudaSuccess;
}

/* Is the copy legal? Lock held. */
static cudaError_t check_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
			      bool async)
{
	const unsigned dev = M(DEV) | M(IMPORTED), pinned = M(PINNED_ALLOC) | M(PINNED_REG);
	const char *pg = getenv("BFS_CUDA_DOUBLE_PAGEABLE");
	bool strict = async && !(pg && strcmp(pg, "1") == 0);

	switch (k) {
	case cudaMemcpyHostToDevice:
		if (!find(dst, n, dev) || find(src, n, dev))
			return cudaErrorInvalidValue;
		if (strict && !find(src, n, pinned))
			return cudaErrorInvalidValue;
		return cudaSuccess;
	case cudaMemcpyDeviceToHost:
		if (!find(src, n, dev) || find(dst, n, dev))
			return cudaErrorInvalidValue;
		if (strict && !find(dst, n, pinned))
			return cudaErrorInvalidValue;
		return cudaSuccess;
	case cudaMemcpyDeviceToDevice:
		return find(src, n, dev) && find(dst, n, dev) ? cudaSuccess : cudaErrorInvalidValue;
	case cudaMemcpyHostToHost:
		return find(src, n, dev) || find(dst, n, dev) ? cudaErrorInvalidValue : cudaSuccess;
	default:
		return cudaSuccess;
	}
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	cudaError_t rc = enter();

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	rc = check_copy(dst, src, n, k, false);
	pthread_mutex_unlock(&lock);
	if (rc)
		return rc;
	memcpy(dst, src, n);
	return cudaSuccess;
}

/* ------------------------------------------------------------- streams */

struct op {
	void *dst;
	const void *src;
	size_t n;
	struct op *next;
};

struct CUstream_st {
	pthread_mutex_t m;
	pthread_cond_t cv;
	pthread_t tid;
	struct op *head, *tail;
	uint64_t queued, done; /* ops enqueued, ops finished */
	bool stop;
};

struct CUevent_st {
	struct CUstream_st *s; /* NULL: never recorded, or on the default stream */
	uint64_t ticket;
};

static void *stream_main(void *arg)
{
	struct CUstream_st *s = arg;
	const char *d = getenv("BFS_CUDA_DOUBLE_DELAY_US");
	long delay = d ? atol(d) : 0;

	pthread_mutex_lock(&s->m);
	for (;;) {
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cv, &s->m);
		if (!s->head)
			break;
		struct op *o = s->head;
		pthread_mutex_unlock(&s->m);
		if (delay > 0)
			usleep((useconds_t)delay);
		memcpy(o->dst, o->src, o->n);
		pthread_mutex_lock(&s->m);
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		free(o);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->m);
	return NULL;
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
	cudaError_t rc = enter();
	struct CUstream_st *s;

	(void)flags;
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return cudaErrorMemoryAllocation;
	pthread_mutex_init(&s->m, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->tid, NULL, stream_main, s) != 0) {
		free(s);
		return cudaErrorMemoryAllocation;
	}
	*out = s;
	return cudaSuccess;
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *out)
{
	return cudaStreamCreateWithFlags(out, 0);
}

static void wait_ticket(struct CUstream_st *s, uint64_t t)
{
	pthread_mutex_lock(&s->m);
	while (s->done < t)
		pthread_cond_wait(&s->cv, &s->m);
	pthread_mutex_unlock(&s->m);
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	cudaError_t rc = enter();
	uint64_t t;

	if (rc)
		return rc;
	if (!s)
		return cudaSuccess;
	pthread_mutex_lock(&s->m);
	t = s->queued;
	pthread_mutex_unlock(&s->m);
	wait_ticket(s, t);
	return cudaSuccess;
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	cudaError_t rc = enter();

	if (rc)
		return rc;
	if (!s)
		return cudaErrorInvalidResourceHandle;
	pthread_mutex_lock(&s->m);
	s->stop = true; /* pending work still runs, as on a real stream */
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->m);
	pthread_join(s->tid, NULL);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->m);
	free(s);
	return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
				   cudaStream_t s)
{
	cudaError_t rc = enter();
	struct op *o;

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	rc = check_copy(dst, src, n, k, true);
	pthread_mutex_unlock(&lock);
	if (rc)
		return rc;
	if (!s) { /* the legacy default stream: done in order, here */
		memcpy(dst, src, n);
		return cudaSuccess;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return cudaErrorMemoryAllocation;
	o->dst = dst;
	o->src = src;
	o->n = n;
	pthread_mutex_lock(&s->m);
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	s->queued++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->m);
	return cudaSuccess;
}

EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
	cudaError_t rc = enter();

	(void)flags;
	if (rc)
		return rc;
	*out = calloc(1, sizeof(**out));
	return *out ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *out)
{
	return cudaEventCreateWithFlags(out, 0);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
	cudaError_t rc = enter();

	if (rc)
		return rc;
	if (!ev)
		return cudaErrorInvalidResourceHandle;
	ev->s = s;
	ev->ticket = 0;
	if (s) {
		pthread_mutex_lock(&s->m);
		ev->ticket = s->queued;
		pthread_mutex_unlock(&s->m);
	}
	return cudaSuccess;
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	cudaError_t rc = enter();

	if (rc)
		return rc;
	if (!ev)
		return cudaErrorInvalidResourceHandle;
	if (ev->s)
		wait_ticket(ev->s, ev->ticket);
	return cudaSuccess;
}

EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
	cudaError_t rc = enter();
	bool done = true;

	if (rc)
		return rc;
	if (ev && ev->s) {
		pthread_mutex_lock(&ev->s->m);
		done = ev->s->done >= ev->ticket;
		pthread_mutex_unlock(&ev->s->m);
	}
	return done ? cudaSuccess : cudaErrorNotReady;
}

EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	cudaError_t rc = enter();

	if (rc)
		return rc;
	free(ev);
	return cudaSuccess;
}

/* ----------------------------------------------------------------- IPC */

EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
	cudaError_t rc = enter();
	struct region *r;

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	r = find(p, 0, M(DEV));
	if (!r || r->base != (uintptr_t)p) {
		pthread_mutex_unlock(&lock);
		return cudaErrorInvalidValue;
	}
	memset(h, 0, sizeof(*h));
	snprintf(h->reserved, sizeof(h->reserved), MAGIC "%s", r->name);
	pthread_mutex_unlock(&lock);
	logcall("ipc-get");
	return cudaSuccess;
}

EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags)
{
	cudaError_t rc = enter();
	char name[CUDA_IPC_HANDLE_SIZE], self[32];
	struct stat st;
	void *m;
	int fd;

	(void)flags;
	if (rc)
		return rc;
	if (memcmp(h.reserved, MAGIC, strlen(MAGIC)) != 0 ||
	    !memchr(h.reserved, '\0', sizeof(h.reserved)))
		return cudaErrorInvalidResourceHandle;
	snprintf(name, sizeof(name), "%s", h.reserved + strlen(MAGIC));
	snprintf(self, sizeof(self), "/bfs-cuda-double-%d-", (int)getpid());
	if (strncmp(name, self, strlen(self)) == 0)
		return cudaErrorInvalidResourceHandle; /* not in the exporting process */
	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return cudaErrorInvalidResourceHandle;
	if (fstat(fd, &st) != 0 || st.st_size <= 0 ||
	    (m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
		    MAP_FAILED) {
		close(fd);
		return cudaErrorInvalidResourceHandle;
	}
	close(fd);
	pthread_mutex_lock(&lock);
	struct region *r = add((uintptr_t)m, (size_t)st.st_size, IMPORTED);
	pthread_mutex_unlock(&lock);
	if (!r) {
		munmap(m, (size_t)st.st_size);
		return cudaErrorMemoryAllocation;
	}
	logcall("ipc-open");
	*p = m;
	return cudaSuccess;
}

EXPORT cudaError_t cudaIpcCloseMemHandle(void *p)
{
	cudaError_t rc = enter();
	struct region *r;

	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	r = take((uintptr_t)p, M(IMPORTED));
	pthread_mutex_unlock(&lock);
	if (!r)
		return cudaErrorInvalidResourceHandle;
	munmap(p, r->size);
	free(r);
	logcall("ipc-close");
	return cudaSuccess;
}
