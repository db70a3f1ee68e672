/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mapguard.h — copies out of a read-only file mapping that turn the SIGBUS
 * of a file shrunk under the mapping into an error.
 *
 * A plain shard is mapped once; a shuffled batch then copies each record out
 * of the mapping with no system call. If the shard is truncated while
 * mapped, touching a page past its new end raises SIGBUS: the guard catches
 * it on the faulting thread and the copy returns -EIO instead of killing
 * the daemon. A SIGBUS outside a guarded copy (or on another thread) is not
 * ours: the previous handler is put back and the fault happens again, so
 * the default action still applies.
 *
 * Cost: a sigsetjmp that saves no signal mask (no system call) per copy.
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_MAPGUARD_H
#define BFS_MAPGUARD_H

#include <stddef.h>

/* Install the SIGBUS handler (once per process; later calls do nothing).
 * Returns 0, or a negative errno when sigaction fails. */
int bfs_mapguard_init(void);

/* memcpy(dst, src, n) where src lies in a file mapping. 0, or -EIO when the
 * mapping faulted (the file shrank under it); dst is then partly written. */
int bfs_mapguard_copy(void *dst, const void *src, size_t n);

/* Load one byte at each of addrs[0..n) (in a file mapping), so that the
 * cache misses of scattered records overlap before they are copied: a
 * load, unlike a prefetch hint, is never dropped for a TLB miss. 0, or
 * -EIO when the mapping faulted. */
int bfs_mapguard_touch(const void *const *addrs, size_t n);

#endif
