/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdcache.c — bounded LRU of shard descriptors (see fdcache.h).
 *
 * One mutex guards the list, the counters and every slot's fd, pins and
 * links. open(2) and close(2) run outside it: a slow disk stalls only the
 * thread that opens.
 */
#include "fdcache.h"

#include "common.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct bfs_fdslot *head, *tail; /* most recently used first */
static size_t nopen, nidle, limit;

static void unlink_slot(struct bfs_fdslot *f)
{
	if (!f->linked)
		return;
	if (f->prev)
		f->prev->next = f->next;
	else
		head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		tail = f->prev;
	f->prev = f->next = NULL;
	f->linked = false;
	nidle--;
}

static void push_front(struct bfs_fdslot *f)
{
	f->prev = NULL;
	f->next = head;
	if (head)
		head->prev = f;
	else
		tail = f;
	head = f;
	f->linked = true;
	nidle++;
}

static size_t default_limit(void)
{
	struct rlimit rl;
	rlim_t n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		n = rl.rlim_cur == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_cur;
	n /= 2;
	return n < 8 ? 8 : (size_t)n;
}

/* With the lock held: take idle descriptors over the limit off the list
 * into out[] (at most cap), to be closed once the lock is dropped. */
static size_t evict_locked(int *out, size_t cap)
{
	size_t k = 0;

	if (!limit)
		limit = default_limit();
	while (nidle && nopen > limit && k < cap) {
		struct bfs_fdslot *v = tail;
		unlink_slot(v);
		out[k++] = v->fd;
		v->fd = -1;
		nopen--;
	}
	return k;
}

static void close_all(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

void bfs_fdslot_init(struct bfs_fdslot *f, const char *path, int fd, uint64_t dev, uint64_t ino)
{
	int out[4];
	size_t n;

	memset(f, 0, sizeof(*f));
	f->path = path;
	f->dev = dev;
	f->ino = ino;
	f->fd = fd;
	pthread_mutex_lock(&lock);
	nopen++;
	push_front(f);
	n = evict_locked(out, 4);
	pthread_mutex_unlock(&lock);
	close_all(out, n);
}

int bfs_fdslot_pin(struct bfs_fdslot *f)
{
	struct stat st;
	int fd, err, out[4];
	size_t n;

	pthread_mutex_lock(&lock);
	if (f->fd >= 0) {
		unlink_slot(f);
		f->pins++;
		pthread_mutex_unlock(&lock);
		return 0;
	}
	pthread_mutex_unlock(&lock);

	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return bfs_err_set(err, "open: %s", strerror(-err));
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		close(fd);
		return bfs_err_set(err, "stat: %s", strerror(-err));
	}
	if ((uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino) {
		close(fd);
		return bfs_err_set(-EIO, "the file was replaced since it was opened (new inode)");
	}

	pthread_mutex_lock(&lock);
	if (f->fd >= 0) { /* another thread opened it meanwhile: use theirs */
		unlink_slot(f);
		n = 0;
		out[n++] = fd;
	} else {
		f->fd = fd;
		nopen++;
		n = 0;
	}
	f->pins++;
	n += evict_locked(out + n, 4 - n);
	pthread_mutex_unlock(&lock);
	close_all(out, n);
	return 0;
}

void bfs_fdslot_unpin(struct bfs_fdslot *f)
{
	int out[4];
	size_t n = 0;

	pthread_mutex_lock(&lock);
	if (f->pins && --f->pins == 0 && f->fd >= 0) {
		push_front(f);
		n = evict_locked(out, 4);
	}
	pthread_mutex_unlock(&lock);
	close_all(out, n);
}

void bfs_fdslot_release(struct bfs_fdslot *f)
{
	int fd;

	pthread_mutex_lock(&lock);
	unlink_slot(f);
	fd = f->fd;
	if (fd >= 0)
		nopen--;
	f->fd = -1;
	f->pins = 0;
	pthread_mutex_unlock(&lock);
	if (fd >= 0)
		close(fd);
}

void bfs_fdcache_set_limit(size_t n)
{
	int out[64];
	size_t k;

	pthread_mutex_lock(&lock);
	limit = n ? n : default_limit();
	pthread_mutex_unlock(&lock);
	do {
		pthread_mutex_lock(&lock);
		k = evict_locked(out, BFS_ARRAY_SIZE(out));
		pthread_mutex_unlock(&lock);
		close_all(out, k);
	} while (k == BFS_ARRAY_SIZE(out));
}

int bfs_nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	if (rl.rlim_cur == rl.rlim_max)
		return 0;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	bfs_fdcache_set_limit(0); /* from the new limit */
	return 0;
}
