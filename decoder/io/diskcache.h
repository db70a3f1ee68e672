/* SPDX-License-Identifier: Apache-2.0 */
/*
 * diskcache.h — source bytes kept on a local disk (-o disk_cache=DIR), so
 * that a dataset behind a bucket or a network filesystem is read from the
 * network once and from the node's own disk after.
 *
 * Each source object (a shard: its URL or path, size and version, i.e.
 * ETag or mtime) has two files in DIR, named by a hash of that identity, so
 * a changed object never meets its old bytes:
 *   <hash>.data    the object's bytes at their own offsets (a sparse file:
 *                  blocks not fetched are holes)
 *   <hash>.blocks  a header naming the object, then per block of
 *                  BFS_DC_BLOCK bytes a word saying it is present and the
 *                  CRC32C of each of its BFS_DC_PAGE-byte pages
 * A block is written whole (or the object's last, shorter one), data
 * first, then its page CRCs, then its present word, each with pwrite: a
 * reader sees a block only once all of it is there, several mounts may
 * write the same block (the same bytes) at once, and what a crash leaves
 * half written fails its CRCs and reads as missing. Every read checks the
 * CRCs of the pages it touches: a flipped byte, a truncated or missing
 * file is never served; the read is a miss (counted as corrupt) and the
 * caller fetches the bytes from the source again.
 *
 * Bound: the data files in DIR (every mount's) stay within the size given
 * (default 10% of DIR's file system). What a mount keeps is decided, not
 * left to recency: its objects in the order they were registered, whole
 * while they fit, then whole blocks of the first that does not (all of
 * them when they fit the bound, else 63/64 of it); blocks past that are
 * read from the source and never written. A mount that reads only a share
 * of the dataset (bfs_dcobj_share) keeps only the blocks of its share, in
 * the same order. So a dataset larger than the
 * cache, read epoch after epoch (a cyclic scan, which least-recently-used
 * would empty of each block just before its next use), finds the same
 * part in DIR every epoch, and so do later mounts of the same dataset.
 * When a write would pass the bound, other objects are deleted (another
 * mount's, or this mount's not kept), the least recently used first (the
 * .blocks file's mtime, touched on use), then the blocks this mount does
 * not keep inside the objects it keeps (an earlier mount's of another
 * share: entry cleared, hole punched); a block that still does not fit
 * is not written. A file deleted under another mount keeps serving that
 * mount from its open descriptor.
 *
 * Writes run on a thread of the cache's own, from copies queued by
 * bfs_dcobj_put (at most BFS_DC_QUEUE bytes; more are dropped, not
 * waited for); a queued block is read from its copy until it is written,
 * so that a block wanted again meanwhile is not fetched again. A write that fails for want of space or permission stops
 * writing for the mount, with one line through the note function.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_DISKCACHE_H
#define BFS_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_DC_BLOCK ((uint64_t)1 << 20) /* bytes per block (see diskcache.c) */
#define BFS_DC_PAGE 4096u /* bytes per CRC'd page */
#define BFS_DC_QUEUE ((uint64_t)64 << 20) /* bytes of writes waiting at most */

struct bfs_diskcache;
struct bfs_dcobj;

struct bfs_diskcache_opts {
	const char *dir;
	uint64_t size; /* bound on DIR's data files; 0: 10% of its file system */
	/* one-line notes (write stopped, files removed...); may be NULL */
	void (*note)(void *ctx, const char *msg);
	void *ctx;
};

struct bfs_diskcache_stats {
	uint64_t hits, misses; /* reads served from DIR, and not */
	uint64_t hit_bytes; /* bytes they served */
	uint64_t bytes; /* bytes written to DIR by this mount */
	uint64_t evictions; /* objects deleted to stay within the bound */
	uint64_t corrupt; /* reads that met a block failing its CRCs (or a short file) */
	uint64_t dropped; /* writes not queued: the queue was full */
	uint64_t refused; /* blocks not written: nothing this mount may delete left room */
	uint64_t used, limit; /* bytes of DIR's data files, and the bound */
	uint64_t kept; /* bytes of the objects this mount keeps (see Bound) */
};

/* Whether dir can be the cache: made when missing, and a file can be
 * made in it. 0, or -ENOENT/-EACCES/-EROFS/-ENOTDIR... with one line
 * naming the option and DIR. */
