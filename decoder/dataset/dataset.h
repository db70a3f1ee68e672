/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset.h — a SOURCE resolved to shards, their index (cached on disk), and
 * the inferred schema (cached too).
 *
 * SOURCE is a directory (its regular, non-hidden files sorted by name), a
 * single file, or a glob pattern. Records are numbered globally: shards in
 * that order, records in file order.
 *
 * Opening scans each shard's framing once (in parallel over `jobs` threads)
 * unless an index cache entry for the shard's (path, size, mtime) exists in
 * `index_dir`: a cached index (index.h) is checked (its CRC) and mapped,
 * in parallel too, never copied; a cache file of an old format, truncated
 * or corrupt is rebuilt (opts.on_note says so). The indexes of small
 * shards (under BFS_IXPACK_ENTRY_MAX bytes) are not files of their own but
 * entries of one index pack per directory of shards (ixpack.h), read once
 * per open and written once after a scan that added or replaced an entry;
 * a corrupt or stale entry costs only its shard a rescan. With compression auto, a
 * shard with a cache entry takes its compression from it (its first bytes
 * are read only to scan it), and index files already loaded are not written
 * again. The scan checks framing and both CRCs; a record whose data
 * CRC fails is indexed, reported (opts.on_bad) and skipped by inference; it
 * is handled per on_corrupt when a batch holding it is read. Inference decodes
 * every record once and is cached the same way (keyed by every shard's
 * path, size and mtime).
 *
 * Thread-safety: after open, every function here is safe to call from many
 * threads at once (the dataset is immutable; reads use pread and per-call
 * inflate state).
 */
#ifndef BFS_DATASET_H
#define BFS_DATASET_H

#include "common.h"
#include "fetch.h"
#include "record.h"
#include "schema.h"

typedef void (*bfs_progress_fn)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);

struct bfs_dataset_opts {
	enum bfs_compression comp;
	bool follow_symlinks; /* allow links that lead outside SOURCE */
	const char *index_dir; /* NULL: no cache */
	unsigned jobs; /* scan threads; 0 = 1 */
	bool infer; /* infer (or load the cached) schema */
	bfs_progress_fn progress;
	void *progress_ctx; /* also passed to on_bad */
	/* a record with a bad data CRC met while indexing (msg borrowed) */
	void (*on_bad)(void *ctx, const char *shard, const char *msg);
	/* plain copies of compressed shards in index_dir, at most this many
	 * bytes there in all (store/shadow.h); 0: none */
	uint64_t shadow_size;
	/* worth one log line (may be NULL): an index cache file rebuilt and
	 * why (shard names it), shadow copies not written or a bad one found
	 * (shard NULL: msg names the file). msg borrowed; ctx is progress_ctx.
	 * Called from any thread, also after open while records are read. */
	void (*on_note)(void *ctx, const char *shard, const char *msg);
	/* a shard cut short (the file or its compressed stream ends inside a
	 * record) keeps its whole records before the cut, and
	 * bfs_dataset_cut says where it was cut; else it fails the open */
	bool keep_cut;
	/* SOURCE a bucket (s3:// or gs://, objsrc.h): the mount's options
	 * (NULL: none given) and the requests in flight at most (0: 64) */
	const struct bfs_s3_options *s3;
	unsigned s3_conns;
};

struct bfs_dataset;
struct bfs_objsrc;
struct bfs_s3_options;

/* Errors (message names the file): -ENOENT no such source or no shards,
 * -EACCES, -EBADMSG not TFRecord / broken framing / inference conflict,
 * -ELOOP symlink leading outside SOURCE, -ENOMEM. */
int bfs_dataset_open(struct bfs_dataset **out, const char *source,
		     const struct bfs_dataset_opts *o);
void bfs_dataset_close(struct bfs_dataset *ds); /* accepts NULL */

