/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c — the decoded-batch cache and its prefetch workers (see cache.h).
 */
#include "cache.h"

#include "workers.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { ST_LOADING = 1, ST_READY = 2, ST_FAILED = 3 };

#define NBUCKETS 4096
#define SPARES 4 /* spare batch buffers kept at most */
#define SPARE_MIN_BYTES ((uint64_t)1 << 20) /* smaller ones come from malloc's heap */
/* Heap bytes of batch buffers freed between two malloc_trim calls (see
 * trim_due) */
#define TRIM_EVERY ((uint64_t)32 << 20)

struct req {
	uint64_t rank, epoch, batch;
};

struct bfs_cache {
	const struct bfs_batcher *const *b; /* [nranks] */
	size_t nranks;
	uint64_t budget;
	unsigned nthreads, prefetch;
	bfs_cache_error_fn on_error;
	void *ctx;
	bfs_cache_pin_fn pin; /* set before the workers start */
	bfs_cache_unpin_fn unpin;
	void *pin_ctx;
	struct bfs_ioplan *io; /* reads planned ahead (NULL: none); set before the workers start */
	uint64_t epochs; /* epochs listed: no prefetch past them (0: no bound); set before */

	pthread_mutex_t lock;
	pthread_cond_t changed; /* an entry left ST_LOADING */
	pthread_cond_t work; /* the queue got a request, or stop */
	struct bfs_cache_entry *table[NBUCKETS]; /* lock */
	/* lock; READY entries, newest first, on three lists: [0] prefetched and
	 * not read yet, [1] batches read at least once (x->touched), [2] chunks
	 * of the epoch view read at least once */
	struct bfs_cache_entry *lru_head[3], *lru_tail[3];
	size_t nread; /* lock; entries on list [1] */
	size_t nahead; /* lock; entries on list [0] */
	uint64_t chunk_bytes; /* lock; bytes of entries on list [2] */
	uint64_t read_bytes; /* lock; bytes of entries on list [1] */
	size_t keep_read; /* read entries kept beyond what readers hold */
	struct bfs_cache_entry *jobs; /* lock; loading entries with a job, oldest first */
	unsigned max_parts;
	struct req *queue; /* lock; ring */
	size_t qcap, qhead, qlen; /* lock */
	bool stop; /* lock */
	struct bfs_workers workers; /* the prefetch workers, once started */
	struct bfs_cache_stats st; /* lock */
	/* lock; buffers of evicted batches kept for the next builds, counted
	 * against the budget and dropped first when room is needed: a fresh
	 * buffer of many MiB comes from mmap, and the kernel faults in and
	 * zeroes every page of it again (~17% of the daemon's CPU on 'photo') */
	struct spare {
		uint8_t *p;
		uint64_t cap;
	} spares[SPARES];
	unsigned nspare;
	uint64_t spare_bytes;
	/* lock; bytes of heap buffers (under BFS_CACHE_MAP_MIN) freed since
	 * the last malloc_trim */
	uint64_t freed;
};

void bfs_cache_malloc_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, (int)BFS_CACHE_MAP_MIN);
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

/* Free a batch buffer of cap bytes. Lock held. */
static void buf_free(struct bfs_cache *c, uint8_t *buf, uint64_t cap)
{
	if (buf && cap < BFS_CACHE_MAP_MIN)
		c->freed += cap;
	free(buf);
}

/* Whether the heap should be trimmed now (outside the lock, by the
 * caller). Batch buffers under BFS_CACHE_MAP_MIN come from malloc's
 * arenas, one per thread that started a build; a freed one stays in its
 * arena (free pages inside an arena are not returned, and the thread that
 * allocates next is rarely the one whose arena holds them). malloc_trim
 * gives those pages back, once per TRIM_EVERY bytes freed. Larger buffers
 * are mapped and unmapped by malloc (bfs_cache_malloc_setup). Lock held. */
static bool trim_due(struct bfs_cache *c)
{
	if (c->freed < TRIM_EVERY)
		return false;
	c->freed = 0;
	return true;
}

/* Keep buf (cap bytes, unpinned) as a spare if it is large and fits the
 * budget, else free it. Lock held. */
