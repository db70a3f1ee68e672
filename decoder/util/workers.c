/* SPDX-License-Identifier: Apache-2.0 */
/* workers.c — see workers.h. */
#include "workers.h"

#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bfs_workers_start(struct bfs_workers *w, unsigned n, void *(*fn)(void *), void *arg,
		      size_t stack, bool detached)
{
	pthread_attr_t attr;
	int rc = 0;

	memset(w, 0, sizeof(*w));
	w->tid = calloc(n ? n : 1, sizeof(*w->tid));
	if (!w->tid)
		return -ENOMEM;
	w->detached = detached;
	if (detached) {
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->gone, NULL);
	}
	pthread_attr_init(&attr);
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (unsigned i = 0; i < n; i++) {
		if (detached) {
			/* counted in before it runs: it may end at once */
			pthread_mutex_lock(&w->lock);
			w->running++;
			pthread_mutex_unlock(&w->lock);
		}
		rc = bfs_thread_start_attr(&w->tid[i], &attr, fn, arg);
		if (rc) {
			if (detached) {
				pthread_mutex_lock(&w->lock);
				w->running--;
				pthread_mutex_unlock(&w->lock);
			}
			break;
		}
		w->n++;
	}
	pthread_attr_destroy(&attr);
	if (w->n)
		return 0;
	(void)bfs_workers_join(w, 0); /* none to wait for: w's memory only */
	return rc ? -rc : -EAGAIN;
}

void bfs_workers_stop(pthread_mutex_t *lock, bool *stop, pthread_cond_t *wake, pthread_cond_t *also)
{
	pthread_mutex_lock(lock);
	*stop = true;
	pthread_cond_broadcast(wake);
	if (also)
		pthread_cond_broadcast(also);
	pthread_mutex_unlock(lock);
}

void bfs_workers_exit(struct bfs_workers *w)
{
	pthread_mutex_lock(&w->lock);
	w->running--;
	pthread_cond_broadcast(&w->gone);
	pthread_mutex_unlock(&w->lock);
}

bool bfs_workers_join(struct bfs_workers *w, uint64_t wait_ns)
{
	if (w->detached) {
		struct timespec dl;
		bool all;

		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += (time_t)(wait_ns / 1000000000u);
		dl.tv_nsec += (long)(wait_ns % 1000000000u);
		dl.tv_sec += dl.tv_nsec / 1000000000L;
		dl.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&w->lock);
		while (w->running)
			if (pthread_cond_timedwait(&w->gone, &w->lock, &dl) == ETIMEDOUT)
				break;
		all = w->running == 0;
		pthread_mutex_unlock(&w->lock);
		if (!all)
			return false;
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->gone);
	} else {
		for (unsigned i = 0; i < w->n; i++)
			pthread_join(w->tid[i], NULL);
	}
	free(w->tid);
	memset(w, 0, sizeof(*w));
	return true;
}
