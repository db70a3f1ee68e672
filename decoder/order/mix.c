/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mix.c — a mixture's order (see mix.h; the rule is docs/shuffle.md,
 * section 8): each segment's period laid out once by earliest deadline
 * first, positions located by table, draws mapped through each source's
 * pass permutation, epoch lengths found by binary search over the counts.
 */
#include "mix.h"

#include "common.h"
#include "feistel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A source's count is kept every CP positions of a period. */
#define CP 64

struct segment {
	uint64_t from; /* first stream position */
	uint64_t W; /* period: the sum of the reduced weights */
	uint64_t *w; /* [nsrc] reduced weights */
	bool approx; /* w is the nearest ratio that fits, not the weights' own (8.1) */
	uint64_t *base; /* [nsrc] draws of each source before this segment */
	uint8_t *table; /* [W] the source of each position of the period */
	uint32_t *cp; /* [(W / CP + 1) * nsrc]: counts before position i * CP */
};

struct bfs_mix {
	size_t nsrc, nseg;
	uint64_t *n; /* [nsrc] records of each source */
	uint64_t *first; /* [nsrc + 1] first global record of each source */
	uint64_t *key; /* [nsrc] the seed of each source's passes */
	struct segment *seg;
	uint64_t L;
	bool shuffle;
};

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* FNV-1a, 64 bits: a source's name into its passes' seed. */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Lay out one period by earliest deadline first (docs/shuffle.md, 8.2):
 * the next draw (number c + 1) of source s may go at position p once
 * c * W < (p + 1) * w_s (not earlier: the count would pass n w / W + 1)
 * and must go by position ceil((c + 1) W / w_s) - 1 (not later: it would
 * fall to n w / W - 1); of the sources that may, the earliest deadline
 * wins, then the lowest index. */
static int lay_out(struct segment *sg, size_t nsrc)
{
	uint64_t W = sg->W, *c = calloc(nsrc, sizeof(*c)), *rel = calloc(nsrc, sizeof(*rel)),
		 *dl = calloc(nsrc, sizeof(*dl));
	size_t ncp = (size_t)(W / CP + 1);
	int rc = 0;

	sg->table = malloc(W);
	sg->cp = calloc(ncp * nsrc, sizeof(*sg->cp));
	if (!c || !rel || !dl || !sg->table || !sg->cp) {
		rc = -ENOMEM;
		goto out;
	}
	/* each source's next draw: its release (the first position it may
	 * take: c W < (p + 1) w, that is floor(c W / w) <= p) and deadline */
	for (size_t s = 0; s < nsrc; s++) {
		rel[s] = 0;
		dl[s] = (W + sg->w[s] - 1) / sg->w[s] - 1;
	}
	for (uint64_t p = 0; p < W; p++) {
		uint64_t best_d = UINT64_MAX;
		size_t best = SIZE_MAX;

		if (p % CP == 0)
			for (size_t s = 0; s < nsrc; s++)
				sg->cp[(p / CP) * nsrc + s] = (uint32_t)c[s];
		for (size_t s = 0; s < nsrc; s++)
			if (rel[s] <= p && dl[s] < best_d) {
				best_d = dl[s];
				best = s;
			}
		/* the proof in docs/shuffle.md says some source is always
		 * released and none misses its deadline; held here too */
		if (best == SIZE_MAX || best_d < p) {
			rc = bfs_err_set(-EINVAL, "mixture: no source fits position %llu",
					 (unsigned long long)p);
			goto out;
		}
		sg->table[p] = (uint8_t)best;
		c[best]++;
		if (c[best] >= sg->w[best]) {
			rel[best] = UINT64_MAX; /* done for this period */
		} else {
			rel[best] = c[best] * W / sg->w[best];
			dl[best] = ((c[best] + 1) * W + sg->w[best] - 1) / sg->w[best] - 1;
		}
	}
	if (W % CP == 0)
		for (size_t s = 0; s < nsrc; s++)
			sg->cp[(W / CP) * nsrc + s] = (uint32_t)c[s];
out:
	free(c);
	free(rel);
	free(dl);
	return rc;
}

/* Draws of source s in positions [0, p) of a period (p <= W). */
static uint64_t period_count(const struct segment *sg, size_t nsrc, uint64_t p, size_t s)
{
	uint64_t c = sg->cp[(p / CP) * nsrc + s];

	for (uint64_t i = p - p % CP; i < p; i++)
		c += sg->table[i] == s;
	return c;
}

