/* SPDX-License-Identifier: Apache-2.0 */
/*
 * record_read.c — reading records by their index: one (bfs_shard_read) or
 * many at once (bfs_shard_read_many), both CRCs checked when asked and the
 * header's length always held against the index's.
 *
 * A plain shard of small records is mapped (record.c): a record is a copy
 * out of the mapping under a SIGBUS guard, the batch's records touched
 * first so that their cache and TLB misses overlap, and one fstat after
 * the copies says whether the file shrank under them. Other plain shards
 * are read with one preadv per run of nearby records, each record's bytes
 * landing in its own buffer (read_runs). A shard read through the I/O
 * stage takes the bytes the stage holds. A compressed shard's records are
 * record_z.c's; a shard with a shadow (a plain copy of its stream) is read
 * from the copy first. All per-read state lives in the call, so concurrent
 * reads on one shard are safe.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "record_impl.h"

#include "fetch.h"
#include "mapguard.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- random access ----------------------------------------------------- */

/* Whether record loc (header, data, footer) lies within the first `size`
 * bytes of its file. */
static bool fits(const struct bfs_record_loc *loc, uint64_t size)
{
	return loc->offset <= size && HDR_LEN + (uint64_t)loc->len + FOOT_LEN <= size - loc->offset;
}

/* Whether record loc can be copied out of the shard's mapping. */
static bool mapped(const struct bfs_shard *s, const struct bfs_record_loc *loc)
{
	return s->map && fits(loc, s->file_size);
}

/* Random records miss the caches and the TLB: load the first cache lines
 * of every mapped record of a batch first, so that the misses overlap
 * (prefetch hints were measured to do nothing here: they are dropped on a
 * TLB miss). A fault is left for the copies to report. */
static void touch_records(const struct bfs_shard *s, const uint64_t *idx, size_t n)
{
	enum { BLOCK = 64, LINES = 4 };
	const void *addr[BLOCK * LINES];
	size_t m = 0;

	if (!s->map)
		return;
	for (size_t k = 0; k < n; k++) {
		struct bfs_record_loc loc;
		uint64_t end;

		if (idx[k] >= s->nlocs)
			continue;
		loc = loc_of(s, idx[k]);
		if (!mapped(s, &loc))
			continue;
		end = loc.offset + HDR_LEN + loc.len + FOOT_LEN;
		for (uint64_t a = loc.offset, l = 0; a < end && l < LINES; a = (a | 63) + 1, l++)
			addr[m++] = s->map + a;
		if (m > (BLOCK - 1) * LINES) {
			(void)bfs_mapguard_touch(addr, m);
			m = 0;
		}
	}
	if (m)
		(void)bfs_mapguard_touch(addr, m);
}

/* Copy record i's header, data and footer out of the mapping. */
static int map_copy(const struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		    uint8_t *hdr, uint8_t *dst, uint8_t *foot)
{
	const uint8_t *src = s->map + loc->offset;

	if (bfs_mapguard_copy(hdr, src, HDR_LEN) != 0 ||
	    bfs_mapguard_copy(dst, src + HDR_LEN, loc->len) != 0 ||
	    bfs_mapguard_copy(foot, src + HDR_LEN + loc->len, FOOT_LEN) != 0)
		return bfs_err_set(-EIO,
				   "record %" PRIu64 " at offset %" PRIu64
				   ": bus error reading the mapped file; file truncated?",
				   i, loc->offset);
	return 0;
}

/* After copies out of the mapping: the bytes past a shrunk file's end read
 * as zeros in its last page (past that page, the guard turns the fault into
 * -EIO), so a copy is good only if the file still holds the record after
 * it. One fstat checks every record of a batch. */
