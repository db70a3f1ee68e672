/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3str.h — a growable string, shared by the cloud unit's files (the
 * object-store client, the credential providers, the HTTP client): static
 * inline functions only.
 */
#ifndef BFS_S3STR_H
#define BFS_S3STR_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated string that grows; err sticks at -ENOMEM (or -EFBIG past
 * max, when max is set) and every later append is a no-op. */
struct bfs_s3_str {
	char *p;
	size_t n, cap;
	size_t max; /* 0: no bound */
	int err;
};

static inline int bfs_s3_str_reserve(struct bfs_s3_str *s, size_t more)
{
	size_t want, cap;
	char *p;

	if (s->err)
		return s->err;
	if (__builtin_add_overflow(s->n, more, &want) || want == SIZE_MAX ||
	    (s->max && want > s->max)) {
		s->err = s->max ? -EFBIG : -ENOMEM;
		return s->err;
	}
	if (want < s->cap)
		return 0;
	cap = s->cap ? s->cap : 64;
	while (cap <= want)
		cap = cap > SIZE_MAX / 2 ? want + 1 : cap * 2;
	p = realloc(s->p, cap);
	if (!p) {
		s->err = -ENOMEM;
		return s->err;
	}
	s->p = p;
	s->cap = cap;
	return 0;
}

static inline void bfs_s3_str_add(struct bfs_s3_str *s, const void *p, size_t n)
{
	if (bfs_s3_str_reserve(s, n))
		return;
	if (n)
		memcpy(s->p + s->n, p, n);
	s->n += n;
	s->p[s->n] = '\0';
}

static inline void bfs_s3_str_adds(struct bfs_s3_str *s, const char *z)
{
	bfs_s3_str_add(s, z, strlen(z));
}

static inline void bfs_s3_str_addc(struct bfs_s3_str *s, char c)
{
	bfs_s3_str_add(s, &c, 1);
}

__attribute__((format(printf, 2, 3))) static inline void bfs_s3_str_addf(struct bfs_s3_str *s,
									 const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		s->err = -EINVAL;
		return;
	}
	if (bfs_s3_str_reserve(s, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(s->p + s->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s->n += (size_t)n;
}

/* Take the string (never NULL on success: "" when nothing was added);
 * returns 0 or the sticky error, and frees it then. */
static inline int bfs_s3_str_take(struct bfs_s3_str *s, char **out)
{
	if (!s->err && !s->p) { /* nothing was added: "" */
		s->p = calloc(1, 1);
		s->cap = 1;
		if (!s->p)
			s->err = -ENOMEM;
	}
	if (s->err) {
		free(s->p);
		s->p = NULL;
		return s->err;
	}
	*out = s->p;
	s->p = NULL;
	s->n = s->cap = 0;
	return 0;
}

static inline void bfs_s3_str_free(struct bfs_s3_str *s)
{
	free(s->p);
	s->p = NULL;
	s->n = s->cap = 0;
}

#endif
