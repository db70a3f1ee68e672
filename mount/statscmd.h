/* SPDX-License-Identifier: Apache-2.0 */
/*
 * statscmd.h — `batchfs stats [--json] MOUNTPOINT`: one snapshot of a
 * running mount's stats.json, for people or, with --json, for scripts.
 * Same calling convention as tools.h: (argc, argv) with argv[0] the
 * command name, returns the exit status.
 */
#ifndef BFS_STATSCMD_H
#define BFS_STATSCMD_H

int bfs_tool_stats(int argc, char **argv);

#endif
