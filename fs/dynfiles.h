/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dynfiles.h — stats.json and errors.txt, the files whose text changes
 * under the mount: which snapshot of each a reader sees.
 *
 * Both are exactly their text. Without OPEN requests the kernel sizes them
 * by the last GETATTR and reads them through its page cache, so which
 * snapshot a size reports is chosen per reader (a thread id; 0: unknown):
 *  - a size asked for a stat (fstat after an open, as cat, Python and
 *    stdio do) makes a fresh snapshot, which that reader's reads serve;
 *  - a size asked again on the way to the same reader's next read(2)
 *    (`reading`), within BFS_DYNFILES_CONTINUE_MS and with no read of
 *    another file by it in between (bfs_dynfiles_touch), is the same
 *    snapshot's: a reader reading on to the end finds the end of what it
 *    read, not a newer snapshot's tail;
 *  - while another reader reads (its last size or read within 50 ms),
 *    the one size the kernel keeps is that reader's: a fresh snapshot is
 *    padded with spaces to it, or, longer, that reader's snapshot (at
 *    most a second old) is shared.
 * A snapshot's generation (snapshot.h) is its mtime, in ns past the
 * mount's.
 *
 * What the files say is the caller's: its text function writes them.
 * Does not: know FUSE, or what is in the files. Thread-safety: any
 * function from any thread but new and free; one mutex guards the
 * readers, and the text function is called under it (but by
 * bfs_dynfiles_open).
 */
#ifndef BFS_DYNFILES_H
#define BFS_DYNFILES_H

#include "snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum bfs_dynfile {
	BFS_DYN_STATS, /* stats.json */
	BFS_DYN_ERRORS, /* errors.txt */
};

#define BFS_DYNFILES_CONTINUE_MS 1000

struct bfs_dynfiles;

/* The text of file k, malloc'd (NULL: no memory), *len its length; pad:
 * stats.json padded with spaces to that many bytes (0: none), only while
 * another reader reads a snapshot of that size. */
typedef char *(*bfs_dynfiles_text_fn)(void *ctx, enum bfs_dynfile k, size_t pad, size_t *len);

/* text(ctx, ...) writes the files. -ENOMEM. */
int bfs_dynfiles_new(struct bfs_dynfiles **out, bfs_dynfiles_text_fn text, void *ctx);
void bfs_dynfiles_free(struct bfs_dynfiles *d); /* accepts NULL */

/* File k's size for reader (reading: asked on the way to a read(2) of an
 * open file, not for a stat), as above; *gen (may be NULL): its
 * snapshot's generation. -ENOMEM. */
int bfs_dynfiles_size(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t reader, bool reading,
		      uint64_t *size, uint64_t *gen);
/* The snapshot reader reads of file k (a reference: bfs_snapshot_put):
 * the one its size was last of, or, for a reader not seen, the one last
 * sized, or the current one. NULL without memory. */
struct bfs_snapshot *bfs_dynfiles_read(struct bfs_dynfiles *d, enum bfs_dynfile k, uint64_t reader);
/* Reader read another file: its next size of either is a fresh snapshot's. */
void bfs_dynfiles_touch(struct bfs_dynfiles *d, uint64_t reader);

/* File k opened with an open request: a fresh snapshot of its own, never
 * padded (a reference). -ENOMEM. */
int bfs_dynfiles_open(struct bfs_dynfiles *d, enum bfs_dynfile k, struct bfs_snapshot **out);

#endif
