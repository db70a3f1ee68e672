/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c — stats.json's table of keys and its writer (see stats.h).
 * Written with stdio from the table, not jansson: the decoder's jansson
 * firewall is decoder/schema/schema_json.c (docs/HACKING.md, one firewall
 * per dependency), and the format is fixed to the byte (docs/contract.md).
 */
#include "stats.h"

#include "cache.h"
#include "common.h"
#include "cred.h"
#include "cudapath.h"
#include "cudapool.h"
#include "dataset.h"
#include "diskcache.h"
#include "errlog.h"
#include "fetch.h"
#include "ioplan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY(id, nm, ty, gr, ki, un, lb)                                                            \
	[BFS_STAT_##id] = { .name = nm,                                                            \
			    .type = BFS_STYPE_##ty,                                                \
			    .group = BFS_SGROUP_##gr,                                              \
			    .kind = BFS_SKIND_##ki,                                                \
			    .unit = BFS_SUNIT_##un,                                                \
			    .label = lb },
#define MEMBER(id, nm, ty, ki, un, lb)                                                             \
	[BFS_STAT_##id] = { .name = nm,                                                            \
			    .type = BFS_STYPE_##ty,                                                \
			    .group = BFS_SGROUP_CUDA,                                              \
			    .kind = BFS_SKIND_##ki,                                                \
			    .unit = BFS_SUNIT_##un,                                                \
			    .label = lb,                                                           \
			    .member = true },

const struct bfs_stat_key bfs_stat_keys[BFS_STAT_NKEYS] = {
#include "stats_keys.def"
};

const struct bfs_stat_key *bfs_stat_find(const char *name)
{
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++)
		if (!bfs_stat_keys[i].member && strcmp(bfs_stat_keys[i].name, name) == 0)
			return &bfs_stat_keys[i];
	return NULL;
}

/* ----------------------------------------------------------------- JSON */

static void put_text(FILE *f, const char *s)
{
	char tmp[7];

	fputc('"', f);
	for (; s && *s; s++) {
		size_t n = bfs_json_char(tmp, (unsigned char)*s);

		fwrite(tmp, 1, n, f);
	}
	fputc('"', f);
}

static void put_value(FILE *f, const struct bfs_stat_key *k, const union bfs_stat_value *v)
{
	switch (k->type) {
	case BFS_STYPE_UINT:
		fprintf(f, "%" PRIu64, v->u);
		break;
	case BFS_STYPE_INT:
		fprintf(f, "%" PRId64, v->i);
		break;
	case BFS_STYPE_REAL:
		fprintf(f, "%.6f", v->f);
		break;
	case BFS_STYPE_BOOL:
		fputs(v->b ? "true" : "false", f);
		break;
	case BFS_STYPE_TEXT:
		put_text(f, v->s);
		break;
	case BFS_STYPE_OBJECT: /* written by the caller, from its members */
		break;
	}
}

static bool present(const struct bfs_stats_snap *s, const struct bfs_stat_key *k)
{
	return k->group == BFS_SGROUP_ALWAYS || s->has[k->group];
}

char *bfs_stats_json(const struct bfs_stats_snap *s, size_t pad, size_t *len)
{
	char *text = NULL, *t;
	size_t n = 0, last = 0;
	FILE *f;

	/* the last key present ends without a comma */
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++)
		if (!bfs_stat_keys[i].member && present(s, &bfs_stat_keys[i]))
			last = i;
	f = open_memstream(&text, &n);
	if (!f)
		return NULL;
	fputs("{\n", f);
	for (size_t i = 0; i < BFS_STAT_NKEYS; i++) {
		const struct bfs_stat_key *k = &bfs_stat_keys[i];

		if (k->member || !present(s, k))
			continue;
		fprintf(f, "  \"%s\": ", k->name);
		if (k->type == BFS_STYPE_OBJECT) {
			fputc('{', f);
			for (size_t j = i + 1; j < BFS_STAT_NKEYS && bfs_stat_keys[j].member; j++) {
				fprintf(f, "%s\"%s\": ", j > i + 1 ? ", " : "",
					bfs_stat_keys[j].name);
				put_value(f, &bfs_stat_keys[j], &s->v[j]);
			}
			fputc('}', f);
		} else {
			put_value(f, k, &s->v[i]);
		}
		fputs(i == last ? "\n" : ",\n", f);
	}
	fputs("}\n", f);
	if (ferror(f)) {
		fclose(f);
		free(text);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	if (n < pad) {
		/* spaces in place of the last newline, then a newline at the end */
		t = realloc(text, pad + 1);
		if (t) {
			memset(t + n - 1, ' ', pad - n);
			t[pad - 1] = '\n';
			t[pad] = '\0';
			text = t;
			n = pad;
		}
	}
	*len = n;
	return text;
}

/* ------------------------------------------------------------- filling */

#define U(id) s->v[BFS_STAT_##id].u

