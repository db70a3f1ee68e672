/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetch.h — the I/O stage: byte ranges of a dataset's source objects (its
 * shard files, or objects in a bucket) read ahead of the decoders, many
 * reads in flight, into a bounded buffer.
 *
 * A user says which ranges it will need with a ticket (bfs_fetch_want):
 * the ranges are sorted, near ones merged into one read (merge_gap), cut
 * into reads of at most max_read bytes, and queued by priority (smaller
 * first; BFS_FETCH_NOW before everything planned). Up to `depth` reads are
 * in flight at once, through a backend: io_uring (fetch_uring.c), a pool
 * of reader threads, or an object store client. Bytes already buffered or
 * on their way are shared: a range that another ticket covers costs no
 * read. A decoder copies bytes out (bfs_fetch_copyv), waiting only while
 * their read is in flight; a read that fails or comes back short is
 * retried once, then fails the copies of the bytes it carried. Bytes stay
 * buffered while a ticket holds them, and go when the last one is
 * released.
 *
 * Bound: bytes buffered or in flight (plus a small overhead per read) stay
 * within `budget` for planned tickets, which are refused with -ENOSPC when
 * they do not fit; a ticket marked demand (a reader waits for it) is
 * always taken.
 *
 * Does not: know records, batches or the shuffle (plan.h turns those into
 * ranges), nor cache bytes nobody holds.
 *
 * Thread-safety: every function may be called from any thread. One mutex
 * guards the buffer, the queue and the counters.
 */
#ifndef BFS_FETCH_H
#define BFS_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct bfs_fetch;
struct bfs_fetch_ticket;

#define BFS_FETCH_NOW 0 /* priority of a read a reader waits for */

/* BFS_FETCH_AUTO chooses per source (bfs_fetch_new): io_uring, unless
 * objects are on a FUSE filesystem whose max_background (the kernel's
 * limit on the asynchronous requests of a connection: io_uring's reads of
 * a FUSE file are such requests, a reader thread's pread is not) is below
 * depth. max_background is read from /sys/fs/fuse/connections/DEV where
 * fusectl is mounted; elsewhere the two backends are timed on `depth`
 * (at most 256) small reads of the source, in turn, up to three rounds
 * (the first warms up; the best later round counts; 2 s at most each),
 * and the faster one taken (threads only when io_uring takes over 1.5
 * times as long);
 * bytes a local copy holds (source.local) are not read, and where too few
 * are left to time, threads. Threads where io_uring cannot start.
 * stats.backend_reason says which and why. */
enum bfs_fetch_backend {
	BFS_FETCH_AUTO = 0,
	BFS_FETCH_URING,
	BFS_FETCH_THREADS,
	BFS_FETCH_CUSTOM, /* reads go to bfs_fetch_source.submit */
};

struct bfs_fetch_read; /* one read being served by a custom backend */

/* Where the bytes come from. Objects are numbered 0..nobj-1. */
struct bfs_fetch_source {
	/* descriptor-backed objects (uring, threads): pin object `obj`'s
	 * descriptor for one read (0 and *fd, or a negative errno), and
	 * unpin it afterwards */
	int (*pin)(void *ctx, uint32_t obj, int *fd);
	void (*unpin)(void *ctx, uint32_t obj);
	/* BFS_FETCH_CUSTOM: start reading r (bfs_fetch_read_target says
	 * what), at most depth at once; call bfs_fetch_read_done(r, ...)
	 * once from any thread, also on failure */
	void (*submit)(void *ctx, struct bfs_fetch_read *r);
	/* optional, a local copy (the disk cache): fill dst with bytes
	 * [off, off + len) of obj and return true, or false to read them from
	 * the source; called before each read, no lock held */
	bool (*local)(void *ctx, uint32_t obj, uint64_t off, uint8_t *dst, uint64_t len);
	/* optional: bytes [off, off + len) of obj just came from the source
	 * (borrowed for the call); no lock held */
	void (*fetched)(void *ctx, uint32_t obj, uint64_t off, const uint8_t *src, uint64_t len);
	/* with opts.align, and for BFS_FETCH_AUTO's probe: the size of
	 * object obj */
	uint64_t (*size)(void *ctx, uint32_t obj);
	/* optional, for BFS_FETCH_AUTO: the filesystem object obj is on
	 * (st_dev; objects of one value share one choice), or 0 when not a
	 * file; NULL: io_uring, as for a local disk */
	uint64_t (*dev)(void *ctx, uint32_t obj);
	/* optional, with opts.align: only ranges starting below this offset
	 * of object obj are widened (the part a local copy keeps); NULL: all */
	uint64_t (*aligned)(void *ctx, uint32_t obj);
	/* optional, with opts.align, in place of aligned: whether the byte at
	 * off of obj is in what a local copy keeps (widened to whole blocks),
	 * and *end the end of the run of bytes kept (or not) alike from it
	 * (a multiple of align, or the object's size) */
	bool (*kept_at)(void *ctx, uint32_t obj, uint64_t off, uint64_t *end);
	/* optional, with opts.align: whether source.local holds all of
	 * [off, off + len) of obj now, answered from memory without waiting
	 * (false when unsure); called with the stage's lock held. Widened
	 * ranges are then read in runs of blocks it holds and runs it does not */
	bool (*has)(void *ctx, uint32_t obj, uint64_t off, uint64_t len);
	void *ctx;
};

