/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ioplan.c — reads planned from the permutation (see ioplan.h).
 *
 * Positions: a stream counts units linearly across epochs (lin = epoch *
 * units per epoch + unit), so a reader running into the next epoch stays
 * in its stream. Plans are kept per stream in unit order and in one hash
 * by (rank, epoch, unit) for the claims. Priorities of planned tickets
 * grow with the order they were planned in, nearest unit first across
 * streams, so the queue serves the units needed soonest.
 *
 * Locks: the planner's mutex, then the stage's (never the other way).
 * Tickets are made with the planner's mutex dropped; a stream reused
 * meanwhile is told by its generation number.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ioplan.h"

#include "blockshuf.h"
#include "common.h"
#include "passcost.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STREAMS 16
#define SLACK 64 /* units: how far from a stream a demand still joins it */
#define MAX_AHEAD ((uint64_t)1 << 12) /* units planned ahead of a reader at most */
#define MAX_ITEMS 16384 /* plans held at once, all streams together */
#define PENDING_PER_DEPTH 8 /* reads queued ahead: this many times the depth */
#define CROSS_AHEAD 4 /* units planned into the next epoch before a reader went there */
/* a stream not read this long gives way to one that is (its builds still
 * running keep the groups they read from) */
#define IDLE_NS 500000000ull
#define NBUCKETS 4096
#define TICK_NS 20000000L /* the planner looks again at least this often */
/* block groups a stream holds at once at most: its reader's partitions'
 * groups, the next of each, those builds behind it still read */
#define MAX_HELD 256
/* global shuffle: bytes a record's place in the stage costs beyond its
 * own (fetch.c's overhead per extent), for sizing windows */
#define EXTENT_COST 128
#define MAX_WINDOW_UNITS ((uint64_t)1 << 16) /* units of one window at most */
#define REASON_LEN 400
/* how the stage joins ranges (iostage.c): for passcost's ranged reads */
#define WINDOW_MERGE_GAP ((uint64_t)64 << 10)
#define WINDOW_MAX_READ ((uint64_t)1 << 20)
#define WINDOW_MAX_GET ((uint64_t)8 << 20)

struct item {
	uint64_t rank, epoch, unit; /* unit with its BFS_CHUNK flag */
	uint64_t lin;
	uint64_t bytes; /* of its records: what it counts against readahead */
	struct bfs_fetch_ticket *t;
	struct item *next; /* the stream's, by lin */
	struct item *hnext;
	struct stream *s;
};

/* Group g of partition q of an epoch's block order (blockshuf.h). */
struct gkey {
	uint64_t epoch, q, g;
};

struct group {
	uint64_t epoch, q, g;
	uint64_t u0, u1; /* its positions in partition q's order */
	struct bfs_fetch_ticket *t;
	unsigned holders; /* streams holding it, and builds reading from it */
	struct group *next;
};

/* Global shuffle (and none): a window of a stream's units, whose records
 * are read together, in a pass over the whole blocks that hold them or by
 * ranged reads (passcost.h), within a share of readahead; a stream holds
 * its reader's window and the next. */
struct window {
	uint64_t lin0, lin1; /* units [lin0, lin1) of its stream */
	uint64_t bytes; /* of its records, with their place in the stage */
	uint64_t planned, claims; /* its units planned ahead, and builds that found it */
	uint64_t built; /* builds that read from it (its maker's too) */
	struct bfs_fetch_ticket *t;
	unsigned refs; /* its stream, while in the stream's list, and builds */
	bool hurried; /* its reads went to the head of the queue */
	struct window *next; /* the stream's, by lin0 */
};

/* What a build holds while it reads its records: its own ticket, the
 * block groups its records are in, or its window. */
struct bfs_ioplan_hold {
	struct bfs_fetch_ticket *t;
	struct group **g;
	size_t ng;
	struct window *w;
};

struct stream {
	bool used;
	uint64_t gen; /* changes whenever the slot is reused */
	uint64_t rank;
	bool chunk;
	uint64_t nunits; /* units per epoch */
	uint64_t end; /* lin of the first unit past the mount's last epoch */
	uint64_t pos; /* the furthest unit built (lin) */
	/* the furthest unit its reader read (lin; bfs_ioplan_note_read), or
	 * where its first build was: block shuffle holds the groups around
	 * it, not around the prefetch's builds ahead of it; without reads
	 * noted (builds alone, as in tests), around pos */
	uint64_t rpos;
	bool read_seen;
	uint64_t next; /* the next unit to plan (lin) */
	/* units it may plan ahead of pos: none for a new stream (a reader
	 * jumping around wastes none), growing as its reader goes on */
	uint64_t ahead;
	/* its builds went well into a later epoch than the one it started
	 * in: its reader reads epoch after epoch, so plans may cross into the
	 * next one (else a reader of one epoch would have the next one's
	 * first units fetched for nothing; a few units past the end are only
	 * the decoded-batch prefetch running ahead) */
	bool crossed;
	uint64_t last_ns; /* last read */
	struct item *head, *tail;
	/* block shuffle: the units that go once through the partitions its
	 * reader reads; the groups held, and whether groups did not fit
	 * (then units are planned one by one) */
	uint64_t span;
	struct group *held[MAX_HELD];
	unsigned nheld;
	bool by_unit;
	/* its plans and groups went for room while it was idle: nothing is
	 * asked for it again until its reader comes back (else two streams
	 * would take each other's groups in turn, each fetched again) */
	bool parked;
	bool holding; /* a thread is asking for its groups (the lock dropped) */
	uint64_t nbuilds; /* builds noted: the first few race each other */
	/* global shuffle: its windows, by lin0, and the end of the last */
	struct window *wins;
	uint64_t wend;
};

struct bfs_ioplan {
	struct bfs_fetch *f;
	const struct bfs_dataset *ds;
	const struct bfs_batcher *const *b;
	size_t nranks;
	bool block;
	unsigned depth;
	uint64_t budget; /* readahead: bytes that plans may cover at most */
	uint64_t epochs; /* epochs the mount lists (0: no bound) */
	uint64_t lookahead; /* units the decoded-batch cache builds ahead of a reader */
	enum bfs_ioplan_mode mode; /* lock (a window_at carries it) */
	uint64_t group_bytes; /* block shuffle: the source bytes of a group, on average */
	/* [nranks]: the rank's share was given to the disk cache (a rank of a
	 * world that reads only some partitions) */
	atomic_bool *shared;

	pthread_mutex_t lock;
	pthread_cond_t kick; /* work for the planner, or stop */
	pthread_cond_t held; /* a stream's groups were asked for */
	bool kicked, stop; /* lock */
	pthread_t tid;
	bool started;
	struct stream streams[MAX_STREAMS]; /* lock */
	struct item *table[NBUCKETS]; /* lock */
	struct group *groups; /* lock */
	uint64_t seq; /* lock: priority of the next plan */
	uint64_t gen; /* lock */
	/* lock: plans held and the bytes of their records, bounded by
	 * MAX_ITEMS and budget whatever the stage already holds (plans for
	 * bytes another ticket holds cost the stage nothing) */
	uint64_t nitems, item_bytes;
	struct bfs_ioplan_stats st; /* lock */
	/* global shuffle: the objects' sizes; the bytes windows hold (lock);
	 * the last window's choice (lock) */
	uint64_t *sizes;
	uint64_t win_bytes, win_planned, win_claims;
	char reason[REASON_LEN];
	const char *plan; /* lock: "passes", "ranged reads"... the last choice */
};

static size_t bucket(uint64_t r, uint64_t e, uint64_t u)
{
	uint64_t h = (e * 0x9E3779B97F4A7C15ull) ^ (u * 0xC2B2AE3D27D4EB4Full) ^
		     (r * 0x165667B19E3779F9ull);
	return (size_t)((h ^ (h >> 29)) % NBUCKETS);
}

/* ---------------------------------------------------------------- ranges */

/* The source ranges of records recs[0..n): r[0..*m) (r has room for n).
 * Records of shards that are not read through the stage are left out. */
static void bfs_ioplan_ranges(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			      struct bfs_fetch_range *r, size_t *m)
{
	*m = 0;
	for (size_t k = 0; k < n; k++) {
		size_t sh;
		uint64_t local, off, len;

		if (bfs_dataset_locate(ds, recs[k], &sh, &local, NULL) != 0)
			continue;
		if (!bfs_shard_span(bfs_dataset_shard(ds, sh), local, local + 1, &off, &len))
			continue;
		r[(*m)++] = (struct bfs_fetch_range){ (uint32_t)sh, off, len };
	}
}

/* The records of (rank, epoch, unit) and their ranges: a ticket. */
static int unit_ticket(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit,
		       uint64_t prio, bool demand, struct bfs_fetch_ticket **out, uint64_t *bytes)
{
	const struct bfs_batcher *b = p->b[rank];
	struct bfs_fetch_range *r = NULL;
	uint64_t r0, n, *recs = NULL;
	struct bfs_perm perm;
	size_t m;
	int rc;

	*out = NULL;
	rc = bfs_batcher_unit_rows(b, unit, &r0, &n);
	if (rc)
		return rc;
	recs = malloc((n ? n : 1) * sizeof(*recs));
	r = malloc((n ? n : 1) * sizeof(*r));
	if (!recs || !r) {
		rc = -ENOMEM;
		goto out;
	}
	rc = bfs_batcher_perm(b, epoch, &perm);
	if (rc)
		goto out;
	bfs_batcher_row_records(b, &perm, r0, (size_t)n, recs);
	bfs_perm_release(&perm);
	bfs_ioplan_ranges(p->ds, recs, (size_t)n, r, &m);
	*bytes = 0;
	for (size_t k = 0; k < m; k++)
		*bytes += r[k].len;
	rc = bfs_fetch_want(p->f, r, m, prio, demand ? BFS_WANT_DEMAND : 0, out);
out:
	free(recs);
	free(r);
	return rc;
}

