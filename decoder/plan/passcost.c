/* SPDX-License-Identifier: Apache-2.0 */
/*
 * passcost.c — passes over whole blocks, or ranged reads (see passcost.h).
 *
 * A request costs its latency, then its bytes at the rate measured beyond
 * it; depth of them run at once. So n requests of B bytes in all take
 * (n * latency + B / rate) / min(depth, n) seconds. A pass reads each
 * block holding a wanted record (not held locally) once; ranged reads
 * join ranges closer than merge_gap into one read of at most max_read,
 * as the stage does.
 */
#include "passcost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Seconds that n requests of `bytes` in all take at c's cost. */
static double pass_seconds(const struct bfs_pass_cost *c, uint64_t n, uint64_t bytes)
{
	double par;

	if (n == 0)
		return 0;
	par = (double)(n < c->depth ? n : (c->depth ? c->depth : 1));
	return ((double)n * (double)c->lat_ns / 1e9 + (double)bytes / c->bw) / par;
}

/* Bytes of block k of an object of size sz. */
static uint64_t block_len(uint64_t k, uint64_t sz)
{
	uint64_t a = k * BFS_PASS_BLOCK;

	return a >= sz ? 0 : (sz - a < BFS_PASS_BLOCK ? sz - a : BFS_PASS_BLOCK);
}

struct tally {
	struct bfs_fetch_range *kept, *rest; /* whole blocks touched, by part */
	size_t nkept, nrest;
	uint64_t reads, read_bytes; /* the ranged reads of the rest */
	uint64_t run_obj, run_a, run_b; /* the ranged read being joined */
	uint64_t useful, waste; /* its bytes asked for, and those between them */
	bool in_run;
};

/* Block k of obj touched: appended to its part's list once (r is sorted,
 * so a block comes again only right after itself). */
static void touch(struct bfs_fetch_range *v, size_t *nv, uint32_t obj, uint64_t k, uint64_t sz)
{
	uint64_t len = block_len(k, sz);

	if (!len || (*nv && v[*nv - 1].obj == obj && v[*nv - 1].off == k * BFS_PASS_BLOCK))
		return;
	v[(*nv)++] = (struct bfs_fetch_range){ obj, k * BFS_PASS_BLOCK, len };
}

/* Range q (not held) into the ranged reads of the rest, joined as the
 * stage joins them (fetch.c's walk): while the gap is within merge_gap,
 * the read within max_read, and the bytes between ranges within half of
 * those asked for. */
static void run_add(struct tally *t, const struct bfs_fetch_range *q, const struct bfs_pass_cost *c)
{
	uint64_t e = q->off + q->len, gap = q->off > t->run_b ? q->off - t->run_b : 0;

	if (t->in_run && q->obj == t->run_obj && gap <= c->merge_gap &&
	    (e > t->run_b ? e : t->run_b) - t->run_a <= c->max_read &&
	    2 * (t->waste + gap) <= t->useful + q->len) {
		t->read_bytes += e > t->run_b ? e - (q->off > t->run_b ? q->off : t->run_b) : 0;
		t->run_b = e > t->run_b ? e : t->run_b;
		t->waste += gap;
		t->useful += q->len;
		return;
	}
	t->reads++;
	t->read_bytes += q->len;
	t->in_run = true;
	t->run_obj = q->obj;
	t->run_a = q->off;
	t->run_b = e;
	t->useful = q->len;
	t->waste = 0;
}

static int tally(const struct bfs_fetch_range *r, size_t n, const bool *held, const uint64_t *kept,
		 const uint64_t *size, uint32_t nobj, const struct bfs_pass_cost *c,
		 struct tally *t, uint64_t *nheld)
{
	size_t cap = 1;

	for (size_t k = 0; k < n; k++) /* the blocks each range touches */
		cap += (r[k].off + r[k].len - 1) / BFS_PASS_BLOCK - r[k].off / BFS_PASS_BLOCK + 1;

