/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checks.h — what the mount command checks before it mounts anything, in
 * the words a new user needs: the MOUNTPOINT (it exists, is a folder, is not
 * already a mount point, no other batchfs is mounting there) and image=
 * options on features that hold no images.
 *
 * Each check prints one line ("batchfs: ...") to stderr when it fails.
 */
#ifndef BFS_CHECKS_H
#define BFS_CHECKS_H

#include "dataset.h"
#include "schema.h"

#include <stdbool.h>

/* Take `arg` as MOUNTPOINT: an existing directory that is not a mount
 * point (of any filesystem: a second batchfs would stack over the first,
 * whose readers would then see the second's batches). abs (PATH_MAX) gets
 * its absolute path. Returns an open descriptor of the folder, flock()ed so
 * that a second batchfs started meanwhile on the same folder is refused
 * (keep it open for the life of the mount; fs/lifecycle.h turns the lock
 * shared once mounted and lets go of it when the session ends), or -1
 * after printing why. A folder whose lock a batchfs holds shared while it
 * is no longer a mount point (that daemon was unmounted and is exiting) is
 * waited for, up to 10 s, so that `fusermount3 -u` then a mount works. */
int bfs_mountpoint_claim(const char *arg, char *abs);

/* Is `abs` a mount point now (again just before mounting)? Prints the
 * line and returns true if so. */
bool bfs_mountpoint_taken(const char *arg, const char *abs);

/* image= on a feature whose values are not JPEG or PNG fails every batch:
 * refuse it now. For each feature made an image by the options (was_image
 * false before them) whose inference did not note it as JPEG/PNG, a few
 * records spread over the dataset are read; when some of their values are
 * non-empty and none is a JPEG or PNG, prints the line (naming the option,
 * the feature and what it holds) and returns -1. */
int bfs_check_image_options(const struct bfs_dataset *ds, const struct bfs_schema *s,
			    const bool *was_image, char *const *image_opts, unsigned nimage);

/* "a, b, c" (at most 12 names, then "... (N in all)"): the schema's
 * features (and feature_lists/NAME), only its bytes features with
 * bytes_only; for a message naming what there is. malloc'd; NULL when out
 * of memory. */
char *bfs_feature_names(const struct bfs_schema *s, bool bytes_only);

#endif
