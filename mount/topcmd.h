/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topcmd.h — `batchfs top MOUNTPOINT`: a running mount's stats.json as a
 * view refreshed every second on a terminal, one plain line per second
 * otherwise. Same calling convention as tools.h: (argc, argv) with argv[0]
 * the command name, returns the exit status.
 */
#ifndef BFS_TOPCMD_H
#define BFS_TOPCMD_H

int bfs_tool_top(int argc, char **argv);

#endif
