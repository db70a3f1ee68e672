/* SPDX-License-Identifier: Apache-2.0 */
/*
 * example_impl.h — the allocation behind a struct bfs_example, shared by the
 * reference decoder (example.c, protobuf-c) and the fast one (wire.c).
 * Internal to the example module.
 */
#ifndef BFS_EXAMPLE_IMPL_H
#define BFS_EXAMPLE_IMPL_H

#include "example.h"

struct example_impl {
	struct bfs_example pub; /* first: bfs_example_free finds the rest */
	void *msg; /* the protobuf-c message, or NULL (fast decoder) */
};

#endif