size_t bfs_dataset_nshards(const struct bfs_dataset *ds);
struct bfs_shard *bfs_dataset_shard(const struct bfs_dataset *ds, size_t i); /* borrowed */
uint64_t bfs_dataset_nrecords(const struct bfs_dataset *ds);
uint32_t bfs_dataset_max_record_len(const struct bfs_dataset *ds);
/* Inferred schema (NULL unless opts.infer). Borrowed. */
const struct bfs_schema *bfs_dataset_schema(const struct bfs_dataset *ds);
bool bfs_dataset_index_reused(const struct bfs_dataset *ds); /* every shard from cache */
bool bfs_dataset_schema_reused(const struct bfs_dataset *ds);
/* With an inferred schema: features in at most half of the records (a
 * folder of several datasets mounted as one?), one line, or NULL; kept in
 * index_dir with the schema, so a re-mount says it too. Borrowed. */
const char *bfs_dataset_mixed(const struct bfs_dataset *ds);
uint64_t bfs_dataset_index_bytes(const struct bfs_dataset *ds); /* mapped or in memory */
uint64_t bfs_dataset_bad_records(const struct bfs_dataset *ds); /* bad data CRC at scan */
/* With opts.keep_cut: why shard i was cut short ("PATH: record N at offset
 * O: ...; the shard is cut short: ..."), or NULL for a whole shard. Its
 * index is not cached (every open scans it again). Borrowed. */
const char *bfs_dataset_cut(const struct bfs_dataset *ds, size_t i);

/* Global record → (shard, record within shard, byte offset). -ENOENT if out
 * of range. */
int bfs_dataset_locate(const struct bfs_dataset *ds, uint64_t rec, size_t *shard, uint64_t *local,
		       uint64_t *offset);

/* Data length of global record `rec` (0 if out of range). */
uint32_t bfs_dataset_record_len(const struct bfs_dataset *ds, uint64_t rec);

/* lens[k] = bfs_dataset_record_len(recs[k]) for k < n, with the index
 * lookups of random records overlapped. */
void bfs_dataset_record_lens(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			     uint32_t *lens);

/* Read global record `rec` into dst (cap >= its length); *len gets its
 * length. The error message names shard, record index, offset and reason. */
int bfs_dataset_read(const struct bfs_dataset *ds, uint64_t rec, uint8_t *dst, size_t cap,
		     uint32_t *len, bool verify);

/* Read n records (global indices, any order, no duplicates) into dst[k]
 * (each at least its index length). Records of one shard are read in file
 * order, and those of a compressed shard share inflate passes. errs[k] gets
 * 0 or a negative errno; for a failed record msgs[k] gets a malloc'd
 * message naming shard, record, offset and reason (caller frees), else
 * NULL. Returns 0, or -ENOMEM when nothing could be attempted. */
int bfs_dataset_read_many(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			  uint8_t *const *dst, bool verify, int *errs, char **msgs);

/* SOURCE a bucket: its object store source (NULL otherwise), and the
 * objects listed but passed over as a directory's names are (borrowed). */
struct bfs_objsrc *bfs_dataset_objsrc(const struct bfs_dataset *ds);
void bfs_dataset_passed(const struct bfs_dataset *ds, char *const **names, size_t *n);

/* Whether any shard is on a network or FUSE filesystem, or in a bucket. */
bool bfs_dataset_remote(const struct bfs_dataset *ds);
/* An I/O stage (fetch.h) over the dataset's shards (object i = shard i),
 * set on every remote shard, or on all with `all`, so that their reads
 * take what it holds. With a disk cache (diskcache.h), the bytes the
 * stage fetches are kept there and read from there after; a plain shard
 * whose copy is whole is read from it as a local file (its records'
 * CRCs always checked; a record its copy fails is read from the source
 * and the copy deleted). The dataset must outlive the stage; free it
 * with bfs_dataset_fetch_free, while no read runs. */
struct bfs_fetch;
struct bfs_diskcache;
struct bfs_dataset_io {
	struct bfs_fetch_opts fetch;
	bool all;
	struct bfs_diskcache *dc; /* NULL: none */
	void (*note)(void *ctx, const char *msg); /* copies found bad; may be NULL */
	void *ctx;
};
int bfs_dataset_fetch_new(struct bfs_fetch **out, const struct bfs_dataset *ds,
			  const struct bfs_dataset_io *o);
