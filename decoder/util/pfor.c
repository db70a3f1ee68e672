/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pfor.c — the parallel loop (see pfor.h): an atomic counter hands out the
 * indices, the first failure is kept with its message, and the helpers are
 * joined before the call returns.
 */
#include "pfor.h"

#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

struct pfor {
	bfs_pfor_fn fn;
	void *ctx;
	size_t n;
	atomic_size_t next; /* the next index to hand out */
	atomic_int rc; /* the first failure, 0 while there is none */
	/* its message, written only by the thread whose failure set rc (and
	 * read by the caller after the join) */
	char msg[1024]; /* as long as the thread-local message (common.c) */
};

static void *pfor_run(void *arg)
{
	struct pfor *p = arg;

	/* each thread takes at most one index past n: next stays far from
	 * wrapping */
	while (!atomic_load_explicit(&p->rc, memory_order_relaxed)) {
		size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
		int none = 0, rc;

		if (i >= p->n)
			break;
		rc = p->fn(p->ctx, i);
		if (rc < 0 && atomic_compare_exchange_strong(&p->rc, &none, rc))
			snprintf(p->msg, sizeof(p->msg), "%s", bfs_err_msg());
	}
	return NULL;
}

int bfs_pfor(size_t n, unsigned threads, bfs_pfor_fn fn, void *ctx)
{
	struct pfor p = { .fn = fn, .ctx = ctx, .n = n };
	pthread_t tids[BFS_PFOR_MAX_THREADS - 1];
	unsigned started = 0;
	int rc;

	atomic_init(&p.next, 0);
	atomic_init(&p.rc, 0);
	if (threads > BFS_PFOR_MAX_THREADS)
		threads = BFS_PFOR_MAX_THREADS;
	if (threads > n)
		threads = (unsigned)n;
	for (unsigned t = 1; t < threads; t++)
		if (bfs_thread_start(&tids[started], pfor_run, &p) == 0)
			started++;
	pfor_run(&p);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	rc = atomic_load(&p.rc);
	if (rc)
		(void)bfs_err_set(rc, "%s", p.msg);
	return rc;
}