static void keep_spare(struct bfs_cache *c, uint8_t *buf, uint64_t cap)
{
	if (buf && cap >= SPARE_MIN_BYTES && c->nspare < SPARES &&
	    c->st.bytes + c->spare_bytes + cap <= c->budget) {
		c->spares[c->nspare++] = (struct spare){ buf, cap };
		c->spare_bytes += cap;
		return;
	}
	buf_free(c, buf, cap);
}

/* The smallest spare of at least need bytes (and at most twice that), or
 * NULL; *cap gets its size. Lock held. */
static uint8_t *take_spare(struct bfs_cache *c, uint64_t need, uint64_t *cap)
{
	unsigned best = SPARES;

	for (unsigned i = 0; i < c->nspare; i++)
		if (c->spares[i].cap >= need && c->spares[i].cap / 2 <= need &&
		    (best == SPARES || c->spares[i].cap < c->spares[best].cap))
			best = i;
	if (best == SPARES)
		return NULL;
	uint8_t *p = c->spares[best].p;
	*cap = c->spares[best].cap;
	c->spare_bytes -= *cap;
	c->spares[best] = c->spares[--c->nspare];
	return p;
}

static void drop_spares(struct bfs_cache *c, uint64_t need)
{
	while (c->nspare && c->st.bytes + c->spare_bytes + need > c->budget) {
		struct spare *sp = &c->spares[--c->nspare];
		c->spare_bytes -= sp->cap;
		buf_free(c, sp->p, sp->cap);
	}
}

static size_t bucket(uint64_t r, uint64_t e, uint64_t b)
{
	uint64_t h = (e * 0x9E3779B97F4A7C15ull) ^ (b * 0xC2B2AE3D27D4EB4Full) ^
		     (r * 0x165667B19E3779F9ull);
	return (size_t)((h ^ (h >> 29)) % NBUCKETS);
}

static struct bfs_cache_entry *find(struct bfs_cache *c, uint64_t r, uint64_t e, uint64_t b)
{
	for (struct bfs_cache_entry *x = c->table[bucket(r, e, b)]; x; x = x->hnext)
		if (x->epoch == e && x->batch == b && x->rank == r)
			return x;
	return NULL;
}

static void unhash(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	struct bfs_cache_entry **pp = &c->table[bucket(x->rank, x->epoch, x->batch)];

	while (*pp && *pp != x)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = x->hnext;
	x->hnext = NULL;
}

/* A read batch is in the page cache too, so few are kept (trim_read). A
 * read chunk is kept while the budget allows: all.safetensors holds each
 * tensor of the whole epoch in turn, so a reader of it (or of the all/
 * files one after another) needs every chunk once per tensor. */
static int list_of(const struct bfs_cache_entry *x)
{
	return !x->touched ? 0 : (x->batch & BFS_CHUNK) ? 2 : 1;
}

static void lru_unlink(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	int l = list_of(x);

	if (x->lprev)
		x->lprev->lnext = x->lnext;
	else if (c->lru_head[l] == x)
		c->lru_head[l] = x->lnext;
	else
		return; /* not on a list */
	if (x->lnext)
		x->lnext->lprev = x->lprev;
	else
		c->lru_tail[l] = x->lprev;
	x->lprev = x->lnext = NULL;
	c->nread -= l == 1;
	c->nahead -= l == 0;
	c->chunk_bytes -= l == 2 ? x->bytes : 0;
	c->read_bytes -= l == 1 ? x->bytes : 0;
}

static void lru_push_front(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	int l = list_of(x);

	x->lprev = NULL;
	x->lnext = c->lru_head[l];
	if (c->lru_head[l])
		c->lru_head[l]->lprev = x;
	c->lru_head[l] = x;
	if (!c->lru_tail[l])
		c->lru_tail[l] = x;
	c->nread += l == 1;
	c->nahead += l == 0;
	c->chunk_bytes += l == 2 ? x->bytes : 0;
	c->read_bytes += l == 1 ? x->bytes : 0;
}

/* Free x; its buffer may become a spare if `keep` (c NULL: never). */
static void entry_free(struct bfs_cache *c, struct bfs_cache_entry *x, bool keep)
{
	if (!x)
		return;
	bfs_ioplan_done(x->io_plan, x->io_hold);
	bfs_build_free(x->job);
	if (x->unpin)
		x->unpin(x->unpin_ctx, x->buf);
	else if (c && keep)
		keep_spare(c, x->buf, x->buf_cap);
	else if (c)
		buf_free(c, x->buf, x->buf_cap);
	else
		free(x->buf);
	bfs_geom_free(x->geom);
	free(x);
}

