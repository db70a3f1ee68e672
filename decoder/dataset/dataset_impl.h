/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_impl.h — the dataset object and what the dataset module's files
 * share: dataset.c (open, close, accessors, reading records by global
 * number), dataset_source.c (SOURCE to shard paths), dataset_cache.c
 * (index_dir: the index files and packs, the cached schema),
 * dataset_scan.c (the scan pass) and dataset_io.c (the I/O stage over the
 * shards). Internal to the module: users include dataset.h.
 */
#ifndef BFS_DATASET_IMPL_H
#define BFS_DATASET_IMPL_H

#include "dataset.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bfs_dataset {
	size_t nshards;
	struct bfs_shard **shards;
	uint64_t *first; /* [nshards + 1]: global index of each shard's first record */
	uint64_t nrecords;
	uint32_t max_len;
	struct bfs_schema *schema;
	bool index_reused;
	bool schema_reused;
	char *mixed; /* bfs_infer_mixed's line, or NULL (saved beside the schema) */
	uint64_t bad_records; /* data CRC mismatches met by the scan */
	char **cut; /* [nshards]: why a shard cut short was kept (opts.keep_cut), else NULL */
	struct bfs_shadows *shadows; /* NULL: no shadow copies */
	/* [nshards], with index_dir: each shard's absolute path (the cache key),
	 * resolved once by the load workers; an entry is NULL until then, or
	 * when out of memory (that shard is then not cached) */
	char **abs;
	bool ix_dir_ok; /* index_dir exists (made once, not per shard) */
	/* with index_dir, while open runs: the index packs (ixpack.h) of the
	 * shards' directories, sorted by directory hash, and each shard's
	 * (SIZE_MAX: none, its index has a file of its own); NULL after */
	struct pack_group *packs;
	size_t npacks;
	size_t *pack_of;
	struct dsio *io; /* while an I/O stage reads the shards */
	/* SOURCE a bucket: its objects, and those passed over */
	struct bfs_objsrc *objs;
	char **passed;
	size_t npassed;
	/* a union of datasets (dataset_union.c): the shards, objs and shadows
	 * belong to its members; only its arrays are its own */
	bool borrowed;
	/* [nshards] or NULL: the ragged counts the scan kept of each shard
	 * (dataset_counts.c), NULL for most; a union's are its members' */
	struct bfs_scan_counts **scnt;
};

struct pack_group {
	uint64_t dirhash; /* of the shards' real directory */
	char *file; /* INDEX_DIR/<dirhash>.pack.idx */
	struct bfs_ixpack *pk; /* as read at open; NULL: none, or bad */
	bool dirty; /* bad, or an entry of one of ours stale or corrupt: write it */
};

/* ---- dataset_source.c -------------------------------------------------- */

/* strcmp for qsort and bsearch over an array of char *. */
int bfs_source_strcmp(const void *a, const void *b);
/* Append a copy of p to the growing array (*v)[*n] of capacity *cap.
 * 0 or -ENOMEM. */
int bfs_source_push(char ***v, size_t *n, size_t *cap, const char *p);

/* ---- dataset_cache.c ----------------------------------------------------- */

/* A shard's absolute path: its real path when it resolves, else as given. */
const char *bfs_dataset_real_path(const char *path, char real[PATH_MAX]);
/* Load every shard's cached index over o->jobs threads; need[i] is set for
 * the shards to scan. */
void bfs_dataset_load_indexes(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need);
/* Whether shard i's index goes into its directory's pack. */
bool bfs_dataset_idx_packed(struct bfs_dataset *ds, size_t i);
/* Write shard i's index to a file of its own in dir (best effort). */
void bfs_dataset_idx_save(struct bfs_dataset *ds, const char *dir, size_t i);
/* After a scan: write the packs that changed (ok[i]: shard i's index is
 * good; cached[i]: it was loaded, not scanned). */
void bfs_dataset_save_packs(struct bfs_dataset *ds, const char *dir, const bool *ok,
			    const bool *cached);
void bfs_dataset_free_packs(struct bfs_dataset *ds);
/* The inferred schema's cache file (its name hashes every shard's path,
 * size, mtime and compression), its load (0, or -ENOENT and the like)
 * and its save (best effort). */
void bfs_dataset_schema_file(char *dst, size_t cap, const char *dir, struct bfs_dataset *ds);
int bfs_dataset_schema_load(struct bfs_schema **out, const char *file);
void bfs_dataset_schema_save(const char *dir, const char *file, const struct bfs_schema *s);
/* The line of bfs_infer_mixed kept beside a schema file (FILE.mixed):
 * load (malloc'd, NULL when none) and save (NULL removes it); best effort. */
char *bfs_dataset_mixed_load(const char *file);
void bfs_dataset_mixed_save(const char *file, const char *line);

/* ---- dataset_scan.c ------------------------------------------------------- */

/* Scan the shards with need[i] over o->jobs threads (framing and CRCs,
 * their indexes built and saved, shadow copies written), inferring the
 * schema into ds->schema when infer. scanned[i]: shard i scanned without
 * error; cached[i] (or NULL): its index came from index_dir. 0 or the
 * first shard's error. */
int bfs_dataset_scan(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need,
		     const bool *cached, bool *scanned, bool infer);

/* ---- dataset_counts.c ----------------------------------------------------- */

/* One shard's counts, noted as its scan decodes its records (in order);
 * budget: the bytes every collection may still take, shared (atomic). */
struct bfs_scan_counts;
struct bfs_scan_counts *bfs_scan_counts_new(int64_t *budget); /* NULL: no memory */
void bfs_scan_counts_add(struct bfs_scan_counts *c, uint64_t index, const struct bfs_example *ex);
/* A record that is not counted (not decoded, a bad CRC): none are kept. */
void bfs_scan_counts_spoil(struct bfs_scan_counts *c);
/* The scan of the shard ended: c when it ok and counted its n records, else
 * NULL (c freed). */
struct bfs_scan_counts *bfs_scan_counts_end(struct bfs_scan_counts *c, uint64_t n, bool ok);
/* Only the features ragged in s (RAGGED2 bytes) kept; NULL (c freed) when
 * none is. */
struct bfs_scan_counts *bfs_scan_counts_keep(struct bfs_scan_counts *c, const struct bfs_schema *s);

/* ---- dataset_union.c ------------------------------------------------------ */

/* Free what a union owns (close calls it for a borrowed dataset). */
void bfs_dataset_union_free(struct bfs_dataset *ds);

#endif
