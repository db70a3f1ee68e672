/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.h — the commands that read a running mount's stats.json:
 * `batchfs stats [--json] MOUNTPOINT` (one snapshot, for people or, with
 * --json, for scripts) and `batchfs top MOUNTPOINT` (a view refreshed every
 * second on a terminal, one plain line per second otherwise). Same calling
 * convention as tools.h: (argc, argv) with argv[0] the command name,
 * returns the exit status.
 */
#ifndef BFS_WATCH_H
#define BFS_WATCH_H

int bfs_tool_stats(int argc, char **argv);
int bfs_tool_top(int argc, char **argv);

#endif