/* keep: its buffer may stay as a spare (trimming read batches), not when
 * making room under the budget. */
static void evict(struct bfs_cache *c, struct bfs_cache_entry *x, bool keep)
{
	lru_unlink(c, x);
	unhash(c, x);
	c->st.bytes -= x->bytes;
	c->st.entries--;
	c->st.evictions++;
	entry_free(c, x, keep);
}

/* Evict unreferenced ready entries until `need` more bytes fit: batches
 * already read first, then chunks already read, then prefetched ones, each
 * oldest first. Returns true if
 * they fit. Called with the lock held. */
static bool make_room(struct bfs_cache *c, uint64_t need)
{
	static const int order[] = { 1, 2, 0 }; /* read batches, read chunks, prefetched */

	drop_spares(c, need);
	for (int o = 0; o < 3; o++) {
		int l = order[o];
		struct bfs_cache_entry *x = c->lru_tail[l];

		while (c->st.bytes + c->spare_bytes + need > c->budget && x) {
			struct bfs_cache_entry *prev = x->lprev;
			if (x->refs == 0)
				evict(c, x, false);
			x = prev;
		}
	}
	return c->st.bytes + c->spare_bytes + need <= c->budget;
}

/* A batch that was read is in the kernel's page cache too (keep_cache):
 * keep only the most recent few decoded, so that their memory is reused
 * for the next batches instead of growing to cache_size with fresh pages
 * (fresh pages cost a fault and a zeroing each: measured 5x the daemon's
 * CPU on 'image' with 1 GiB held). Few is a count (prefetch + 8), and for
 * large batches also bytes: a sixteenth of the budget, at least one batch,
 * so that trimmed buffers become spares for the next builds ('photo':
 * 38.5 MB batches, 12 kept by count). Lock held. */
static void trim_read(struct bfs_cache *c)
{
	struct bfs_cache_entry *x = c->lru_tail[1];

	while ((c->nread > c->keep_read || (c->read_bytes > c->budget / 16 && c->nread > 1)) && x) {
		struct bfs_cache_entry *prev = x->lprev;
		if (x->refs == 0)
			evict(c, x, true);
		x = prev;
	}
	/* read chunks: at most half the budget, so that the daemon's memory
	 * (buffers plus the allocator's own) stays within cache_size */
	x = c->lru_tail[2];
	while (c->chunk_bytes > c->budget / 2 && x) {
		struct bfs_cache_entry *prev = x->lprev;
		if (x->refs == 0)
			evict(c, x, true);
		x = prev;
	}
}

/* The end of a load: publish the result of entry x (LOADING). Lock held. */
static void publish(struct bfs_cache *c, struct bfs_cache_entry *x, int rc, uint8_t *buf,
		    struct bfs_geom *g, bool pinned)
{
	c->st.decoding--;
	if (rc == 0) {
		c->st.records_decoded += g->batch;
		x->buf = buf;
		x->geom = g;
		x->pinned = pinned;
		x->unpin = pinned ? c->unpin : NULL;
		x->unpin_ctx = c->pin_ctx;
		x->state = ST_READY;
		if (x->batch & BFS_CHUNK)
			c->st.chunks_decoded++;
		else
			c->st.batches_decoded++;
		lru_push_front(c, x);
	} else {
		x->state = ST_FAILED;
		x->err = rc;
		unhash(c, x);
		c->st.bytes -= x->bytes;
		c->st.entries--;
		c->st.decode_errors++;
	}
	pthread_cond_broadcast(&c->changed);
}

/* Drop a reference to x; the last one frees a failed entry (no longer in
 * the table). Lock held. */
static void unref(struct bfs_cache_entry *x)
{
	if (--x->refs == 0 && x->state == ST_FAILED)
		entry_free(NULL, x, false);
}

/* Every part of x has run: finish its job, outside the lock. Lock held;
 * the caller holds a reference. */