/* The pieces of group k (partition k->q's group k->g of epoch k->epoch's
 * block order), as ranges. demand: a reader is in the group (taken whatever
 * the budget, the group being what it decodes now, not bytes ahead of
 * it); -E2BIG when the group alone is larger than the budget (its stream
 * then plans unit by unit). */
static int group_ticket(struct bfs_ioplan *p, const struct gkey *k, uint64_t prio, bool demand,
			struct bfs_fetch_ticket **out, uint64_t *u0, uint64_t *u1)
{
	const struct bfs_blocks *bl = bfs_batcher_blocks(p->b[0]);
	struct bfs_fetch_range *r = NULL;
	const uint64_t *pieces;
	uint64_t np;
	struct bfs_perm perm;
	uint64_t bytes = 0;
	size_t m = 0;
	int rc;

	*out = NULL;
	rc = bfs_batcher_perm(p->b[0], k->epoch, &perm);
	if (rc)
		return rc;
	if (!perm.bo || k->q >= bfs_blocks_nparts(bl) ||
	    k->g >= bfs_block_order_ngroups(perm.bo, k->q)) {
		bfs_perm_release(&perm);
		return -ENOENT;
	}
	bfs_block_order_group(perm.bo, k->q, k->g, u0, u1, &pieces, &np);
	r = malloc((np ? np : 1) * sizeof(*r));
	if (!r) {
		bfs_perm_release(&perm);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < np; i++) {
		uint64_t first, end, local, off, len;
		size_t sh;

		bfs_blocks_piece(bl, pieces[i], &first, &end);
		if (end <= first || bfs_dataset_locate(p->ds, first, &sh, &local, NULL) != 0)
			continue;
		/* a piece never spans two shards */
		if (!bfs_shard_span(bfs_dataset_shard(p->ds, sh), local, local + (end - first),
				    &off, &len))
			continue;
		r[m++] = (struct bfs_fetch_range){ (uint32_t)sh, off, len };
		bytes += len;
	}
	bfs_perm_release(&perm);
	if (bytes > p->budget) {
		free(r);
		return -E2BIG;
	}
	/* a gap between two of a group's pieces is a piece of another group,
	 * which that group reads itself */
	rc = bfs_fetch_want(p->f, r, m, prio, BFS_WANT_NO_GAPS | (demand ? BFS_WANT_DEMAND : 0),
			    out);
	free(r);
	return rc;
}

/* ---------------------------------------------------------------- items */

static void item_unhash(struct bfs_ioplan *p, struct item *it)
{
	struct item **pp = &p->table[bucket(it->rank, it->epoch, it->unit)];

	while (*pp && *pp != it)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = it->hnext;
}

/* it, off every list: its plan released (or taken: it->t NULL). */
static void item_free(struct bfs_ioplan *p, struct item *it)
{
	bfs_fetch_release(p->f, it->t);
	p->nitems--;
	p->item_bytes -= it->bytes;
	free(it);
}

/* Take it off its stream's list (it must be there) and the hash. */
static void item_unlink(struct bfs_ioplan *p, struct item *it)
{
	struct stream *s = it->s;
	struct item *prev = NULL;

	for (struct item *x = s->head; x && x != it; x = x->next)
		prev = x;
	if (prev)
		prev->next = it->next;
	else
		s->head = it->next;
	if (s->tail == it)
		s->tail = prev;
	item_unhash(p, it);
}

/* Release every plan of s before lin `before` (all: UINT64_MAX). Lock
 * held. */
static void drop_items(struct bfs_ioplan *p, struct stream *s, uint64_t before)
{
	while (s->head && s->head->lin < before) {
		struct item *it = s->head;

		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		item_unhash(p, it);
		item_free(p, it);
		p->st.dropped++;
	}
}

/* The last plan of s (the furthest), released. Lock held. */
static bool drop_last(struct bfs_ioplan *p, struct stream *s)
{
	struct item *it = s->tail;

	if (!it)
		return false;
	item_unlink(p, it);
	s->next = it->lin;
	item_free(p, it);
	p->st.dropped++;
	return true;
}

/* ---------------------------------------------------------------- groups */

static void group_put(struct bfs_ioplan *p, struct group *gr)
{
	struct group **pp = &p->groups;

	if (--gr->holders)
		return;
	while (*pp && *pp != gr)
		pp = &(*pp)->next;
	if (*pp)
		*pp = gr->next;
	bfs_fetch_release(p->f, gr->t);
	free(gr);
}

static void release_groups(struct bfs_ioplan *p, struct stream *s)
{
	for (unsigned i = 0; i < s->nheld; i++)
		group_put(p, s->held[i]);
	s->nheld = 0;
}

/* ---------------------------------------------------------------- windows */

static bool holding_begin(struct bfs_ioplan *p, struct stream *s);
static void holding_end(struct bfs_ioplan *p, struct stream *s, uint64_t gen);

static void window_put(struct bfs_ioplan *p, struct window *w)
{
	if (--w->refs)
		return;
	p->win_bytes -= w->bytes;
	p->win_planned -= w->planned;
	p->win_claims -= w->claims;
	p->st.dropped += w->planned > w->claims ? w->planned - w->claims : 0;
	bfs_fetch_release(p->f, w->t);
	free(w);
}

/* s lets go of its windows that end at or before lin `before` (all:
 * UINT64_MAX); builds reading from one keep it until they are done. Lock
 * held. */
static void drop_windows(struct bfs_ioplan *p, struct stream *s, uint64_t before)
{
	while (s->wins && s->wins->lin1 <= before) {
		struct window *w = s->wins;

		s->wins = w->next;
		w->next = NULL;
		window_put(p, w);
	}
}

/* s lets go of the windows its reader went past whose every unit was
 * built and that no build holds: their bytes serve no one (a window kept
 * for builds that may still come behind the reader, or for the reader's
 * own unit, made whatever the budget, would otherwise stay past its use
 * while the next ones are made on top). Lock held. */
static void drop_built(struct bfs_ioplan *p, struct stream *s)
{
	struct window **pp = &s->wins;

	while (*pp) {
		struct window *w = *pp;

		if (w->refs == 1 && w->lin1 <= s->pos && w->built >= w->lin1 - w->lin0) {
			*pp = w->next;
			w->next = NULL;
			window_put(p, w);
		} else {
			pp = &w->next;
		}
	}
}

/* w out of s's list. Lock held. */
static void window_unlink(struct stream *s, struct window *w)
{
	for (struct window **pp = &s->wins; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			w->next = NULL;
			return;
		}
}

static struct window *window_of(const struct stream *s, uint64_t lin)
{
	for (struct window *w = s->wins; w; w = w->next)
		if (w->lin0 <= lin && lin < w->lin1)
			return w;
	return NULL;
}

/* Room in *r for n more ranges past *len (of *cap), and in *recs for n. */
static int ranges_room(struct bfs_fetch_range **r, size_t len, size_t *cap, uint64_t **recs,
		       size_t *rcap, size_t n)
{
	if (len + n > *cap) {
		size_t c = (len + n) * 2;
		struct bfs_fetch_range *v = realloc(*r, c * sizeof(*v));

		if (!v)
			return -ENOMEM;
		*r = v;
		*cap = c;
	}
	if (n > *rcap) {
		uint64_t *v = realloc(*recs, n * sizeof(*v));

		if (!v)
			return -ENOMEM;
		*recs = v;
		*rcap = n;
	}
	return 0;
}

/* Where a window of s wanting units from lin0 on is made */
struct window_at {
	uint64_t rank, nunits, lin0, lin_max, limit;
	bool chunk;
	uint64_t need; /* units before this are taken whatever the limit */
	bool may_pass; /* its reader went on from where it started */
	enum bfs_ioplan_mode mode;
};

static int range_order(const void *x, const void *y);

/* What ranges v[0..m) (sorted here) take in the stage: the bytes of their
 * union (a compressed shard's records share their seek spans), each piece
 * with its place. */
static uint64_t union_cost(struct bfs_fetch_range *v, size_t m)
{
	uint64_t cost = 0, end = 0;
	uint32_t obj = UINT32_MAX;

	if (!v || m == 0)
		return 0;
	qsort(v, m, sizeof(*v), range_order);
	for (size_t k = 0; k < m; k++) {
		uint64_t e = v[k].off + v[k].len;

		if (k == 0 || v[k].obj != obj || v[k].off > end) {
			cost += v[k].len + EXTENT_COST;
			obj = v[k].obj;
			end = e;
		} else if (e > end) {
			cost += e - end;
			end = e;
		}
	}
	return cost;
}

/* The ranges of the units from a->lin0 on, unit by unit, while their bytes
 * (EXTENT_COST more each) stay within a->limit (one unit at least) and
 * before a->lin_max: *rv (malloc'd, *nv of them), the window's end *lin1
 * and its *bytes. No lock held. */
