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

int bfs_tool_inspect(int argc, char **argv);
int bfs_tool_schema(int argc, char **argv);
int bfs_tool_index(int argc, char **argv);

/* The indexing progress bar on stderr (a bfs_progress_fn): drawn only when
 * tty is set (stderr is a terminal). */
struct bfs_progress {
	bool tty;
};
void bfs_progress_show(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

#endif
