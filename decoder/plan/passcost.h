/* SPDX-License-Identifier: Apache-2.0 */
/*
 * passcost.h — how the records of a window of units are read from a slow
 * source: in a pass over the whole blocks that hold them (the blocks read
 * at the source's bandwidth, only the records kept), or by ranged reads
 * of the records themselves (near ones joined); chosen from what the
 * source was measured to cost (a request's latency, the bytes per second
 * beyond it, the requests in flight) and the records' sizes and places.
 *
 * Blocks a local copy keeps (the disk cache) are read whole where the
 * reader reads most records (keep_whole): once written there, they serve
 * every later epoch, so whole blocks cost less than ranged reads of the
 * same bytes epoch after epoch. Blocks a local copy holds already are not
 * read at all.
 *
 * Does not: read anything, or hold any state (a function of its inputs).
 * Thread-safety: reentrant.
 */
#ifndef BFS_PASSCOST_H
#define BFS_PASSCOST_H

#include "fetch.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BFS_PASS_BLOCK ((uint64_t)1 << 20) /* a pass reads whole blocks of this */

struct bfs_pass_cost {
	uint64_t lat_ns; /* a request's latency (its first byte) */
	double bw; /* bytes per second a request brings beyond its latency */
	unsigned depth; /* requests in flight at once */
	uint64_t merge_gap, max_read; /* ranged reads join ranges this near, up to this long */
	bool keep_whole; /* the blocks a local copy keeps are read whole */
	bool no_pass; /* the rest by ranged reads whatever they cost */
	bool all_pass; /* the rest in passes whatever they cost (unless no_pass) */
};

/* The choice for ranges r[0..n) (sorted by object and offset, none empty):
 * spans[0..nspans) (malloc'd; sorted, apart) are the blocks to read whole,
 * each one read; the ranges outside them are read as asked. */
struct bfs_pass_plan {
	struct bfs_fetch_range *spans;
	size_t nspans;
	bool pass; /* the ranges outside the kept part are read in passes */
	/* the ranges outside the kept part (all of them but for keep_whole):
	 * the two ways, requests, bytes and seconds each */
	uint64_t blocks, block_bytes, reads, read_bytes;
	double t_blocks, t_reads;
	uint64_t kept_blocks; /* kept blocks read whole */
	uint64_t nheld; /* ranges a local copy holds (not read) */
};

/* Choose for r[0..n): held[k] (may be NULL) says range k lies in blocks a
 * local copy holds; kept[obj] is the end of the part of obj a local copy
 * keeps (0: none) and size[obj] its size, for obj < nobj. *why gets one
 * line saying which and why. 0, or -ENOMEM (then nothing is held). */
int bfs_pass_choose(const struct bfs_fetch_range *r, size_t n, const bool *held,
		    const uint64_t *kept, const uint64_t *size, uint32_t nobj,
		    const struct bfs_pass_cost *c, struct bfs_pass_plan *out, char *why,
		    size_t whylen);
void bfs_pass_plan_free(struct bfs_pass_plan *p);

#endif