static int window_ranges(struct bfs_ioplan *p, const struct window_at *a,
			 struct bfs_fetch_range **rv, size_t *nv, uint64_t *lin1, uint64_t *bytes)
{
	const struct bfs_batcher *b = p->b[a->rank];
	struct bfs_fetch_range *r = NULL;
	uint64_t *recs = NULL, lin, have_epoch = UINT64_MAX;
	size_t n = 0, cap = 0, rcap = 0;
	struct bfs_perm perm;
	int rc = 0;

	*bytes = 0;
	for (lin = a->lin0; lin < a->lin_max && !rc; lin++) {
		uint64_t epoch = lin / a->nunits, r0, cnt, add = 0;
		uint64_t unit = (lin % a->nunits) | (a->chunk ? BFS_CHUNK : 0);
		size_t m;

		if ((rc = bfs_batcher_unit_rows(b, unit, &r0, &cnt)) != 0)
			break;
		if (epoch != have_epoch) {
			if (have_epoch != UINT64_MAX)
				bfs_perm_release(&perm);
			have_epoch = UINT64_MAX;
			if ((rc = bfs_batcher_perm(b, epoch, &perm)) != 0)
				break;
			have_epoch = epoch;
		}
		if ((rc = ranges_room(&r, n, &cap, &recs, &rcap, (size_t)cnt + 1)) != 0)
			break;
		bfs_batcher_row_records(b, &perm, r0, (size_t)cnt, recs);
		bfs_ioplan_ranges(p->ds, recs, (size_t)cnt, r + n, &m);
		add = union_cost(r + n, m);
		if (lin > a->lin0 && lin >= a->need && *bytes + add > a->limit)
			break;
		n += m;
		*bytes += add;
	}
	if (have_epoch != UINT64_MAX)
		bfs_perm_release(&perm);
	free(recs);
	if (lin == a->lin0 && !rc)
		rc = -ENOENT;
	if (lin > a->lin0)
		rc = 0; /* the units before the one that failed */
	*lin1 = lin;
	if (rc) {
		free(r);
		r = NULL;
		n = 0;
	}
	*rv = r;
	*nv = n;
	return rc;
}

