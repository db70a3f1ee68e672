/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pfor.h — the decoder's one parallel loop: fn(ctx, i) for every i in
 * [0, n), on up to `threads` threads, the calling thread among them.
 *
 * For passes that run once per mount and take seconds over many
 * independent items: loading the index cache files, scanning shards,
 * counting ragged values. Indices are handed out one at a time in
 * increasing order to whichever thread is free, so one slow item (a large
 * shard) never leaves the others idle behind a fixed share; a caller that
 * wants fixed shares makes each item a share.
 *
 * Threads: at most min(threads, n, BFS_PFOR_MAX_THREADS), the caller being
 * one; the others are started by bfs_thread_start (the stop signals
 * blocked in them) and joined before bfs_pfor returns. A helper that cannot
 * be started is done without: the threads there are take its items. No
 * allocation: the loop's state lives on the caller's stack.
 *
 * Errors: fn returns 0, or a negative errno with its message set
 * (bfs_err_set). The first failure stops the loop: items running finish,
 * no further item starts, and bfs_pfor returns that value with the failing
 * thread's message as the caller's (bfs_err_msg). On success the caller's
 * message is what the items the caller ran left there.
 *
 * Thread-safety: fn runs concurrently with itself for different i; it
 * guards whatever the items share. Everything the items wrote is visible
 * to the caller when bfs_pfor returns.
 */
#ifndef BFS_PFOR_H
#define BFS_PFOR_H

#include <stddef.h>

#define BFS_PFOR_MAX_THREADS 64

typedef int (*bfs_pfor_fn)(void *ctx, size_t i);

/* threads 0 counts as 1 (the caller alone). Returns 0 or the first
 * failure's value (see above). */
int bfs_pfor(size_t n, unsigned threads, bfs_pfor_fn fn, void *ctx);

#endif