static void finish_job(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	struct bfs_cache_entry **pp = &c->jobs;
	struct bfs_build *jb = x->job;
	struct bfs_geom *g = NULL;
	uint8_t *buf = NULL;
	int rc;

	while (*pp && *pp != x)
		pp = &(*pp)->jnext;
	if (*pp)
		*pp = x->jnext;
	x->jnext = NULL;
	x->job = NULL;
	pthread_mutex_unlock(&c->lock);
	bfs_ioplan_done(x->io_plan, x->io_hold); /* its records are read */
	x->io_hold = NULL;
	rc = bfs_build_finish(jb, &buf, &g);
	bool pinned = rc == 0 && c->pin && c->pin(c->pin_ctx, &buf, g->st_size) == 0;
	pthread_mutex_lock(&c->lock);
	publish(c, x, rc, buf, g, pinned);
}

/* Run part k of x (claimed by the caller), outside the lock; the thread
 * that completes the last part finishes the job. Lock held. */
static void run_part(struct bfs_cache *c, struct bfs_cache_entry *x, unsigned k)
{
	uint64_t t0 = bfs_now_ns();

	x->refs++;
	pthread_mutex_unlock(&c->lock);
	bfs_build_part(x->job, k, c->on_error, c->ctx);
	uint64_t dt = bfs_now_ns() - t0;
	pthread_mutex_lock(&c->lock);
	c->st.decode_ns += dt;
	if (++x->done == x->nparts)
		finish_job(c, x);
	unref(x);
}

/* Start decoding x (LOADING, just reserved, one reference held by the
 * caller): split it into parts and offer them to every thread. Lock held;
 * dropped while the job is set up. */
static void start_job(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	struct bfs_geom *g = x->geom; /* computed by reserve() */
	struct bfs_build *jb = NULL;
	struct bfs_cache_entry **pp;
	unsigned np = bfs_build_parts_for(g, c->max_parts);
	uint64_t t0 = bfs_now_ns(), cap = 0;
	uint8_t *buf = take_spare(c, g->st_size, &cap);
	int rc;

	x->buf_cap = buf ? cap : g->st_size;
	c->st.buffers_reused += buf != NULL;
	x->geom = NULL;
	pthread_mutex_unlock(&c->lock);
	rc = bfs_build_new_in(&jb, c->b[x->rank], x->epoch, x->batch, g, np, buf);
	if (rc == 0 && c->io) {
		/* the bytes of its records: planned already, or asked for now */
		size_t n;
		const uint64_t *recs = bfs_build_records(jb, &n);

		x->io_plan = c->io;
		x->io_hold = bfs_ioplan_claim(c->io, x->rank, x->epoch, x->batch, recs, n);
	}
	uint64_t dt = bfs_now_ns() - t0;
	pthread_mutex_lock(&c->lock);
	c->st.decode_ns += dt;
	if (rc) {
		publish(c, x, rc, NULL, NULL, false);
		return;
	}
	x->job = jb;
	x->nparts = bfs_build_nparts(jb);
	x->claimed = x->done = 0;
	for (pp = &c->jobs; *pp; pp = &(*pp)->jnext)
		;
	*pp = x;
	x->jnext = NULL;
	pthread_cond_broadcast(&c->work); /* idle workers: parts to take */
	pthread_cond_broadcast(&c->changed); /* its waiters: the same */
}

/* The next part to decode: of a unit a reader waits for, else of the
 * oldest unit being decoded. Lock held. */
static struct bfs_cache_entry *pick_part(struct bfs_cache *c)
{
	struct bfs_cache_entry *first = NULL;

	for (struct bfs_cache_entry *x = c->jobs; x; x = x->jnext) {
		if (x->claimed == x->nparts)
			continue;
		if (x->waiters)
			return x;
		if (!first)
			first = x;
	}
	return first;
}

/* A reader's wait for x (LOADING; the caller holds a reference): decode
 * x's unclaimed parts, then sleep until it is ready or failed. Lock held. */
static void wait_loaded(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	x->waiters++;
	while (x->state == ST_LOADING) {
		if (x->job && x->claimed < x->nparts)
			run_part(c, x, x->claimed++);
		else
			pthread_cond_wait(&c->changed, &c->lock);
	}
	x->waiters--;
}

/* Create a LOADING entry for (e, b) holding one reference, or return NULL
 * when it exists already or (prefetch only) does not fit. Lock held; drops
 * and retakes it to compute the geometry. */