void bfs_stats_put_dataset(struct bfs_stats_snap *s, const struct bfs_dataset *ds,
			   uint64_t epoch_records, uint64_t batches_per_epoch)
{
	U(RECORDS) = epoch_records;
	U(SOURCE_RECORDS) = bfs_dataset_nrecords(ds);
	U(BATCHES_PER_EPOCH) = batches_per_epoch;
	s->v[BFS_STAT_INDEX_REUSED].b = bfs_dataset_index_reused(ds);
	s->v[BFS_STAT_SCHEMA_REUSED].b = bfs_dataset_schema_reused(ds);
	U(INDEX_BYTES) = bfs_dataset_index_bytes(ds);
	U(INDEX_CORRUPT_RECORDS) = bfs_dataset_bad_records(ds);
}

void bfs_stats_put_cache(struct bfs_stats_snap *s, const struct bfs_cache_stats *c)
{
	U(CACHE_HITS) = c->hits;
	U(CACHE_MISSES) = c->misses;
	U(CACHE_WAITS) = c->waits;
	U(CACHE_EVICTIONS) = c->evictions;
	U(CACHE_ENTRIES) = c->entries;
	U(CACHE_BYTES) = c->bytes;
	U(CACHE_PEAK_BYTES) = c->peak_bytes;
	U(CACHE_BUDGET) = c->budget;
	U(PREFETCH_ISSUED) = c->prefetch_issued;
	U(BATCHES_DECODED) = c->batches_decoded;
	U(CHUNKS_DECODED) = c->chunks_decoded;
	s->v[BFS_STAT_DECODE_SECONDS].f = (double)c->decode_ns / 1e9;
	U(DECODE_ERRORS) = c->decode_errors;
	U(RECORDS_DECODED) = c->records_decoded;
	U(PREFETCH_READY) = c->prefetch_ready;
	U(PREFETCH_QUEUED) = c->prefetch_queued;
	U(DECODING) = c->decoding;
	U(BUFFERS_REUSED) = c->buffers_reused;
}

void bfs_stats_put_errors(struct bfs_stats_snap *s, const struct bfs_errlog_counts *e)
{
	U(CORRUPT_RECORDS) = e->corrupt;
	U(SKIPPED_RECORDS) = e->skipped;
	U(SOURCE_ERRORS) = e->source;
}

void bfs_stats_put_io(struct bfs_stats_snap *s, const struct bfs_fetch_stats *f,
		      const struct bfs_ioplan_stats *p, unsigned depth, uint64_t readahead)
{
	s->has[BFS_SGROUP_IO] = true;
	s->v[BFS_STAT_IO_BACKEND].s = f->backend;
	s->v[BFS_STAT_IO_BACKEND_REASON].s = f->backend_reason ? f->backend_reason : "";
	U(IO_DEPTH) = depth;
	U(IO_READAHEAD) = readahead;
	U(IO_READS) = f->reads;
	U(IO_BYTES) = f->bytes;
	U(IO_INFLIGHT) = f->inflight;
	U(IO_PEAK_INFLIGHT) = f->peak_inflight;
	U(IO_PENDING) = f->pending;
	U(IO_BUFFERED) = f->buffered;
	U(IO_PEAK_BUFFERED) = f->peak_buffered;
	U(IO_RANGES) = f->ranges;
	U(IO_MERGED) = f->merged;
	U(IO_WAITS) = f->waits;
	s->v[BFS_STAT_IO_WAIT_SECONDS].f = (double)f->wait_ns / 1e9;
	U(IO_RETRIES) = f->retries;
	U(IO_FAILED) = f->failed;
	U(IO_DROPPED) = f->dropped;
	U(IO_REFUSED) = f->refused;
	U(IO_PLANNED) = p->planned;
	U(IO_CLAIMED) = p->claimed;
	U(IO_UNPLANNED) = p->unplanned;
	U(IO_PLANS_DROPPED) = p->dropped;
	U(IO_GROUPS) = p->groups;
	U(IO_STREAMS) = p->streams;
	U(IO_LOCAL) = f->local;
	U(IO_LOCAL_BYTES) = f->local_bytes;
	snprintf(s->io_plan, sizeof(s->io_plan), "%s", p->plan);
	snprintf(s->io_plan_reason, sizeof(s->io_plan_reason), "%s", p->reason);
	s->v[BFS_STAT_IO_PLAN].s = s->io_plan;
	s->v[BFS_STAT_IO_PLAN_REASON].s = s->io_plan_reason;
	U(IO_WINDOWS) = p->windows;
	U(IO_PASSES) = p->passes;
	U(IO_PASS_READS) = f->pass_reads;
	U(IO_PASS_BYTES) = f->pass_bytes;
}