static int range_order(const void *x, const void *y)
{
	const struct bfs_fetch_range *a = x, *b = y;

	if (a->obj != b->obj)
		return a->obj < b->obj ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* What a read of the source costs (as measured; until then, a guess that
 * a bucket's request takes 10 ms and a file system's 1 ms). */
static void source_cost(struct bfs_ioplan *p, const struct window_at *a, struct bfs_pass_cost *c)
{
	uint64_t rows = bfs_batcher_rows(p->b[a->rank]), n = bfs_dataset_nrecords(p->ds);

	bfs_fetch_cost(p->f, &c->lat_ns, &c->bw);
	if (!c->lat_ns)
		c->lat_ns = bfs_fetch_is_custom(p->f) ? 10000000 : 1000000;
	if (c->bw <= 0)
		c->bw = 100e6;
	c->depth = p->depth;
	c->merge_gap = WINDOW_MERGE_GAP;
	c->max_read = bfs_fetch_is_custom(p->f) ? WINDOW_MAX_GET : WINDOW_MAX_READ;
	/* a reader of (about) every record: each kept block is read whole
	 * once and serves every later epoch */
	c->keep_whole = n && 2 * rows >= n && a->mode != BFS_IOPLAN_RANGES;
	/* a new stream's reader may be jumping around: a pass for its one
	 * unit would read the whole dataset for it; and a pass's block read
	 * whole must fit a quarter of readahead (the stage lets that much of
	 * pass reads be in flight, and one always goes) */
	c->no_pass = !a->may_pass || p->budget < 4 * BFS_PASS_BLOCK || a->mode == BFS_IOPLAN_RANGES;
	c->all_pass = a->mode == BFS_IOPLAN_PASSES;
}

/* How a window's ranges are read (passcost.h): the plan, and which of
 * the ranges a local copy holds. */
struct window_choice {
	struct bfs_pass_plan plan;
	bool *held;
	char why[REASON_LEN];
};

static void choice_free(struct window_choice *ch)
{
	bfs_pass_plan_free(&ch->plan);
	free(ch->held);
	ch->held = NULL;
}

/* Choose for ranges r[0..n) (sorted here) at the source's measured cost.
 * No lock held. */
static int window_choose(struct bfs_ioplan *p, const struct window_at *a, struct bfs_fetch_range *r,
			 size_t n, struct window_choice *ch)
{
	size_t nobj = bfs_dataset_nshards(p->ds);
	uint64_t *kept = calloc(nobj ? nobj : 1, sizeof(*kept));
	struct bfs_pass_cost c;
	int rc = -ENOMEM;

	choice_free(ch);
	ch->held = malloc((n ? n : 1) * sizeof(*ch->held));
	if (ch->held && kept) {
		for (size_t k = 1; k < n; k++) /* (window_plan's come sorted) */
			if (range_order(&r[k - 1], &r[k]) > 0) {
				qsort(r, n, sizeof(*r), range_order);
				break;
			}
		for (size_t k = 0; k < n; k++)
			ch->held[k] = bfs_fetch_held(p->f, r[k].obj, r[k].off, r[k].len);
		for (size_t i = 0; i < nobj; i++)
			kept[i] = bfs_fetch_kept(p->f, (uint32_t)i);
		size_t at = 0;

		source_cost(p, a, &c);
		if (a->mode != BFS_IOPLAN_AUTO) /* io_plan= said which */
			at = (size_t)snprintf(ch->why, sizeof(ch->why), "asked for (io_plan=%s): ",
					      a->mode == BFS_IOPLAN_PASSES ? "passes" : "ranges");
		rc = bfs_pass_choose(r, n, ch->held, kept, p->sizes, (uint32_t)nobj, &c, &ch->plan,
				     ch->why + at, sizeof(ch->why) - at);
	}
	free(kept);
	return rc;
}

/* The ticket for ranges r[0..n) as ch says; why into p->reason. No lock
 * held. */
static int window_want(struct bfs_ioplan *p, struct bfs_fetch_range *r, size_t n,
		       const struct window_choice *ch, uint64_t prio, bool demand,
		       struct bfs_fetch_ticket **t)
{
	unsigned flags = demand ? BFS_WANT_DEMAND : 0;
	size_t m = 0;
	int rc;

	/* what a local copy holds is read from it when built, not held here
	 * (whole blocks of it at a time, or a copy read as a file) */
	for (size_t k = 0; k < n; k++)
		if (!ch->held[k])
			r[m++] = r[k];
	if (ch->plan.nspans)
		rc = bfs_fetch_want_pass(p->f, r, m, ch->plan.spans, ch->plan.nspans, prio, flags,
					 t);
	else
		rc = bfs_fetch_want(p->f, r, m, prio, flags | BFS_WANT_AS_ASKED, t);
	if (!rc) {
		pthread_mutex_lock(&p->lock);
		snprintf(p->reason, sizeof(p->reason), "%s", ch->why);
		p->plan = ch->plan.pass	    ? "passes"
			  : ch->plan.blocks ? "ranged reads"
			  : ch->plan.nspans ? "kept blocks"
					    : "local";
		pthread_mutex_unlock(&p->lock);
	}
	return rc;
}

/* A window's ranges from a->lin0 on and how they are read: when blocks are
 * read whole, more units cost no more reads (the blocks are read anyway),
 * so the window goes on up to far (and its byte limit): few large windows,
 * not a pass per small one. *rv (malloc'd), *nv, *lin1, *bytes as
 * window_ranges. No lock held. */
static int window_plan(struct bfs_ioplan *p, const struct window_at *a, uint64_t far,
		       struct bfs_fetch_range **rv, size_t *nv, uint64_t *lin1, uint64_t *bytes,
		       struct window_choice *ch)
{
	struct window_at b = *a;
	struct bfs_fetch_range *more = NULL, *v;
	uint64_t lin2, bytes2;
	size_t n2;
	int rc = window_ranges(p, a, rv, nv, lin1, bytes);

	if (!rc)
		rc = window_choose(p, a, *rv, *nv, ch);
	if (rc || !ch->plan.nspans || *lin1 >= far || *bytes >= a->limit)
		return rc;
	b.lin0 = *lin1;
	b.lin_max = far;
	b.limit = a->limit - *bytes;
	b.need = 0;
	if (window_ranges(p, &b, &more, &n2, &lin2, &bytes2) != 0)
		return 0; /* the window as it is */
	v = malloc((*nv + n2 ? *nv + n2 : 1) * sizeof(*v));
	if (!v) {
		free(more);
		return 0;
	}
	/* *rv is sorted (window_choose): more sorted, and the two merged */
	if (n2 > 1)
		qsort(more, n2, sizeof(*more), range_order);
	for (size_t i = 0, j = 0, k = 0; k < *nv + n2; k++)
		v[k] = j == n2 || (i < *nv && range_order(&(*rv)[i], &more[j]) <= 0) ? (*rv)[i++]
										     : more[j++];
	free(more);
	free(*rv);
	*rv = v;
	*nv += n2;
	*lin1 = lin2;
	*bytes += bytes2;
	return window_choose(p, a, *rv, *nv, ch);
}

/* The last unit a window of s from lin0 may take, + 1: within the mount's
 * epochs, its epoch until s's reader went into a later one, and what s may
 * plan ahead (past its reader's unit). Lock held. */
static uint64_t window_limit(const struct stream *s, uint64_t lin0, bool far)
{
	/* (a window further ahead than ahead: a pass per window reads the
	 * blocks again, so few large windows rather than many small ones) */
	uint64_t units = (s->ahead > 1 ? 4 * s->ahead : 1) + (s->pos > lin0 ? s->pos - lin0 : 0),
		 max;

	if (far)
		units = MAX_WINDOW_UNITS;

	if (units > MAX_WINDOW_UNITS)
		units = MAX_WINDOW_UNITS;
	max = lin0 + units < s->end ? lin0 + units : s->end;
	if (!s->crossed && max > (lin0 / s->nunits + 1) * s->nunits)
		max = (lin0 / s->nunits + 1) * s->nunits;
	for (const struct window *w = s->wins; w; w = w->next)
		if (w->lin0 > lin0 && w->lin0 < max)
			max = w->lin0; /* never over a window made already */
	return max;
}

/* A window of s from lin0: the reader's (demand: taken whatever the
 * budget), else the next one, within the room left. Lock held; dropped
 * while its ranges and ticket are made. NULL when none was made. */
static struct window *window_make(struct bfs_ioplan *p, struct stream *s, uint64_t lin0,
				  bool demand)
{
	uint64_t gen = s->gen, prio = demand ? BFS_FETCH_NOW : ++p->seq, lin1 = lin0, bytes = 0;
	uint64_t share = p->budget / 8 * 3, all = p->budget / 4 * 3;
	struct window_at a = { s->rank,
			       s->nunits,
			       lin0,
			       window_limit(s, lin0, false),
			       share,
			       s->chunk,
			       demand ? s->pos + 1 : 0,
			       s->ahead > 0,
			       p->mode };
	/* (a new stream, whose reader may be jumping around, takes no more
	 * than its units) */
	uint64_t far = s->ahead ? window_limit(s, lin0, true) : a.lin_max;
	struct window_choice ch = { 0 };
	struct bfs_fetch_ticket *t = NULL;
	struct bfs_fetch_range *r = NULL;
	struct window *w = NULL;
	bool pass = false;
	size_t n = 0;
	int rc;

	/* within the room the windows held leave: the reader's window takes
	 * its units up to the reader's whatever the budget (the builds' own
	 * records), and no more than what fits after them */
	a.limit = all > p->win_bytes + share ? share : all > p->win_bytes ? all - p->win_bytes : 0;
	if (a.lin_max <= lin0 || (!demand && a.limit == 0))
		return NULL;
	pthread_mutex_unlock(&p->lock);
	rc = window_plan(p, &a, far, &r, &n, &lin1, &bytes, &ch);
	if (!rc)
		rc = window_want(p, r, n, &ch, prio, demand, &t);
	pass = ch.plan.pass;
	choice_free(&ch);
	free(r);
	pthread_mutex_lock(&p->lock);
	if (rc || !s->used || s->gen != gen || !(w = calloc(1, sizeof(*w)))) {
		bfs_fetch_release(p->f, t);
		return NULL;
	}
	*w = (struct window){ .lin0 = lin0,
			      .lin1 = lin1,
			      .bytes = bytes,
			      .planned = lin1 - lin0 - (demand ? 1 : 0),
			      .t = t,
			      .refs = 1,
			      .hurried = demand };
	struct window **pp = &s->wins;
	while (*pp && (*pp)->lin0 < lin0)
		pp = &(*pp)->next;
	w->next = *pp;
	*pp = w;
	s->wend = lin1 > s->wend ? lin1 : s->wend;
	p->win_bytes += bytes;
	p->win_planned += w->planned;
	p->st.windows++;
	p->st.passes += pass;
	/* units planned ahead: the reader's own unit is not */
	p->st.planned += w->planned;
	return w;
}

/* Global shuffle: s holds the window its reader is in (made now, whatever
 * the budget: it is what is decoded now) and the next one (when there is
 * room), and lets go of those behind it. Lock held; dropped while a
 * window is made. */
static void hold_windows(struct bfs_ioplan *p, struct stream *s)
{
	uint64_t gen = s->gen;

	if (!holding_begin(p, s))
		return;
	struct window *w;

	drop_windows(p, s, s->pos > p->lookahead ? s->pos - p->lookahead : 0);
	drop_built(p, s);
	w = window_of(s, s->pos);
	/* from where the last one ended (the units between, built out of
	 * order by the prefetch, are in it too), or from the reader's unit
	 * when it jumped */
	if (!w)
		w = window_make(p, s,
				s->pos >= s->wend && s->pos - s->wend <= SLACK ? s->wend : s->pos,
				true);
	/* the next one, once the reader goes on from where it started (a
	 * reader of random batches costs no reads it does not use) */
	if (w && s->used && s->gen == gen && s->ahead && !w->next && w->lin1 < s->end)
		(void)window_make(p, s, w->lin1, false);
	holding_end(p, s, gen);
}

/* ------------------------------------------------------ groups of units */

/* Groups, in the order they were added (the nearest first). */
struct gset {
	struct gkey v[MAX_HELD];
	size_t n;
	bool full; /* some did not fit */
};

static bool gkey_eq(const struct gkey *a, const struct gkey *b)
{
	return a->epoch == b->epoch && a->q == b->q && a->g == b->g;
}

static bool gset_has(const struct gset *set, const struct gkey *k)
{
	for (size_t i = 0; i < set->n; i++)
		if (gkey_eq(&set->v[i], k))
			return true;
	return false;
}

static void gset_add(struct gset *set, const struct gkey *k)
{
	if (gset_has(set, k))
		return;
	if (set->n == MAX_HELD)
		set->full = true;
	else
		set->v[set->n++] = *k;
}

/* The groups of partition q holding its positions [u0, u1), into set. */
static void range_groups(const struct bfs_block_order *bo, uint64_t epoch, uint64_t q, uint64_t u0,
			 uint64_t u1, struct gset *set)
{
	uint64_t g1 = bfs_block_order_group_of(bo, q, u1 - 1);

	for (uint64_t g = bfs_block_order_group_of(bo, q, u0); g <= g1 && !set->full; g++)
		gset_add(set, &(struct gkey){ epoch, q, g });
}

/* The groups of epoch's order bo that unit (a batch, or a chunk with
 * BFS_CHUNK set) of batcher b reads from, into set: each of its batches'
 * rows is a run of positions of one partition. Without partitions, the
 * positions from its first row's to its last's (the other ranks' between
 * them lie in the same groups). */
static void unit_groups(const struct bfs_batcher *b, const struct bfs_block_order *bo,
			uint64_t epoch, uint64_t unit, struct gset *set)
{
	uint64_t r0, n, bs = bfs_batcher_batch_size(b);

	if (bfs_batcher_unit_rows(b, unit, &r0, &n) != 0 || n == 0)
		return;
	if (bfs_blocks_nparts(bfs_batcher_blocks(b)) == 1) {
		range_groups(bo, epoch, 0, bfs_batcher_row_pos(b, r0),
			     bfs_batcher_row_pos(b, r0 + n - 1) + 1, set);
		return;
	}
	for (uint64_t r = r0; r < r0 + n && !set->full;) {
		uint64_t take = bs - r % bs, q, u;

		if (take > r0 + n - r)
			take = r0 + n - r;
		bfs_block_order_locate(bo, bfs_batcher_row_pos(b, r), &q, &u);
		range_groups(bo, epoch, q, u, u + take, set);
		r += take;
	}
}

/* The groups that units [lin0, lin1) (counted across epochs, nunits an
 * epoch) of batcher b read from, into set. */
static void units_groups(const struct bfs_batcher *b, bool chunk, uint64_t nunits, uint64_t lin0,
			 uint64_t lin1, struct gset *set)
{
	struct bfs_perm perm = { 0 };
	uint64_t have = UINT64_MAX;

	for (uint64_t lin = lin0; lin < lin1 && !set->full; lin++) {
		uint64_t epoch = lin / nunits;

		if (epoch != have) {
			bfs_perm_release(&perm);
			have = epoch;
			if (bfs_batcher_perm(b, epoch, &perm) != 0 || !perm.bo)
				break;
		}
		unit_groups(b, perm.bo, epoch, (lin % nunits) | (chunk ? BFS_CHUNK : 0), set);
	}
	bfs_perm_release(&perm);
}

/* ---------------------------------------------------------------- streams */

static void stream_end(struct bfs_ioplan *p, struct stream *s)
{
	drop_items(p, s, UINT64_MAX);
	drop_windows(p, s, UINT64_MAX);
	release_groups(p, s);
	s->used = false;
}

static uint64_t nunits_of(const struct bfs_batcher *b, bool chunk)
{
	return chunk ? bfs_batcher_nchunks(b) : bfs_batcher_nbatches(b);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Block shuffle: how many units s's reader goes through to read each of
 * its partitions once (a batch each: P / gcd(world, P) of them, one when
 * P = 1), and whether their groups can be held at all: more than a stream
 * may hold, or, on average, more bytes than the budget, and s plans unit
 * by unit from the start. */
static void stream_span(const struct bfs_ioplan *p, struct stream *s)
{
	const struct bfs_batcher *b = p->b[s->rank];
	uint64_t parts = bfs_blocks_nparts(bfs_batcher_blocks(b));
	uint64_t m = parts / gcd64(bfs_batcher_world(b) % parts, parts);
	uint64_t cr = bfs_batcher_chunk_rows(b), bs = bfs_batcher_batch_size(b);

	s->span = m;
	if (s->chunk)
		s->span = m == 1 ? 1 : (m * bs + cr - 1) / cr + 1;
	if (m > 1 &&
	    (2 * m + 4 > MAX_HELD || m > p->budget / (p->group_bytes ? p->group_bytes : 1)))
		s->by_unit = true;
}

/* The stream a read of (rank, lin) belongs to, made if none. Lock held. */
static struct stream *stream_for(struct bfs_ioplan *p, uint64_t rank, bool chunk, uint64_t lin)
{
	struct stream *best = NULL, *free_slot = NULL, *oldest = NULL;

	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = &p->streams[i];

		if (!s->used) {
			if (!free_slot)
				free_slot = s;
			continue;
		}
		if (!oldest || s->last_ns < oldest->last_ns)
			oldest = s;
		if (s->rank != rank || s->chunk != chunk)
			continue;
		/* behind: the reader's own builds, up to the prefetch's depth
		 * behind the furthest one */
		if (lin + SLACK + p->lookahead < s->pos || lin > s->next + SLACK)
			continue;
		if (!best || (lin > s->pos ? lin - s->pos : s->pos - lin) <
				     (lin > best->pos ? lin - best->pos : best->pos - lin))
			best = s;
	}
	if (best)
		return best;
	if (!free_slot) {
		stream_end(p, oldest);
		free_slot = oldest;
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->used = true;
	free_slot->gen = ++p->gen;
	free_slot->rank = rank;
	free_slot->chunk = chunk;
	free_slot->nunits = nunits_of(p->b[rank], chunk);
	free_slot->end = p->epochs && p->epochs <= UINT64_MAX / (free_slot->nunits + 1)
				 ? p->epochs * free_slot->nunits
				 : UINT64_MAX;
	free_slot->pos = free_slot->rpos = lin;
	free_slot->next = lin + 1;
	free_slot->wend = lin;
	if (p->block)
		stream_span(p, free_slot);
	return free_slot;
}

static void kick(struct bfs_ioplan *p)
{
	p->kicked = true;
	pthread_cond_signal(&p->kick);
}

static bool hold_groups(struct bfs_ioplan *p, struct stream *s);
static void release_groups(struct bfs_ioplan *p, struct stream *s);
static bool hold_behind(struct bfs_ioplan *p, struct stream *s, uint64_t epoch, uint64_t unit);

/* A build of (rank, epoch, unit) starts: its stream moves there. Lock held.
 * Returns the stream, or NULL when the build is outside every stream (past
 * the mount's epochs, or the prefetch running into the next one). */
static struct stream *note_build(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit)
{
	bool chunk = (unit & BFS_CHUNK) != 0;
	uint64_t u = unit & ~BFS_CHUNK, nu, lin;
	struct stream *s;

	if (rank >= p->nranks)
		return NULL;
	nu = nunits_of(p->b[rank], chunk);
	if (!nu || u >= nu || epoch > UINT64_MAX / nu - 1 || (p->epochs && epoch >= p->epochs))
		return NULL;
	lin = epoch * nu + u;
	s = stream_for(p, rank, chunk, lin);
	s->last_ns = bfs_now_ns();
	s->parked = false;
	s->nbuilds++;
	if (lin / nu > s->pos / nu && !s->crossed) {
		/* into a later epoch: only the decoded-batch prefetch running
		 * past the end, until a build further in shows the reader there;
		 * but under block shuffle, an epoch the mount lists is entered at
		 * once (those builds read from its first group, which the stream
		 * holds already: asking for their records one by one would fetch
		 * them twice); and so under the global shuffle (from the window
		 * made for them) */
		if (lin % nu < p->lookahead && lin % nu + 1 < nu && !p->epochs) {
			kick(p);
			return NULL;
		}
		s->crossed = true;
	}
	if (lin > s->pos) {
		s->pos = lin;
		s->ahead = s->ahead * 2 + 4 < MAX_AHEAD ? s->ahead * 2 + 4 : MAX_AHEAD;
	}
	drop_items(p, s, s->pos > SLACK ? s->pos - SLACK : 0);
	/* block shuffle: the group must be held before the build asks for its
	 * records, or they are read one by one */
	if (p->block && !s->by_unit && !hold_groups(p, s)) {
		release_groups(p, s);
		s->by_unit = true;
	}
	if (s->next <= lin) /* built before (or as) it was planned */
		s->next = lin + 1;
	kick(p);
	return s;
}

/* The group k some stream holds, or NULL. Lock held. */
static struct group *group_find(const struct bfs_ioplan *p, const struct gkey *k)
{
	struct group *gr;

	for (gr = p->groups; gr; gr = gr->next)
		if (gr->epoch == k->epoch && gr->q == k->q && gr->g == k->g)
			break;
	return gr;
}

/* Block shuffle: when every record of (rank, epoch, unit) lies in groups
 * that are held, the build holds those groups too (their bytes stay while
 * it reads them, whatever the stream does meanwhile). Lock held. */
static bool hold_held(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit,
		      struct bfs_ioplan_hold *h)
{
	struct gset set = { .n = 0 };
	struct bfs_perm perm;
	struct group **g;

	if (bfs_batcher_perm(p->b[rank], epoch, &perm) != 0)
		return false;
	if (perm.bo)
		unit_groups(p->b[rank], perm.bo, epoch, unit, &set);
	bfs_perm_release(&perm);
	if (!set.n || set.full)
		return false;
	for (size_t i = 0; i < set.n; i++)
		if (!group_find(p, &set.v[i]))
			return false;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	g = malloc(set.n * sizeof(*g));
	if (!g)
		return false;
	for (size_t i = 0; i < set.n; i++) {
		g[i] = group_find(p, &set.v[i]);
		g[i]->holders++;
	}
	h->g = g;
	h->ng = set.n;
	return true;
}

/* Global shuffle: the build of (epoch, unit) of s holds the window its
 * records are in (made now when the unit is past s's windows); h->t then
 * borrows the window's ticket when its reads are to be hurried (the first
 * build in it). False when no window holds the unit (a build behind the
 * reader whose window went: it asks for its records itself). Lock held;
 * dropped while a window is made. */
static bool hold_window(struct bfs_ioplan *p, struct stream *s, uint64_t epoch, uint64_t unit,
			struct bfs_ioplan_hold *h)
{
	uint64_t lin = epoch * s->nunits + (unit & ~BFS_CHUNK), gen = s->gen;
	struct window *w = window_of(s, lin);

	if (w && bfs_fetch_failed(p->f, w->t)) {
		/* a read of it failed: its ticket never tries again, so it goes,
		 * and this build (and those after) ask anew */
		window_unlink(s, w);
		window_put(p, w);
		w = NULL;
	}
	if (w) {
		p->st.claimed++;
		w->claims++;
		p->win_claims++;
	} else if (holding_begin(p, s)) { /* after a window being made now */
		const struct window *first;

		drop_built(p, s); /* room before a window made on top */
		first = s->wins;
		w = window_of(s, lin);
		if (!w && lin >= s->wend)
			/* past the windows: from where the last one ended (the
			 * units between, built out of order by the prefetch, are
			 * in it too), or from here when the reader jumped */
			w = window_make(p, s, lin - s->wend <= SLACK ? s->wend : lin, true);
		else if (!w && first && lin < first->lin0 && first->lin0 - lin <= p->lookahead)
			/* the first builds start together (the reader's unit and
			 * the prefetch's), and the one noted first made the
			 * stream's first window: up to it */
			w = window_make(p, s, lin, true);
		if (w && w->lin0 == lin) {
			p->st.unplanned++; /* made for this build, which asked itself */
		} else if (w) {
			p->st.claimed++;
			w->claims++;
			p->win_claims++;
		}
		holding_end(p, s, gen);
		kick(p); /* the next window */
	}
	if (!w || !s->used || s->gen != gen || !window_of(s, lin))
		return false;
	w->refs++;
	w->built++;
	h->w = w;
	if (!w->hurried) {
		w->hurried = true;
		h->t = w->t;
	}
	return true;
}

/* Under partitions, the first build of a rank that reads only some of
 * them (world and P not coprime) gives the stage's disk cache the byte
 * ranges of its partitions' pieces, so that the node keeps its share
 * (diskcache.h) rather than the first shards. */
static void give_share(struct bfs_ioplan *p, uint64_t rank)
{
	const struct bfs_blocks *bl = bfs_batcher_blocks(p->b[rank]);
	uint64_t parts, d;

	if (!bl || rank >= p->nranks || atomic_exchange(&p->shared[rank], true))
		return;
	parts = bfs_blocks_nparts(bl);
	d = gcd64(bfs_batcher_world(p->b[rank]) % parts, parts);
	for (uint64_t q = bfs_batcher_rank(p->b[rank]) % d; d > 1 && q < parts; q += d) {
		uint64_t k0, k1;

		bfs_blocks_part_pieces(bl, q, &k0, &k1);
		for (uint64_t k = k0; k < k1; k++) {
			uint64_t first, end, local, off, len;
			size_t sh;

			bfs_blocks_piece(bl, k, &first, &end);
			if (end > first &&
			    bfs_dataset_locate(p->ds, first, &sh, &local, NULL) == 0 &&
			    bfs_shard_span(bfs_dataset_shard(p->ds, sh), local,
					   local + (end - first), &off, &len))
				bfs_dataset_share(p->ds, sh, off, len);
		}
	}
}

struct bfs_ioplan_hold *bfs_ioplan_claim(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch,
					 uint64_t unit, const uint64_t *recs, size_t n)
{
	struct bfs_ioplan_hold *h = calloc(1, sizeof(*h));
	struct bfs_fetch_ticket *t = NULL;
	struct stream *s;
	struct bfs_fetch_range *r;
	size_t m;

	if (!h)
		return NULL;
	if (p->block)
		give_share(p, rank);
	pthread_mutex_lock(&p->lock);
	s = note_build(p, rank, epoch, unit);
	if (!p->block && s && hold_window(p, s, epoch, unit, h)) {
		pthread_mutex_unlock(&p->lock);
		if (h->t) /* the reader's window: its reads first (once) */
			bfs_fetch_hurry(p->f, h->t, BFS_FETCH_NOW);
		h->t = NULL;
		return h;
	}
	if (p->block && (hold_held(p, rank, epoch, unit, h) ||
			 (hold_behind(p, s, epoch, unit) && hold_held(p, rank, epoch, unit, h)))) {
		p->st.claimed++;
		pthread_mutex_unlock(&p->lock);
		return h;
	}
	for (struct item *it = p->table[bucket(rank, epoch, unit)]; it; it = it->hnext) {
		if (it->rank != rank || it->epoch != epoch || it->unit != unit)
			continue;
		item_unlink(p, it);
		t = it->t;
		it->t = NULL;
		item_free(p, it);
		p->st.claimed++;
		break;
	}
	if (!t)
		p->st.unplanned++;
	pthread_mutex_unlock(&p->lock);
	if (t) {
		bfs_fetch_hurry(p->f, t, BFS_FETCH_NOW);
		h->t = t;
		return h;
	}
	r = malloc((n ? n : 1) * sizeof(*r));
	if (!r) {
		free(h);
		return NULL;
	}
	bfs_ioplan_ranges(p->ds, recs, n, r, &m);
	if (bfs_fetch_want(p->f, r, m, BFS_FETCH_NOW, BFS_WANT_DEMAND, &h->t) != 0) {
		free(h);
		h = NULL;
	}
	free(r);
	return h;
}

void bfs_ioplan_done(struct bfs_ioplan *p, struct bfs_ioplan_hold *h)
{
	if (!h)
		return;
	bfs_fetch_release(p->f, h->t);
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < h->ng; i++)
		group_put(p, h->g[i]);
	if (h->w)
		window_put(p, h->w);
	kick(p);
	pthread_mutex_unlock(&p->lock);
	free(h->g);
	free(h);
}

bool bfs_ioplan_ready(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit)
{
	bool chunk = (unit & BFS_CHUNK) != 0, seen = false, ok = true;
	struct gset *set;
	struct bfs_perm perm;

	if (!p->block || rank >= p->nranks)
		return true;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < MAX_STREAMS && ok; i++) {
		const struct stream *s = &p->streams[i];

		if (s->used && s->rank == rank && s->chunk == chunk) {
			seen = true;
			ok = !s->by_unit;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (!seen || !ok || bfs_batcher_perm(p->b[rank], epoch, &perm) != 0)
		return true;
	set = perm.bo ? malloc(sizeof(*set)) : NULL;
	if (set) {
		set->n = 0;
		set->full = false;
		unit_groups(p->b[rank], perm.bo, epoch, unit, set);
	}
	bfs_perm_release(&perm);
	if (!set)
		return true;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < set->n && ok; i++)
		ok = group_find(p, &set->v[i]) != NULL;
	pthread_mutex_unlock(&p->lock);
	free(set);
	return ok;
}

void bfs_ioplan_note_read(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit)
{
	bool chunk = (unit & BFS_CHUNK) != 0;
	uint64_t u = unit & ~BFS_CHUNK, nu, lin;

	if (!p->block || rank >= p->nranks)
		return;
	nu = nunits_of(p->b[rank], chunk);
	if (!nu || u >= nu || epoch > UINT64_MAX / nu - 1)
		return;
	lin = epoch * nu + u;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = &p->streams[i];

		if (!s->used || s->rank != rank || s->chunk != chunk || lin <= s->rpos ||
		    lin > s->next + SLACK + p->lookahead)
			continue;
		s->rpos = lin;
		s->read_seen = true;
		s->last_ns = bfs_now_ns();
		kick(p);
		break;
	}
	pthread_mutex_unlock(&p->lock);
}

