/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdcache.h — a bounded, process-wide LRU of open file descriptors, so that
 * a dataset of any number of shards needs a bounded number of descriptors.
 *
 * Each shard owns a struct bfs_fdslot. A caller pins the slot around every
 * use of its descriptor (bfs_fdslot_pin opens the file again if the cache
 * closed it), and unpins it afterwards; a pinned descriptor is never
 * closed, so its number stays valid for the pin's whole span. Unpinned
 * descriptors stay open, least recently used first out, while more than
 * the limit are open. Pins past the limit still succeed (at most one per
 * thread at a time in practice): the limit bounds the idle descriptors.
 *
 * A file opened again must be the one first opened (same device and
 * inode): a shard renamed over is reported, never read in place of the
 * file that was indexed.
 *
 * Thread-safety: every function may be called from any thread; one slot
 * may be pinned by many threads at once.
 */
#ifndef BFS_FDCACHE_H
#define BFS_FDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_fdslot {
	int fd; /* -1: closed (valid to read only while pinned) */
	unsigned pins;
	bool linked; /* in the LRU list (open and unpinned) */
	struct bfs_fdslot *prev, *next;
	uint64_t dev, ino; /* the file first opened */
	const char *path; /* borrowed from the owner */
};

/* Take ownership of the open descriptor `fd` of `path` (borrowed; must
 * outlive the slot) as an unpinned entry. dev/ino identify the file. */
void bfs_fdslot_init(struct bfs_fdslot *f, const char *path, int fd, uint64_t dev, uint64_t ino);

/* Pin the slot's descriptor, opening the file again if needed: 0 (f->fd is
 * then valid until the matching unpin) or a negative errno with a message
 * ("open: ...", or that the file was replaced). */
int bfs_fdslot_pin(struct bfs_fdslot *f);
void bfs_fdslot_unpin(struct bfs_fdslot *f);

/* Close the slot's descriptor (it must not be pinned) and forget it. */
void bfs_fdslot_release(struct bfs_fdslot *f);

/* The most idle descriptors kept open: n, or 0 for the default, half the
 * soft RLIMIT_NOFILE (at least 8; the limit until this is called, taken at
 * the first use). Closes idle descriptors over the new limit at once. */
void bfs_fdcache_set_limit(size_t n);

/* Raise the soft RLIMIT_NOFILE to the hard limit, and the limit above
 * with it. 0 or a negative errno. */
int bfs_nofile_raise(void);

#endif
