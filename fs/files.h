/* SPDX-License-Identifier: Apache-2.0 */
/*
 * files.h — the files of a mount, without FUSE: what each node of the
 * namespace (vfs.h) is, its attributes and size, and its bytes at any
 * [off, off + len), each kind of file sent to the module that knows it:
 * README.txt and schema.json, fixed text here; stats.json and errors.txt,
 * a snapshot per reader (dynfiles.h), their text written here from the
 * counters; the batch files straight from the decoded batch in the cache
 * (cache.h: a .npy's header built for the read, then the entry's bytes, no
 * copy); the files of all/ (allfiles.h); batch-B.cuda through its
 * descriptor (cudaopen.h). It owns the state those need: the cache and its
 * workers, all/'s views and stash, errors.txt (errlog.h), the read
 * counters and, with -o cuda, the CUDA runtime and its pool.
 *
 * fuse_ops.c answers requests with these; session.c starts it (the I/O
 * stage, the workers) and stops it. Does not: include FUSE or reply to
 * anything. Thread-safety: bfs_files_new/free/set_io from one thread;
 * everything else from any thread.
 */
#ifndef BFS_FILES_H
#define BFS_FILES_H

#include "allfiles.h"
#include "batch.h"
#include "cache.h"
#include "cudaopen.h"
#include "cudapath.h"
#include "dataset.h"
#include "dynfiles.h"
#include "fs.h"
#include "iostage.h"
#include "snapshot.h"
#include "vfs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* struct bfs_fs_config, a mount's configuration, is fs.h's. */

#define BFS_FILES_BLKSIZE (1u << 20) /* st_blksize, and the size of a read asked for */

struct bfs_files;

/* The files of cfg's mount; with cfg->cuda_device >= 0 the CUDA runtime is
 * loaded (not started: bfs_cudapath_init, in the daemon). -errno with
 * bfs_err_msg set for a bad option. */
int bfs_files_new(struct bfs_files **out, const struct bfs_fs_config *cfg);
void bfs_files_free(struct bfs_files *f); /* accepts NULL */

/* The on_corrupt callback of the batcher/cache (bfs_fs_report). */
void bfs_files_report(void *f, const char *msg, unsigned flags);

/* Borrowed parts, for the session: the namespace, the cache (its workers
 * start in the daemon), the CUDA runtime and the opens of batch-B.cuda
 * (NULL without -o cuda). */
struct bfs_vfs *bfs_files_vfs(struct bfs_files *f);
struct bfs_cache *bfs_files_cache(struct bfs_files *f);
struct bfs_cudapath *bfs_files_cuda(struct bfs_files *f);
struct bfs_cudaopen *bfs_files_cudaopen(struct bfs_files *f);
/* The I/O stage (borrowed; NULL: none): the cache reads through it and
 * stats.json shows it. Before the workers start. */
void bfs_files_set_io(struct bfs_files *f, struct bfs_iostage *io);

/* stats.json and errors.txt: their text changes under the mount. */
static inline bool bfs_files_dynamic(const struct bfs_vnode *n)
{
	return n->type == BFS_V_STATS || n->type == BFS_V_ERRORS;
}

/* Who asks for a size or a read: the asking thread's id (0: unknown), and
 * whether the size is asked for on the way to a read(2) of an open file
 * (FUSE's GETATTR with a file handle), not for a stat: which snapshot of
 * stats.json and errors.txt it sees (dynfiles.h). */
struct bfs_files_asker {
	uint64_t reader;
	bool reading;
};

/* n's size in bytes, without decoding anything; *mtime_ns (may be NULL)
 * gets a dynamic file's snapshot number (its mtime past the mount's). */
int bfs_files_size(struct bfs_files *f, const struct bfs_vnode *n,
		   const struct bfs_files_asker *who, uint64_t *size, uint64_t *mtime_ns);
/* n's attributes (read-only; owned by the mounting user). */
int bfs_files_stat(struct bfs_files *f, const struct bfs_vnode *n,
		   const struct bfs_files_asker *who, struct stat *st);

/* stats.json or errors.txt opened with an open request: a snapshot of its
 * own (a reference, the descriptor's: bfs_files_release drops it). */
int bfs_files_open_snapshot(struct bfs_files *f, const struct bfs_vnode *n,
			    struct bfs_snapshot **out);
/* Descriptor fh of file n closed: its snapshot or its batch-B.cuda
 * reference goes (fh 0: nothing). */
void bfs_files_release(struct bfs_files *f, const struct bfs_vnode *n, uint64_t fh);

/* Bytes [off, off + len) of a file (fewer at its end, none past it): up to
 * two pieces of memory, p[0] then p[1], borrowed until
 * bfs_files_read_done. */
struct bfs_files_read {
	struct {
		const void *mem;
		size_t size;
	} p[2];
	unsigned count;
	bool zero_copy; /* the pieces are the cache's: the reply may splice them */
	/* private: what the pieces borrow */
	char hdr[1024]; /* a .npy header */
	struct bfs_cache_entry *entry;
	struct bfs_snapshot *snap;
	struct bfs_cudaopen_fh *cuda;
	uint8_t *owned;
};

/* The pieces of file n at [off, off + len) for reader (a thread id, 0:
 * unknown; see bfs_files_asker); fh is its descriptor (0 when opened
 * without an open request). 0, or -errno: -EIO (or -ENOMEM) for a batch or
 * view file that could not be decoded (counted in stats.json), -EISDIR.
 * bfs_files_read_done in every case. */
int bfs_files_read(struct bfs_files *f, const struct bfs_vnode *n, uint64_t reader, uint64_t fh,
		   size_t len, uint64_t off, struct bfs_files_read *r);
/* Releases what r's pieces borrowed (once its reply is written). */
void bfs_files_read_done(struct bfs_files *f, struct bfs_files_read *r);

#endif
