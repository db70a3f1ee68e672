/*
 * checks.h — what the mount command checks before it mounts anything, in
 * the words a new user needs: the MOUNTPOINT (it exists, is a folder, is not
 * already a mount point, no other batchfs is mounting there).
 *
 * Each check prints one line ("batchfs: ...") to stderr when it fails.
 */
#ifndef BFS_CHECKS_H
#define BFS_CHECKS_H

#include <stdbool.h>

/* Take `arg` as MOUNTPOINT: an existing directory that is not a mount
 * point (of any filesystem: a second batchfs would stack over the first,
 * whose readers would then see the second's batches). abs (PATH_MAX) gets
 * its absolute path. Returns an open descriptor of the folder, flock()ed so
 * that a second batchfs started meanwhile on the same folder is refused
 * (keep it open for the life of the mount), or -1 after printing why. */
int bfs_mountpoint_claim(const char *arg, char *abs);

/* Is `abs` a mount point now (again just before mounting)? Prints the
 * line and returns true if so. */
bool bfs_mountpoint_taken(const char *arg, const char *abs);

#endif