struct bfs_fetch_opts {
	unsigned depth; /* reads in flight at most (>= 1) */
	uint64_t budget; /* bytes buffered or in flight for planned tickets */
	uint64_t merge_gap; /* ranges of one object at most this far apart share a read */
	uint64_t max_read; /* bytes per read at most; 0: 4 MiB */
	/* bytes of the reads in flight at most (one read always goes); 0: no
	 * bound but depth. A source that serves its bandwidth shares it among
	 * the reads in flight: with all of a group's blocks in flight at once,
	 * the one a reader waits for ends with the last; held in the queue,
	 * the reads go by priority (the reader's first). */
	uint64_t max_inflight_bytes;
	/* every range read from the source is widened to multiples of align
	 * (within its object; source.size says where it ends), so that a local
	 * copy can keep whole blocks; 0: ranges as asked */
	uint64_t align;
	enum bfs_fetch_backend backend;
	/* the source retries what may pass itself, for a bounded time (an
	 * object store's client): a read it fails is not tried again by the
	 * stage (a new ticket still tries it again) */
	bool source_retries;
	/* bytes of pass reads in flight at most (their buffers are read whole
	 * and then dropped but for the ranges kept); 0: no bound but the
	 * others */
	uint64_t max_pass_inflight;
};

struct bfs_fetch_range {
	uint32_t obj;
	uint64_t off, len;
};

struct bfs_fetch_stats {
	uint64_t reads; /* reads completed (each retry counts) */
	uint64_t bytes; /* bytes they brought */
	uint64_t ranges; /* ranges asked for (a record, a block piece) that needed a read */
	uint64_t merged; /* of those, ranges that shared a read with another */
	uint64_t inflight, peak_inflight;
	uint64_t pending; /* reads waiting for a place in flight */
	uint64_t buffered, peak_buffered; /* bytes held or in flight, with overhead */
	uint64_t waits, wait_ns; /* copies that waited for a read, and how long */
	uint64_t retries, failed; /* reads retried; reads failed after their retry */
	uint64_t dropped; /* reads never issued: their tickets went first */
	uint64_t local, local_bytes; /* reads served by source.local instead */
	uint64_t pass_reads, pass_bytes; /* of reads and bytes: pass reads' (bfs_fetch_want_pass) */
	uint64_t refused; /* planned tickets refused for want of room */
	const char *backend; /* "io_uring", "threads", ... */
	const char *backend_reason; /* why (one line; lives as long as the stage) */
};

/* n objects read through src (copied). Starts the backend's threads.
 * Errors: -EINVAL (depth 0, no source for the backend), -ENOMEM, or the
 * backend's own when it was asked for by name. */
int bfs_fetch_new(struct bfs_fetch **out, uint32_t nobj, const struct bfs_fetch_source *src,
		  const struct bfs_fetch_opts *o);
/* Stops the backend; reads still hanging in a source are abandoned (their
 * buffers are not freed). Accepts NULL. */
void bfs_fetch_free(struct bfs_fetch *f);
/* From now on every wait ends with -ESHUTDOWN and no read starts. */
void bfs_fetch_stop(struct bfs_fetch *f);

/* Flags of bfs_fetch_want. */
#define BFS_WANT_DEMAND 1u /* a reader waits: taken whatever the budget */
#define BFS_WANT_NO_GAPS 2u /* ranges share a read only where they touch */
#define BFS_WANT_AS_ASKED 4u /* not widened to a local copy's blocks (opts.align) */

/* A ticket on ranges r[0..n) (sorted here; r is modified). prio orders
 * its reads against others (smaller first). Without BFS_WANT_DEMAND,
 * -ENOSPC when its new bytes do not fit the budget. A ticket of no ranges
 * is valid. -ENOMEM. */
int bfs_fetch_want(struct bfs_fetch *f, struct bfs_fetch_range *r, size_t n, uint64_t prio,
		   unsigned flags, struct bfs_fetch_ticket **out);
/* A ticket on ranges r[0..n) (sorted here; r is modified) read in a pass:
 * the bytes of a range that lies in one of the spans sp[0..nsp) (sorted by
 * object and offset, apart, each within one object) come from one read of
 * that whole span, of which only the ranges' bytes are kept (the rest is
 * read and dropped: records scattered over whole blocks, read at the
 * source's bandwidth rather than a request each); a range outside every
 * span is read as asked (BFS_WANT_AS_ASKED). Bytes held already are shared;
 * a range that a span read holds is shared too, until that read ends (a
 * later one reads it again). A pass read that fails is tried again once
 * (unless the source retries), then its ranges are read one by one. Bytes
 * of pass reads in flight: opts.max_pass_inflight. Without BFS_WANT_DEMAND,
 * -ENOSPC when the ranges' new bytes do not fit the budget. -ENOMEM,
 * -EINVAL. */