void bfs_dataset_fetch_free(const struct bfs_dataset *ds, struct bfs_fetch *f); /* accepts NULL */
/* Bytes [off, off + len) of shard i are part of what this mount reads when
 * it reads only a share of the dataset: its disk cache keeps only its
 * share (bfs_dcobj_share). Nothing without a disk cache. */
void bfs_dataset_share(const struct bfs_dataset *ds, size_t i, uint64_t off, uint64_t len);
/* Records the stage's disk cache served from copies read as local files
 * (whole copies, promoted), and their bytes: reads the stage never sees. */
void bfs_dataset_copy_served(const struct bfs_dataset *ds, uint64_t *records, uint64_t *bytes);

/* Cache files about one shard in a cache directory (the index is one; the
 * batcher's ragged counts another): dst gets "DIR/<16 hex digits: a hash of
 * the shard's absolute path><suffix>" and abs (abscap >= PATH_MAX) that
 * absolute path, which the file should record and check. -ENAMETOOLONG,
 * -EINVAL (no such shard). */
int bfs_dataset_cache_file(const struct bfs_dataset *ds, size_t i, const char *dir,
			   const char *suffix, char *dst, size_t cap, char *abs, size_t abscap);
/* Delete the files of their own that the shards i with drop[i] may have in
 * dir under each of the nsuf suffixes, now that what they held is kept
 * elsewhere (a pack): each name is computed as bfs_dataset_cache_file
 * computes it, never matched by a pattern. dir is listed once (not at all
 * when no drop[i] is set), and only names found there are unlinked: no
 * system call per shard without such a file (20,000 tiny shards; an
 * index_dir shared over NFS). Best effort;
 * another mount reading a file deleted under it only rebuilds it. */
void bfs_dataset_drop_cache_files(const struct bfs_dataset *ds, const char *dir,
				  const char *const *suffixes, size_t nsuf, const bool *drop);

/* The union of n open datasets (a mixture's sources): their shards end to
 * end, so dataset k's records are numbered from the sum of the record
 * counts before it. It borrows the members' shards (they must outlive it
 * and be closed after it) and has no schema; at most one member may be a
 * bucket (-EINVAL naming the second). Errors: -EINVAL, -ENOMEM. */
int bfs_dataset_union(struct bfs_dataset **out, struct bfs_dataset *const *members, size_t n);

/* The ragged counts the scan kept of shard i (global shard index) for bytes
 * feature `feature`: each record's number of values and bytes, the
 * shard's record count of each (borrowed; valid until the dataset is
 * closed or they are dropped). Kept only for shards that the count pass
 * would read again from a bucket, when inference made the feature ragged
 * and every record of the shard was decoded. False when there are none. */
bool bfs_dataset_scan_counts(const struct bfs_dataset *ds, size_t shard, const char *feature,
			     const uint32_t **nvalues, const uint32_t **nbytes);
/* Free them (once the count pass has taken them). A union drops only its
 * view: drop its members' too. */
void bfs_dataset_scan_counts_drop(struct bfs_dataset *ds);

/* Resolve SOURCE into a sorted list of shard paths (malloc'd, caller frees
 * each and the array). */
int bfs_source_resolve(char ***out, size_t *n, const char *source, bool follow_symlinks);
void bfs_source_free(char **paths, size_t n);

/* In a directory SOURCE, names that are plainly not shards are passed over
 * (docs/contract.md, SOURCE): ending .json .txt .md .crc .pbtxt .idx, batchfs's
 * own .shadow copies (index_dir set to SOURCE), or starting with '_'. */
bool bfs_source_not_shard(const char *name);
/* Those names in directory `dir`, sorted (none when dir is not a
 * directory); free with bfs_source_free. */
int bfs_source_passed_over(char ***out, size_t *n, const char *dir);

#endif
