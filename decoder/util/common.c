/* SPDX-License-Identifier: Apache-2.0 */
/* common.c — kinds, dtypes, the thread-local error message, and the one
 * way a cache file is written. */
#include "common.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ERRBUF_SIZE 1024
static _Thread_local char errbuf[ERRBUF_SIZE];

void bfs_err_format(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
}

void bfs_err_prefix(const char *fmt, ...)
{
	char prefix[ERRBUF_SIZE];
	char old[ERRBUF_SIZE];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, errbuf, sizeof(old));
	size_t n = strnlen(prefix, sizeof(prefix) - 1);
	memcpy(errbuf, prefix, n);
	if (old[0] && n + 2 < sizeof(errbuf)) {
		size_t m = strnlen(old, sizeof(errbuf) - n - 3);
		memcpy(errbuf + n, ": ", 2);
		memcpy(errbuf + n + 2, old, m);
		n += 2 + m;
	}
	errbuf[n] = '\0';
}

const char *bfs_err_msg(void)
{
	return errbuf[0] ? errbuf : "unknown error";
}

static const char *const kind_names[] = {
	[BFS_KIND_NONE] = "none",
	[BFS_KIND_BYTES] = "bytes",
	[BFS_KIND_FLOAT] = "float",
	[BFS_KIND_INT64] = "int64",
};

const char *bfs_kind_name(enum bfs_kind k)
{
	if ((unsigned)k < BFS_ARRAY_SIZE(kind_names))
		return kind_names[k];
	return "?";
}

enum bfs_kind bfs_kind_parse(const char *s)
{
	for (size_t i = 1; i < BFS_ARRAY_SIZE(kind_names); i++)
		if (strcmp(s, kind_names[i]) == 0)
			return (enum bfs_kind)i;
	return BFS_KIND_NONE;
}

struct dtype_info {
	const char *name;
	const char *descr;
	const char *st;
	size_t size;
};

static const struct dtype_info dtypes[] = {
	[BFS_DT_INVALID] = { "invalid", "", "", 0 },
	[BFS_DT_U8] = { "uint8", "|u1", "U8", 1 },
	[BFS_DT_I8] = { "int8", "|i1", "I8", 1 },
	[BFS_DT_U16] = { "uint16", "<u2", "U16", 2 },
	[BFS_DT_I16] = { "int16", "<i2", "I16", 2 },
	[BFS_DT_U32] = { "uint32", "<u4", "U32", 4 },
	[BFS_DT_I32] = { "int32", "<i4", "I32", 4 },
	[BFS_DT_U64] = { "uint64", "<u8", "U64", 8 },
	[BFS_DT_I64] = { "int64", "<i8", "I64", 8 },
	[BFS_DT_F16] = { "float16", "<f2", "F16", 2 },
	[BFS_DT_F32] = { "float32", "<f4", "F32", 4 },
	[BFS_DT_F64] = { "float64", "<f8", "F64", 8 },
};

static const struct dtype_info *dtype_get(enum bfs_dtype t)
{
	if ((unsigned)t < BFS_ARRAY_SIZE(dtypes))
		return &dtypes[t];
	return &dtypes[BFS_DT_INVALID];
}

size_t bfs_dtype_size(enum bfs_dtype t)
{
	return dtype_get(t)->size;
}

const char *bfs_dtype_name(enum bfs_dtype t)
{
	return dtype_get(t)->name;
}

const char *bfs_dtype_npy_descr(enum bfs_dtype t)
{
	return dtype_get(t)->descr;
}

const char *bfs_dtype_safetensors(enum bfs_dtype t)
{
	return dtype_get(t)->st;
}

enum bfs_dtype bfs_dtype_parse(const char *s)
{
	for (size_t i = 1; i < BFS_ARRAY_SIZE(dtypes); i++)
		if (strcmp(s, dtypes[i].name) == 0)
			return (enum bfs_dtype)i;
	return BFS_DT_INVALID;
}

void bfs_stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
}

int bfs_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	return bfs_thread_start_attr(tid, NULL, fn, arg);
}

int bfs_thread_start_attr(pthread_t *tid, const pthread_attr_t *attr, void *(*fn)(void *),
			  void *arg)
{
	sigset_t stop, old;
	int rc;

	bfs_stop_signals(&stop);
	/* the new thread inherits the mask in force at pthread_create */
	rc = pthread_sigmask(SIG_BLOCK, &stop, &old);
	if (rc)
		return rc;
	rc = pthread_create(tid, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

size_t bfs_json_char(char out[7], unsigned char c)
{
	if (c == '"' || c == '\\') {
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	}
	if (c < 0x20) {
		static const char hex[] = "0123456789abcdef";
		memcpy(out, "\\u00", 4);
		out[4] = hex[c >> 4];
		out[5] = hex[c & 15];
		return 6;
	}
	out[0] = (char)c;
	return 1;
}

uint64_t bfs_fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

size_t bfs_sorted_u64_floor(const void *base, size_t n, size_t size, size_t off, uint64_t key)
{
	const uint8_t *b = base;
	size_t lo = 0, hi = n;

	while (lo + 1 < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;

		memcpy(&k, b + mid * size + off, sizeof(k));
		if (k <= key)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Write iov[0..n) to fd from the start: writev, IOV_MAX pieces at a time;
 * after a short write, the rest of the piece it stopped in with write(). */
static int writev_all(int fd, const struct iovec *iov, size_t n)
{
	size_t i = 0, off = 0; /* the next byte: iov[i], off bytes in */

	while (i < n) {
		ssize_t w;

		if (off) {
			w = write(fd, (const uint8_t *)iov[i].iov_base + off, iov[i].iov_len - off);
		} else {
			size_t cnt = n - i < IOV_MAX ? n - i : IOV_MAX;

			w = writev(fd, iov + i, (int)cnt);
		}
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0 && iov[i].iov_len > off)
			return -EIO; /* no progress on a byte left */
		off += (size_t)w;
		while (i < n && off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			i++;
		}
	}
	return 0;
}

char *bfs_read_file(const char *path, size_t max, size_t *len)
{
	struct stat st;
	char *buf;
	FILE *f = fopen(path, "rb");

	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		fclose(f);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[st.st_size] = '\0';
		*len = (size_t)st.st_size;
	}
	return buf;
}

int bfs_write_file_atomic(const char *path, const struct iovec *iov, size_t n)
{
	char tmp[PATH_MAX + 16];
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	(void)fchmod(fd, 0644); /* mkostemp makes it 0600 */
	rc = writev_all(fd, iov, n);
	if (close(fd) != 0 && !rc)
		rc = errno ? -errno : -EIO;
	if (!rc && rename(tmp, path) != 0)
		rc = -errno;
	if (rc)
		(void)unlink(tmp);
	return rc;
}

int bfs_cache_dir_make(const char *dir)
{
	char tmp[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, dir, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}