/* Draws of source s in the first m positions of segment sg. */
static uint64_t seg_count(const struct segment *sg, size_t nsrc, uint64_t m, size_t s)
{
	return sg->base[s] + (m / sg->W) * sg->w[s] + period_count(sg, nsrc, m % sg->W, s);
}

static const struct segment *seg_of(const struct bfs_mix *m, uint64_t n)
{
	size_t lo = 0, hi = m->nseg; /* the last segment with from <= n */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->seg[mid].from <= n)
			lo = mid;
		else
			hi = mid;
	}
	return &m->seg[lo];
}

uint64_t bfs_mix_count(const struct bfs_mix *m, uint64_t n, size_t s)
{
	const struct segment *sg = seg_of(m, n);

	return seg_count(sg, m->nsrc, n - sg->from, s);
}

void bfs_mix_at(const struct bfs_mix *m, uint64_t n, size_t *src, uint64_t *draw)
{
	const struct segment *sg = seg_of(m, n);
	uint64_t off = n - sg->from, p = off % sg->W;
	size_t s = sg->table[p];

	*src = s;
	*draw = sg->base[s] + (off / sg->W) * sg->w[s] + period_count(sg, m->nsrc, p, s);
}

uint64_t bfs_mix_record(const struct bfs_mix *m, uint64_t n)
{
	struct bfs_feistel f;
	uint64_t draw;
	size_t s;

	bfs_mix_at(m, n, &s, &draw);
	bfs_feistel_init(&f, m->n[s], m->key[s], draw / m->n[s], m->shuffle);
	return m->first[s] + bfs_feistel_apply(&f, draw % m->n[s]);
}

/* Positions at a time in bfs_mix_records. */
#define BLOCK 256

/* (source, draw) of each position of a block: a run of consecutive
 * positions in one segment goes on from the counts of the position before
 * (one table look-up each), anything else starts from the formula. */
static void block_draws(const struct bfs_mix *m, uint64_t epoch, const uint64_t *pos, size_t n,
			uint8_t *src, uint64_t *draw)
{
	uint64_t cnt[BFS_MIX_MAX_SOURCES], next = 0, end = 0, p = 0;
	const struct segment *sg = NULL;

	for (size_t i = 0; i < n; i++) {
		uint64_t at = epoch * m->L + pos[i];
		size_t s;

		if (!sg || at != next || at >= end) {
			uint64_t off;

			sg = seg_of(m, at);
			end = sg + 1 < m->seg + m->nseg ? sg[1].from : UINT64_MAX;
			off = at - sg->from;
			p = off % sg->W;
			for (size_t t = 0; t < m->nsrc; t++)
				cnt[t] = sg->base[t] + (off / sg->W) * sg->w[t] +
					 period_count(sg, m->nsrc, p, t);
		}
		s = sg->table[p];
		src[i] = (uint8_t)s;
		draw[i] = cnt[s]++;
		if (++p == sg->W)
			p = 0; /* a whole period adds w_s to each count: they go on */
		next = at + 1;
	}
}

void bfs_mix_records(const struct bfs_mix *m, uint64_t epoch, const uint64_t *pos, size_t n,
		     uint64_t *out)
{
	uint8_t src[BLOCK];
	uint64_t draw[BLOCK], r[BLOCK], y[BLOCK];
	/* zeroed once: every src[i] is below nsrc, so the counting sort
	 * writes idx[0..b) whole, which the analyzer cannot see */
	uint16_t idx[BLOCK] = { 0 };
	size_t start[BFS_MIX_MAX_SOURCES + 1];

	for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
		size_t b = n - i0 < BLOCK ? n - i0 : BLOCK;

		block_draws(m, epoch, pos + i0, b, src, draw);
		/* the block's positions grouped by source (a counting sort, in
		 * position order within each), then each run of one pass through
		 * that pass's permutation at once (the vector rounds) */
		memset(start, 0, (m->nsrc + 1) * sizeof(start[0]));
		for (size_t i = 0; i < b; i++)
			start[src[i] + 1]++;
		for (size_t s = 0; s < m->nsrc; s++)
			start[s + 1] += start[s];
		for (size_t i = 0; i < b; i++)
			idx[start[src[i]]++] = (uint16_t)i;
		for (size_t k0 = 0, k1; k0 < b; k0 = k1) {
			size_t s = src[idx[k0]];
			uint64_t N = m->n[s], pass = draw[idx[k0]] / N;
			struct bfs_feistel f;

			for (k1 = k0; k1 < b && src[idx[k1]] == s && draw[idx[k1]] / N == pass;
			     k1++)
				r[k1 - k0] = draw[idx[k1]] % N;
			bfs_feistel_init(&f, N, m->key[s], pass, m->shuffle);
			bfs_feistel_apply_many(&f, r, k1 - k0, y, true);
			for (size_t k = k0; k < k1; k++)
				out[i0 + idx[k]] = m->first[s] + y[k - k0];
		}
	}
}

