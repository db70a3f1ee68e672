/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readme.h — the text of a mount's README.txt, from its options, dataset,
 * batcher and schema. Does not: write or serve the file (fs/ does), or
 * decide anything about the mount. Thread-safety: none needed (built once,
 * before the mount).
 */
#ifndef BFS_README_H
#define BFS_README_H

#include "batch.h"
#include "dataset.h"
#include "mixture.h"
#include "options.h"
#include "schema.h"

struct bfs_readme_in {
	const struct bfs_options *o;
	const char *opts; /* the effective options (bfs_options_describe), or NULL */
	const char *mnt; /* the mount point's absolute path */
	const char *split; /* a TFDS folder's split served, or NULL */
	const struct bfs_dataset *ds;
	const struct bfs_mount_mix *mm; /* SOURCE a mixture file, or NULL */
	const struct bfs_batcher *b;
	const struct bfs_schema *schema; /* the one served */
	const char *mixed; /* the line on a folder of several datasets, or NULL */
	const char *disk_cache; /* the disk cache's folder, or NULL: none */
};

/* README.txt (malloc'd), or NULL without memory. */
char *bfs_readme_text(const struct bfs_readme_in *in);

#endif
