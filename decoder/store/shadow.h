/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shadow.h — plain (decompressed) copies of compressed shards, kept in
 * index_dir, so that a gzip or zlib shard is read like a plain one.
 *
 * A compressed shard can only be entered at a seek point: under the global
 * shuffle every record costs an inflate of up to ~1 MiB. The scan that
 * indexes a compressed shard inflates all of it anyway; a writer set on the
 * shard (bfs_shadow_begin/end, through record.h's sink hook) writes that
 * output to INDEX_DIR/<hash of the shard's path>.shadow as it comes, so
 * there is no second pass. The file is the uncompressed record stream, byte
 * for byte (record offsets of the index are offsets in it), then the
 * shard's absolute path and a fixed trailer: the shard's size, mtime and
 * compression (the index's key), the stream's size, the record count and a
 * CRC32C of the trailer. A shadow is attached to a shard (record.h's view)
 * only when the trailer matches the shard and its index and the file has
 * exactly the expected size; reads then go to it, CRCs always checked,
 * and a record it fails is read from the compressed shard instead (the
 * shadow file is then deleted, so the next mount writes it again).
 *
 * Bounds: `budget` caps the total bytes of valid shadows in index_dir (all
 * datasets); a shard whose shadow would pass it keeps seek points. Files of
 * a failed write are removed; a write that fails for want of space or
 * permission (ENOSPC, EDQUOT, EROFS, EACCES, EPERM) stops shadow writing for
 * the set, with one line through the note function. Nothing is written
 * outside index_dir. Stale shadows (their shard gone, or of another size or
 * mtime, or an unreadable trailer) and leftovers of dead writers are deleted
 * when a set is created.
 *
 * Does not: decide what to read (record_read.c does), know the index format, or
 * verify the whole copy at attach time (per-record CRCs do that at read,
 * which also covers a copy damaged after it was attached).
 *
 * Thread-safety: one set may be used by many threads at once (the scan
 * threads each write their own shard; a read thread may report a bad copy).
 * bfs_shadow_attach must not run while the shard is read or scanned.
 */
#ifndef BFS_SHADOW_H
#define BFS_SHADOW_H

#include "record.h"

#include <stdbool.h>
#include <stdint.h>

struct bfs_shadow_opts {
	const char *dir; /* index_dir (created when missing) */
	uint64_t budget; /* total bytes of shadows in dir */
	/* one-line notes (shard NULL: msg names the file); may be NULL */
	void (*note)(void *ctx, const char *shard, const char *msg);
	void *ctx;
};

struct bfs_shadows;
struct bfs_shadow_writer;

/* A set over opts->dir: deletes stale shadows there and counts the valid
 * ones against the budget. 0 or -ENOMEM. */
int bfs_shadows_new(struct bfs_shadows **out, const struct bfs_shadow_opts *o);
void bfs_shadows_free(struct bfs_shadows *sh); /* accepts NULL */

/* Whether shard s (compressed, indexed) has a valid shadow on disk. */
bool bfs_shadow_valid(struct bfs_shadows *sh, const struct bfs_shard *s);

/* Whether it is worth scanning indexed shard s again only to write its
 * shadow: compressed, none valid, writing not stopped, the directory
 * writable, with room for it in the budget and on the file system. */
bool bfs_shadow_wanted(struct bfs_shadows *sh, const struct bfs_shard *s);

/* Start writing s's shadow from its next scan: NULL when s is plain, a
 * valid shadow exists or writing is stopped. Pass the scan's result to
 * bfs_shadow_end, which finishes (or removes) the file. */
struct bfs_shadow_writer *bfs_shadow_begin(struct bfs_shadows *sh, struct bfs_shard *s);
void bfs_shadow_end(struct bfs_shadow_writer *w, int scan_err); /* accepts NULL */

/* Attach s's valid shadow, if any: true when s now reads from it. */
bool bfs_shadow_attach(struct bfs_shadows *sh, struct bfs_shard *s);

/* Bytes of valid shadows in the directory counted by the set now. */
uint64_t bfs_shadows_used(const struct bfs_shadows *sh);

#endif
