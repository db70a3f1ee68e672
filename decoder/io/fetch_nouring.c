/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch_nouring.c — built instead of fetch_uring.c without liburing: the
 * I/O stage then reads with its reader threads (fetch_threads.c).
 */
#include "fetch_impl.h"

const struct bfs_fetch_backend_ops *const bfs_fetch_uring_ops = NULL;