static struct bfs_cache_entry *reserve(struct bfs_cache *c, uint64_t r, uint64_t e, uint64_t b,
				       bool demand, int *err)
{
	struct bfs_geom *g = NULL;
	struct bfs_cache_entry *x;
	uint64_t need;
	int rc;

	pthread_mutex_unlock(&c->lock);
	if (r >= c->nranks) {
		*err = -ENOENT;
		return NULL;
	}
	rc = bfs_batcher_geom(&g, c->b[r], e, b);
	pthread_mutex_lock(&c->lock);
	if (rc) {
		*err = rc;
		return NULL;
	}
	need = g->st_size;
	if (find(c, r, e, b) || (!make_room(c, need) && !demand)) {
		bfs_geom_free(g);
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		bfs_geom_free(g);
		*err = -ENOMEM;
		return NULL;
	}
	x->geom = g; /* handed to the build (bfs_build_new_in) by load() */
	x->rank = r;
	x->epoch = e;
	x->batch = b;
	x->refs = 1;
	x->state = ST_LOADING;
	x->bytes = need;
	x->hnext = c->table[bucket(r, e, b)];
	c->table[bucket(r, e, b)] = x;
	c->st.bytes += need;
	c->st.entries++;
	c->st.decoding++;
	if (c->st.bytes > c->st.peak_bytes)
		c->st.peak_bytes = c->st.bytes;
	return x;
}

static void enqueue(struct bfs_cache *c, uint64_t r, uint64_t e, uint64_t b)
{
	if (!c->qcap)
		return;
	if (c->qlen == c->qcap) { /* drop the oldest: the reader has moved on */
		c->qhead = (c->qhead + 1) % c->qcap;
		c->qlen--;
	}
	c->queue[(c->qhead + c->qlen) % c->qcap] = (struct req){ r, e, b };
	c->qlen++;
	c->st.prefetch_issued++;
}

/* Queue the `prefetch` batches (or chunks of the epoch view) after (e, b),
 * into the next epoch. Lock held. */
static void queue_ahead(struct bfs_cache *c, uint64_t r, uint64_t e, uint64_t b)
{
	uint64_t flag = b & BFS_CHUNK;
	uint64_t nb = flag ? bfs_batcher_nchunks(c->b[r]) : bfs_batcher_nbatches(c->b[r]);

	b &= ~BFS_CHUNK;
	if (!c->nthreads || !nb)
		return;
	for (unsigned k = 1; k <= c->prefetch; k++) {
		uint64_t ne = e, nbt = b + k;
		while (nbt >= nb) {
			nbt -= nb;
			ne++;
		}
		if (c->epochs && ne >= c->epochs)
			break;
		if (!find(c, r, ne, nbt | flag))
			enqueue(c, r, ne, nbt | flag);
	}
	pthread_cond_broadcast(&c->work);
}

/* Whether the I/O stage holds what a prefetched build of r would read
 * (ioplan.h): a build before its source bytes are planned would read its
 * records one by one, so the prefetch leaves it for now (the reader's next
 * touch queues it again). Lock held; dropped meanwhile. */
static bool io_ready(struct bfs_cache *c, const struct req *r)
{
	bool ok;

	if (!c->io)
		return true;
	pthread_mutex_unlock(&c->lock);
	ok = bfs_ioplan_ready(c->io, r->rank, r->epoch, r->batch);
	pthread_mutex_lock(&c->lock);
	return ok;
}

