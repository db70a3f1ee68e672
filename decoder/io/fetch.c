/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch.c — the core of the I/O stage (see fetch.h): the buffer of
 * ranges, the queue of reads, extents, tickets and copies. Its backends
 * (fetch_threads.c, fetch_uring.c, fetch_custom.c) take the reads through
 * fetch_impl.h; the core reaches a backend only through its ops table.
 * The choice of a backend is fetch_probe.c's.
 *
 * Each read covers one extent: bytes [off, off + len) of one object. The
 * extents of an object are kept sorted and never overlap, so that a range
 * wanted twice is read once and a copy finds its bytes by binary search.
 * An extent is PENDING (queued by (prio, seq)), INFLIGHT, READY or FAILED;
 * `refs` counts the tickets that hold it and `users` the copies running
 * outside the lock or waiting for it. One with no ticket is taken out of
 * its object's list at once (a later want reads the bytes again) and freed
 * when no read and no copy uses it any more.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fetch_impl.h"

#include "common.h"
#include "workers.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OVERHEAD 128 /* bytes counted per extent beyond its data */
#define DEFAULT_MAX_READ ((uint64_t)4 << 20)
#define NOT_QUEUED SIZE_MAX
#define COPY_UNLOCKED 4096 /* larger copies run outside the lock */
#define TRIES 2 /* a read and its retry */
#define COST_SMALL ((uint64_t)64 << 10) /* a read this small costs its latency */
#define COST_LARGE ((uint64_t)256 << 10) /* one this large tells the rate too */

/* ---------------------------------------------------------------- queue */

static bool before(const struct bfs_fetch_read *a, const struct bfs_fetch_read *b)
{
	return a->prio != b->prio ? a->prio < b->prio : a->seq < b->seq;
}

static void heap_set(struct bfs_fetch *f, size_t i, struct bfs_fetch_read *x)
{
	f->heap[i] = x;
	x->heap = i;
}

static void sift_up(struct bfs_fetch *f, size_t i)
{
	struct bfs_fetch_read *x = f->heap[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!before(x, f->heap[p]))
			break;
		heap_set(f, i, f->heap[p]);
		i = p;
	}
	heap_set(f, i, x);
}

static void sift_down(struct bfs_fetch *f, size_t i)
{
	struct bfs_fetch_read *x = f->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= f->nheap)
			break;
		if (c + 1 < f->nheap && before(f->heap[c + 1], f->heap[c]))
			c++;
		if (!before(f->heap[c], x))
			break;
		heap_set(f, i, f->heap[c]);
		i = c;
	}
	heap_set(f, i, x);
}

