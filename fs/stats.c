/*
 * stats.c — stats.json's table of keys and its writer (see stats.h).
 * Written with stdio from the table, not jansson: jansson's one user in the
 * daemon is decoder/schema.c (docs/HACKING.md, one firewall per
 * dependency), and the format is fixed to the byte (docs/contract.md).
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

#define KEY(id, nm, ty, gr, ki, un, lb)                                                            \
	[BFS_STAT_##id] = { .name = nm,                                                            \
			    .type = BFS_STYPE_##ty,                                                \
			    .group = BFS_SGROUP_##gr,                                              \
			    .kind = BFS_SKIND_##ki,                                                \
			    .unit = BFS_SUNIT_##un,                                                \
			    .label = lb }
#define MEMBER(id, nm, ty, ki, un, lb)                                                             \
	[BFS_STAT_##id] = { .name = nm,                                                            \
			    .type = BFS_STYPE_##ty,                                                \
			    .group = BFS_SGROUP_CUDA,                                              \
			    .kind = BFS_SKIND_##ki,                                                \
			    .unit = BFS_SUNIT_##un,                                                \
			    .label = lb,                                                           \
			    .member = true }

const struct bfs_stat_key bfs_stat_keys[BFS_STAT_NKEYS] = {
	KEY(RECORDS, "records", UINT, ALWAYS, FACT, COUNT, "records"),
	KEY(BATCHES_PER_EPOCH, "batches_per_epoch", UINT, ALWAYS, FACT, COUNT, "batches per epoch"),
	KEY(INDEX_REUSED, "index_reused", BOOL, ALWAYS, FACT, FLAG, "index reused"),
	KEY(SCHEMA_REUSED, "schema_reused", BOOL, ALWAYS, FACT, FLAG, "schema reused"),
	KEY(INDEX_BYTES, "index_bytes", UINT, ALWAYS, FACT, BYTES, "index"),
	KEY(INDEX_CORRUPT_RECORDS, "index_corrupt_records", UINT, ALWAYS, FACT, COUNT,
	    "corrupt records indexed"),
	KEY(READS, "reads", UINT, ALWAYS, TOTAL, COUNT, "reads"),
	KEY(BYTES_READ, "bytes_read", UINT, ALWAYS, TOTAL, BYTES, "read"),
	KEY(CACHE_HITS, "cache_hits", UINT, ALWAYS, TOTAL, COUNT, "cache hits"),
	KEY(CACHE_MISSES, "cache_misses", UINT, ALWAYS, TOTAL, COUNT, "cache misses"),
	KEY(CACHE_WAITS, "cache_waits", UINT, ALWAYS, TOTAL, COUNT, "waits for a decode"),
	KEY(CACHE_EVICTIONS, "cache_evictions", UINT, ALWAYS, TOTAL, COUNT, "evictions"),
	KEY(CACHE_ENTRIES, "cache_entries", UINT, ALWAYS, LEVEL, COUNT, "cache entries"),
	KEY(CACHE_BYTES, "cache_bytes", UINT, ALWAYS, LEVEL, BYTES, "cache held"),
	KEY(CACHE_PEAK_BYTES, "cache_peak_bytes", UINT, ALWAYS, LEVEL, BYTES, "cache peak"),
	KEY(CACHE_BUDGET, "cache_budget", UINT, ALWAYS, FACT, BYTES, "cache budget"),
	KEY(PREFETCH_ISSUED, "prefetch_issued", UINT, ALWAYS, TOTAL, COUNT, "prefetches issued"),
	KEY(BATCHES_DECODED, "batches_decoded", UINT, ALWAYS, TOTAL, COUNT, "batches decoded"),
	KEY(CHUNKS_DECODED, "chunks_decoded", UINT, ALWAYS, TOTAL, COUNT, "chunks decoded"),
	KEY(DECODE_SECONDS, "decode_seconds", REAL, ALWAYS, TOTAL, SECONDS, "decoding"),
	KEY(DECODE_ERRORS, "decode_errors", UINT, ALWAYS, TOTAL, COUNT, "decode errors"),
	KEY(CORRUPT_RECORDS, "corrupt_records", UINT, ALWAYS, TOTAL, COUNT, "corrupt records"),
	KEY(SKIPPED_RECORDS, "skipped_records", UINT, ALWAYS, TOTAL, COUNT, "skipped records"),
	KEY(FAILED_READS, "failed_reads", UINT, ALWAYS, TOTAL, COUNT, "failed reads"),
	KEY(RECORDS_SERVED, "records_served", UINT, ALWAYS, TOTAL, COUNT, "records served"),
	KEY(RECORDS_DECODED, "records_decoded", UINT, ALWAYS, TOTAL, COUNT, "records decoded"),
	KEY(PREFETCH_READY, "prefetch_ready", UINT, ALWAYS, LEVEL, COUNT, "ready ahead"),
	KEY(PREFETCH_QUEUED, "prefetch_queued", UINT, ALWAYS, LEVEL, COUNT, "queued ahead"),
	KEY(DECODING, "decoding", UINT, ALWAYS, LEVEL, COUNT, "decoding now"),
	KEY(BUFFERS_REUSED, "buffers_reused", UINT, ALWAYS, TOTAL, COUNT, "buffers reused"),

	KEY(IO_BACKEND, "io_backend", TEXT, IO, FACT, NAME, "source reads by"),
	KEY(IO_BACKEND_REASON, "io_backend_reason", TEXT, IO, FACT, NAME, "because"),
	KEY(IO_DEPTH, "io_depth", UINT, IO, FACT, COUNT, "source reads in flight at most"),
	KEY(IO_READAHEAD, "io_readahead", UINT, IO, FACT, BYTES, "readahead"),
	KEY(IO_READS, "io_reads", UINT, IO, TOTAL, COUNT, "source reads"),
	KEY(IO_BYTES, "io_bytes", UINT, IO, TOTAL, BYTES, "source bytes"),
	KEY(IO_INFLIGHT, "io_inflight", UINT, IO, LEVEL, COUNT, "source reads in flight"),
	KEY(IO_PEAK_INFLIGHT, "io_peak_inflight", UINT, IO, LEVEL, COUNT, "peak in flight"),
	KEY(IO_PENDING, "io_pending", UINT, IO, LEVEL, COUNT, "source reads queued"),
	KEY(IO_BUFFERED, "io_buffered", UINT, IO, LEVEL, BYTES, "buffered"),
	KEY(IO_PEAK_BUFFERED, "io_peak_buffered", UINT, IO, LEVEL, BYTES, "peak buffered"),
	KEY(IO_RANGES, "io_ranges", UINT, IO, TOTAL, COUNT, "ranges"),
	KEY(IO_MERGED, "io_merged", UINT, IO, TOTAL, COUNT, "ranges sharing a read"),
	KEY(IO_WAITS, "io_waits", UINT, IO, TOTAL, COUNT, "decoder waits"),
	KEY(IO_WAIT_SECONDS, "io_wait_seconds", REAL, IO, TOTAL, SECONDS, "decoders waited"),
	KEY(IO_RETRIES, "io_retries", UINT, IO, TOTAL, COUNT, "source reads retried"),
	KEY(IO_FAILED, "io_failed", UINT, IO, TOTAL, COUNT, "source reads failed"),
	KEY(IO_DROPPED, "io_dropped", UINT, IO, TOTAL, COUNT, "source reads dropped"),
	KEY(IO_REFUSED, "io_refused", UINT, IO, TOTAL, COUNT, "plans refused for room"),
	KEY(IO_PLANNED, "io_planned", UINT, IO, TOTAL, COUNT, "units planned"),
	KEY(IO_CLAIMED, "io_claimed", UINT, IO, TOTAL, COUNT, "builds from a plan"),
	KEY(IO_UNPLANNED, "io_unplanned", UINT, IO, TOTAL, COUNT, "builds without"),
	KEY(IO_PLANS_DROPPED, "io_plans_dropped", UINT, IO, TOTAL, COUNT, "plans dropped"),
	KEY(IO_GROUPS, "io_groups", UINT, IO, TOTAL, COUNT, "block groups"),
	KEY(IO_STREAMS, "io_streams", UINT, IO, LEVEL, COUNT, "streams"),
	KEY(IO_LOCAL, "io_local", UINT, IO, TOTAL, COUNT, "reads of local copies"),
	KEY(IO_LOCAL_BYTES, "io_local_bytes", UINT, IO, TOTAL, BYTES, "local copy bytes"),

	KEY(DISK_CACHE_HITS, "disk_cache_hits", UINT, DISK, TOTAL, COUNT, "disk cache hits"),
	KEY(DISK_CACHE_MISSES, "disk_cache_misses", UINT, DISK, TOTAL, COUNT, "disk cache misses"),
	KEY(DISK_CACHE_HIT_BYTES, "disk_cache_hit_bytes", UINT, DISK, TOTAL, BYTES,
	    "disk cache hit bytes"),
	KEY(DISK_CACHE_BYTES, "disk_cache_bytes", UINT, DISK, TOTAL, BYTES, "disk cache written"),
	KEY(DISK_CACHE_EVICTIONS, "disk_cache_evictions", UINT, DISK, TOTAL, COUNT,
	    "disk cache evictions"),
	KEY(DISK_CACHE_CORRUPT, "disk_cache_corrupt", UINT, DISK, TOTAL, COUNT,
	    "disk cache corrupt"),
	KEY(DISK_CACHE_DROPPED, "disk_cache_dropped", UINT, DISK, TOTAL, COUNT,
	    "disk cache writes dropped"),
	KEY(DISK_CACHE_USED, "disk_cache_used", UINT, DISK, LEVEL, BYTES, "disk cache used"),
	KEY(DISK_CACHE_LIMIT, "disk_cache_limit", UINT, DISK, FACT, BYTES, "disk cache limit"),

	KEY(CUDA, "cuda", OBJECT, CUDA, LEVEL, NAME, "cuda"),
	MEMBER(CUDA_DEVICE, "device", INT, FACT, COUNT, "device"),
	MEMBER(CUDA_POOL, "pool", UINT, FACT, COUNT, "pool"),
	MEMBER(CUDA_BUSY, "busy", UINT, LEVEL, COUNT, "busy"),
	MEMBER(CUDA_OPENS, "opens", UINT, TOTAL, COUNT, "opens"),
	MEMBER(CUDA_WAITS, "waits", UINT, TOTAL, COUNT, "waits"),
	MEMBER(CUDA_EAGAIN, "eagain", UINT, TOTAL, COUNT, "EAGAIN"),
	MEMBER(CUDA_ERRORS, "errors", UINT, TOTAL, COUNT, "errors"),
	MEMBER(CUDA_COPIES, "copies", UINT, TOTAL, COUNT, "copies"),
	MEMBER(CUDA_BYTES_COPIED, "bytes_copied", UINT, TOTAL, BYTES, "copied"),
	MEMBER(CUDA_PINNED_BUFFERS, "pinned_buffers", UINT, LEVEL, COUNT, "pinned buffers"),
	MEMBER(CUDA_HOST_ALLOCS, "host_allocs", UINT, TOTAL, COUNT, "cudaHostAlloc calls"),
	MEMBER(CUDA_DEVICE_BYTES, "device_bytes", UINT, LEVEL, BYTES, "device memory"),

	KEY(CREDENTIALS, "credentials", TEXT, CRED, FACT, NAME, "credentials from"),
	KEY(CREDENTIALS_EXPIRES, "credentials_expires", UINT, CRED, LEVEL, COUNT,
	    "credentials expire (epoch s, 0 never)"),
	KEY(CREDENTIALS_VALID, "credentials_valid", BOOL, CRED, LEVEL, FLAG, "credentials valid"),
	KEY(CREDENTIALS_REFRESHES, "credentials_refreshes", UINT, CRED, TOTAL, COUNT,
	    "credentials refreshed"),
	KEY(CREDENTIALS_REFRESH_FAILURES, "credentials_refresh_failures", UINT, CRED, TOTAL, COUNT,
	    "credential refreshes failed"),
	KEY(CREDENTIALS_EXPIRED_ANSWERS, "credentials_expired_answers", UINT, CRED, TOTAL, COUNT,
	    "answers: token expired"),
	KEY(SOURCE_ERRORS, "source_errors", UINT, ALWAYS, TOTAL, COUNT, "source errors"),
	KEY(UPTIME_SECONDS, "uptime_seconds", INT, ALWAYS, TOTAL, SECONDS, "up"),
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
			   uint64_t batches_per_epoch)
{
	U(RECORDS) = bfs_dataset_nrecords(ds);
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

void bfs_stats_read_failed(struct bfs_stats_reads *r)
{
	pthread_mutex_lock(&r->lock);
	r->failed++;
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
