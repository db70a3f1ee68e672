/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ioplan.h — reads planned from the permutation: what the units (batches,
 * or chunks of all/) after each reader's position will need from the
 * source, handed to the I/O stage (fetch.h) ahead of the decoders.
 *
 * The builds of a reader's units form a stream (one per rank and kind of
 * unit, and per distant position: a reader that jumps elsewhere starts a
 * stream of its own, which plans ahead only once its reader goes on from
 * there; at most MAX_STREAMS, the least recently used goes). A planner
 * thread keeps each stream's next units planned as long as the stage has
 * room and fewer than twice its depth of reads are waiting to be issued,
 * nearest unit first across streams, so a reader that jumps is served
 * first and plans for units nobody reads soon give way (a stream's plans
 * behind its reader are dropped; a stream left idle loses its plans when
 * room is needed, and asks for nothing more until its reader comes back).
 * Plans never go past the last epoch the mount lists, and cover at most
 * `readahead` bytes of records and MAX_ITEMS units in all, even where the
 * stage holds their bytes already (a reader of a dataset that fits the
 * stage once had a million units planned ahead).
 *
 * Global shuffle (and none): a unit's plan is its records' bytes. Block
 * shuffle: a stream holds the whole groups (window blocks) its reader is
 * in and the next one (across the end of an epoch when the mount lists
 * the next), read in whole blocks, each block once per pass of a reader
 * over the epoch, and released when the stream has left the group; a
 * unit's records are then already there. The reader's own group is taken
 * whatever the budget (it is what is decoded now, not read ahead); the
 * next one waits for room. Only a group larger than the whole budget turns
 * its stream to plans unit by unit.
 *
 * The build of a unit claims its plan (or gets a ticket made at once, at
 * the head of the queue) and releases it when its records are read.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef BFS_IOPLAN_H
#define BFS_IOPLAN_H

#include "batch.h"
#include "fetch.h"

struct bfs_ioplan;
struct bfs_ioplan_hold; /* what a build holds while it reads */

/* How the global shuffle's windows read their records (io_plan=): as the
 * source's measured cost says, or always one way (for measurements;
 * stats.json's io_plan_reason then says "asked for"). */
enum bfs_ioplan_mode {
	BFS_IOPLAN_AUTO = 0,
	BFS_IOPLAN_PASSES, /* passes over the whole blocks wherever readahead allows */
	BFS_IOPLAN_RANGES, /* ranged reads of the records, no block read whole */
};

struct bfs_ioplan_stats {
	uint64_t planned; /* units planned ahead */
	uint64_t claimed; /* builds that found their unit planned */
	uint64_t unplanned; /* builds that had to ask for their bytes themselves */
	uint64_t dropped; /* plans released unused (passed, idle, or for room) */
	uint64_t groups; /* block groups fetched */
	uint64_t streams; /* streams now */
	uint64_t held, held_bytes; /* plans held now, and their records' bytes */
	/* global shuffle: windows made, and those read in passes over whole
	 * blocks; the last one's choice and why */
	uint64_t windows, passes;
	char plan[32];
	char reason[400];
};

/* Plans for the batchers b[0..nranks) (rank folders share one base; b[0]
 * alone otherwise) of dataset ds, through stage f (all borrowed; they
 * must outlive the planner). lookahead: units that builds run ahead of a
 * reader (the decoded-batch prefetch): builds that far into the next
 * epoch do not move a stream there. epochs: the epochs the mount lists
 * (0: no bound); nothing is planned past the last. Plans cover at most the
 * stage's budget (readahead) of record bytes, whatever the stage holds
 * already, and a bounded number of units. Starts the planner thread.
 * -ENOMEM. */
int bfs_ioplan_new(struct bfs_ioplan **out, struct bfs_fetch *f, const struct bfs_dataset *ds,
		   const struct bfs_batcher *const *b, size_t nranks, unsigned lookahead,
		   uint64_t epochs);
/* Stops the thread and releases every plan. Accepts NULL. */
void bfs_ioplan_free(struct bfs_ioplan *p);
/* The windows made from now on read as m says (BFS_IOPLAN_AUTO at first). */
void bfs_ioplan_set_mode(struct bfs_ioplan *p, enum bfs_ioplan_mode m);

/* The build of (rank, epoch, unit) (a batch, or a chunk with BFS_CHUNK
 * set), reading records recs[0..n), starts: its stream moves there and
 * plans on from it (builds, not reads, drive the plans: a reader served
 * from decoded batches needs no source bytes). Returns what holds the
 * unit's bytes while it is built: its plan, hurried to the head of the
 * queue, the block groups its records are in, or a ticket made now with
 * the same priority; NULL when none could be made (the reads then go to
 * the source one by one). Release it with bfs_ioplan_done. */
struct bfs_ioplan_hold *bfs_ioplan_claim(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch,
					 uint64_t unit, const uint64_t *recs, size_t n);
void bfs_ioplan_done(struct bfs_ioplan *p, struct bfs_ioplan_hold *h); /* accepts NULL */

/* Whether a build of (rank, epoch, unit) would find its records' bytes
 * planned now. Under block shuffle, whether the groups it reads from are
 * held (a stream asked for them): the decoded-batch prefetch builds only
 * such units, since a build elsewhere reads its records one by one (and
 * a prefetch far ahead of the groups held turned into record reads for
 * most of an epoch). True otherwise (global shuffle, a stream planning
 * unit by unit, a rank no stream reads yet). */
bool bfs_ioplan_ready(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit);
/* A reader read (rank, epoch, unit), built or not: under block shuffle its
 * stream holds the groups around the reader's unit (the prefetch builds
 * ahead of it within them). */
void bfs_ioplan_note_read(struct bfs_ioplan *p, uint64_t rank, uint64_t epoch, uint64_t unit);

void bfs_ioplan_stats(struct bfs_ioplan *p, struct bfs_ioplan_stats *out);

#endif
