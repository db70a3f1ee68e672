/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credplaces.h — the places a bucket mount takes its credentials from, in
 * the order each chain walks them (credaws.c for s3://, credgcpchain.c for
 * gs://; docs/credentials.md), and the variables and files each reads;
 * then the variables that set the endpoint, region and retries. One table
 * for the people who read about them: `--help` names the places, the man
 * page (doc/batchfs.1.scd, CREDENTIALS) names every place and every
 * variable, and tests/unit/check_options.c holds both to it, and holds
 * the table to every such variable the cloud unit's sources read.
 *
 * Does not: read the environment (the chains do). Thread-safety: constant.
 */
#ifndef BFS_CREDPLACES_H
#define BFS_CREDPLACES_H

#include <stdbool.h>
#include <stddef.h>

struct bfs_cred_place {
	const char *scheme; /* "s3://" or "gs://"; "" for settings of both */
	bool cred; /* a place credentials come from (else: settings) */
	const char *name; /* as --help and the man page name it */
	const char *const *reads; /* its variables and files, NULL-terminated */
};

/* The table, in chain order, and its length. */
const struct bfs_cred_place *bfs_cred_places(size_t *n);

#endif