/* ---------------------------------------------------------------- planner */

/* Make room for a plan of stream `for_s` at distance d: drop the plans of
 * idle streams, then the furthest plan of another stream further ahead
 * than d. True if something was released. Lock held. */
static bool make_room(struct bfs_ioplan *p, struct stream *for_s, uint64_t d)
{
	uint64_t t = bfs_now_ns();
	struct stream *far = NULL;

	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = &p->streams[i];

		if (!s->used || s == for_s)
			continue;
		if (t - s->last_ns > IDLE_NS && (s->head || s->nheld || s->wins)) {
			drop_items(p, s, UINT64_MAX);
			drop_windows(p, s, UINT64_MAX);
			release_groups(p, s);
			s->next = s->pos + 1;
			s->parked = true;
			return true;
		}
		if (s->tail && s->tail->lin - s->pos > d &&
		    (!far || s->tail->lin - s->pos > far->tail->lin - far->pos))
			far = s;
	}
	return far && drop_last(p, far);
}

/* s lets go of group k if it holds it. Lock held. */
static bool drop_held(struct bfs_ioplan *p, struct stream *s, const struct gkey *k)
{
	for (unsigned i = 0; i < s->nheld; i++) {
		struct group *gr = s->held[i];

		if (gr->epoch != k->epoch || gr->q != k->q || gr->g != k->g)
			continue;
		s->held[i] = s->held[--s->nheld];
		group_put(p, gr);
		return true;
	}
	return false;
}