static void *worker(void *arg)
{
	struct bfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct bfs_cache_entry *x = pick_part(c);
		struct req r;
		int err = 0;

		if (x) {
			run_part(c, x, x->claimed++);
			continue;
		}
		if (c->qlen == 0) {
			pthread_cond_wait(&c->work, &c->lock);
			continue;
		}
		r = c->queue[c->qhead];
		c->qhead = (c->qhead + 1) % c->qcap;
		c->qlen--;
		if (find(c, r.rank, r.epoch, r.batch) || !io_ready(c, &r))
			continue;
		x = reserve(c, r.rank, r.epoch, r.batch, false, &err);
		if (!x)
			continue;
		start_job(c, x);
		unref(x);
		if (trim_due(c)) {
			pthread_mutex_unlock(&c->lock);
			malloc_trim(0);
			pthread_mutex_lock(&c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int bfs_cache_get(struct bfs_cache_entry **out, struct bfs_cache *c, uint64_t rank, uint64_t epoch,
		  uint64_t batch)
{
	struct bfs_cache_entry *x;
	bool trim;
	int rc = 0;

	if (c->io)
		bfs_ioplan_note_read(c->io, rank, epoch, batch);
	pthread_mutex_lock(&c->lock);
	for (;;) {
		x = find(c, rank, epoch, batch);
		if (x) {
			x->refs++;
			if (x->state == ST_READY) {
				c->st.hits++;
				break;
			}
			c->st.waits++; /* being decoded by someone: help, wait */
			wait_loaded(c, x);
			if (x->state == ST_READY)
				break;
			rc = x->err;
			unref(x);
			goto out;
		}
		x = reserve(c, rank, epoch, batch, true, &rc);
		if (rc)
			goto out;
		if (!x)
			continue; /* someone created it meanwhile */
		c->st.misses++;
		x->touched = true;
		queue_ahead(c, rank, epoch, batch);
		start_job(c, x);
		wait_loaded(c, x);
		if (x->state == ST_READY)
			break;
		rc = x->err;
		unref(x);
		goto out;
	}
	lru_unlink(c, x);
	if (!x->touched) {
		x->touched = true;
		queue_ahead(c, rank, epoch, batch);
	}
	lru_push_front(c, x);
	*out = x;
out:
	trim = trim_due(c);
	pthread_mutex_unlock(&c->lock);
	if (trim)
		malloc_trim(0);
	return rc;
}

void bfs_cache_put(struct bfs_cache *c, struct bfs_cache_entry *x)
{
	bool trim;

	if (!x)
		return;
	pthread_mutex_lock(&c->lock);
	x->refs--;
	if (c->st.bytes > c->budget)
		make_room(c, 0);
	trim_read(c);
	trim = trim_due(c);
	pthread_mutex_unlock(&c->lock);
	if (trim)
		malloc_trim(0);
}

void bfs_cache_stats(const struct bfs_cache *c, struct bfs_cache_stats *out)
{
	pthread_mutex_lock((pthread_mutex_t *)&c->lock);
	*out = c->st;
	out->prefetch_ready = c->nahead;
	out->prefetch_queued = c->qlen;
	pthread_mutex_unlock((pthread_mutex_t *)&c->lock);
}

int bfs_cache_new(struct bfs_cache **out, const struct bfs_batcher *const *b, size_t nranks,
		  uint64_t budget, unsigned threads, unsigned prefetch, bfs_cache_error_fn on_error,
		  void *ctx)
{
	struct bfs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->b = b;
	c->nranks = nranks;
	c->budget = budget;
	c->nthreads = threads;
	c->prefetch = prefetch;
	c->keep_read = (size_t)prefetch + 8;
	c->max_parts = 2 * (threads ? threads : 1);
	c->on_error = on_error;
	c->ctx = ctx;
	c->st.budget = budget;
	c->qcap = prefetch ? (size_t)prefetch * 4 : 0;
	if (c->qcap) {
		c->queue = calloc(c->qcap, sizeof(*c->queue));
		if (!c->queue) {
			free(c);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->changed, NULL);
	pthread_cond_init(&c->work, NULL);
	*out = c;
	return 0;
}

int bfs_cache_start(struct bfs_cache *c)
{
	if (!c->nthreads || !c->prefetch)
		return 0;
	return bfs_workers_start(&c->workers, c->nthreads, worker, c, 0, false);
}

void bfs_cache_set_io(struct bfs_cache *c, struct bfs_ioplan *io)
{
	c->io = io;
}

void bfs_cache_set_epochs(struct bfs_cache *c, uint64_t epochs)
{
	c->epochs = epochs;
}

void bfs_cache_set_pinning(struct bfs_cache *c, bfs_cache_pin_fn pin, bfs_cache_unpin_fn unpin,
			   void *ctx)
{
	c->pin = pin;
	c->unpin = unpin;
	c->pin_ctx = ctx;
}

void bfs_cache_free(struct bfs_cache *c)
{
	if (!c)
		return;
	bfs_workers_stop(&c->lock, &c->stop, &c->work, NULL);
	(void)bfs_workers_join(&c->workers, 0);
	for (size_t i = 0; i < NBUCKETS; i++) {
		struct bfs_cache_entry *x = c->table[i];
		while (x) {
			struct bfs_cache_entry *n = x->hnext;
			entry_free(NULL, x, false);
			x = n;
		}
	}
	for (unsigned i = 0; i < c->nspare; i++) /* buffers of evicted batches */
		free(c->spares[i].p);
	free(c->queue);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->changed);
	pthread_cond_destroy(&c->work);
	free(c);
}
