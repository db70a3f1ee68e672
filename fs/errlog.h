/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errlog.h — errors.txt: one line per corrupt or rejected record, each
 * written once however often its record is read (docs/contract.md), and the
 * counts stats.json shows of them (corrupt_records, source_errors,
 * skipped_records).
 *
 * A line is known by a 64-bit hash of its text. The first `max_lines`
 * different lines are kept and remembered; past them a report is only
 * counted (each time: nothing more is remembered, so that the log's memory
 * stays bounded), and the text ends with "... N more". Each counted report
 * is also written to `echo` (the daemon's log) as "batchfs: LINE".
 *
 * Does not: know FUSE, pad or refresh anything (fuse_ops.c snapshots the
 * text per GETATTR). Thread-safety: every function may be called from any
 * thread; one mutex guards the text, the hashes and the counts.
 */
#ifndef BFS_ERRLOG_H
#define BFS_ERRLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* errors.txt keeps at most this many lines (the daemon's bound) */
#define BFS_ERRLOG_MAX_LINES 10000

struct bfs_errlog;

struct bfs_errlog_counts {
	uint64_t corrupt; /* different lines reported of wrong bytes (corrupt_records) */
	uint64_t source; /* ... of bytes the source could not give (source_errors) */
	uint64_t skipped; /* of them, records replaced under on_corrupt=skip */
	uint64_t dropped; /* new lines past max_lines: counted, not kept */
	size_t lines; /* lines kept in the text */
};

/* echo: where each new line is also written (NULL: nowhere; borrowed, must
 * outlive the log). Errors: -ENOMEM. */
int bfs_errlog_new(struct bfs_errlog **out, size_t max_lines, FILE *echo);
void bfs_errlog_free(struct bfs_errlog *l); /* accepts NULL */

/* Report msg (one line, no newline); " (skipped)" is appended when the
 * record was replaced. A line remembered changes nothing. Returns true when
 * the report was counted. A line that finds no memory for its text is
 * counted and echoed, and not remembered. */
bool bfs_errlog_add(struct bfs_errlog *l, const char *msg, bool skipped);
/* The same; source: the record's bytes could not be read (counted as a
 * source error, not a corrupt record). */
bool bfs_errlog_add_as(struct bfs_errlog *l, const char *msg, bool skipped, bool source);

/* A copy of errors.txt's text (malloc'd, *len bytes, NUL-terminated), or
 * NULL without memory. */
char *bfs_errlog_text(struct bfs_errlog *l, size_t *len);

void bfs_errlog_counts(struct bfs_errlog *l, struct bfs_errlog_counts *out);

#endif