void bfs_mix_source_of(const struct bfs_mix *m, uint64_t rec, size_t *src, uint64_t *local)
{
	size_t lo = 0, hi = m->nsrc;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->first[mid] <= rec)
			lo = mid;
		else
			hi = mid;
	}
	*src = lo;
	*local = rec - m->first[lo];
}

uint64_t bfs_mix_epoch_len(const struct bfs_mix *m)
{
	return m->L;
}

uint64_t bfs_mix_nrecords(const struct bfs_mix *m)
{
	return m->first[m->nsrc];
}

const uint64_t *bfs_mix_weights(const struct bfs_mix *m, size_t seg, uint64_t *W)
{
	*W = m->seg[seg].W;
	return m->seg[seg].w;
}

void bfs_mix_free(struct bfs_mix *m)
{
	if (!m)
		return;
	for (size_t i = 0; m->seg && i < m->nseg; i++) {
		free(m->seg[i].w);
		free(m->seg[i].base);
		free(m->seg[i].table);
		free(m->seg[i].cp);
	}
	free(m->seg);
	free(m->n);
	free(m->first);
	free(m->key);
	free(m);
}

/* first_exhausted: the largest n with count_s(n) <= N_s for every s;
 * all_exhausted: the smallest n with count_s(n) >= N_s for every s.
 * Counts never decrease with n, so both are binary searches. */
static bool within_first_pass(const struct bfs_mix *m, uint64_t n)
{
	for (size_t s = 0; s < m->nsrc; s++)
		if (bfs_mix_count(m, n, s) > m->n[s])
			return false;
	return true;
}

static bool every_pass_done(const struct bfs_mix *m, uint64_t n)
{
	for (size_t s = 0; s < m->nsrc; s++)
		if (bfs_mix_count(m, n, s) < m->n[s])
			return false;
	return true;
}

/* ---- the weights of a segment (docs/shuffle.md, 8.1) ---- */

typedef unsigned __int128 u128;
typedef __int128 i128;

/* A share may differ from its weight's by this much (1 / SHARE_TOL) when
 * the weights' own period does not fit. */
#define SHARE_TOL 1000000

/* The longest period a segment of k sources may have. */
static uint64_t max_period(size_t k)
{
	uint64_t cells = BFS_MIX_MAX_CELLS / k;

	return cells < BFS_MIX_MAX_PERIOD ? cells : BFS_MIX_MAX_PERIOD;
}

/* floor(n / d) for a quotient below 2^63, by a long double estimate made
 * exact (the search below divides 128-bit numbers millions of times). */
static uint64_t div_floor(u128 n, u128 d)
{
	u128 q = (u128)((long double)n / (long double)d);

	while (q > 0 && q * d > n)
		q--;
	while ((q + 1) * d <= n)
		q++;
	return (uint64_t)q;
}

/* For a period of V positions: the counts v_s with |v_s / V - w_s / W| <=
 * 10^-6, v_s >= 1 (lo, hi), as in 8.1. False when some source has none,
 * or when no choice of them sums to V. */
static bool fit_bounds(const uint64_t *w, size_t k, u128 W, uint64_t V, uint64_t *lo, uint64_t *hi)
{
	u128 D = W * SHARE_TOL, slo = 0, shi = 0;

	for (size_t s = 0; s < k; s++) {
		u128 up = div_floor((u128)V * ((u128)w[s] * SHARE_TOL + W), D);
		u128 dn = (u128)w[s] * SHARE_TOL > W
				  ? div_floor((u128)V * ((u128)w[s] * SHARE_TOL - W) + D - 1, D)
				  : 0;

		if (dn < 1)
			dn = 1;
		if (dn > up)
			return false;
		lo[s] = (uint64_t)dn;
		hi[s] = (uint64_t)up;
		slo += dn;
		shi += up;
	}
	return slo <= V && V <= shi;
}

