/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ixpack.h — the index pack: one cache file holding the indexes of many
 * small shards, so that a first mount over thousands of tiny shards creates
 * one file in index_dir instead of one per shard (file creation was two
 * thirds of such a build), and a re-mount opens and reads one.
 *
 * An entry is the whole bytes of the shard's index file (index.h,
 * "BFSIDX03": header CRC, body CRC, the shard's absolute path, size, mtime
 * and compression), so an entry is checked against its shard exactly as a
 * file of its own is, and a corrupt or stale entry costs only its own shard
 * a rescan. Which shards go in a pack, and which pack, is the caller's
 * (dataset.c: those whose index file is under BFS_IXPACK_ENTRY_MAX bytes,
 * one pack per directory of shards).
 *
 * File (version 1, magic "BFSPAK01"), little-endian:
 *     header, 64 bytes (struct bfs_ixpack_hdr in ixpack.c: the entry count,
 *     the file's size, a CRC-32C of the table, its own CRC-32C)
 *     table: nentries x { u64 hash of the shard's path (bfs_ixpack_hash),
 *     u64 offset, u64 length }, sorted by hash
 *     entries: index file bytes, each at an offset that is a multiple of 16
 * A load reads the file into memory and checks the header, the table's CRC,
 * order and every entry's bounds; an entry itself is checked (its CRCs, its
 * key, its directory) only when it is asked for, by bfs_index_from_bytes.
 *
 * Does not: know datasets, shards or the cache directory's naming, log.
 *
 * Thread-safety: a loaded pack is immutable: bfs_ixpack_get from any number
 * of threads at once. A writer is single-threaded.
 */
#ifndef BFS_IXPACK_H
#define BFS_IXPACK_H

#include "index.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Indexes whose file would be this many bytes or more keep a file of their
 * own: one page, under which a file of its own is read into memory anyway
 * (index.c), so an entry loaded from a pack costs the same memory; a
 * larger index is mapped from its own file (evictable pages), and a change
 * in its shard does not rewrite a pack of big entries. */
#define BFS_IXPACK_ENTRY_MAX 4096u

/* The hash a pack's table sorts by: FNV-1a of the path. */
uint64_t bfs_ixpack_hash(const char *path);
/* The hash that names the pack of the directory of absolute path `abs`:
 * FNV-1a of abs up to its last '/'. */
uint64_t bfs_ixpack_dir_hash(const char *abs);

struct bfs_ixpack;

/* Read `path`: LOADED (*out set), ABSENT (no file, or unreadable), BAD (an
 * old format, truncated or corrupt: why says which). */
enum bfs_index_load_result bfs_ixpack_load(struct bfs_ixpack **out, const char *path, char *why,
					   size_t whycap);
void bfs_ixpack_free(struct bfs_ixpack *pk); /* accepts NULL */

/* The index for k in pk (a copy: pk may be freed after): LOADED (*out
 * set), ABSENT (no entry for k->path, or one for another version of the
 * shard: *had_entry says whether the pack holds one for that path), BAD (a
 * corrupt entry: why). */
enum bfs_index_load_result bfs_ixpack_get(const struct bfs_ixpack *pk,
					  const struct bfs_index_key *k, struct bfs_index **out,
					  bool *had_entry, char *why, size_t whycap);

/* Entries, in table order: their count, and entry i's bytes (borrowed,
 * unchecked: bfs_index_image_key, then a load, tells what they are). */
size_t bfs_ixpack_count(const struct bfs_ixpack *pk);
/* The first entry whose hash is `hash` or more (the count if none): the
 * entries for a path are those from there on with its hash. */
size_t bfs_ixpack_find(const struct bfs_ixpack *pk, uint64_t hash);
void bfs_ixpack_entry(const struct bfs_ixpack *pk, size_t i, uint64_t *hash, const uint8_t **p,
		      size_t *len);

/* ---- writing ------------------------------------------------------------- */

struct bfs_ixpack_writer;

int bfs_ixpack_writer_new(struct bfs_ixpack_writer **out); /* -ENOMEM */
/* Add an index for k (its file bytes, bfs_index_image), or an entry's
 * bytes as they are (copied) for the shard with path hash `hash`. */
int bfs_ixpack_add(struct bfs_ixpack_writer *w, const struct bfs_index *ix,
		   const struct bfs_index_key *k);
int bfs_ixpack_add_bytes(struct bfs_ixpack_writer *w, uint64_t hash, const uint8_t *p, size_t len);
/* Write the pack to `path` via a temporary file and rename (an empty
 * writer removes `path` instead). 0 or -errno. */
int bfs_ixpack_write(struct bfs_ixpack_writer *w, const char *path);
void bfs_ixpack_writer_free(struct bfs_ixpack_writer *w); /* accepts NULL */

#endif
