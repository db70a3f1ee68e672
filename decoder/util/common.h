/* SPDX-License-Identifier: Apache-2.0 */
/*
 * common.h — shared vocabulary of the decoder library: value kinds, dtypes,
 * and the thread-local error message.
 *
 * Errors: functions return 0 or a negative errno from a small set
 * (-EBADMSG corrupt data or schema mismatch, -EFBIG over a limit, -EINVAL,
 * -ENOMEM, -EIO, -ENOENT). The human-readable detail of the last failure on
 * the calling thread is kept in a thread-local buffer (bfs_err_msg()); the
 * boundary (CLI, FUSE handler) logs it once.
 *
 * This file knows nothing of FUSE; of threads, only how batchfs starts
 * one; of files, only how a cache file is written whole.
 */
#ifndef BFS_COMMON_H
#define BFS_COMMON_H

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

/* The kind of a tf.train.Feature. NONE: present with no kind set (Feature {}),
 * which counts as missing. */
enum bfs_kind {
	BFS_KIND_NONE = 0,
	BFS_KIND_BYTES = 1,
	BFS_KIND_FLOAT = 2,
	BFS_KIND_INT64 = 3,
};

/* Element types of output tensors. */
enum bfs_dtype {
	BFS_DT_INVALID = 0,
	BFS_DT_U8,
	BFS_DT_I8,
	BFS_DT_U16,
	BFS_DT_I16,
	BFS_DT_U32,
	BFS_DT_I32,
	BFS_DT_U64,
	BFS_DT_I64,
	BFS_DT_F16,
	BFS_DT_F32,
	BFS_DT_F64,
};

const char *bfs_kind_name(enum bfs_kind k); /* "bytes", "float", "int64", "none" */
enum bfs_kind bfs_kind_parse(const char *s); /* BFS_KIND_NONE if unknown */
size_t bfs_dtype_size(enum bfs_dtype t); /* 0 for INVALID */
const char *bfs_dtype_name(enum bfs_dtype t); /* numpy name: "uint8", "float32" ... */
enum bfs_dtype bfs_dtype_parse(const char *s); /* by numpy name; INVALID if unknown */
const char *bfs_dtype_npy_descr(enum bfs_dtype t); /* "<f4", "|u1", ... */
const char *bfs_dtype_safetensors(enum bfs_dtype t); /* "F32", "U8", ... */

/* Thread-local error detail. bfs_err_set formats into it (printf-style) and
 * returns `err` so callers can write `return bfs_err_set(-EBADMSG, ...)`. */
void bfs_err_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A macro, so that callers and static analyzers see the value returned:
 * `err` itself (evaluated once, after the message is formatted). */
#define bfs_err_set(err, ...) (bfs_err_format(__VA_ARGS__), (err))
/* Prefix the current message with "prefix: " (e.g. the shard name). */
void bfs_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *bfs_err_msg(void);

/* pthread_create with SIGINT, SIGTERM, SIGHUP and SIGQUIT blocked in the new
 * thread (the caller's mask is left as it was): a helper thread never takes
 * a signal meant to stop the process, so the one thread that waits for them
 * (the mount's signal thread, or the main thread of a tool) gets it.
 * Returns 0 or a positive errno, like pthread_create. Every thread batchfs
 * starts goes through it. */
int bfs_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg);
/* The same with attributes (stack size, detached; NULL: the defaults). */
int bfs_thread_start_attr(pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg);
/* Fill `set` with the signals above: the ones that stop batchfs. */
void bfs_stop_signals(sigset_t *set);

#define BFS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Byte c as it stands inside a JSON string (a quote or backslash escaped,
 * a control character as \u00XX): written to out, which takes 7 bytes;
 * returns how many it wrote (no terminator). */
size_t bfs_json_char(char out[7], unsigned char c);

/* FNV-1a over n bytes, from h (0xcbf29ce484222325 to start): names of
 * cache files, not a checksum. */
uint64_t bfs_fnv1a(uint64_t h, const void *p, size_t n);

/* Of n records of `size` bytes at base, sorted ascending by the uint64_t
 * at byte `off` of each (a directory's hash, say), the index of the last
 * whose key is <= key: the group that key belongs to. 0 when n is 0 or
 * every key is larger. A binary search: O(log n). */
size_t bfs_sorted_u64_floor(const void *base, size_t n, size_t size, size_t off, uint64_t key);

/* Write the n pieces iov[0..n) (in order; n may pass IOV_MAX) as the
 * whole new content of `path`, which readers see either as it was or with
 * every byte: written to a temporary "<path>.tmp.XXXXXX" beside it (mode
 * 0644; mkostemp, so the name is unique even among hosts sharing the
 * directory, which pids are not), then renamed over path. Short writes and
 * EINTR are resumed; on any failure the temporary is removed and path is
 * left as it was. iov is not modified. No fsync (a cache file torn by a
 * crash fails its loader's checks and is rebuilt). 0 or -errno
 * (-ENAMETOOLONG, -ENOSPC, -EACCES, -EROFS ...). */
int bfs_write_file_atomic(const char *path, const struct iovec *iov, size_t n);
/* The whole of `path`, a regular file of at most max bytes, with a NUL
 * after its *len bytes (malloc'd); NULL when it is not such a file, cannot
 * be read or there is no memory. */
char *bfs_read_file(const char *path, size_t max, size_t *len);
/* mkdir -p DIR (0755). 0 or -errno. */
int bfs_cache_dir_make(const char *dir);

/* A xorshift64* generator for retry jitter (not for anything that must
 * be unpredictable): bfs_rand_seed makes any seed a usable state (never
 * 0), bfs_rand_next steps the state and gives the next number. */
static inline uint64_t bfs_rand_seed(uint64_t seed)
{
	return seed ? seed : 0x9e3779b97f4a7c15ULL;
}

static inline uint64_t bfs_rand_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* The environment variable name's value, or NULL when it is unset or
 * empty (the AWS and Google conventions: an empty variable is no setting). */
static inline const char *bfs_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The wait before retry `retry` (1 for the first): first ms (0: 1),
 * doubling up to max ms (0: no doubling), drawn from its upper half with
 * rnd (bfs_rand_next), so that clients that failed together spread out. */
static inline unsigned bfs_backoff_ms(uint64_t first, uint64_t max, unsigned retry, uint64_t rnd)
{
	uint64_t cap = first ? first : 1;

	for (unsigned i = 1; i < retry && cap < max; i++)
		cap *= 2;
	if (max && cap > max)
		cap = max;
	return (unsigned)(cap - cap / 2 + rnd % (cap / 2 + 1));
}

/* CLOCK_MONOTONIC in nanoseconds: the one clock of waits and durations. */
static inline uint64_t bfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A little-endian uint64 at p (any alignment). */
static inline uint64_t bfs_get_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8); /* one load: compilers do not always see it in a byte loop */
	return le64toh(v);
}

#endif