/* v_s for the period V (8.1): each w_s V / W rounded (halves up) into
 * [lo_s, hi_s]; then, one at a time, the source furthest below its share
 * gains one while they sum to less than V, the one furthest above loses
 * one while they sum to more (the lowest index on a tie). */
static void fit_counts(const uint64_t *w, size_t k, u128 W, uint64_t V, const uint64_t *lo,
		       const uint64_t *hi, uint64_t *v)
{
	u128 sum = 0;

	for (size_t s = 0; s < k; s++) {
		u128 r = ((u128)2 * w[s] * V + W) / (2 * W);

		v[s] = r < lo[s] ? lo[s] : r > hi[s] ? hi[s] : (uint64_t)r;
		sum += v[s];
	}
	while (sum != V) {
		bool up = sum < V;
		size_t best = k;
		i128 best_d = 0;

		for (size_t s = 0; s < k; s++) {
			/* (w_s V / W - v_s) W: how far below its share; negated above */
			i128 d = (i128)((u128)w[s] * V) - (i128)((u128)v[s] * W);

			if (!up)
				d = -d;
			if ((up ? v[s] < hi[s] : v[s] > lo[s]) && (best == k || d > best_d)) {
				best = s;
				best_d = d;
			}
		}
		v[best] += up ? 1 : (uint64_t)-1;
		sum += up ? 1 : (u128)-1;
	}
}

/* A segment's weights (integers of 10^-9) as the counts of one period:
 * reduced by their gcd when that period fits, else the smallest period
 * that keeps every share within 10^-6 (8.1). sg->w and sg->W. */
static int seg_weights(struct segment *sg, const struct bfs_mix_spec *sp, size_t i)
{
	size_t k = sp->nsrc;
	const uint64_t *w = sp->weights + i * k;
	uint64_t g = 0, Vmax = max_period(k), *lo, *hi, *red;
	u128 W = 0;
	size_t least = 0;
	char where[64];
	int rc = 0;

	for (size_t s = 0; s < k; s++) {
		if (w[s] == 0)
			return bfs_err_set(-EINVAL,
					   "mixture: source '%s': weight must be positive "
					   "(segment %zu)",
					   sp->names[s], i);
		g = gcd64(g, w[s]);
	}
	for (size_t s = 0; s < k; s++) {
		sg->w[s] = w[s] / g;
		W += sg->w[s];
		if (w[s] < w[least])
			least = s;
	}
	if (W <= Vmax) {
		sg->W = (uint64_t)W;
		return 0;
	}
	lo = calloc(k, sizeof(*lo));
	hi = calloc(k, sizeof(*hi));
	red = malloc(k * sizeof(*red));
	if (!lo || !hi || !red) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(red, sg->w, k * sizeof(*red));
	for (uint64_t V = 1; V <= Vmax; V++) {
		if (!fit_bounds(red, k, W, V, lo, hi))
			continue;
		fit_counts(red, k, W, V, lo, hi, sg->w);
		sg->W = V;
		sg->approx = true;
		goto out;
	}
	snprintf(where, sizeof(where), sp->nseg > 1 ? "\"schedule\" entry %zu" : "the weights", i);
	rc = bfs_err_set(-EFBIG,
			 "mixture: %s: no period of up to %llu records gives every source its "
			 "share within 10^-6 (source '%s' has %.3g of the stream): give it a "
			 "larger weight, or leave it out",
			 where, (unsigned long long)Vmax, sp->names[least],
			 (double)red[least] / (double)W);
out:
	free(lo);
	free(hi);
	free(red);
	return rc;
}

bool bfs_mix_approximated(const struct bfs_mix *m, size_t seg)
{
	return m->seg[seg].approx;
}

#define MAX_EPOCH ((uint64_t)1 << 62)

