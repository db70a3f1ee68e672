/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errlog.c — errors.txt, deduplicated (see errlog.h).
 */
#include "errlog.h"

#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* room for " (skipped)", the newline and the terminator past a line */
#define LINE_EXTRA 32
/* room for "... N more\n" past the kept lines */
#define MORE_EXTRA 64

struct bfs_errlog {
	FILE *echo;
	size_t max_lines;
	pthread_mutex_t lock; /* guards everything below */
	char *text;
	size_t len, cap;
	uint64_t *hashes; /* [max_lines]: of the lines kept, in order */
	struct bfs_errlog_counts n;
};

int bfs_errlog_new(struct bfs_errlog **out, size_t max_lines, FILE *echo)
{
	struct bfs_errlog *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->hashes = calloc(max_lines ? max_lines : 1, sizeof(*l->hashes));
	if (!l->hashes) {
		free(l);
		return -ENOMEM;
	}
	l->max_lines = max_lines;
	l->echo = echo;
	pthread_mutex_init(&l->lock, NULL);
	*out = l;
	return 0;
}

void bfs_errlog_free(struct bfs_errlog *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->lock);
	free(l->text);
	free(l->hashes);
	free(l);
}

static bool seen(const struct bfs_errlog *l, uint64_t h)
{
	for (size_t i = 0; i < l->n.lines; i++)
		if (l->hashes[i] == h)
			return true;
	return false;
}

/* Lock held: room for `need` bytes of text, doubling from 4 KiB. */
static bool reserve(struct bfs_errlog *l, size_t need)
{
	size_t nc;
	char *t;

	if (need <= l->cap)
		return true;
	nc = l->cap ? l->cap * 2 : 4096;
	while (nc < need)
		nc *= 2;
	t = realloc(l->text, nc);
	if (!t)
		return false;
	l->text = t;
	l->cap = nc;
	return true;
}

bool bfs_errlog_add(struct bfs_errlog *l, const char *msg, bool skipped)
{
	return bfs_errlog_add_as(l, msg, skipped, false);
}

bool bfs_errlog_add_as(struct bfs_errlog *l, const char *msg, bool skipped, bool source)
{
	uint64_t h = bfs_fnv1a(0xcbf29ce484222325ull, msg, strlen(msg));
	const char *tail = skipped ? " (skipped)" : "";

	pthread_mutex_lock(&l->lock);
	if (seen(l, h)) {
		pthread_mutex_unlock(&l->lock);
		return false;
	}
	if (source)
		l->n.source++;
	else
		l->n.corrupt++;
	if (skipped)
		l->n.skipped++;
	if (l->n.lines >= l->max_lines) {
		l->n.dropped++;
	} else if (reserve(l, l->len + strlen(msg) + LINE_EXTRA)) {
		l->len += (size_t)snprintf(l->text + l->len, l->cap - l->len, "%s%s\n", msg, tail);
		l->hashes[l->n.lines++] = h;
	}
	/* under the lock: the log's lines come in errors.txt's order */
	if (l->echo)
		fprintf(l->echo, "batchfs: %s%s\n", msg, tail);
	pthread_mutex_unlock(&l->lock);
	return true;
}

char *bfs_errlog_text(struct bfs_errlog *l, size_t *len)
{
	char *s;

	pthread_mutex_lock(&l->lock);
	s = malloc(l->len + MORE_EXTRA);
	if (s) {
		memcpy(s, l->text ? l->text : "", l->len);
		*len = l->len;
		s[*len] = '\0';
		if (l->n.dropped)
			*len += (size_t)snprintf(s + *len, MORE_EXTRA, "... %" PRIu64 " more\n",
						 l->n.dropped);
	}
	pthread_mutex_unlock(&l->lock);
	return s;
}

void bfs_errlog_counts(struct bfs_errlog *l, struct bfs_errlog_counts *out)
{
	pthread_mutex_lock(&l->lock);
	*out = l->n;
	pthread_mutex_unlock(&l->lock);
}