void bfs_stats_put_cred(struct bfs_stats_snap *s, struct bfs_cred_keeper *k)
{
	struct bfs_cred_stats c;

	bfs_cred_keeper_stats(k, &c);
	s->has[BFS_SGROUP_CRED] = true;
	s->v[BFS_STAT_CREDENTIALS].s = bfs_cred_keeper_name(k);
	U(CREDENTIALS_EXPIRES) = c.expires > 0 ? (uint64_t)c.expires : 0;
	s->v[BFS_STAT_CREDENTIALS_VALID].b = c.valid;
	U(CREDENTIALS_REFRESHES) = c.refreshes;
	U(CREDENTIALS_REFRESH_FAILURES) = c.failures;
	U(CREDENTIALS_EXPIRED_ANSWERS) = c.expired_signals;
	bfs_cred_keeper_key_id(k, s->key_id, sizeof(s->key_id));
	s->v[BFS_STAT_CREDENTIALS_KEY_ID].s = s->key_id;
}

void bfs_stats_put_diskcache(struct bfs_stats_snap *s, const struct bfs_diskcache_stats *d)
{
	s->has[BFS_SGROUP_DISK] = true;
	U(DISK_CACHE_HITS) = d->hits;
	U(DISK_CACHE_MISSES) = d->misses;
	U(DISK_CACHE_HIT_BYTES) = d->hit_bytes;
	U(DISK_CACHE_BYTES) = d->bytes;
	U(DISK_CACHE_EVICTIONS) = d->evictions;
	U(DISK_CACHE_CORRUPT) = d->corrupt;
	U(DISK_CACHE_DROPPED) = d->dropped;
	U(DISK_CACHE_USED) = d->used;
	U(DISK_CACHE_LIMIT) = d->limit;
}

void bfs_stats_put_cuda(struct bfs_stats_snap *s, int device, const struct bfs_cudapool_stats *p,
			const struct bfs_cudapath_stats *c)
{
	s->has[BFS_SGROUP_CUDA] = true;
	s->v[BFS_STAT_CUDA_DEVICE].i = device;
	U(CUDA_POOL) = p->pool;
	U(CUDA_BUSY) = p->busy;
	U(CUDA_OPENS) = p->opens;
	U(CUDA_WAITS) = p->waits;
	U(CUDA_EAGAIN) = p->eagain;
	U(CUDA_ERRORS) = p->errors;
	U(CUDA_COPIES) = c->copies;
	U(CUDA_BYTES_COPIED) = c->bytes;
	U(CUDA_PINNED_BUFFERS) = c->pinned;
	U(CUDA_HOST_ALLOCS) = c->host_allocs;
	U(CUDA_DEVICE_BYTES) = c->device_bytes;
}

/* ---------------------------------------------------------------- reads */

void bfs_stats_reads_init(struct bfs_stats_reads *r)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
}

void bfs_stats_reads_destroy(struct bfs_stats_reads *r)
{
	pthread_mutex_destroy(&r->lock);
}

void bfs_stats_read(struct bfs_stats_reads *r, uint64_t bytes, double records)
{
	pthread_mutex_lock(&r->lock);
	r->reads++;
	r->bytes += bytes;
	r->records += records;
	pthread_mutex_unlock(&r->lock);
}

/* How long a failed request waits for the kernel's retry of it. */
#define RETRY_WAIT_MS 60000

void bfs_stats_read_failed(struct bfs_stats_reads *r, uint64_t ino, uint64_t reader, uint64_t off,
			   uint64_t len)
{
	struct timespec ts;
	int64_t now;
	struct bfs_stats_failure *f = &r->last[(ino * 0x9E3779B97F4A7C15ull) >> 58];
	bool mine, fresh;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	pthread_mutex_lock(&r->lock);
	mine = f->ino == ino && f->reader == reader && f->end > f->off;
	fresh = mine && f->open && now - f->at_ms < RETRY_WAIT_MS;
	if (fresh && off >= f->off && off < f->end) {
		f->open = false; /* the reader's own page, after the readahead */
		f->at_ms = now;
	} else if (fresh && off == f->end) {
		f->end = off + len; /* the readahead's next request */
		f->at_ms = now;
	} else if (mine && !f->open && off >= f->off && off < f->end) {
		r->failed++; /* pages still in the cache, unread: asked once */
		f->at_ms = now;
	} else {
		r->failed++;
		*f = (struct bfs_stats_failure){ ino, reader, off, off + len, now, true };
	}
	pthread_mutex_unlock(&r->lock);
}

void bfs_stats_put_reads(struct bfs_stats_snap *s, struct bfs_stats_reads *r)
{
	pthread_mutex_lock(&r->lock);
	U(READS) = r->reads;
	U(BYTES_READ) = r->bytes;
	U(FAILED_READS) = r->failed;
	/* whole records: the fractions of a batch read file by file add up */
	U(RECORDS_SERVED) = (uint64_t)(r->records + 0.5);
	pthread_mutex_unlock(&r->lock);
}

double bfs_stats_rows(const struct bfs_geom *g, uint64_t hlen, uint64_t pos, uint64_t end)
{
	uint64_t total = g->st_size - g->st_hlen;
	uint64_t a = pos > hlen ? pos : hlen;

	if (end <= a || total == 0)
		return 0;
	return (double)(end - a) * (double)g->batch / (double)total;
}
