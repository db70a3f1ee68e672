/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tools.h — the commands that work without a mount: inspect, schema, index.
 * Each takes (argc, argv) with argv[0] the command name, prints its result
 * on stdout and errors (one line each, naming file, record, offset) on
 * stderr, and returns the exit status.
 */
#ifndef BFS_TOOLS_H
#define BFS_TOOLS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

int bfs_tool_inspect(int argc, char **argv);
int bfs_tool_schema(int argc, char **argv);
int bfs_tool_index(int argc, char **argv);

/* The indexing progress bar on stderr, a bfs_progress_fn whose ctx is a
 * struct bfs_progress: drawn only when tty (stderr is a terminal). */
struct bfs_progress {
	bool tty;
	time_t last;
};
void bfs_tool_progress(void *ctx, uint64_t done, uint64_t total);
/* One log line "batchfs: SHARD: MSG" (the dataset's on_note). */
void bfs_tool_note(void *ctx, const char *shard, const char *msg);

#endif