/* The groups a block-shuffled stream wants held now: `cur`, those of the
 * units its reader goes through next, once through its partitions (the
 * first `nreader` its reader's own unit's: asked for whatever the budget);
 * `ahead`, those of the prefetch's builds past them, and `back`, those of
 * the builds up to lookahead units behind the reader (both kept while
 * builds may still start there, never asked for again: the back ones give
 * way first when room is needed); `next`, for each partition in cur, then
 * in ahead, the group after its last. */
struct group_want {
	struct gset cur, next, back, ahead;
	size_t nreader;
};

/* Whether s may hold groups of `epoch` (its reader's is `at`): an epoch the
 * mount lists, or, with no bound, once its reader went on into a later
 * epoch. */
static bool epoch_ok(const struct bfs_ioplan *p, const struct stream *s, uint64_t epoch,
		     uint64_t at)
{
	if (epoch == at)
		return true;
	return p->epochs ? epoch < p->epochs : s->crossed;
}

/* want->next from want->cur: the group after each partition's last. */
static void next_groups(const struct bfs_ioplan *p, const struct stream *s, uint64_t at,
			bool same_epoch, const struct gset *from, struct group_want *want)
{
	const struct bfs_batcher *b = p->b[s->rank];
	struct bfs_perm perm = { 0 };
	uint64_t have = UINT64_MAX;

	for (size_t i = 0; i < from->n; i++) {
		struct gkey k = from->v[i];
		bool last = true;

		for (size_t j = 0; j < from->n && last; j++)
			last = !(from->v[j].epoch == k.epoch && from->v[j].q == k.q &&
				 from->v[j].g > k.g);
		if (!last)
			continue;
		if (k.epoch != have) {
			bfs_perm_release(&perm);
			have = k.epoch;
			if (bfs_batcher_perm(b, k.epoch, &perm) != 0 || !perm.bo)
				break;
		}
		if (k.g + 1 < bfs_block_order_ngroups(perm.bo, k.q)) {
			k.g++;
			if (!same_epoch)
				continue;
		} else {
			k.epoch++;
			k.g = 0;
			if (!epoch_ok(p, s, k.epoch, at))
				continue;
		}
		if (!gset_has(&want->cur, &k) && !gset_has(&want->ahead, &k))
			gset_add(&want->next, &k);
	}
	bfs_perm_release(&perm);
}

/* want->next gets the group after each partition's last in want->ahead
 * (chunks: of the reader's epoch only). */
static void next_ahead(const struct bfs_ioplan *p, const struct stream *s, uint64_t at,
		       struct group_want *want)
{
	struct gset *from = malloc(sizeof(*from));

	if (!from)
		return;
	from->n = 0;
	from->full = false;
	for (size_t i = 0; i < want->ahead.n; i++)
		if (!s->chunk || want->ahead.v[i].epoch == at)
			gset_add(from, &want->ahead.v[i]);
	next_groups(p, s, at, true, from, want);
	free(from);
}

/* Fill *want for s's reader. 1 when filled; 0 when nothing is to be held
 * now; -1 when groups cannot be held (too many: s plans by unit). */
static int groups_wanted(const struct bfs_ioplan *p, const struct stream *s,
			 struct group_want *want)
{
	const struct bfs_batcher *b = p->b[s->rank];
	uint64_t r = s->read_seen ? s->rpos : s->pos, at = r / s->nunits, unit = r % s->nunits,
		 end = r + s->span;
	uint64_t back = r - (r < p->lookahead ? r : p->lookahead);

