/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cudapool.c — the CUDA path's pool of device buffers: owners and the
 * queue of opens (see cudapool.h).
 */
#include "cudapool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct bfs_cudapool {
	unsigned n;
	pthread_mutex_t lock; /* guards everything below */
	bool *busy; /* [n]: the buffer belongs to an open descriptor, or a waiter */
	struct bfs_cudapool_waiter *head, *tail; /* the queue, oldest first */
	struct bfs_cudapool_stats st;
};

int bfs_cudapool_new(struct bfs_cudapool **out, unsigned n)
{
	struct bfs_cudapool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->n = n ? n : 1;
	p->busy = calloc(p->n, sizeof(*p->busy));
	if (!p->busy) {
		free(p);
		return -ENOMEM;
	}
	p->st.pool = p->n;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void bfs_cudapool_free(struct bfs_cudapool *p)
{
	if (!p)
		return;
	pthread_mutex_destroy(&p->lock);
	free(p->busy);
	free(p);
}

int bfs_cudapool_take(struct bfs_cudapool *p, struct bfs_cudapool_waiter *w, bool nonblock,
		      bool (*gone)(const void *tag))
{
	int rc = -EINPROGRESS;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->n; i++)
		if (!p->busy[i]) {
			p->busy[i] = true;
			p->st.busy++;
			pthread_mutex_unlock(&p->lock);
			return (int)i;
		}
	if (nonblock) {
		p->st.eagain++;
		rc = -EAGAIN;
	} else if (gone && gone(w->tag)) {
		rc = -EINTR;
	} else {
		p->st.waits++;
		w->next = NULL;
		if (p->tail)
			p->tail->next = w;
		else
			p->head = w;
		p->tail = w;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

struct bfs_cudapool_waiter *bfs_cudapool_put(struct bfs_cudapool *p, unsigned slot)
{
	struct bfs_cudapool_waiter *w;

	pthread_mutex_lock(&p->lock);
	w = p->head;
	if (w) { /* the buffer stays busy: it changes hands */
		p->head = w->next;
		if (!p->head)
			p->tail = NULL;
		w->next = NULL;
	} else if (slot < p->n && p->busy[slot]) {
		p->busy[slot] = false;
		p->st.busy--;
	}
	pthread_mutex_unlock(&p->lock);
	return w;
}

struct bfs_cudapool_waiter *bfs_cudapool_cancel(struct bfs_cudapool *p, const void *tag)
{
	struct bfs_cudapool_waiter *w = NULL, *prev = NULL;

	pthread_mutex_lock(&p->lock);
	for (struct bfs_cudapool_waiter **pp = &p->head; *pp; prev = *pp, pp = &(*pp)->next)
		if ((*pp)->tag == tag) {
			w = *pp;
			*pp = w->next;
			if (p->tail == w)
				p->tail = prev;
			w->next = NULL;
			break;
		}
	pthread_mutex_unlock(&p->lock);
	return w;
}

void bfs_cudapool_opened(struct bfs_cudapool *p)
{
	pthread_mutex_lock(&p->lock);
	p->st.opens++;
	pthread_mutex_unlock(&p->lock);
}

void bfs_cudapool_failed(struct bfs_cudapool *p)
{
	pthread_mutex_lock(&p->lock);
	p->st.errors++;
	pthread_mutex_unlock(&p->lock);
}

void bfs_cudapool_stats(struct bfs_cudapool *p, struct bfs_cudapool_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	pthread_mutex_unlock(&p->lock);
}