static int queue_push(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	if (f->nheap == f->capheap) {
		size_t cap = f->capheap ? f->capheap * 2 : 256;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct bfs_fetch_read **h = realloc(f->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		f->heap = h;
		f->capheap = cap;
	}
	x->seq = f->seq++;
	heap_set(f, f->nheap++, x);
	sift_up(f, f->nheap - 1);
	return 0;
}

static void queue_remove(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	size_t i = x->heap;
	struct bfs_fetch_read *last;

	if (i == NOT_QUEUED)
		return;
	x->heap = NOT_QUEUED;
	last = f->heap[--f->nheap];
	if (i == f->nheap)
		return;
	heap_set(f, i, last);
	sift_up(f, i);
	sift_down(f, last->heap);
}

/* x (PENDING) is now wanted at prio: move it up if that is sooner (a kid:
 * the pass read that brings it). */
static void hurry(struct bfs_fetch *f, struct bfs_fetch_read *x, uint64_t prio)
{
	if (x->via)
		x = x->via;
	if (x->state != X_PENDING || prio >= x->prio)
		return;
	x->prio = prio;
	if (x->heap != NOT_QUEUED)
		sift_up(f, x->heap);
}

/* ------------------------------------------------------- object lists */

/* The first extent of o that ends after off. */
static size_t lower(const struct objx *o, uint64_t off)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		/* o->v holds listed extents only: settle() unlists one before
		 * it frees it (the analyzer takes a path where it does not) */
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
		if (o->v[mid]->off + o->v[mid]->len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int list_insert(struct objx *o, size_t i, struct bfs_fetch_read *x)
{
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct bfs_fetch_read **v = realloc(o->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	memmove(o->v + i + 1, o->v + i, (o->n - i) * sizeof(*o->v));
	o->v[i] = x;
	o->n++;
	x->listed = true;
	return 0;
}

static void list_remove(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	struct objx *o = &f->objs[x->obj];
	size_t i;

	if (!x->listed)
		return;
	i = lower(o, x->off);
	while (i < o->n && o->v[i] != x)
		i++;
	if (i < o->n) {
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		memmove(o->v + i, o->v + i + 1, (o->n - i - 1) * sizeof(*o->v));
		o->n--;
	}
	x->listed = false;
}

/* ------------------------------------------------------------ extents */

static void extent_free(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	/* a pass read's buffer is counted while it is in flight only */
	f->st.buffered -= x->pass ? OVERHEAD : x->len + OVERHEAD;
	if (x->slab) {
		if (--x->slab->refs == 0)
			free(x->slab);
	} else {
		free(x->buf);
	}
	free(x->msg);
	free(x->kids);
	free(x);
}

/* The first pass read of o that ends after off. */
static size_t pass_lower(const struct objx *o, uint64_t off)
{
	size_t lo = 0, hi = o->pn;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->pv[mid]->off + o->pv[mid]->len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The pass read of obj on its way that covers [off, off + len), or NULL. */
static struct bfs_fetch_read *pass_find(struct bfs_fetch *f, uint32_t obj, uint64_t off,
					uint64_t len)
{
	const struct objx *o = &f->objs[obj];
	size_t i = pass_lower(o, off);

	if (i < o->pn && o->pv[i]->off <= off && o->pv[i]->off + o->pv[i]->len >= off + len)
		return o->pv[i];
	return NULL;
}

static int pass_list(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	struct objx *o = &f->objs[x->obj];
	size_t i = pass_lower(o, x->off);

	if (o->pn == o->pcap) {
		size_t cap = o->pcap ? o->pcap * 2 : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct bfs_fetch_read **v = realloc(o->pv, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		o->pv = v;
		o->pcap = cap;
	}
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	memmove(o->pv + i + 1, o->pv + i, (o->pn - i) * sizeof(*o->pv));
	o->pv[i] = x;
	o->pn++;
	x->listed = true; /* in its object's pass list */
	return 0;
}

static void pass_unlist(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	struct objx *o = &f->objs[x->obj];
	size_t i = pass_lower(o, x->off);

	if (!x->listed)
		return;
	while (i < o->pn && o->pv[i] != x)
		i++;
	if (i < o->pn) {
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		memmove(o->pv + i, o->pv + i + 1, (o->pn - i - 1) * sizeof(*o->pv));
		o->pn--;
	}
	x->listed = false;
}

/* Pass read p lost a kid: with none left before it is issued, it goes. */
static void pass_unkid(struct bfs_fetch *f, struct bfs_fetch_read *p)
{
	p->livekids--;
	if (p->livekids == 0 && p->state == X_PENDING && p->heap != NOT_QUEUED) {
		queue_remove(f, p);
		f->st.dropped++;
		f->st.pending--;
		pass_unlist(f, p);
		extent_free(f, p);
	}
}

/* Kid x no longer waits for its pass read. */
static void kid_detach(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	struct bfs_fetch_read *p = x->via;

	if (!p)
		return;
	p->kids[x->via_i] = NULL;
	x->via = NULL;
	pass_unkid(f, p);
}

/* x lost its last ticket, or a user of one that has none left is done:
 * out of the list now, and out of the queue unless a copy waits for it
 * (bfs_fetch_copyv: dropped, it would never be read and the copy would
 * wait for ever); freed once nothing uses it. */
static void settle(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	if (x->refs)
		return;
	list_remove(f, x);
	if (x->via && x->users == 0)
		kid_detach(f, x);
	if (x->state == X_PENDING && x->heap != NOT_QUEUED && x->users == 0) {
		queue_remove(f, x);
		f->st.dropped++;
		f->st.pending--;
	}
	if (x->state != X_INFLIGHT && x->users == 0)
		extent_free(f, x);
}

/* A read of [off, off + len) of obj at prio, PENDING and not queued, its
 * bytes not yet counted; NULL without memory. Extents and passes. */
static struct bfs_fetch_read *read_alloc(struct bfs_fetch *f, uint32_t obj, uint64_t off,
					 uint64_t len, uint64_t prio)
{
	struct bfs_fetch_read *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	x->f = f;
	x->obj = obj;
	x->off = off;
	x->len = len;
	x->prio = prio;
	x->heap = NOT_QUEUED;
	x->state = X_PENDING;
	return x;
}

static struct bfs_fetch_read *extent_new(struct bfs_fetch *f, uint32_t obj, uint64_t off,
					 uint64_t len, uint64_t prio)
{
	struct bfs_fetch_read *x = read_alloc(f, obj, off, len, prio);

	if (!x)
		return NULL;
	f->st.buffered += len + OVERHEAD;
	if (f->st.buffered > f->st.peak_buffered)
		f->st.peak_buffered = f->st.buffered;
	return x;
}

/* ------------------------------------------------------------- tickets */

static int ticket_add(struct bfs_fetch *f, struct bfs_fetch_ticket *t, struct bfs_fetch_read *x)
{
	if (x->stamp == t->id)
		return 0; /* already held by t */
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct bfs_fetch_read **v = realloc(t->x, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->x = v;
		t->cap = cap;
	}
	t->x[t->n++] = x;
	x->stamp = t->id;
	x->refs++;
	hurry(f, x, t->prio);
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct bfs_fetch_range *x = a, *y = b;

	if (x->obj != y->obj)
		return x->obj < y->obj ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* r[0..n) in range_cmp's order: a planner's ranges come sorted already
 * (its windows of tens of thousands of records), checked in one look */
static void sort_ranges(struct bfs_fetch_range *r, size_t n)
{
	for (size_t k = 1; k < n; k++)
		if (range_cmp(&r[k - 1], &r[k]) > 0) {
			qsort(r, n, sizeof(*r), range_cmp);
			return;
		}
}

/* Walk span [a, b) of object obj: what t would hold. With t NULL, only
 * count the bytes new reads would add (*add); else take them. With join, a
 * queued read ending at a grows to take the first bytes. */
static int walk_span(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint32_t obj, uint64_t a,
		     uint64_t b, uint64_t *add, uint64_t *made, bool join)
{
	struct objx *o = &f->objs[obj];
	uint64_t max = f->o.max_read;
	size_t i = lower(o, a);
	uint64_t cur = a;
	int rc;

	while (cur < b) {
		struct bfs_fetch_read *x = i < o->n ? o->v[i] : NULL, *p;
		uint64_t end;

		if (x && x->off <= cur) {
			if (x->state == X_FAILED) {
				/* a failed read is tried again for a new ticket;
				 * its holders keep their error */
				if (t) {
					list_remove(f, x);
					continue;
				}
				i++;
				end = x->off + x->len < b ? x->off + x->len : b;
				*add += end - cur + OVERHEAD;
				cur = end;
				continue;
			}
			if (t && (rc = ticket_add(f, t, x)) != 0)
				return rc;
			cur = x->off + x->len;
			i++;
			continue;
		}
		end = x && x->off < b ? x->off : b;
		p = i > 0 ? o->v[i - 1] : NULL;
		/* (a queued read of its own: a kid of a pass read is filled
		 * from that read's span, and grows with none) */
		if (join && p && p->state == X_PENDING && !p->via && p->heap != NOT_QUEUED &&
		    p->off + p->len == cur && end - p->off <= max) {
			/* the queued read just before grows to take these bytes */
			*add += end - (p->off + p->len);
			if (t) {
				f->st.buffered += end - (p->off + p->len);
				if (f->st.buffered > f->st.peak_buffered)
					f->st.peak_buffered = f->st.buffered;
				p->len = end - p->off;
				if ((rc = ticket_add(f, t, p)) != 0)
					return rc;
			}
			cur = end;
			continue;
		}
		while (cur < end) {
			/* no short read at the end: the last piece takes up to
			 * half a read more */
			uint64_t piece = end - cur <= max + max / 2 ? end - cur : max;

			*add += piece + OVERHEAD;
			if (t) {
				x = extent_new(f, obj, cur, piece, t->prio);
				if (!x)
					return -ENOMEM;
				if (list_insert(o, i, x) != 0 || queue_push(f, x) != 0) {
					list_remove(f, x);
					extent_free(f, x);
					return -ENOMEM;
				}
				f->st.pending++;
				(*made)++;
				i++;
				if ((rc = ticket_add(f, t, x)) != 0)
					return rc;
			}
			cur += piece;
		}
	}
	return 0;
}

/* Span [a, b) of obj in whole blocks of what a local copy keeps: runs of
 * the blocks it holds now and runs of those it does not, each read on its
 * own and joining no queued read, so that a block the copy holds is read
 * there rather than fetched again with a neighbour it does not hold (under
 * shuffle=block, the block two ranges of records share is fetched once by
 * whichever is read first). Of a run the copy holds, only what was asked
 * ([a0, b0)) is read: a record's pages there, not its whole block again for
 * each chunk a compressed shard's reader asks for. */
static int walk_kept(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint32_t obj, uint64_t a,
		     uint64_t b, uint64_t a0, uint64_t b0, uint64_t *add, uint64_t *made)
{
	uint64_t al = f->o.align;

	if (!f->src.has)
		return walk_span(f, t, obj, a, b, add, made, true);
	while (a < b) {
		uint64_t e = a + al < b ? a + al : b;
		bool held = f->src.has(f->src.ctx, obj, a, e - a);
		int rc;

		while (e < b) {
			uint64_t n = e + al < b ? e + al : b;

			if (f->src.has(f->src.ctx, obj, e, n - e) != held)
				break;
			e = n;
		}
		if (held) {
			uint64_t x = a > a0 ? a : a0, y = e < b0 ? e : b0;

			rc = x < y ? walk_span(f, t, obj, x, y, add, made, false) : 0;
		} else {
			rc = walk_span(f, t, obj, a, e, add, made, false);
		}
		if (rc)
			return rc;
		a = e;
	}
	return 0;
}

/* Whether byte a of obj is in what a local copy keeps (read in whole
 * blocks), and *end the end of the run of bytes kept (or not) alike. */
static bool kept_run(struct bfs_fetch *f, uint32_t obj, uint64_t a, uint64_t *end)
{
	uint64_t keep;

	*end = UINT64_MAX;
	if (!f->o.align)
		return false;
	if (f->src.kept_at)
		return f->src.kept_at(f->src.ctx, obj, a, end);
	keep = f->src.aligned ? f->src.aligned(f->src.ctx, obj) : UINT64_MAX;
	if (a >= keep)
		return false;
	*end = keep;
	return true;
}

/* Span [a, b) of obj: with widen, the runs a local copy keeps widened to
 * whole blocks (walk_kept: only what was asked of those it holds), the
 * rest as asked. */
static int walk_runs(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint32_t obj, uint64_t a,
		     uint64_t b, bool widen, uint64_t *add, uint64_t *made)
{
	while (a < b) {
		uint64_t end, size, w, a0 = a;
		int rc;

		if (!widen || !kept_run(f, obj, a, &end)) {
			uint64_t e = widen && end < b ? end : b;

			rc = walk_span(f, t, obj, a, e, add, made, true);
			if (rc)
				return rc;
			a = e;
			continue;
		}
		size = f->src.size(f->src.ctx, obj);
		w = b % f->o.align && b / f->o.align < UINT64_MAX / f->o.align
			    ? (b / f->o.align + 1) * f->o.align
			    : b;
		a -= a % f->o.align;
		if (w > size)
			w = size > a ? size : w;
		/* the part kept widened, the rest as asked */
		rc = walk_kept(f, t, obj, a, b > end ? end : w, a0, b, add, made);
		if (rc || b <= end)
			return rc;
		a = end;
	}
	return 0;
}

/* Spans of sorted ranges r[0..n): near ones of one object joined, as long
 * as a span stays within max_read and the bytes between its ranges stay
 * within half of the bytes they carry (so that a source never serves more
 * than 1.5 times what was asked for). Calls walk_span for each. */
static int walk(struct bfs_fetch *f, struct bfs_fetch_ticket *t, const struct bfs_fetch_range *r,
		size_t n, uint64_t max_gap, bool widen, uint64_t *add, uint64_t *made)
{
	for (size_t k = 0; k < n;) {
		uint32_t obj = r[k].obj;
		uint64_t a = r[k].off, b = r[k].off + r[k].len, useful = r[k].len, waste = 0;
		int rc;

		for (k++; k < n && r[k].obj == obj; k++) {
			uint64_t e = r[k].off + r[k].len > b ? r[k].off + r[k].len : b;
			uint64_t gap = r[k].off > b ? r[k].off - b : 0;

			if (gap > max_gap || e - a > f->o.max_read ||
			    2 * (waste + gap) > useful + r[k].len)
				break;
			waste += gap;
			useful += r[k].len;
			b = e;
		}
		if (obj >= f->nobj)
			return -EINVAL;
		rc = walk_runs(f, t, obj, a, b, widen, add, made);
		if (rc)
			return rc;
	}
	return 0;
}

/* The extents marked unlist leave their objects' lists, each list
 * walked once (a window's release takes thousands of extents out of
 * lists of thousands: one memmove each was quadratic). */
static void unlist_marked(struct bfs_fetch *f, struct bfs_fetch_ticket *t)
{
	for (size_t k = 0; k < t->n; k++) {
		struct objx *o = &f->objs[t->x[k]->obj];
		size_t m = 0;

		if (!t->x[k]->unlist)
			continue;
		for (size_t i = 0; i < o->n; i++) {
			struct bfs_fetch_read *y = o->v[i];

			if (y->unlist) {
				y->unlist = false;
				y->listed = false;
			} else {
				o->v[m++] = y;
			}
		}
		o->n = m;
	}
}

static void release_locked(struct bfs_fetch *f, struct bfs_fetch_ticket *t)
{
	size_t going = 0;

	for (size_t k = 0; k < t->n; k++) {
		struct bfs_fetch_read *x = t->x[k];

		x->refs--;
		if (!x->refs && x->listed && !x->unlist) {
			x->unlist = true;
			going++;
		}
	}
	if (going > 1) /* (settle() takes a lone one out itself) */
		unlist_marked(f, t);
	for (size_t k = 0; k < t->n; k++) {
		t->x[k]->unlist = false;
		settle(f, t->x[k]);
	}
	free(t->x);
	free(t);
}

int bfs_fetch_want(struct bfs_fetch *f, struct bfs_fetch_range *r, size_t n, uint64_t prio,
		   unsigned flags, struct bfs_fetch_ticket **out)
{
	uint64_t gap = flags & BFS_WANT_NO_GAPS ? 0 : f->o.merge_gap;
	struct bfs_fetch_ticket *t = calloc(1, sizeof(*t));
	uint64_t add = 0, made = 0, pending0;
	size_t m = 0;
	int rc;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->prio = prio;
	/* empty ranges want nothing */
	for (size_t k = 0; k < n; k++)
		if (r[k].len)
			r[m++] = r[k];
	sort_ranges(r, m);
	pthread_mutex_lock(&f->lock);
	if (!(flags & BFS_WANT_DEMAND)) {
		rc = walk(f, NULL, r, m, gap, !(flags & BFS_WANT_AS_ASKED), &add, &made);
		if (!rc && f->st.buffered + add > f->o.budget) {
			f->st.refused++;
			rc = -ENOSPC;
		}
		if (rc) {
			pthread_mutex_unlock(&f->lock);
			free(t);
			return rc;
		}
	}
	t->id = ++f->ticket_id;
	pending0 = f->st.pending;
	add = 0;
	rc = walk(f, t, r, m, gap, !(flags & BFS_WANT_AS_ASKED), &add, &made);
	if (rc) {
		release_locked(f, t);
		pthread_mutex_unlock(&f->lock);
		return rc;
	}
	f->st.ranges += m;
	f->st.merged += m > made ? m - made : 0;
	/* one reader thread woken per new read, not all of them: 256 threads
	 * woken for each record of the global shuffle cost more CPU than the
	 * reads (a busy one takes the next read before it sleeps again) */
	for (uint64_t k = pending0; k < f->st.pending && k - pending0 < f->o.depth; k++)
		pthread_cond_signal(&f->work);
	pthread_mutex_unlock(&f->lock);
	if (made && f->be->kick)
		f->be->kick(f);
	*out = t;
	return 0;
}

/* ------------------------------------------------------------ passes */

/* A pass read of span [off, off + len) of obj at prio, queued; its kids
 * come with kid_attach. NULL without memory. */
static struct bfs_fetch_read *pass_new(struct bfs_fetch *f, uint32_t obj, uint64_t off,
				       uint64_t len, uint64_t prio)
{
	struct bfs_fetch_read *x = read_alloc(f, obj, off, len, prio);

	if (!x)
		return NULL;
	x->pass = true;
	f->st.buffered += OVERHEAD;
	if (pass_list(f, x) != 0) {
		extent_free(f, x);
		return NULL;
	}
	if (queue_push(f, x) != 0) {
		pass_unlist(f, x);
		extent_free(f, x);
		return NULL;
	}
	f->st.pending++;
	return x;
}

/* k (new, PENDING, not queued) is filled by pass read p. */
static int kid_attach(struct bfs_fetch_read *p, struct bfs_fetch_read *k)
{
	if (p->nkids == p->capkids) {
		size_t cap = p->capkids ? p->capkids * 2 : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct bfs_fetch_read **v = realloc(p->kids, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->kids = v;
		p->capkids = cap;
	}
	k->via = p;
	k->via_i = p->nkids;
	p->kids[p->nkids++] = k;
	p->livekids++;
	return 0;
}

/* The new extents nv[0..nn) (sorted, apart from each other and from every
 * listed one) into obj's list: one merge, not an insert each (a pass
 * brings tens of thousands of records into lists as long). */
static int list_merge(struct objx *o, struct bfs_fetch_read **nv, size_t nn)
{
	struct bfs_fetch_read **v;
	size_t i = 0, j = 0, k = 0;

	if (!nn)
		return 0;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	v = malloc((o->n + nn) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	while (i < o->n || j < nn) {
		if (j == nn || (i < o->n && o->v[i]->off < nv[j]->off)) {
			v[k++] = o->v[i++];
		} else {
			nv[j]->listed = true;
			v[k++] = nv[j++];
		}
	}
	free(o->v);
	o->v = v;
	o->n = o->cap = k;
	return 0;
}

/* The extent for gap [a, b) of obj, wanted by t: a kid of pass read *p
 * (made now when NULL) when the gap lies in span sp, else a read of its
 * own (queued). Appended to nv; *made counts the reads made. On failure
 * the extent is t's all the same (releasing t frees it). */
static int gap_extent(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint32_t obj, uint64_t a,
		      uint64_t b, const struct bfs_fetch_range *sp, struct bfs_fetch_read **p,
		      struct bfs_fetch_read **nv, size_t *nn, uint64_t *made)
{
	struct bfs_fetch_read *x = extent_new(f, obj, a, b - a, t->prio);

	if (!x)
		return -ENOMEM;
	if (ticket_add(f, t, x) != 0) {
		extent_free(f, x);
		return -ENOMEM;
	}
	nv[(*nn)++] = x;
	if (sp && !*p && !(*p = pass_find(f, obj, sp->off, sp->len))) {
		*p = pass_new(f, obj, sp->off, sp->len, t->prio);
		if (!*p)
			return -ENOMEM;
		(*made)++;
	}
	if (sp)
		hurry(f, *p, t->prio); /* joined by a ticket that needs it sooner */
	if (sp)
		return kid_attach(*p, x);
	if (queue_push(f, x) != 0)
		return -ENOMEM;
	f->st.pending++;
	(*made)++;
	return 0;
}

/* Whether bytes [pos, end) of o all lie in listed extents. */
static bool all_listed(const struct objx *o, uint64_t pos, uint64_t end)
{
	for (size_t i = lower(o, pos); pos < end; i++) {
		const struct bfs_fetch_read *x = i < o->n ? o->v[i] : NULL;

		if (!x || x->off > pos || x->state == X_FAILED)
			return false;
		pos = x->off + x->len;
	}
	return true;
}

/* Room for one more in nv (of *cap). */
static int nv_room(struct bfs_fetch_read ***nv, size_t nn, size_t *cap)
{
	struct bfs_fetch_read **v;

	if (nn < *cap)
		return 0;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	v = realloc(*nv, 2 * *cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	*nv = v;
	*cap *= 2;
	return 0;
}

/* Ranges r[0..n) of obj (sorted) into t, spans sp[0..nsp) of obj (sorted,
 * apart): bytes held already are shared; the rest of a range in a span is
 * a kid of that span's pass read (one per span), outside every span a read
 * of its own (in pieces of at most a read and a half). New extents go into
 * the list in one merge. */
static int pass_object(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint32_t obj,
		       const struct bfs_fetch_range *r, size_t n, const struct bfs_fetch_range *sp,
		       size_t nsp, uint64_t *made)
{
	struct objx *o = &f->objs[obj];
	uint64_t max = f->o.max_read, done_to = 0;
	struct bfs_fetch_read **nv, *p = NULL;
	size_t nn = 0, cap = 2 * n + 16, si = 0, psi = SIZE_MAX;
	int rc = 0;

	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	nv = malloc(cap * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	for (size_t k = 0; k < n && !rc; k++) {
		uint64_t cur = r[k].off > done_to ? r[k].off : done_to, end = r[k].off + r[k].len;
		size_t i;

		/* ranges that touch (records side by side) are one extent */
		while (k + 1 < n && r[k + 1].off <= end) {
			end = r[k + 1].off + r[k + 1].len > end ? r[k + 1].off + r[k + 1].len : end;
			k++;
		}
		i = lower(o, cur);

		while (cur < end && !rc) {
			struct bfs_fetch_read *x = i < o->n ? o->v[i] : NULL;
			const struct bfs_fetch_range *in = NULL;
			uint64_t e;

			if (x && x->off <= cur) {
				if (x->state == X_FAILED) { /* tried again for a new ticket */
					list_remove(f, x);
					continue;
				}
				rc = ticket_add(f, t, x);
				cur = x->off + x->len;
				i++;
				continue;
			}
			e = x && x->off < end ? x->off : end;
			while (si < nsp && sp[si].off + sp[si].len <= cur)
				si++;
			if (si < nsp && sp[si].off <= cur) {
				in = &sp[si];
				e = e < in->off + in->len ? e : in->off + in->len;
			} else {
				if (si < nsp && sp[si].off < e)
					e = sp[si].off;
				if (e - cur > max + max / 2)
					e = cur + max;
			}
			if (in && psi != si) {
				p = NULL; /* the span's pass read, made with its first kid */
				psi = si;
			}
			rc = nv_room(&nv, nn, &cap);
			if (!rc)
				rc = gap_extent(f, t, obj, cur, e, in, &p, nv, &nn, made);
			cur = done_to = e;
		}
	}
	if (!rc)
		rc = list_merge(o, nv, nn);
	free(nv);
	return rc;
}

/* Bytes t would add for ranges r[0..n) (sorted): those not in a listed
 * extent, each with its overhead (for the budget). */
static uint64_t pass_adds(struct bfs_fetch *f, const struct bfs_fetch_range *r, size_t n)
{
	uint64_t add = 0;

	for (size_t k = 0; k < n; k++) {
		const struct objx *o = r[k].obj < f->nobj ? &f->objs[r[k].obj] : NULL;

		if (!o || !all_listed(o, r[k].off, r[k].off + r[k].len))
			add += r[k].len + OVERHEAD;
	}
	return add;
}

int bfs_fetch_want_pass(struct bfs_fetch *f, struct bfs_fetch_range *r, size_t n,
			const struct bfs_fetch_range *sp, size_t nsp, uint64_t prio, unsigned flags,
			struct bfs_fetch_ticket **out)
{
	struct bfs_fetch_ticket *t = calloc(1, sizeof(*t));
	uint64_t made = 0, pending0;
	size_t m = 0, s0 = 0;
	int rc = 0;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->prio = prio;
	for (size_t k = 0; k < n; k++)
		if (r[k].len)
			r[m++] = r[k];
	sort_ranges(r, m);
	pthread_mutex_lock(&f->lock);
	if (!(flags & BFS_WANT_DEMAND) && f->st.buffered + pass_adds(f, r, m) > f->o.budget) {
		f->st.refused++;
		pthread_mutex_unlock(&f->lock);
		free(t);
		return -ENOSPC;
	}
	t->id = ++f->ticket_id;
	pending0 = f->st.pending;
	for (size_t a = 0, b; a < m && !rc; a = b) {
		size_t s1;

		for (b = a; b < m && r[b].obj == r[a].obj; b++)
			;
		while (s0 < nsp && sp[s0].obj < r[a].obj)
			s0++;
		for (s1 = s0; s1 < nsp && sp[s1].obj == r[a].obj; s1++)
			;
		rc = r[a].obj < f->nobj
			     ? pass_object(f, t, r[a].obj, r + a, b - a, sp + s0, s1 - s0, &made)
			     : -EINVAL;
		s0 = s1;
	}
	if (rc) {
		release_locked(f, t);
		pthread_mutex_unlock(&f->lock);
		return rc;
	}
	f->st.ranges += m;
	f->st.merged += m > made ? m - made : 0;
	for (uint64_t k = pending0; k < f->st.pending && k - pending0 < f->o.depth; k++)
		pthread_cond_signal(&f->work);
	pthread_mutex_unlock(&f->lock);
	if (made && f->be->kick)
		f->be->kick(f);
	*out = t;
	return 0;
}

void bfs_fetch_hurry(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint64_t prio)
{
	if (!t)
		return;
	pthread_mutex_lock(&f->lock);
	t->prio = prio < t->prio ? prio : t->prio;
	for (size_t k = 0; k < t->n; k++)
		hurry(f, t->x[k], prio);
	pthread_mutex_unlock(&f->lock);
}

void bfs_fetch_release(struct bfs_fetch *f, struct bfs_fetch_ticket *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&f->lock);
	release_locked(f, t);
	pthread_mutex_unlock(&f->lock);
}

bool bfs_fetch_failed(struct bfs_fetch *f, const struct bfs_fetch_ticket *t)
{
	bool failed = false;

	if (!t)
		return false;
	pthread_mutex_lock(&f->lock);
	for (size_t k = 0; f->st.failed && k < t->n && !failed; k++)
		failed = t->x[k]->state == X_FAILED;
	pthread_mutex_unlock(&f->lock);
	return failed;
}

bool bfs_fetch_has_room(struct bfs_fetch *f, uint64_t bytes)
{
	bool ok;

	pthread_mutex_lock(&f->lock);
	ok = f->st.buffered + bytes <= f->o.budget;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

/* ---------------------------------------------------------------- copies */

/* Copy n bytes from src into the iovecs, from position *pos of them. */
static void scatter(const struct iovec *iov, size_t *vi, size_t *vo, const uint8_t *src, size_t n)
{
	while (n) {
		size_t room = iov[*vi].iov_len - *vo;
		size_t k = n < room ? n : room;

		memcpy((uint8_t *)iov[*vi].iov_base + *vo, src, k);
		src += k;
		n -= k;
		*vo += k;
		if (*vo == iov[*vi].iov_len) {
			(*vi)++;
			*vo = 0;
		}
	}
}

static void unuse(struct bfs_fetch *f, struct bfs_fetch_read *x)
{
	x->users--;
	settle(f, x);
}

/* Whether bytes [pos, end) of o are all in reads that are ready. */
static bool all_ready(const struct objx *o, uint64_t pos, uint64_t end)
{
	for (size_t i = lower(o, pos); pos < end; i++) {
		const struct bfs_fetch_read *x = i < o->n ? o->v[i] : NULL;

		if (!x || x->off > pos || x->state != X_READY)
			return false;
		pos = x->off + x->len;
	}
	return true;
}

size_t bfs_fetch_copy_ready(struct bfs_fetch *f, uint32_t obj, size_t n, const uint64_t *offs,
			    const struct iovec *iovs, size_t per, bool *done)
{
	size_t got = 0;

	for (size_t k = 0; k < n; k++)
		done[k] = false;
	if (obj >= f->nobj || n == 0)
		return 0;
	pthread_mutex_lock(&f->lock);
	for (size_t k = 0; k < n; k++) {
		const struct iovec *iov = iovs + k * per;
		struct objx *o = &f->objs[obj];
		uint64_t total = 0, pos = offs[k], end;
		size_t vi = 0, vo = 0;

		for (size_t j = 0; j < per; j++)
			total += iov[j].iov_len;
		end = pos + total;
		if (total >= COPY_UNLOCKED || !all_ready(o, pos, end))
			continue; /* bfs_fetch_copyv: it waits, fails, copies unlocked */
		while (vi < per && iov[vi].iov_len == 0)
			vi++;
		while (pos < end) {
			struct bfs_fetch_read *x = o->v[lower(o, pos)];
			uint64_t take = x->off + x->len - pos;

			if (take > end - pos)
				take = end - pos;
			x->users++;
			scatter(iov, &vi, &vo, x->buf + (pos - x->off), (size_t)take);
			pos += take;
			unuse(f, x);
		}
		done[k] = true;
		got++;
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

int bfs_fetch_copyv(struct bfs_fetch *f, uint32_t obj, uint64_t off, const struct iovec *iov,
		    size_t niov)
{
	uint64_t total = 0, pos = off;
	size_t vi = 0, vo = 0;
	int rc = 0;

	for (size_t k = 0; k < niov; k++)
		total += iov[k].iov_len;
	while (vi < niov && iov[vi].iov_len == 0)
		vi++;
	if (obj >= f->nobj)
		return -ENODATA;
	pthread_mutex_lock(&f->lock);
	while (pos < off + total) {
		struct objx *o = &f->objs[obj];
		size_t i = lower(o, pos);
		struct bfs_fetch_read *x = i < o->n ? o->v[i] : NULL;
		uint64_t take;

		if (!x || x->off > pos) {
			rc = -ENODATA;
			break;
		}
		x->users++;
		if (x->state == X_PENDING || x->state == X_INFLIGHT) {
			uint64_t t0 = bfs_now_ns();

			hurry(f, x, BFS_FETCH_NOW);
			f->st.waits++;
			while ((x->state == X_PENDING || x->state == X_INFLIGHT) && !f->stopping)
				pthread_cond_wait(&f->done, &f->lock);
			f->st.wait_ns += bfs_now_ns() - t0;
		}
		if (f->stopping) {
			unuse(f, x);
			rc = bfs_err_set(-ESHUTDOWN, "the source's reads were stopped");
			break;
		}
		if (x->state == X_FAILED) {
			rc = bfs_err_set(x->err ? x->err : -EIO, "%s",
					 x->msg ? x->msg : "read failed");
			unuse(f, x);
			break;
		}
		take = x->off + x->len - pos;
		if (take > off + total - pos)
			take = off + total - pos;
		if (take < COPY_UNLOCKED) {
			scatter(iov, &vi, &vo, x->buf + (pos - x->off), (size_t)take);
		} else {
			pthread_mutex_unlock(&f->lock);
			scatter(iov, &vi, &vo, x->buf + (pos - x->off), (size_t)take);
			pthread_mutex_lock(&f->lock);
		}
		pos += take;
		unuse(f, x);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* ------------------------------------------------------- for backends */

static void complete(struct bfs_fetch_read *x, int64_t got, const char *msg, bool local);

/* Whether the next read must wait for bytes in flight to end
 * (opts.max_inflight_bytes; one read always goes). */
bool bfs_fetch_bytes_full(const struct bfs_fetch *f)
{
	const struct bfs_fetch_read *h = f->heap[0];

	if (h->pass && f->o.max_pass_inflight && f->pass_inflight &&
	    f->pass_inflight + h->len > f->o.max_pass_inflight)
		return true;
	return f->o.max_inflight_bytes && f->inflight_bytes &&
	       f->inflight_bytes + h->len > f->o.max_inflight_bytes;
}

/* bfs_fetch_take, entered with f->lock held; returns with it released. */
struct bfs_fetch_read *bfs_fetch_take_locked(struct bfs_fetch *f, bool block)
{
	struct bfs_fetch_read *x;
	void (*low)(void *) = NULL;
	void *low_ctx = NULL;

	for (;;) {
		while (!f->stopping && (f->nheap == 0 || bfs_fetch_bytes_full(f))) {
			if (!block) {
				x = NULL;
				goto out;
			}
			pthread_cond_wait(&f->work, &f->lock);
		}
		if (f->stopping) {
			x = NULL;
			goto out;
		}
		x = f->heap[0];
		queue_remove(f, x);
		f->st.pending--;
		if (f->low_fn && f->st.pending == f->low_at && !low) {
			low = f->low_fn;
			low_ctx = f->low_ctx;
			f->in_low++;
		}
		x->state = X_INFLIGHT;
		x->t0 = bfs_now_ns();
		f->inflight_bytes += x->len;
		if (x->pass) { /* its buffer is counted while it is in flight */
			f->pass_inflight += x->len;
			f->st.buffered += x->len;
			if (f->st.buffered > f->st.peak_buffered)
				f->st.peak_buffered = f->st.buffered;
		}
		f->st.inflight++;
		if (f->st.inflight > f->st.peak_inflight)
			f->st.peak_inflight = f->st.inflight;
		pthread_mutex_unlock(&f->lock);
		if (!x->buf && !(x->buf = malloc(x->len ? x->len : 1))) {
			bfs_fetch_read_done(x, -ENOMEM, "out of memory for a read buffer");
		} else if (f->src.local &&
			   f->src.local(f->src.ctx, x->obj, x->off, x->buf, x->len)) {
			complete(x, (int64_t)x->len, NULL, true);
		} else {
			break; /* x goes to the source; the lock is not held */
		}
		pthread_mutex_lock(&f->lock);
	}
	if (low) {
		low(low_ctx);
		pthread_mutex_lock(&f->lock);
		f->in_low--;
		pthread_cond_broadcast(&f->done);
		pthread_mutex_unlock(&f->lock);
	}
	return x;
out:
	pthread_mutex_unlock(&f->lock);
	if (low) {
		low(low_ctx);
		pthread_mutex_lock(&f->lock);
		f->in_low--;
		pthread_cond_broadcast(&f->done);
		pthread_mutex_unlock(&f->lock);
	}
	return x;
}

struct bfs_fetch_read *bfs_fetch_take(struct bfs_fetch *f, bool block)
{
	pthread_mutex_lock(&f->lock);
	return bfs_fetch_take_locked(f, block);
}

void bfs_fetch_set_low(struct bfs_fetch *f, uint64_t at, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&f->lock);
	f->low_fn = fn;
	f->low_ctx = ctx;
	f->low_at = at;
	while (f->in_low)
		pthread_cond_wait(&f->done, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

bool bfs_fetch_stopping(struct bfs_fetch *f)
{
	bool s;

	pthread_mutex_lock(&f->lock);
	s = f->stopping;
	pthread_mutex_unlock(&f->lock);
	return s;
}

unsigned bfs_fetch_depth_of(struct bfs_fetch *f)
{
	return f->o.depth;
}

void *bfs_fetch_backend_data(struct bfs_fetch *f)
{
	return f->be_data;
}

void bfs_fetch_set_backend_data(struct bfs_fetch *f, void *data)
{
	f->be_data = data;
}

int bfs_fetch_read_pin(struct bfs_fetch *f, struct bfs_fetch_read *r, int *fd)
{
	return f->src.pin(f->src.ctx, r->obj, fd);
}

void bfs_fetch_read_unpin(struct bfs_fetch *f, struct bfs_fetch_read *r)
{
	f->src.unpin(f->src.ctx, r->obj);
}

uint64_t bfs_fetch_read_progress(const struct bfs_fetch_read *r)
{
	return r->got;
}

void bfs_fetch_read_target(const struct bfs_fetch_read *r, uint32_t *obj, uint64_t *off,
			   uint8_t **dst, uint64_t *len)
{
	*obj = r->obj;
	*off = r->off;
	*dst = r->buf;
	*len = r->len;
}

bool bfs_fetch_read_advance(struct bfs_fetch_read *r, uint64_t n)
{
	r->got += n;
	if (r->got < r->len)
		return true;
	bfs_fetch_read_done(r, (int64_t)r->got, NULL);
	return false;
}

void bfs_fetch_read_done(struct bfs_fetch_read *x, int64_t got, const char *msg)
{
	complete(x, got, msg, false);
}

/* What a read of the source costs (bfs_fetch_cost), from one that brought
 * len bytes in ns: a small one its latency, a large one the rate beyond. */
static void measure(struct bfs_fetch *f, uint64_t len, uint64_t ns)
{
	if (len <= COST_SMALL) {
		f->lat_ns = f->lat_ns ? (7 * f->lat_ns + ns) / 8 : ns;
	} else if (len >= COST_LARGE && ns > f->lat_ns) {
		double bw = (double)len * 1e9 / (double)(ns - f->lat_ns);

		f->bw = f->bw > 0 ? 0.875 * f->bw + 0.125 * bw : bw;
	}
}

/* The kids of pass read x (READY) get their bytes, copied out of its
 * buffer into one slab (or FAILED for want of memory). */
static void kids_fill(struct bfs_fetch_read *x)
{
	uint64_t bytes = 0, at = 0;
	struct slab *sl;

	for (size_t i = 0; i < x->nkids; i++)
		if (x->kids[i])
			bytes += x->kids[i]->len;
	sl = malloc(sizeof(*sl) + (bytes ? bytes : 1));
	if (sl)
		sl->refs = 0;
	for (size_t i = 0; i < x->nkids; i++) {
		struct bfs_fetch_read *k = x->kids[i];

		if (!k)
			continue;
		k->via = NULL;
		if (!sl) {
			k->state = X_FAILED;
			k->err = -ENOMEM;
			k->msg = strdup("out of memory for the records of a pass read");
			continue;
		}
		k->buf = sl->data + at;
		k->slab = sl;
		sl->refs++;
		memcpy(k->buf, x->buf + (k->off - x->off), k->len);
		at += k->len;
		k->state = X_READY;
	}
	if (sl && !sl->refs)
		free(sl);
}

/* The end of pass read x under f->lock: its kids get their bytes (only
 * theirs are kept), and it goes. One that failed is tried again once
 * (unless the source retries itself), then its kids are read one by one:
 * true when reads were queued. */
static bool pass_done(struct bfs_fetch *f, struct bfs_fetch_read *x, int64_t got, bool local)
{
	bool ok = got >= 0 && (uint64_t)got == x->len, queued = false;

	f->pass_inflight -= x->len;
	f->st.buffered -= x->len; /* counted while in flight (bfs_fetch_take_locked) */
	if (!ok && x->livekids && x->tries + 1 < TRIES && !f->o.source_retries && !f->stopping &&
	    queue_push(f, x) == 0) {
		x->tries++;
		x->got = 0;
		x->state = X_PENDING;
		x->prio = BFS_FETCH_NOW;
		f->st.retries++;
		f->st.pending++;
		pthread_cond_signal(&f->work);
		return true;
	}
	if (ok && !local) {
		f->st.pass_reads++;
		f->st.pass_bytes += x->len;
	} else if (!ok) {
		f->st.failed++;
	}
	if (ok)
		kids_fill(x);
	for (size_t i = 0; i < x->nkids && !ok; i++) {
		struct bfs_fetch_read *k = x->kids[i];

		if (!k)
			continue;
		k->via = NULL;
		if (!f->stopping && queue_push(f, k) == 0) {
			f->st.pending++; /* the records read on their own */
			queued = true;
		} else {
			k->state = X_FAILED;
			k->err = got < 0 ? (int)got : -EIO;
			k->msg = strdup(got < 0 ? strerror((int)-got) : "short pass read");
		}
	}
	x->livekids = 0;
	pthread_cond_broadcast(&f->done);
	if (queued)
		pthread_cond_broadcast(&f->work);
	pass_unlist(f, x);
	extent_free(f, x);
	return queued;
}

/* The end of read x under f->lock (complete): x READY, FAILED or queued
 * again (true). */
bool bfs_fetch_complete_locked(struct bfs_fetch_read *x, int64_t got, const char *msg, bool local)
{
	struct bfs_fetch *f = x->f;
	bool requeued = false;

	f->st.inflight--;
	f->inflight_bytes -= x->len;
	if ((f->o.max_inflight_bytes || f->o.max_pass_inflight) && f->nheap)
		pthread_cond_signal(&f->work); /* room for a read held back by its bytes */
	if (local) {
		f->st.local++;
		f->st.local_bytes += (uint64_t)got;
	} else {
		f->st.reads++;
		if (got > 0)
			f->st.bytes += (uint64_t)got;
		if (got >= 0 && (uint64_t)got == x->len)
			measure(f, x->len, bfs_now_ns() - x->t0);
	}
	if (x->pass)
		return pass_done(f, x, got, local);
	if (got >= 0 && (uint64_t)got == x->len) {
		x->state = X_READY;
	} else {
		int err = got < 0 ? (int)got : -EIO;
		char *m = NULL;

		x->tries++;
		if (msg)
			m = strdup(msg);
		else if (got < 0)
			(void)!asprintf(&m, "%s", strerror(-err));
		else
			(void)!asprintf(&m, "short read (%" PRId64 " of %" PRIu64 " bytes)", got,
					x->len);
		free(x->msg);
		x->msg = m;
		x->err = err;
		x->got = 0;
		if (x->tries < TRIES && !f->o.source_retries && !f->stopping && x->refs &&
		    err != -ESTALE) {
			f->st.retries++;
			x->state = X_PENDING;
			x->prio = BFS_FETCH_NOW;
			if (queue_push(f, x) == 0) {
				f->st.pending++;
				requeued = true;
			} else {
				x->state = X_FAILED;
			}
		} else {
			x->state = X_FAILED;
		}
		if (x->state == X_FAILED)
			f->st.failed++;
	}
	pthread_cond_broadcast(&f->done);
	if (requeued)
		pthread_cond_signal(&f->work);
	settle(f, x);
	return requeued;
}

/* The end of read x: from the source (local false), or served by the local
 * copy. */
static void complete(struct bfs_fetch_read *x, int64_t got, const char *msg, bool local)
{
	struct bfs_fetch *f = x->f;
	bool requeued;

	if (!local && got >= 0 && (uint64_t)got == x->len && f->src.fetched)
		f->src.fetched(f->src.ctx, x->obj, x->off, x->buf, x->len);
	pthread_mutex_lock(&f->lock);
	requeued = bfs_fetch_complete_locked(x, got, msg, local);
	pthread_mutex_unlock(&f->lock);
	if (requeued && f->be->kick)
		f->be->kick(f);
	else if (f->be->done)
		f->be->done(f);
}

/* ------------------------------------------------------------ lifetime */

/* f with backend be (started), the rest of it as bfs_fetch_new says. */
int bfs_fetch_open(struct bfs_fetch **out, uint32_t nobj, const struct bfs_fetch_source *src,
		   const struct bfs_fetch_opts *o, const struct bfs_fetch_backend_ops *be,
		   const char *reason)
{
	struct bfs_fetch *f = calloc(1, sizeof(*f));
	int rc;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->o = *o;
	if (!f->o.max_read)
		f->o.max_read = DEFAULT_MAX_READ;
	f->src = *src;
	f->nobj = nobj;
	f->objs = calloc(nobj ? nobj : 1, sizeof(*f->objs));
	if (!f->objs) {
		free(f);
		return -ENOMEM;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->done, NULL);
	pthread_cond_init(&f->work, NULL);
	f->be = be;
	snprintf(f->reason, sizeof(f->reason), "%s", reason ? reason : "");
	rc = f->be->start ? f->be->start(f) : 0;
	if (rc && o->backend == BFS_FETCH_AUTO && f->be != &bfs_fetch_threads_ops) {
		/* io_uring refused (an old kernel, a seccomp filter): threads */
		snprintf(f->reason, sizeof(f->reason),
			 "io_uring could not start (%s): reader threads", strerror(-rc));
		f->be = &bfs_fetch_threads_ops;
		rc = f->be->start(f);
	}
	if (rc) {
		bfs_fetch_free(f);
		return rc;
	}
	f->be_started = true;
	f->st.backend = f->be->name;
	f->st.backend_reason = f->reason;
	*out = f;
	return 0;
}

void bfs_fetch_stop(struct bfs_fetch *f)
{
	if (!f)
		return;
	bfs_workers_stop(&f->lock, &f->stopping, &f->done, &f->work);
}

void bfs_fetch_free(struct bfs_fetch *f)
{
	bool abandoned;

	if (!f)
		return;
	bfs_fetch_stop(f);
	if (f->be_started && f->be->kick)
		f->be->kick(f);
	if (f->be_started && f->be->stop)
		f->be->stop(f);
	pthread_mutex_lock(&f->lock);
	abandoned = f->st.inflight > 0 || f->be_data;
	pthread_mutex_unlock(&f->lock);
	if (abandoned)
		return; /* a read still in a source may write into its buffer and
			 * end through f: all of it stays (the process is ending) */
	for (size_t k = 0; k < f->nheap; k++) /* pass reads are in no list */
		if (f->heap[k]->pass)
			extent_free(f, f->heap[k]);
	for (uint32_t i = 0; i < f->nobj; i++) {
		struct objx *o = &f->objs[i];
		for (size_t k = 0; k < o->n; k++)
			extent_free(f, o->v[k]);
		free(o->v);
		free(o->pv);
	}
	free(f->objs);
	free(f->heap);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->done);
	pthread_cond_destroy(&f->work);
	free(f);
}

void bfs_fetch_stats(struct bfs_fetch *f, struct bfs_fetch_stats *out)
{
	pthread_mutex_lock(&f->lock);
	*out = f->st;
	pthread_mutex_unlock(&f->lock);
}

const char *bfs_fetch_backend_name(const struct bfs_fetch *f)
{
	return f->be->name;
}

uint64_t bfs_fetch_budget(const struct bfs_fetch *f)
{
	return f->o.budget;
}

void bfs_fetch_cost(struct bfs_fetch *f, uint64_t *lat_ns, double *bytes_per_s)
{
	pthread_mutex_lock(&f->lock);
	*lat_ns = f->lat_ns;
	*bytes_per_s = f->bw;
	pthread_mutex_unlock(&f->lock);
}

bool bfs_fetch_held(struct bfs_fetch *f, uint32_t obj, uint64_t off, uint64_t len)
{
	return obj < f->nobj && f->src.has && f->src.has(f->src.ctx, obj, off, len);
}

uint64_t bfs_fetch_kept(struct bfs_fetch *f, uint32_t obj)
{
	uint64_t end;

	if (obj >= f->nobj || !f->o.align)
		return 0;
	if (f->src.kept_at) /* the run kept from byte 0 */
		return f->src.kept_at(f->src.ctx, obj, 0, &end) ? end : 0;
	return f->src.aligned ? f->src.aligned(f->src.ctx, obj) : UINT64_MAX;
}

bool bfs_fetch_is_custom(const struct bfs_fetch *f)
{
	return f->be == &bfs_fetch_custom_ops;
}

unsigned bfs_fetch_depth(const struct bfs_fetch *f)
{
	return f->o.depth;
}
