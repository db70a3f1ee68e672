/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cntcache.h — where a batcher's ragged counts (counts.h) are kept in
 * index_dir, shard by shard, so that a first mount over thousands of tiny
 * shards writes one counts file per directory of shards instead of one per
 * shard (file creation is most of the cost of such a mount, as it is for
 * the index: ixpack.h), and a re-mount reads that one file back.
 *
 * A shard whose counts file (counts.h) would be under BFS_IXPACK_ENTRY_MAX
 * bytes has it as an entry of the counts pack of its (real) directory and
 * of the slots' description:
 *     INDEX_DIR/<hash of the directory>-<hash of the description>.cntpack.idx
 * an index pack container (ixpack.h, "BFSPAK01") whose entries are whole
 * counts files ("BFSCNT01"), so an entry is checked exactly as a file of its
 * own is (its CRCs; the shard's path, compression, size, mtime and record
 * count; the slots' description) and a stale or corrupt entry costs only
 * its shard a count pass. A larger shard keeps a file of its own:
 *     INDEX_DIR/<hash of the shard's path>-<hash of the description>.cnt.idx
 * Both names end in .idx, so an index_dir that is a directory SOURCE
 * itself holds no file that would be taken for a shard (docs/contract.md).
 * The name ...cnt (a file of its own for every shard, small or large) is
 * retired: a file by that name is never read, and is deleted when the
 * shard's counts are next written (its .cnt.idx, or a pack that holds
 * them, which also deletes the .cnt.idx the shard had while it was
 * larger), so that index_dir does not keep what nothing reads. Each name
 * is computed, never matched by a pattern (bfs_dataset_drop_cache_files);
 * a mount of another batchfs version sharing index_dir that reads a file
 * deleted under it only costs it a count pass.
 * Two schemas counting other slots have other descriptions, hence other
 * packs; two datasets over one directory (globs) with the same slots share
 * its pack: a rewrite keeps the entries of the old pack that still hold
 * for their shards.
 *
 * A pack is read once, when its first shard is looked up. Counts put for
 * small shards are kept in memory and written by bfs_cntcache_save, one
 * write of each pack that changed (a temporary file and a rename); a large
 * shard's file is written when it is put. Everything is best effort: a file
 * not written costs a count pass next time (one note per cache), a bad one
 * is one note and rebuilt.
 *
 * Does not: decode or count records (batch.c), lay out a pack (ixpack.c)
 * or a counts file (counts.c).
 *
 * Thread-safety: a cache is used by one thread at a time.
 */
#ifndef BFS_CNTCACHE_H
#define BFS_CNTCACHE_H

#include "dataset.h"
#include "tensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_cntcache;

/* A cache in index_dir for the counts of p's slots over ds's shards
 * (index_dir need not exist yet); on_note (may be NULL) gets each line
 * worth logging, with the shard's path or NULL. 0, -ENOMEM, -ENAMETOOLONG. */
int bfs_cntcache_new(struct bfs_cntcache **out, const struct bfs_dataset *ds,
		     const struct bfs_plan *p, const char *index_dir,
		     void (*on_note)(void *ctx, const char *shard, const char *msg),
		     void *note_ctx);
void bfs_cntcache_free(struct bfs_cntcache *cc); /* accepts NULL; saves nothing */

/* Shard i's counts into cols[s][0 .. its records) for every slot s: true if
 * the cache holds valid ones. Otherwise the arrays may have been written and
 * must be filled again. */
bool bfs_cntcache_load(struct bfs_cntcache *cc, size_t i, uint32_t *const *cols);

/* Shard i's counts, computed (cols as for load): a large shard's file is
 * written now, a small shard's entry is kept (copied) for the save. */
void bfs_cntcache_put(struct bfs_cntcache *cc, size_t i, const uint32_t *const *cols);

/* Write every pack that changed: counts put, or an entry found bad. */
void bfs_cntcache_save(struct bfs_cntcache *cc);

#endif