static uint64_t current_size(const struct bfs_shard *s)
{
	struct stat st;

	return fstat(s->fs.fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int truncated(uint64_t i, const struct bfs_record_loc *loc)
{
	return bfs_err_set(-EIO,
			   "record %" PRIu64 " at offset %" PRIu64 ": short read; file truncated?",
			   i, loc->offset);
}

/* Record i from the mapping, checked like read_plain; the caller checks
 * the size afterwards. */
static int read_mapped(const struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		       uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	int err = map_copy(s, i, loc, hdr, dst, foot);

	return err ? err : bfs_record_check_frame(i, loc, hdr, dst, foot, verify);
}

/* Record i out of the I/O stage, checked like read_plain: -ENODATA when
 * the stage does not hold its bytes (read it from the file). */
static int read_staged(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		       uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	struct iovec iov[3] = {
		{ hdr, HDR_LEN },
		{ dst, loc->len },
		{ foot, FOOT_LEN },
	};
	int err = bfs_fetch_copyv(s->fetch, s->fetch_id, loc->offset, iov, 3);

	if (err == -ENODATA)
		return err;
	if (err) {
		char why[512];

		snprintf(why, sizeof(why), "%s", bfs_err_msg());
		return bfs_err_set(err, "record %" PRIu64 " at offset %" PRIu64 ": read: %s", i,
				   loc->offset, why[0] ? why : strerror(-err));
	}
	return bfs_record_check_frame(i, loc, hdr, dst, foot, verify);
}

/* Record i of a shard read through the I/O stage that the stage does not
 * hold: asked for now (see take_through_stage), then read from it;
 * -ENODATA when it still cannot give it. */
static int staged_now(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		      uint8_t *dst, bool verify)
{
	struct bfs_fetch_range r = { s->fetch_id, loc->offset,
				     HDR_LEN + (uint64_t)loc->len + FOOT_LEN };
	struct bfs_fetch_ticket *t = NULL;
	int err;

	if (bfs_fetch_want(s->fetch, &r, 1, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t) != 0)
		return -ENODATA;
	err = read_staged(s, i, loc, dst, verify);
	bfs_fetch_release(s->fetch, t);
	return err;
}

static int read_plain(struct bfs_shard *s, uint64_t i, const struct bfs_record_loc *loc,
		      uint8_t *dst, bool verify)
{
	uint8_t hdr[HDR_LEN], foot[FOOT_LEN];
	struct iovec iov[3] = {
		{ hdr, HDR_LEN },
		{ dst, loc->len },
		{ foot, FOOT_LEN },
	};
	size_t want = HDR_LEN + (size_t)loc->len + FOOT_LEN;
	size_t got = 0;
	int err;

	if (s->fetch && (err = read_staged(s, i, loc, dst, verify)) != -ENODATA)
		return err;
	if (s->fetch && (err = staged_now(s, i, loc, dst, verify)) != -ENODATA)
		return err;
	if (mapped(s, loc)) {
		err = map_copy(s, i, loc, hdr, dst, foot);
		if (!err && !fits(loc, current_size(s)))
			err = truncated(i, loc);
		if (err)
			return err;
		got = want;
	}
	while (got < want) {
		ssize_t n;
		int k = 0;
		size_t skip = got;
		struct iovec v[3];

		/* the iovecs still to fill */
		for (int j = 0; j < 3; j++) {
			if (skip >= iov[j].iov_len) {
				skip -= iov[j].iov_len;
				continue;
			}
			v[k].iov_base = (uint8_t *)iov[j].iov_base + skip;
			v[k].iov_len = iov[j].iov_len - skip;
			skip = 0;
			k++;
		}
		n = bfs_shard_preadv(s, v, k, loc->offset + got);
		if (n < 0) {
			char why[512];

			return bfs_err_set((int)n,
					   "record %" PRIu64 " at offset %" PRIu64 ": read: %s", i,
					   loc->offset, bfs_shard_read_why(s, n, why, sizeof(why)));
		}
		if (n == 0)
			return bfs_err_set(-EIO,
					   "record %" PRIu64 " at offset %" PRIu64
					   ": short read (%zu of %zu bytes); file truncated?",
					   i, loc->offset, got, want);
		got += (size_t)n;
	}
	return bfs_record_check_frame(i, loc, hdr, dst, foot, verify);
}

/* Record i from the shadow, both CRCs checked whatever the caller's verify
 * (the copy is ours, not the user's data: a bad byte in it must not reach a
 * batch). Returns 0, or the shadow's error with its message in *msg
 * (malloc'd, or NULL): the caller then reads the compressed shard. */
static int shadow_read(struct bfs_shard *view, uint64_t i, uint8_t *dst, size_t dst_cap, char **msg)
{
	int err = bfs_shard_read(view, i, dst, dst_cap, true);

	*msg = err ? strdup(bfs_err_msg()) : NULL;
	return err;
}

/* n records of `bytes` data bytes came from the shadow. */
static void shadow_count(struct bfs_shard *s, uint64_t n, uint64_t bytes)
{
	atomic_fetch_add_explicit(&s->shadow_reads, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->shadow_bytes, bytes, memory_order_relaxed);
}

/* The shadow `view` failed record i, which the shard itself gave: the copy
 * is bad. Said only while view is still the shard's: one demoted meanwhile
 * (bfs_shard_demote) is old news, and its successor checked. */
static void shadow_failed(struct bfs_shard *s, const struct bfs_shard *view, uint64_t i,
			  const char *msg)
{
	if (s->shadow_fail && atomic_load(&s->shadow) == view)
		s->shadow_fail(s->shadow_ctx, s, i, msg ? msg : "read failed");
}

/* bfs_shard_read with the descriptor pinned. */
static int read_one(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, bool verify)
{
	struct bfs_record_loc loc;

	if (i >= s->nlocs)
		return bfs_err_set(-ENOENT,
				   "record %" PRIu64 ": no such record (%" PRIu64 " indexed)", i,
				   s->nlocs);
	loc = loc_of(s, i);
	if (loc.len > dst_cap)
		return bfs_err_set(-EFBIG,
				   "record %" PRIu64 " at offset %" PRIu64 ": %" PRIu32
				   " bytes do not fit in a %zu-byte buffer",
				   i, loc.offset, loc.len, dst_cap);
	if (s->comp == BFS_COMP_NONE)
		return read_plain(s, i, &loc, dst, verify);
	return bfs_shard_read_z(s, i, &loc, dst, verify);
}

int bfs_shard_read(struct bfs_shard *s, uint64_t i, uint8_t *dst, size_t dst_cap, bool verify)
{
	/* read once: a view may be demoted (bfs_shard_demote) meanwhile */
	struct bfs_shard *view = atomic_load(&s->shadow);
	char *smsg = NULL;
	int err;

	if (view && shadow_read(view, i, dst, dst_cap, &smsg) == 0) {
		shadow_count(s, 1, loc_of(s, i).len);
		return 0;
	}
	err = bfs_shard_pin(s);
	if (!err) {
		err = read_one(s, i, dst, dst_cap, verify);
		bfs_shard_unpin(s);
		if (!err && view)
			shadow_failed(s, view, i, smsg);
	}
	free(smsg);
	return err;
}

/* ---- batched reads ------------------------------------------------------ */

static void read_many_pinned(struct bfs_shard *s, const uint64_t *idx, size_t n,
			     uint8_t *const *dst, bool verify, int *errs, char **msgs);
static void read_many_plain_or_z(struct bfs_shard *s, const uint64_t *idx, size_t n,
				 uint8_t *const *dst, bool verify, int *errs, char **msgs);

void bfs_shard_read_many(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			 bool verify, int *errs, char **msgs)
{
	struct bfs_shard *view = atomic_load(&s->shadow); /* once: see bfs_shard_read */

	for (size_t k = 0; k < n; k++) {
		errs[k] = 0;
		msgs[k] = NULL;
	}
	if (view && n) {
		/* what the shadow cannot give comes from the shard itself (one
		 * allocation: the records to redo and their arguments) */
		size_t one = sizeof(uint8_t *) + 2 * sizeof(char *) + sizeof(uint64_t) +
			     sizeof(size_t) + sizeof(int);
		char *mem = malloc(n * one);

		if (mem) {
			uint8_t **rd = (uint8_t **)(void *)mem;
			char **rm = (char **)(void *)(rd + n);
			char **sm = rm + n; /* the shadow's messages */
			uint64_t *ri = (uint64_t *)(void *)(sm + n);
			size_t *redo = (size_t *)(void *)(ri + n);
			int *re = (int *)(void *)(redo + n);
			size_t nredo = 0;
			uint64_t bytes = 0;

			bfs_shard_read_many(view, idx, n, dst, true, errs, msgs);
			for (size_t k = 0; k < n; k++) {
				if (!errs[k]) {
					bytes += loc_of(s, idx[k]).len;
					continue;
				}
				ri[nredo] = idx[k];
				rd[nredo] = dst[k];
				sm[nredo] = msgs[k];
				re[nredo] = 0; /* read_many_pinned sets only failures */
				rm[nredo] = NULL;
				redo[nredo++] = k;
				errs[k] = 0;
				msgs[k] = NULL;
			}
			shadow_count(s, n - nredo, bytes);
			if (nredo)
				read_many_plain_or_z(s, ri, nredo, rd, verify, re, rm);
			for (size_t j = 0; j < nredo; j++) {
				errs[redo[j]] = re[j];
				msgs[redo[j]] = rm[j];
				if (!re[j])
					shadow_failed(s, view, ri[j], sm[j]);
				free(sm[j]);
			}
			free(mem);
			return;
		}
	}
	read_many_plain_or_z(s, idx, n, dst, verify, errs, msgs);
}

static void read_many_plain_or_z(struct bfs_shard *s, const uint64_t *idx, size_t n,
				 uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	int err = bfs_shard_pin(s);

	if (err) {
		for (size_t k = 0; k < n; k++)
			bfs_shard_fail_one(s, err, errs, msgs, k);
		return;
	}
	read_many_pinned(s, idx, n, dst, verify, errs, msgs);
	bfs_shard_unpin(s);
}

/* Records of one call that lie within RUN_GAP bytes of each other in an
 * unmapped plain shard are read with one preadv: each header and footer into
 * a small array, the data straight into its row, and the bytes between two
 * records into one throwaway buffer. A source that charges per read (a
 * network or FUSE filesystem, a disk seek, faultfs's delay) is paid once per
 * run, and no byte is copied twice. Adjacent records (shuffle=block, or any
 * large records side by side) waste nothing; a gap costs its bytes, which a
 * page-cached source copies in ~5 µs per 64 KiB. */
#define RUN_GAP ((uint64_t)64 << 10)
#define RUN_MAX_IOV 1024 /* Linux's IOV_MAX */
#define RUN_MAX_BYTES ((uint64_t)64 << 20)

struct pending {
	uint64_t off;
	uint32_t len;
	size_t k; /* position in the call */
};

static int pending_cmp(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static uint64_t rec_end(const struct pending *p)
{
	return p->off + HDR_LEN + p->len + FOOT_LEN;
}

/* One preadv for records p[0..m) (sorted, not overlapping). Returns false
 * when it did not read them all (error, short read): the caller reads them
 * one by one, which names what went wrong. */
static bool read_run(struct bfs_shard *s, const struct pending *p, size_t m, uint8_t *const *dst,
		     uint8_t (*hf)[HDR_LEN + FOOT_LEN], uint8_t *sink, struct iovec *v)
{
	size_t nv = 0;
	uint64_t want = 0;
	ssize_t got;

	for (size_t t = 0; t < m; t++) {
		if (t && p[t].off > rec_end(&p[t - 1])) {
			v[nv++] = (struct iovec){ sink, (size_t)(p[t].off - rec_end(&p[t - 1])) };
			want += p[t].off - rec_end(&p[t - 1]);
		}
		v[nv++] = (struct iovec){ hf[t], HDR_LEN };
		v[nv++] = (struct iovec){ dst[p[t].k], p[t].len };
		v[nv++] = (struct iovec){ hf[t] + HDR_LEN, FOOT_LEN };
		want += HDR_LEN + (uint64_t)p[t].len + FOOT_LEN;
	}
	got = bfs_shard_preadv(s, v, (int)nv, p[0].off);
	return got >= 0 && (uint64_t)got == want;
}

/* Records p[0..np) of a shard read through the I/O stage that it does not
 * hold (no plan had them: one made while the shard was read from a local
 * copy, since demoted; a build without a plan): asked for now, at the head
 * of its queue, so that they come through the stage and its disk cache
 * rather than from the source past both (every epoch, for a copy found
 * bad). Those the stage then gives are read (checked) and taken out of p;
 * the others stay for read_runs. */
static void take_through_stage(struct bfs_shard *s, const uint64_t *idx, struct pending *p,
			       size_t *np, uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	struct bfs_fetch_range *r = malloc(*np * sizeof(*r));
	struct bfs_fetch_ticket *t = NULL;
	size_t m = 0;

	if (!r)
		return;
	for (size_t k = 0; k < *np; k++)
		r[k] = (struct bfs_fetch_range){ s->fetch_id, p[k].off,
						 HDR_LEN + (uint64_t)p[k].len + FOOT_LEN };
	if (bfs_fetch_want(s->fetch, r, *np, BFS_FETCH_NOW, BFS_WANT_DEMAND, &t) == 0) {
		for (size_t k = 0; k < *np; k++) {
			struct bfs_record_loc loc = { p[k].off, p[k].len };
			int err = read_staged(s, idx[p[k].k], &loc, dst[p[k].k], verify);

			if (err == -ENODATA)
				p[m++] = p[k];
			else if (err)
				bfs_shard_fail_one(s, err, errs, msgs, p[k].k);
		}
		*np = m;
		bfs_fetch_release(s->fetch, t);
	}
	free(r);
}

/* The unmapped records p[0..np) of a plain shard, in runs of nearby ones. */
static void read_runs(struct bfs_shard *s, const uint64_t *idx, struct pending *p, size_t np,
		      uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	uint8_t(*hf)[HDR_LEN + FOOT_LEN];
	struct iovec *v;
	uint8_t *sink;
	bool runs;
	/* a remote source serves the gap's bytes over its network: only
	 * adjacent records share a read there */
	uint64_t gap = s->remote ? 0 : RUN_GAP;

	if (np == 0)
		return; /* every record was mapped */
	hf = malloc(np * sizeof(*hf));
	v = malloc(RUN_MAX_IOV * sizeof(*v));
	sink = malloc(RUN_GAP);
	runs = hf && v && sink;

	if (runs)
		qsort(p, np, sizeof(*p), pending_cmp);
	for (size_t a = 0, b; a < np; a = b) {
		uint64_t end = rec_end(&p[a]);
		size_t nv = 3;

		for (b = a + 1; runs && b < np; b++) {
			size_t more = p[b].off > end ? 4 : 3;

			if (p[b].off < end || p[b].off - end > gap || nv + more > RUN_MAX_IOV ||
			    rec_end(&p[b]) - p[a].off > RUN_MAX_BYTES)
				break; /* a record twice, too far, or enough for one read */
			nv += more;
			end = rec_end(&p[b]);
		}
		if (!runs)
			b = a + 1;
		if (b - a > 1 && read_run(s, p + a, b - a, dst, hf + a, sink, v)) {
			for (size_t t = a; t < b; t++) {
				struct bfs_record_loc loc = { p[t].off, p[t].len };
				uint64_t i = idx[p[t].k];
				int err = bfs_record_check_frame(i, &loc, hf[t], dst[p[t].k],
								 hf[t] + HDR_LEN, verify);

				if (err)
					bfs_shard_fail_one(s, err, errs, msgs, p[t].k);
			}
			continue;
		}
		for (size_t t = a; t < b; t++) {
			int err = read_one(s, idx[p[t].k], dst[p[t].k], p[t].len, verify);

			if (err)
				bfs_shard_fail_one(s, err, errs, msgs, p[t].k);
		}
	}
	free(hf);
	free(v);
	free(sink);
}

/* The records of idx whose bytes the I/O stage holds ready, copied out
 * under one hold of its lock and checked (staged[k] true); the others are
 * left to read_staged, one by one. Without memory, none is taken. */
static void take_staged(struct bfs_shard *s, const uint64_t *idx, size_t n, uint8_t *const *dst,
			bool verify, int *errs, char **msgs, bool *staged)
{
	uint8_t(*frame)[HDR_LEN + FOOT_LEN] = malloc(n * sizeof(*frame));
	struct iovec *iov = malloc(n * 3 * sizeof(*iov));
	uint64_t *offs = malloc(n * sizeof(*offs));
	size_t m = 0;

	if (frame && iov && offs) {
		for (size_t k = 0; k < n; k++) {
			struct bfs_record_loc loc = { 0, 0 };

			if (idx[k] < s->nlocs)
				loc = loc_of(s, idx[k]);
			offs[k] = loc.offset;
			iov[3 * k] = (struct iovec){ frame[k], HDR_LEN };
			iov[3 * k + 1] = (struct iovec){ dst[k], loc.len };
			iov[3 * k + 2] = (struct iovec){ frame[k] + HDR_LEN, FOOT_LEN };
			if (idx[k] >= s->nlocs) /* left for the path that names it */
				iov[3 * k + 1].iov_len = UINT32_MAX;
		}
		m = bfs_fetch_copy_ready(s->fetch, s->fetch_id, n, offs, iov, 3, staged);
	}
	for (size_t k = 0; m && k < n; k++) {
		struct bfs_record_loc loc;
		int err;

		if (!staged[k])
			continue;
		loc = loc_of(s, idx[k]);
		err = bfs_record_check_frame(idx[k], &loc, frame[k], dst[k], frame[k] + HDR_LEN,
					     verify);
		if (err)
			bfs_shard_fail_one(s, err, errs, msgs, k);
	}
	if (!m)
		for (size_t k = 0; k < n; k++)
			staged[k] = false;
	free(frame);
	free(iov);
	free(offs);
}

static void read_many_pinned(struct bfs_shard *s, const uint64_t *idx, size_t n,
			     uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	bool any_mapped = false, *staged = NULL;
	struct pending *p;
	size_t np = 0;
	int err;

	if (s->comp != BFS_COMP_NONE) {
		bfs_shard_read_many_z(s, idx, n, dst, verify, errs, msgs);
		return;
	}
	p = malloc((n ? n : 1) * sizeof(*p));
	touch_records(s, idx, n);
	if (s->fetch && n > 1 && (staged = calloc(n, sizeof(*staged))))
		take_staged(s, idx, n, dst, verify, errs, msgs, staged);
	for (size_t k = 0; k < n; k++) {
		bool in = idx[k] < s->nlocs;
		struct bfs_record_loc loc = { 0, 0 };

		if (staged && staged[k])
			continue;
		if (in)
			loc = loc_of(s, idx[k]);
		if (in && s->fetch) {
			err = read_staged(s, idx[k], &loc, dst[k], verify);
			if (err == -ENODATA && p) {
				p[np++] = (struct pending){ loc.offset, loc.len, k };
				continue;
			}
			if (err == -ENODATA)
				err = read_one(s, idx[k], dst[k], loc.len, verify);
		} else if (in && mapped(s, &loc)) {
			err = read_mapped(s, idx[k], &loc, dst[k], verify);
			any_mapped = true;
		} else if (in && p) {
			p[np++] = (struct pending){ loc.offset, loc.len, k };
			continue;
		} else {
			err = read_one(s, idx[k], dst[k], loc.len, verify);
		}
		if (err)
			bfs_shard_fail_one(s, err, errs, msgs, k);
	}
	if (s->fetch && np)
		take_through_stage(s, idx, p, &np, dst, verify, errs, msgs);
	read_runs(s, idx, p, np, dst, verify, errs, msgs);
	free(p);
	free(staged);
	/* one size check for every record copied from the mapping (a
	 * record past a shrunk end is named as such, whatever its CRC);
	 * a file that has not shrunk holds them all */
	if (any_mapped) {
		uint64_t size = current_size(s);
		for (size_t k = 0; k < n && size < s->file_size; k++) {
			struct bfs_record_loc loc;

			if (idx[k] >= s->nlocs)
				continue;
			loc = loc_of(s, idx[k]);
			if (!mapped(s, &loc) || fits(&loc, size))
				continue;
			free(msgs[k]);
			msgs[k] = NULL;
			bfs_shard_fail_one(s, truncated(idx[k], &loc), errs, msgs, k);
		}
	}
}
