/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tfds.h — a TFDS dataset version folder as SOURCE (docs/contract.md,
 * split=): a folder holding dataset_info.json and features.json, whose
 * shards NAME-SPLIT.tfrecord-* hold one split each, and whose
 * features.json (with FEATURE.labels.txt beside it for ClassLabel names)
 * refines the inferred schema (bfs_schema_apply_tfds).
 *
 * What a mount of one does with its split= is the command's business;
 * this says what the folder holds. Thread-safety: any thread.
 */
#ifndef BFS_TFDS_H
#define BFS_TFDS_H

#include "schema.h"

#include <stdbool.h>
#include <stddef.h>

/* dir is a folder with dataset_info.json and features.json. */
bool bfs_tfds_is_dir(const char *dir);

/* The splits of dir, from its shard names: "test, train" (sorted, each
 * once), "none" when there are none (malloc'd); NULL when dir cannot be
 * read or there is no memory. */
char *bfs_tfds_splits(const char *dir);
/* split is one of a list bfs_tfds_splits made. */
bool bfs_tfds_split_listed(const char *list, const char *split);

/* The glob of split's shards, dir's files matching *-SPLIT.tfrecord*
 * (dir, a slash, then that pattern), into out. 0, or -ENAMETOOLONG when it
 * does not fit cap bytes. */
int bfs_tfds_glob(char *out, size_t cap, const char *dir, const char *split);

/* s refined by dir's features.json (bfs_schema_apply_tfds), ClassLabel
 * names read from dir/FEATURE.labels.txt. 0, or -errno with a message
 * starting "DIR/features.json: " (-EIO when it cannot be read). */
int bfs_tfds_refine(struct bfs_schema *s, const char *dir);

#endif