int bfs_fetch_want_pass(struct bfs_fetch *f, struct bfs_fetch_range *r, size_t n,
			const struct bfs_fetch_range *sp, size_t nsp, uint64_t prio, unsigned flags,
			struct bfs_fetch_ticket **out);
/* Reads of t not yet issued move up to prio (a planned ticket a reader
 * now waits for). */
void bfs_fetch_hurry(struct bfs_fetch *f, struct bfs_fetch_ticket *t, uint64_t prio);
/* Drop t: bytes no other ticket holds are freed, reads not issued for
 * them dropped. Accepts NULL. */
void bfs_fetch_release(struct bfs_fetch *f, struct bfs_fetch_ticket *t);
/* Whether a read of t failed (after its retry): a new ticket for those
 * bytes tries them again, t never does. */
bool bfs_fetch_failed(struct bfs_fetch *f, const struct bfs_fetch_ticket *t);
/* Whether `bytes` more fit the budget now (for planning). */
bool bfs_fetch_has_room(struct bfs_fetch *f, uint64_t bytes);

/* The records of object obj at offs[0..n), each into its `per` iovecs
 * (iovs[k * per ..]), under one hold of the stage's lock: those whose
 * bytes are all in reads that are ready are copied (done[k] true), the
 * others left for bfs_fetch_copyv (which waits, or says why not). Returns
 * how many were copied. A decoder takes a batch's records this way: one
 * lock per batch part instead of one per record. */
size_t bfs_fetch_copy_ready(struct bfs_fetch *f, uint32_t obj, size_t n, const uint64_t *offs,
			    const struct iovec *iovs, size_t per, bool *done);
/* Copy bytes [off, off + total) of object obj into iov[0..niov) (total:
 * the sum of their lengths), waiting for reads in flight. 0; -ENODATA
 * when some of those bytes are not held by any ticket (read them
 * elsewhere); the read's error (-EIO, -ESTALE...) with a message when it
 * failed after its retry; -ESHUTDOWN after bfs_fetch_stop. */
int bfs_fetch_copyv(struct bfs_fetch *f, uint32_t obj, uint64_t off, const struct iovec *iov,
		    size_t niov);

/* Call fn(ctx) (from a backend's thread, no lock held) whenever the reads
 * waiting to be issued fall to `at`: a planner's cue to plan more. fn
 * NULL: never. Returns once no call of the previous fn runs. */
void bfs_fetch_set_low(struct bfs_fetch *f, uint64_t at, void (*fn)(void *ctx), void *ctx);

void bfs_fetch_stats(struct bfs_fetch *f, struct bfs_fetch_stats *out);
/* The backend in use and the depth: "io_uring", "threads", "custom". */
const char *bfs_fetch_backend_name(const struct bfs_fetch *f);

/* What BFS_FETCH_AUTO takes for a FUSE filesystem whose max_background is
 * max_bg (-1: unknown), given the times of `depth` reads through io_uring
 * and threads (0: not measured; -1: did not finish in time), and the
 * line why into why[len]. For tests; bfs_fetch_new calls it. */
enum bfs_fetch_backend bfs_fetch_choose_fuse(long max_bg, unsigned depth, int64_t uring_ns,
					     int64_t threads_ns, char *why, size_t len);
/* A FUSE connection's max_background, for a descriptor of a file on it:
 * the value (> 0), -1 when it cannot be read (fusectl not mounted), or 0
 * when the file is not on FUSE. */
long bfs_fetch_fuse_max_background(int fd);
unsigned bfs_fetch_depth(const struct bfs_fetch *f);
/* The budget for planned tickets (opts.budget: readahead). */
uint64_t bfs_fetch_budget(const struct bfs_fetch *f);
/* What a read of the source costs, as measured on the reads so far: its
 * latency (a small read's time, ns) and the bytes per second a large one
 * brings beyond that; 0 for what was not measured yet. */
void bfs_fetch_cost(struct bfs_fetch *f, uint64_t *lat_ns, double *bytes_per_s);
/* Whether a local copy holds bytes [off, off + len) of obj now
 * (source.has; false without one). */
bool bfs_fetch_held(struct bfs_fetch *f, uint32_t obj, uint64_t off, uint64_t len);
/* Bytes [0, end) of obj that a local copy keeps (read in whole blocks of
 * opts.align; source.kept_at or aligned), 0 without one. */
uint64_t bfs_fetch_kept(struct bfs_fetch *f, uint32_t obj);
/* Whether the reads go to a custom backend (an object store's client). */
bool bfs_fetch_is_custom(const struct bfs_fetch *f);

/* ---- for custom backends ---- */
void bfs_fetch_read_target(const struct bfs_fetch_read *r, uint32_t *obj, uint64_t *off,
			   uint8_t **dst, uint64_t *len);
/* got: bytes read into dst (< len: short, retried), or a negative errno;
 * msg: what went wrong (copied; may be NULL). */
void bfs_fetch_read_done(struct bfs_fetch_read *r, int64_t got, const char *msg);

#endif
