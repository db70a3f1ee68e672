/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options_impl.h — what options.c (the parser) and options_table.c (the
 * table) share: the parser's state and the setting of one value.
 * Private to the two; not thread-safe (one parse at a time).
 */
#ifndef BFS_OPTIONS_IMPL_H
#define BFS_OPTIONS_IMPL_H

#include "options.h"

/* fuse_opt's keys of the table's entries: 2 x index (+1 for the alias) */
#define MAX_OPTIONS 64

struct bfs_options_parser {
	struct bfs_options *o;
	const struct bfs_option *tab; /* bfs_options_table's */
	size_t ntab;
	int nonopt;
	bool failed;
	bool in_features; /* the last option was features=: libfuse split its commas */
	bool given[MAX_OPTIONS]; /* by index in the table */
	bool block_given; /* an option only for shuffle=block was given: */
	char block_arg[64]; /* the last of them */
};

/* "batchfs: option 'ARG': WHY" on stderr; marks the parse failed. -1. */
int bfs_options_bad(struct bfs_options_parser *c, const char *arg, const char *why);

/* *dst = a copy of v (the old one freed). 0, or -1 without memory. */
int bfs_options_set_str(char **dst, const char *v);

/* Value v of option t into c->o, as t's type and range say (arg: the
 * option as written, for the line a bad value gets). 0; 1 when libfuse
 * takes the option too (debug); -1 after that line. */
int bfs_options_set(struct bfs_options_parser *c, const struct bfs_option *t, const char *arg,
		    const char *v);

#endif