	memset(want, 0, sizeof(*want));
	/* the reader's unit, then those after it (into an epoch it may hold) */
	units_groups(b, s->chunk, s->nunits, r, r + 1, &want->cur);
	want->nreader = want->cur.n;
	if (!want->nreader)
		return 0;
	if (end > s->end)
		end = s->end;
	if (end / s->nunits > at && !epoch_ok(p, s, at + 1, at))
		end = (at + 1) * s->nunits;
	units_groups(b, s->chunk, s->nunits, r + 1, end, &want->cur);
	/* builds run up to lookahead units ahead of their reader, and not
	 * always in order: the groups behind the reader's stay while a unit
	 * that near behind still reads from them (else such a build would ask
	 * for its records one by one, a second fetch of them), and so do the
	 * groups of the builds ahead of it */
	units_groups(b, s->chunk, s->nunits, back, r, &want->back);
	if (s->pos >= end)
		units_groups(b, s->chunk, s->nunits, end, s->pos + 1, &want->ahead);
	/* the first chunks of an epoch: the prefetch running on from the end
	 * of the one before as often as a reader (a reader of all.safetensors
	 * goes through the epoch once per column, and each pass's end
	 * prefetches here); the next groups come once a build further in
	 * shows the reader here */
	next_groups(p, s, at, !(s->chunk && unit < p->lookahead && s->span == 1), &want->cur, want);
	/* and the next of those ahead (held when the stream followed its
	 * builds before a read was noted: let go, each was fetched again);
	 * not for chunks in a later epoch than the reader's, the prefetch's
	 * run past a pass's end */
	next_ahead(p, s, at, want);
	return want->cur.full || want->next.full ? -1 : 1;
}

static bool wanted(const struct group_want *want, const struct group *gr)
{
	struct gkey k = { gr->epoch, gr->q, gr->g };

	return gset_has(&want->cur, &k) || gset_has(&want->next, &k) || gset_has(&want->back, &k) ||
	       gset_has(&want->ahead, &k);
}

/* s keeps the groups it holds that want still names (in their order, at
 * the front of s->held), releases the rest. Lock held. */
static void keep_wanted(struct bfs_ioplan *p, struct stream *s, const struct group_want *want)
{
	unsigned nkeep = 0;

	for (unsigned i = 0; i < s->nheld; i++) {
		struct group *gr = s->held[i];

		if (wanted(want, gr))
			s->held[nkeep++] = gr; /* nkeep <= i: never ahead of the walk */
		else
			group_put(p, gr);
	}
	s->nheld = nkeep;
}

/* A new group k of ticket t over partition positions u0..u1, held by s.
 * False when out of memory (t then released). Lock held. */
static bool group_add(struct bfs_ioplan *p, struct stream *s, const struct gkey *k,
		      struct bfs_fetch_ticket *t, uint64_t u0, uint64_t u1)
{
	struct group *gr = s->nheld < MAX_HELD ? calloc(1, sizeof(*gr)) : NULL;

	if (!gr) {
		bfs_fetch_release(p->f, t);
		return false;
	}
	gr->epoch = k->epoch;
	gr->q = k->q;
	gr->g = k->g;
	gr->u0 = u0;
	gr->u1 = u1;
	gr->t = t;
	gr->holders = 1;
	gr->next = p->groups;
	p->groups = gr;
	s->held[s->nheld++] = gr;
	p->st.groups++;
	return true;
}

/* s holds group k too: it held it already, or shares the one another
 * stream holds. False when neither. Lock held. */
static bool hold_existing(struct bfs_ioplan *p, struct stream *s, const struct gkey *k)
{
	struct group *gr;

	for (unsigned i = 0; i < s->nheld; i++)
		if (s->held[i]->epoch == k->epoch && s->held[i]->q == k->q && s->held[i]->g == k->g)
			return true;
	gr = group_find(p, k);
	if (!gr || s->nheld == MAX_HELD)
		return false;
	gr->holders++;
	s->held[s->nheld++] = gr;
	return true;
}

/* Room for a group of s: one of the groups kept behind it goes first (a
 * late build is rarer than a reader waiting at a boundary), then what
 * other streams hold. Lock held. */
static bool room_for(struct bfs_ioplan *p, struct stream *s, const struct group_want *want)
{
	for (size_t i = 0; i < want->back.n; i++)
		if (!gset_has(&want->cur, &want->back.v[i]) &&
		    !gset_has(&want->next, &want->back.v[i]) &&
		    !gset_has(&want->ahead, &want->back.v[i]) && drop_held(p, s, &want->back.v[i]))
			return true;
	return make_room(p, s, 0);
}

/* s holds group k: shared with the stream that has it, or fetched as a new
 * group. demand: its reader's unit reads it (asked for ahead of every
 * plan, whatever the budget). 0 when held (or s was let go of meanwhile,
 * -ESTALE); -E2BIG when the group is larger than the whole budget; another
 * -errno when it waits for room. Lock held; dropped while the group's
 * ticket is made. */
static int hold_group(struct bfs_ioplan *p, struct stream *s, const struct group_want *want,
		      const struct gkey *k, bool demand)
{
	uint64_t gen = s->gen, prio, u0 = 0, u1 = 0;
	struct bfs_fetch_ticket *t = NULL;
	int rc;

	if (hold_existing(p, s, k))
		return 0;
	prio = demand ? BFS_FETCH_NOW : ++p->seq;
	pthread_mutex_unlock(&p->lock);
	rc = group_ticket(p, k, prio, demand, &t, &u0, &u1);
	pthread_mutex_lock(&p->lock);
	if (rc == -ENOSPC && s->used && s->gen == gen && want && room_for(p, s, want)) {
		pthread_mutex_unlock(&p->lock);
		rc = group_ticket(p, k, prio, false, &t, &u0, &u1);
		pthread_mutex_lock(&p->lock);
	}
	if (rc || !s->used || s->gen != gen) {
		bfs_fetch_release(p->f, t);
		return rc ? rc : -ESTALE;
	}
	if (group_find(p, k)) { /* another stream made it meanwhile */
		bfs_fetch_release(p->f, t);
		return hold_existing(p, s, k) ? 0 : -ENOSPC;
	}
	return group_add(p, s, k, t, u0, u1) ? 0 : -ENOMEM;
}

/* Block shuffle: hold the groups of s's reader's partitions (its own
 * unit's whatever the budget: its bytes are what the reader decodes now;
 * turning a stream to unit by unit plans when it did not fit would read
 * each block again in pieces, for the rest of the mount) and the next of
 * each (the first of the next epoch when the mount lists it, or, with no
 * bound on epochs, once the reader went on into a later epoch), nearest
 * first; those that do not fit wait for room. Lock held; dropped while a
 * group's ticket is made. False when the groups cannot be held (more than
 * a stream may hold, or one larger than the whole budget: s then plans by
 * unit). */
static bool hold_groups_now(struct bfs_ioplan *p, struct stream *s)
{
	struct group_want *want = malloc(sizeof(*want));
	uint64_t gen = s->gen;
	bool ok = true;
	int rc;

	if (!want)
		return true;
	rc = groups_wanted(p, s, want);
	if (rc <= 0) {
		free(want);
		return rc == 0;
	}
	keep_wanted(p, s, want);
	for (size_t i = 0; i < want->cur.n + want->next.n && s->used && s->gen == gen; i++) {
		const struct gkey *k =
			i < want->cur.n ? &want->cur.v[i] : &want->next.v[i - want->cur.n];

		rc = hold_group(p, s, want, k, i < want->nreader);
		if (rc == -E2BIG)
			ok = false;
		if (rc != 0)
			break;
	}
	free(want);
	return ok;
}

/* hold_groups_now, one caller per stream at a time: a build that comes
 * while its stream's group is being asked for waits for it, so that its
 * records are found there instead of read one by one. */
/* The one thread asking for s's groups: waits while another one does.
 * False when s was let go of meanwhile (then nothing is to be asked). Lock
 * held; dropped while waiting. */
static bool holding_begin(struct bfs_ioplan *p, struct stream *s)
{
	uint64_t gen = s->gen;

	while (s->holding && s->used && s->gen == gen)
		pthread_cond_wait(&p->held, &p->lock);
	if (!s->used || s->gen != gen)
		return false;
	s->holding = true;
	return true;
}

/* The end of holding_begin's turn, for s of generation gen. Lock held. */
static void holding_end(struct bfs_ioplan *p, struct stream *s, uint64_t gen)
{
	if (s->used && s->gen == gen)
		s->holding = false;
	pthread_cond_broadcast(&p->held);
}

static bool hold_groups(struct bfs_ioplan *p, struct stream *s)
{
	uint64_t gen = s->gen;
	bool ok;

	if (!holding_begin(p, s))
		return true;
	ok = hold_groups_now(p, s);
	holding_end(p, s, gen);
	return ok;
}

/* Block shuffle, a stream's first builds: they start together (the
 * reader's batch and the prefetch's), and the one noted first sets where
 * the stream starts. A build noted after it, behind it, whose groups no one
 * holds would read its records one by one (the first batches' records,
 * fetched in pieces): the stream holds those groups too, as groups kept
 * behind its reader. Lock held; dropped while a group's ticket is made.
 * True when they are held. */
