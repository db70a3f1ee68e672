/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h — stats.json: the one table of its keys, the JSON written from
 * it, and the read counters fs/ keeps itself.
 *
 * Every key is declared once, in one line of stats_keys.def: its place
 * there is its place in the enum below and in stats.json, and the line
 * gives its entry in bfs_stat_keys (name, JSON type, when it is present,
 * how to read it, unit, a label for people). The
 * daemon writes stats.json from the table; `batchfs stats` and `batchfs
 * top` (mount/watch.c) find every key, label and unit there, so a key added
 * to the table shows in all of them. The keys and value formats are
 * docs/contract.md's (none is ever removed or renamed).
 *
 * Does not: know FUSE, read the cache or the I/O stage itself (the put
 * functions take their stats), or parse stats.json (watch.c does).
 * Thread-safety: the table is immutable; a snapshot belongs to its caller;
 * struct bfs_stats_reads is locked inside.
 */
#ifndef BFS_STATS_H
#define BFS_STATS_H

#include "fs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The key table (enum bfs_stat, struct bfs_stat_key, bfs_stat_keys,
 * bfs_stat_find) is declared in fs.h, for `batchfs stats` and `top`. */

union bfs_stat_value {
	uint64_t u; /* BFS_STYPE_UINT */
	int64_t i; /* BFS_STYPE_INT */
	double f; /* BFS_STYPE_REAL */
	bool b; /* BFS_STYPE_BOOL */
	const char *s; /* BFS_STYPE_TEXT: borrowed, until the JSON is written */
};

/* One reading of every key: the values of the groups present. */
struct bfs_stats_snap {
	union bfs_stat_value v[BFS_STAT_NKEYS];
	bool has[BFS_SGROUP_N]; /* has[BFS_SGROUP_ALWAYS] is taken as true */
	char io_plan[32], io_plan_reason[400]; /* the texts of those keys */
	char key_id[16]; /* credentials_key_id's text ("****WXYZ", or "") */
};

/* stats.json is padded with spaces to this size, so that its size does not
 * change as its numbers grow: a reader that saw one snapshot's size and
 * reads the next still gets whole JSON. */
#define BFS_STATS_SIZE 4096

/* stats.json for s (malloc'd, *len bytes, NUL-terminated): one key per
 * line in the table's order, the present groups only. pad > 0: shorter
 * text is padded with spaces to pad bytes, the last still a newline, so
 * that the file's size holds still as its numbers grow. NULL without
 * memory. */
char *bfs_stats_json(const struct bfs_stats_snap *s, size_t pad, size_t *len);

/* ---- filling a snapshot from the modules' own stats */

struct bfs_cache_stats;
struct bfs_errlog_counts;
struct bfs_fetch_stats;
struct bfs_ioplan_stats;
struct bfs_diskcache_stats;
struct bfs_cudapath_stats;
struct bfs_cudapool_stats;
struct bfs_dataset;
struct bfs_cred_keeper;

/* credentials, credentials_expires ... of a bucket's keeper */
void bfs_stats_put_cred(struct bfs_stats_snap *s, struct bfs_cred_keeper *k);

/* records, batches_per_epoch and the index facts */
/* records (an epoch's: the dataset's, or a mixture's L), source_records
 * (the dataset's), batches_per_epoch, the index's facts */
void bfs_stats_put_dataset(struct bfs_stats_snap *s, const struct bfs_dataset *ds,
			   uint64_t epoch_records, uint64_t batches_per_epoch);
void bfs_stats_put_cache(struct bfs_stats_snap *s, const struct bfs_cache_stats *c);
void bfs_stats_put_errors(struct bfs_stats_snap *s, const struct bfs_errlog_counts *e);
/* the I/O stage (sets has[BFS_SGROUP_IO]); depth and readahead are its bounds */
void bfs_stats_put_io(struct bfs_stats_snap *s, const struct bfs_fetch_stats *f,
		      const struct bfs_ioplan_stats *p, unsigned depth, uint64_t readahead);
void bfs_stats_put_diskcache(struct bfs_stats_snap *s, const struct bfs_diskcache_stats *d);
/* -o cuda on device `device` (sets has[BFS_SGROUP_CUDA]) */
void bfs_stats_put_cuda(struct bfs_stats_snap *s, int device, const struct bfs_cudapool_stats *p,
			const struct bfs_cudapath_stats *c);

/* ---- the reads fs/ serves */

/* reads, bytes_read, records_served and failed_reads. A read is counted
 * before its reply, so a reader that reads stats.json after its read
 * returned sees it (docs/contract.md).
 *
 * failed_reads counts what readers see: a read(2) that fails. The kernel
 * asks twice for one: its readahead fails, then it asks again for the
 * reader's own page (a smaller read in the range that failed), whose
 * failure the reader gets. So a failed request in the range of the last
 * failure of the same file and reader, the first after it, is that same
 * read; the pages of that range then stay in the kernel's cache unread,
 * and a later read of them is asked for once: counted each time. A
 * readahead the kernel splits in requests end to end is one read too. */
#define BFS_STATS_FAILURES 64 /* slots: the top 6 bits of a hash of the inode */
struct bfs_stats_failure {
	uint64_t ino, reader, off, end; /* the range of a failed request */
	int64_t at_ms; /* when it failed */
	bool open; /* the kernel's own retry of it is still to come */
};

struct bfs_stats_reads {
	pthread_mutex_t lock; /* guards the fields below */
	uint64_t reads, bytes, failed;
	double records; /* records' worth of tensor data: fractions add up */
	struct bfs_stats_failure last[BFS_STATS_FAILURES]; /* by inode */
};

void bfs_stats_reads_init(struct bfs_stats_reads *r);
void bfs_stats_reads_destroy(struct bfs_stats_reads *r);
/* A read of a batch or view file answered with `bytes` bytes, `records`
 * records' worth of them (bfs_stats_rows). */
void bfs_stats_read(struct bfs_stats_reads *r, uint64_t bytes, double records);
/* A read of [off, off + len) of inode ino, by process reader, failed;
 * counted unless it is the kernel's second request for one read (above). */
void bfs_stats_read_failed(struct bfs_stats_reads *r, uint64_t ino, uint64_t reader, uint64_t off,
			   uint64_t len);
void bfs_stats_put_reads(struct bfs_stats_snap *s, struct bfs_stats_reads *r);

struct bfs_geom;

/* The records' worth of tensor data in bytes [pos, end) of a file whose
 * data (after hlen bytes of header) is part of a unit (a batch, or an
 * epoch view) of geometry g: the bytes of tensor data read over the unit's
 * bytes of tensor data per record. So reading every .npy of a batch, or
 * its .safetensors, counts its records once; a header counts nothing. */
double bfs_stats_rows(const struct bfs_geom *g, uint64_t hlen, uint64_t pos, uint64_t end);

#endif