int bfs_diskcache_check(const char *dir);
/* Open the cache in o->dir (checked as above). -ENOMEM. */
int bfs_diskcache_open(struct bfs_diskcache **out, const struct bfs_diskcache_opts *o);
/* Waits for the writes queued, then frees. Accepts NULL. */
void bfs_diskcache_close(struct bfs_diskcache *c);

/* The cache of one object: `name` (a URL or an absolute path), `size`
 * bytes, `version` (an ETag's hash, or the mtime in ns). Files are opened
 * (or made) on first use. NULL: out of memory. Freed with the cache. */
struct bfs_dcobj *bfs_diskcache_obj(struct bfs_diskcache *c, const char *name, uint64_t size,
				    int64_t version, void *user);

/* Bytes [off, off + n) of the object from DIR: 0 when every block holding
 * them is there and their pages check, or is queued to be written (its
 * bytes then come from the queue); -ENODATA otherwise (a miss). */
int bfs_dcobj_read(struct bfs_dcobj *o, void *dst, size_t n, uint64_t off);
/* Bytes [off, off + n) of the object as fetched from the source: every
 * whole block in them (and the object's last block when they reach its
 * end) that the object keeps and is not yet in DIR is queued for writing. */
void bfs_dcobj_put(struct bfs_dcobj *o, const void *src, size_t n, uint64_t off);
/* Bytes [0, end) of the object are kept (see Bound; end a multiple of
 * BFS_DC_BLOCK, or the object's size): reads of them are worth widening to
 * whole blocks. Changes only when objects are registered, or a share
 * given. */
uint64_t bfs_dcobj_kept(struct bfs_dcobj *o);
/* Whether the block holding byte off of the object is kept, and *end the
 * end of the run of blocks from it that are kept (or not) alike. */
bool bfs_dcobj_kept_at(struct bfs_dcobj *o, uint64_t off, uint64_t *end);
/* Bytes [off, off + len) of the object are the mount's share (a node that
 * reads only some of a dataset: shuffle=block with partitions, the blocks
 * of its ranks' partitions). Once a share is given for any object, the
 * mount keeps only the blocks holding shares (Bound: in the same order,
 * while they fit), so that a node whose share fits DIR reads it from there
 * in every epoch after the first. Shares add up. */
void bfs_dcobj_share(struct bfs_dcobj *o, uint64_t off, uint64_t len);
/* Whether every block holding [off, off + len) is known to be in DIR, or
 * queued to be written: from memory, no I/O and no lock (what DIR holds
 * is read at the object's first use; a hint: a read may still find more,
 * written by another mount since, or fail its CRCs). */
bool bfs_dcobj_holds(struct bfs_dcobj *o, uint64_t off, uint64_t len);
/* Whether every block of the object is in DIR (as far as this mount
 * knows; checked against the .blocks file). */
bool bfs_dcobj_complete(struct bfs_dcobj *o);
/* Check every page of a complete object: true when all of it is good,
 * then *path gets its .data file (borrowed, valid while the cache is). */
bool bfs_dcobj_verify(struct bfs_dcobj *o, const char **path);

/* Delete the object's files (a copy found bad where the caller checks
 * it; counted as corrupt): the next use fetches and writes it again. */
void bfs_dcobj_drop(struct bfs_dcobj *o);
/* Bytes [off, off + len) of the object failed where the caller checks
 * them (a record's CRC): the pages holding them are checked, and the
 * blocks of those that fail are no longer there, for every mount (counted
 * as corrupt), so that they are fetched and written again; the object's
 * other blocks stay. False when every page checks (the bytes are good now:
 * written again since the caller read them, say). */
bool bfs_dcobj_forget(struct bfs_dcobj *o, uint64_t off, uint64_t len);

/* Call fn(ctx, user) on the writer's thread whenever an object's last
 * missing block is written (user: the object's); fn NULL: no more calls.
 * Returns once no call of the previous fn runs. */
void bfs_diskcache_set_complete(struct bfs_diskcache *c, void (*fn)(void *ctx, void *user),
				void *ctx);

/* Wait until every write queued so far is done (tests, benchmarks). */
void bfs_diskcache_flush(struct bfs_diskcache *c);
void bfs_diskcache_stats(struct bfs_diskcache *c, struct bfs_diskcache_stats *out);

#endif