	t->kept = malloc(cap * sizeof(*t->kept));
	t->rest = malloc(cap * sizeof(*t->rest));
	if (!t->kept || !t->rest)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		uint64_t sz = r[k].obj < nobj ? size[r[k].obj] : 0, kp = 0;
		uint64_t b0 = r[k].off / BFS_PASS_BLOCK,
			 b1 = (r[k].off + r[k].len - 1) / BFS_PASS_BLOCK;

		if (held && held[k]) {
			(*nheld)++;
			continue;
		}
		if (r[k].obj < nobj && kept)
			kp = kept[r[k].obj];
		for (uint64_t b = b0; b <= b1; b++) {
			bool in_kept = c->keep_whole && b * BFS_PASS_BLOCK < kp;

			if (in_kept)
				touch(t->kept, &t->nkept, r[k].obj, b, sz);
			else
				touch(t->rest, &t->nrest, r[k].obj, b, sz);
		}
		if (!(c->keep_whole && r[k].off + r[k].len <= kp))
			run_add(t, &r[k], c);
	}
	return 0;
}

/* The spans: whole blocks, in order (the kept ones, and the rest's when
 * they are read in a pass), each its own read. */
static int make_spans(struct tally *t, bool pass, const struct bfs_pass_cost *c,
		      struct bfs_pass_plan *out)
{
	size_t n = t->nkept + (pass ? t->nrest : 0), i = 0, j = 0, m = 0;
	struct bfs_fetch_range *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	while (i < t->nkept || (pass && j < t->nrest)) {
		const struct bfs_fetch_range *b;

		if (!pass || j == t->nrest ||
		    (i < t->nkept &&
		     (t->kept[i].obj < t->rest[j].obj ||
		      (t->kept[i].obj == t->rest[j].obj && t->kept[i].off < t->rest[j].off))))
			b = &t->kept[i++];
		else
			b = &t->rest[j++];
		v[m++] = *b; /* a block a read: a later pass over it joins one on its way */
	}
	out->spans = v;
	out->nspans = m;
	return 0;
}

int bfs_pass_choose(const struct bfs_fetch_range *r, size_t n, const bool *held,
		    const uint64_t *kept, const uint64_t *size, uint32_t nobj,
		    const struct bfs_pass_cost *c, struct bfs_pass_plan *out, char *why,
		    size_t whylen)
{
	struct tally t = { 0 };
	int rc;

	*out = (struct bfs_pass_plan){ 0 };
	rc = tally(r, n, held, kept, size, nobj, c, &t, &out->nheld);
	if (!rc) {
		for (size_t k = 0; k < t.nrest; k++)
			out->block_bytes += t.rest[k].len;
		out->blocks = t.nrest;
		out->reads = t.reads;
		out->read_bytes = t.read_bytes;
		out->kept_blocks = t.nkept;
		out->t_blocks = pass_seconds(c, out->blocks, out->block_bytes);
		out->t_reads = pass_seconds(c, out->reads, out->read_bytes);
		out->pass =
			out->blocks && !c->no_pass && (c->all_pass || out->t_blocks < out->t_reads);
		rc = make_spans(&t, out->pass, c, out);
	}
	free(t.kept);
	free(t.rest);
	if (rc)
		return rc;
	snprintf(why, whylen,
		 "%s: %llu records%s, %llu blocks (%.1f MB) ~%.3f s against %llu ranged reads "
		 "(%.1f MB) ~%.3f s (%.1f ms a request, %.0f MB/s each, %u in flight)%s",
		 out->pass     ? "passes over whole blocks"
		 : out->blocks ? "ranged reads"
		 : out->nspans ? "the kept blocks whole"
			       : "held locally",
		 (unsigned long long)n, out->nheld ? " (some held locally)" : "",
		 (unsigned long long)out->blocks, (double)out->block_bytes / 1e6, out->t_blocks,
		 (unsigned long long)out->reads, (double)out->read_bytes / 1e6, out->t_reads,
		 (double)c->lat_ns / 1e6, c->bw / 1e6, c->depth,
		 out->kept_blocks ? "; the blocks the disk cache keeps read whole" : "");
	return 0;
}

void bfs_pass_plan_free(struct bfs_pass_plan *p)
{
	free(p->spans);
	p->spans = NULL;
	p->nspans = 0;
}