static int epoch_len(struct bfs_mix *m, const struct bfs_mix_spec *sp)
{
	uint64_t lo, hi;

	switch (sp->epoch) {
	case BFS_MIX_RECORDS:
		if (sp->epoch_records == 0 || sp->epoch_records > MAX_EPOCH)
			return bfs_err_set(-EINVAL,
					   "mixture: \"epoch\": %llu records: need 1 to 2^62",
					   (unsigned long long)sp->epoch_records);
		m->L = sp->epoch_records;
		return 0;
	case BFS_MIX_FIRST_EXHAUSTED:
		lo = 0; /* within */
		hi = m->first[m->nsrc] + 1; /* not within: the counts sum to n */
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (within_first_pass(m, mid))
				lo = mid;
			else
				hi = mid;
		}
		if (lo == 0)
			return bfs_err_set(-EINVAL, "mixture: \"epoch\": first_exhausted holds no "
						    "record: give \"epoch\" a number of records");
		m->L = lo;
		return 0;
	case BFS_MIX_ALL_EXHAUSTED:
		lo = 0; /* not done (every source has a record) */
		hi = m->first[m->nsrc];
		while (!every_pass_done(m, hi)) {
			lo = hi;
			if (hi > MAX_EPOCH / 2)
				return bfs_err_set(-EFBIG, "mixture: \"epoch\": all_exhausted "
							   "needs more than 2^62 records");
			hi *= 2;
		}
		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;
			if (every_pass_done(m, mid))
				hi = mid;
			else
				lo = mid;
		}
		m->L = hi;
		return 0;
	}
	return bfs_err_set(-EINVAL, "mixture: unknown epoch rule");
}

int bfs_mix_new(struct bfs_mix **out, const struct bfs_mix_spec *sp)
{
	struct bfs_mix *m;
	size_t k = sp->nsrc;
	int rc = -ENOMEM;

	if (k == 0)
		return bfs_err_set(-EINVAL, "mixture: no source");
	if (k > BFS_MIX_MAX_SOURCES)
		return bfs_err_set(-EFBIG,
				   "mixture: %zu sources, and a mixture takes at most %d: join "
				   "some into one source (a folder or a glob)",
				   k, BFS_MIX_MAX_SOURCES);
	if (sp->nseg == 0 || sp->from[0] != 0)
		return bfs_err_set(-EINVAL,
				   "mixture: \"schedule\": the first segment must start at "
				   "from_record 0");
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->nsrc = k;
	m->nseg = sp->nseg;
	m->shuffle = sp->shuffle;
	m->n = calloc(k, sizeof(*m->n));
	m->first = calloc(k + 1, sizeof(*m->first));
	m->key = calloc(k, sizeof(*m->key));
	m->seg = calloc(sp->nseg, sizeof(*m->seg));
	if (!m->n || !m->first || !m->key || !m->seg)
		goto fail;
	for (size_t s = 0; s < k; s++) {
		if (sp->nrecords[s] == 0) {
			rc = bfs_err_set(-EINVAL, "mixture: source '%s' has no records",
					 sp->names[s]);
			goto fail;
		}
		m->n[s] = sp->nrecords[s];
		if (__builtin_add_overflow(m->first[s], m->n[s], &m->first[s + 1])) {
			rc = bfs_err_set(-EFBIG, "mixture: over 2^64 records");
			goto fail;
		}
		m->key[s] = bfs_mix64(sp->seed ^ fnv1a(sp->names[s]));
	}
	for (size_t i = 0; i < sp->nseg; i++) {
		struct segment *sg = &m->seg[i];

		if (i > 0 && sp->from[i] <= sp->from[i - 1]) {
			rc = bfs_err_set(-EINVAL,
					 "mixture: \"schedule\" entry %zu: from_record %llu is not "
					 "after the entry before",
					 i, (unsigned long long)sp->from[i]);
			goto fail;
		}
		sg->from = sp->from[i];
		sg->w = calloc(k, sizeof(*sg->w));
		sg->base = calloc(k, sizeof(*sg->base));
		if (!sg->w || !sg->base)
			goto fail;
		rc = seg_weights(sg, sp, i);
		if (rc)
			goto fail;
		if (i > 0) /* each source goes on where it stood */
			for (size_t s = 0; s < k; s++)
				sg->base[s] =
					seg_count(&m->seg[i - 1], k, sg->from - sg[-1].from, s);
		rc = lay_out(sg, k);
		if (rc)
			goto fail;
	}
	rc = epoch_len(m, sp);
	if (rc)
		goto fail;
	*out = m;
	return 0;
fail:
	bfs_mix_free(m);
	return rc;
}