static bool hold_behind(struct bfs_ioplan *p, struct stream *s, uint64_t epoch, uint64_t unit)
{
	struct gset *set;
	struct bfs_perm perm;
	uint64_t gen;
	bool ok = true;

	if (!s || s->by_unit || s->nbuilds > p->lookahead + 1 ||
	    epoch * s->nunits + (unit & ~BFS_CHUNK) >= s->pos)
		return false;
	if (bfs_batcher_perm(p->b[s->rank], epoch, &perm) != 0)
		return false;
	set = perm.bo ? malloc(sizeof(*set)) : NULL;
	if (set) {
		set->n = 0;
		set->full = false;
		unit_groups(p->b[s->rank], perm.bo, epoch, unit, set);
	}
	bfs_perm_release(&perm);
	gen = s->gen;
	if (!set || set->full || !set->n || !holding_begin(p, s)) {
		free(set);
		return false;
	}
	/* groups held already stay as they are (hold_held did not find all
	 * of the unit's there); no room among the stream's: the build reads
	 * by itself */
	for (size_t i = 0; i < set->n && ok; i++)
		ok = group_find(p, &set->v[i]) || (s->nheld + set->n <= MAX_HELD &&
						   hold_group(p, s, NULL, &set->v[i], true) == 0);
	holding_end(p, s, gen);
	free(set);
	return ok;
}

/* The stream whose next plan is nearest its reader, or NULL. Lock held. */
static struct stream *nearest(struct bfs_ioplan *p)
{
	struct stream *best = NULL;

	/* what readahead allows, whatever the stage holds already */
	if (p->nitems >= MAX_ITEMS || p->item_bytes >= p->budget)
		return NULL;
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = &p->streams[i];

		if (!s->used || s->parked || (p->block && !s->by_unit) ||
		    s->next - s->pos > s->ahead || s->next >= s->end)
			continue;
		if (!s->crossed && s->next / s->nunits > s->pos / s->nunits &&
		    s->next - s->pos > CROSS_AHEAD)
			continue;
		if (!best || s->next - s->pos < best->next - best->pos)
			best = s;
	}
	return best;
}

/* Plan one unit of s. Lock held; dropped while the ticket is made. False
 * when nothing more can be planned now. */
static bool plan_one(struct bfs_ioplan *p, struct stream *s)
{
	uint64_t lin = s->next, gen = s->gen, prio = ++p->seq;
	uint64_t epoch = lin / s->nunits, unit = (lin % s->nunits) | (s->chunk ? BFS_CHUNK : 0);
	uint64_t rank = s->rank;
	struct bfs_fetch_ticket *t = NULL;
	uint64_t bytes = 0;
	struct item *it;
	int rc;

	s->next++;
	pthread_mutex_unlock(&p->lock);
	rc = unit_ticket(p, rank, epoch, unit, prio, false, &t, &bytes);
	pthread_mutex_lock(&p->lock);
	if (rc == -ENOSPC && make_room(p, s, lin - s->pos)) {
		pthread_mutex_unlock(&p->lock);
		rc = unit_ticket(p, rank, epoch, unit, prio, false, &t, &bytes);
		pthread_mutex_lock(&p->lock);
	}
	/* the stream moved on meanwhile; or the build of lin started (it
	 * moved pos there), found no plan and reads its records itself: a plan
	 * made now would be held, unread, until the stream ends */
	if (!s->used || s->gen != gen || lin <= s->pos) {
		bfs_fetch_release(p->f, t);
		return true;
	}
	if (rc || !(it = calloc(1, sizeof(*it)))) {
		bfs_fetch_release(p->f, t);
		if (s->next == lin + 1)
			s->next = lin; /* again later */
		return false;
	}
	it->rank = rank;
	it->epoch = epoch;
	it->unit = unit;
	it->lin = lin;
	it->t = t;
	it->s = s;
	it->bytes = bytes;
	p->nitems++;
	p->item_bytes += bytes;
	/* plans are made in order, but one made while the lock was dropped
	 * may land after a later one: keep the list sorted */
	if (!s->tail || s->tail->lin < lin) {
		if (s->tail)
			s->tail->next = it;
		else
			s->head = it;
		s->tail = it;
	} else {
		struct item **pp = &s->head;
		while (*pp && (*pp)->lin < lin)
			pp = &(*pp)->next;
		it->next = *pp;
		*pp = it;
	}
	it->hnext = p->table[bucket(rank, epoch, unit)];
	p->table[bucket(rank, epoch, unit)] = it;
	p->st.planned++;
	return true;
}

static void pump(struct bfs_ioplan *p)
{
	if (!p->block) { /* global shuffle: windows */
		for (int i = 0; i < MAX_STREAMS && !p->stop; i++) {
			struct stream *s = &p->streams[i];

			if (s->used && !s->parked)
				hold_windows(p, s);
		}
		return;
	}
	if (p->block)
		for (int i = 0; i < MAX_STREAMS && !p->stop; i++) {
			struct stream *s = &p->streams[i];
			if (s->used && !s->by_unit && !s->parked && !hold_groups(p, s)) {
				release_groups(p, s);
				s->by_unit = true;
			}
		}
	while (!p->stop) {
		struct bfs_fetch_stats fs;
		struct stream *s;

		bfs_fetch_stats(p->f, &fs);
		if (fs.pending >= PENDING_PER_DEPTH * (uint64_t)p->depth)
			break;
		s = nearest(p);
		if (!s || !plan_one(p, s))
			break;
	}
}

static void *planner(void *arg)
{
	struct bfs_ioplan *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		if (!p->kicked) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += TICK_NS;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&p->kick, &p->lock, &ts);
		}
		p->kicked = false;
		pump(p);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void low_water(void *ctx)
{
	struct bfs_ioplan *p = ctx;

	pthread_mutex_lock(&p->lock);
	kick(p);
	pthread_mutex_unlock(&p->lock);
}

int bfs_ioplan_new(struct bfs_ioplan **out, struct bfs_fetch *f, const struct bfs_dataset *ds,
		   const struct bfs_batcher *const *b, size_t nranks, unsigned lookahead,
		   uint64_t epochs)
{
	struct bfs_ioplan *p = calloc(1, sizeof(*p));
	int rc;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->f = f;
	p->ds = ds;
	p->b = b;
	p->nranks = nranks;
	p->block = bfs_batcher_blocks(b[0]) != NULL;
	if (p->block) {
		const struct bfs_blocks *bl = bfs_batcher_blocks(b[0]);
		uint64_t total = 0, np = bfs_blocks_npieces(bl);

		for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
			total += bfs_shard_file_size(bfs_dataset_shard(ds, i));
		p->group_bytes = total / (np ? np : 1) * bfs_blocks_window(bl);
	}
	p->depth = bfs_fetch_depth(f);
	p->budget = bfs_fetch_budget(f);
	p->epochs = epochs;
	p->lookahead = (uint64_t)lookahead + 1;
	p->sizes = calloc(bfs_dataset_nshards(ds) ? bfs_dataset_nshards(ds) : 1, sizeof(*p->sizes));
	p->shared = calloc(nranks ? nranks : 1, sizeof(*p->shared));
	if (!p->sizes || !p->shared) {
		free(p->sizes);
		free(p->shared);
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < bfs_dataset_nshards(ds); i++)
		p->sizes[i] = bfs_shard_file_size(bfs_dataset_shard(ds, i));
	if (p->block)
		p->plan = "block groups";
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->kick, NULL);
	pthread_cond_init(&p->held, NULL);
	rc = bfs_thread_start(&p->tid, planner, p);
	if (rc) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->kick);
		pthread_cond_destroy(&p->held);
		free(p->sizes);
		free(p->shared);
		free(p);
		return -rc;
	}
	p->started = true;
	bfs_fetch_set_low(f, p->depth, low_water, p);
	*out = p;
	return 0;
}

void bfs_ioplan_set_mode(struct bfs_ioplan *p, enum bfs_ioplan_mode m)
{
	pthread_mutex_lock(&p->lock);
	p->mode = m;
	pthread_mutex_unlock(&p->lock);
}

void bfs_ioplan_free(struct bfs_ioplan *p)
{
	if (!p)
		return;
	bfs_fetch_set_low(p->f, 0, NULL, NULL);
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->kick);
	pthread_mutex_unlock(&p->lock);
	if (p->started)
		pthread_join(p->tid, NULL);
	/* every plan goes: the hash is not kept up to date on the way */
	for (int i = 0; i < MAX_STREAMS; i++) {
		struct stream *s = &p->streams[i];

		while (s->head) {
			struct item *it = s->head;

			s->head = it->next;
			item_free(p, it);
		}
		s->tail = NULL;
		drop_windows(p, s, UINT64_MAX);
		if (s->used)
			release_groups(p, s);
	}
	free(p->sizes);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->kick);
	pthread_cond_destroy(&p->held);
	free(p->shared);
	free(p);
}

void bfs_ioplan_stats(struct bfs_ioplan *p, struct bfs_ioplan_stats *out)
{
	pthread_mutex_lock(&p->lock);
	*out = p->st;
	out->streams = 0;
	out->held =
		p->nitems + (p->win_planned > p->win_claims ? p->win_planned - p->win_claims : 0);
	out->held_bytes = p->item_bytes + p->win_bytes;
	snprintf(out->plan, sizeof(out->plan), "%s", p->plan ? p->plan : "");
	snprintf(out->reason, sizeof(out->reason), "%s", p->reason);
	for (int i = 0; i < MAX_STREAMS; i++)
		out->streams += p->streams[i].used;
	pthread_mutex_unlock(&p->lock);
}
