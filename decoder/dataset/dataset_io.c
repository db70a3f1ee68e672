/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_io.c — the I/O stage (fetch.h) over a dataset's shards: what it
 * reads through (descriptors, a bucket's objects, copies in a disk cache),
 * which shards go through it (the remote ones, or all with an explicit
 * io_depth), and a disk cache copy that is whole promoted to a local,
 * mapped view of its shard.
 *
 * Does not: plan reads (ioplan.c) or issue them (fetch.c).
 */
#include "dataset_impl.h"

#include "diskcache.h"
#include "fetch.h"
#include "objsrc.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* how long the stage's end waits for a bucket's reads it cancelled (the
 * client's thread ends each at once; a stuck one is left behind) */
#define END_READS_WAIT_MS 500

struct bfs_objsrc *bfs_dataset_objsrc(const struct bfs_dataset *ds)
{
	return ds->objs;
}

void bfs_dataset_passed(const struct bfs_dataset *ds, char *const **names, size_t *n)
{
	*names = ds->passed;
	*n = ds->npassed;
}

bool bfs_dataset_remote(const struct bfs_dataset *ds)
{
	for (size_t i = 0; i < ds->nshards; i++)
		if (bfs_shard_is_remote(ds->shards[i]))
			return true;
	return false;
}

/* What the I/O stage reads through: the shards, and their copies in a
 * disk cache. Attached to the dataset while a stage exists. */
struct dsio {
	struct bfs_dataset *ds;
	struct bfs_diskcache *dc;
	struct bfs_dcobj **obj; /* [nshards] with dc; NULL entries: not cached */
	atomic_bool *failed; /* [nshards]: the shard's promoted copy failed a read, and
			      * it was demoted (until promoted again) */
	bool all; /* every shard through the stage, else the remote ones */
	atomic_bool *promoted; /* [nshards]: the shard is read from its copy */
	void (*note)(void *ctx, const char *msg);
	void *ctx;
};

static int shard_pin(void *ctx, uint32_t obj, int *fd)
{
	const struct dsio *io = ctx;

	return bfs_shard_pin_fd(io->ds->shards[obj], fd);
}

static void shard_unpin(void *ctx, uint32_t obj)
{
	const struct dsio *io = ctx;

	bfs_shard_unpin_fd(io->ds->shards[obj]);
}

static void object_submit(void *ctx, struct bfs_fetch_read *r)
{
	const struct dsio *io = ctx;
	uint64_t off, len;
	uint32_t obj;
	uint8_t *dst;

	bfs_fetch_read_target(r, &obj, &off, &dst, &len);
	bfs_objsrc_submit(io->ds->objs, r, io->ds->shards[obj]);
}

static uint64_t shard_size(void *ctx, uint32_t obj)
{
	const struct dsio *io = ctx;

	return bfs_shard_file_size(io->ds->shards[obj]);
}

/* The filesystem a shard's stage reads go to; 0 for one the stage does
 * not read (a local shard without `all`, one a shadow copy serves): the
 * backend's probe leaves it alone. */
static uint64_t shard_dev(void *ctx, uint32_t obj)
{
	const struct dsio *io = ctx;
	const struct bfs_shard *s = io->ds->shards[obj];

	if (bfs_shard_has_shadow(s) || !(io->all || bfs_shard_is_remote(s)))
		return 0;
	return bfs_shard_dev(s);
}

static bool cached_read(void *ctx, uint32_t obj, uint64_t off, uint8_t *dst, uint64_t len)
{
	const struct dsio *io = ctx;

	return io->obj[obj] && bfs_dcobj_read(io->obj[obj], dst, (size_t)len, off) == 0;
}

static bool kept_at(void *ctx, uint32_t obj, uint64_t off, uint64_t *end)
{
	const struct dsio *io = ctx;

	*end = UINT64_MAX;
	return io->obj[obj] && bfs_dcobj_kept_at(io->obj[obj], off, end);
}

void bfs_dataset_share(const struct bfs_dataset *ds, size_t i, uint64_t off, uint64_t len)
{
	const struct dsio *io = ds->io;

	if (io && io->dc && i < ds->nshards && io->obj[i])
		bfs_dcobj_share(io->obj[i], off, len);
}

static bool held(void *ctx, uint32_t obj, uint64_t off, uint64_t len)
{
	const struct dsio *io = ctx;

	return io->obj[obj] && bfs_dcobj_holds(io->obj[obj], off, len);
}

static void fetched(void *ctx, uint32_t obj, uint64_t off, const uint8_t *src, uint64_t len)
{
	const struct dsio *io = ctx;

	if (io->obj[obj])
		bfs_dcobj_put(io->obj[obj], src, (size_t)len, off);
}

static void io_note(const struct dsio *io, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void io_note(const struct dsio *io, const char *fmt, ...)
{
	char msg[PATH_MAX + 512];
	va_list ap;

	if (!io->note)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	io->note(io->ctx, msg);
}

static void promote(struct dsio *io, size_t i);

/* A read of a promoted shard's copy failed record rec (read from the
 * source instead): the blocks holding it are no longer there, and the
 * shard is read through the I/O stage again (demoted), which reads the
 * good blocks from the copy and fetches the bad ones once, writing them
 * again; when the copy is whole again it is promoted again (copy_complete).
 * Left attached, each later read of a bad record went to the source, in
 * every epoch. One line per demotion. */
static void copy_failed(void *ctx, const struct bfs_shard *s, uint64_t rec, const char *msg)
{
	struct dsio *io = ctx;

	for (size_t i = 0; i < io->ds->nshards; i++) {
		if (io->ds->shards[i] != s || !io->obj[i])
			continue;
		bool bad = bfs_dcobj_forget(io->obj[i], bfs_shard_record_offset(s, rec),
					    (uint64_t)bfs_shard_record_len(s, rec) +
						    16 /* its framing */);

		if (atomic_exchange(&io->failed[i], true))
			continue;
		io_note(io, "disk_cache: %s: %s; its bad blocks are fetched again",
			bfs_shard_path(s), msg);
		bfs_shard_demote(io->ds->shards[i]);
		/* no bad page (written again since that read, or the read
		 * failed for another reason): the copy, checked whole, is
		 * read as a file again at once; else once its bad blocks are
		 * written again (copy_complete) */
		if (!bad)
			promote(io, i);
	}
}

/* Shard i's copy is whole: check it, and read the shard from it from now
 * on, as a plain local file (mapped). Plain shards only: a compressed
 * one's copy holds compressed bytes. */
static void promote(struct dsio *io, size_t i)
{
	struct bfs_shard *s = io->ds->shards[i], *view = NULL;
	const char *path;
	int fd;

	if (bfs_shard_compression(s) != BFS_COMP_NONE || bfs_shard_has_shadow(s) ||
	    !bfs_dcobj_verify(io->obj[i], &path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (bfs_shard_open_view(&view, path, fd, s) != 0) {
		close(fd);
		return;
	}
	if (!bfs_shard_promote(s, view, copy_failed, io)) {
		bfs_shard_close(view);
	} else {
		atomic_store(&io->promoted[i], true);
		atomic_store(&io->failed[i], false); /* a failure from now is a new one */
	}
}

void bfs_dataset_copy_served(const struct bfs_dataset *ds, uint64_t *records, uint64_t *bytes)
{
	const struct dsio *io = ds->io;

	*records = *bytes = 0;
	if (!io || !io->dc)
		return;
	for (size_t i = 0; i < ds->nshards; i++) {
		uint64_t r, b;

		if (!atomic_load(&io->promoted[i]))
			continue;
		bfs_shard_shadow_served(ds->shards[i], &r, &b);
		*records += r;
		*bytes += b;
	}
}

static void copy_complete(void *ctx, void *user)
{
	struct dsio *io = ctx;

	promote(io, (size_t)(uintptr_t)user - 1);
}

int bfs_dataset_fetch_new(struct bfs_fetch **out, const struct bfs_dataset *ds,
			  const struct bfs_dataset_io *o)
{
	struct bfs_fetch_source src = {
		.pin = shard_pin, .unpin = shard_unpin, .size = shard_size, .dev = shard_dev
	};
	struct bfs_fetch_opts fo = o->fetch;
	struct bfs_dataset *m = (struct bfs_dataset *)ds; /* the stage is attached to it */
	struct dsio *io;
	int rc;

	*out = NULL;
	if (ds->nshards > UINT32_MAX)
		return bfs_err_set(-EFBIG, "too many shards for the I/O stage");
	io = calloc(1, sizeof(*io));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	if (!io || !(io->obj = calloc(ds->nshards ? ds->nshards : 1, sizeof(*io->obj))) ||
	    !(io->failed = calloc(ds->nshards ? ds->nshards : 1, sizeof(*io->failed))) ||
	    !(io->promoted = calloc(ds->nshards ? ds->nshards : 1, sizeof(*io->promoted)))) {
		if (io) {
			free(io->obj);
			free(io->failed);
		}
		free(io);
		return -ENOMEM;
	}
	io->ds = m;
	io->dc = o->dc;
	io->all = o->all;
	io->note = o->note;
	io->ctx = o->ctx;
	src.ctx = io;
	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_shard *s = ds->shards[i];
		char real[PATH_MAX];

		if (!io->dc || !(o->all || bfs_shard_is_remote(s)))
			continue;
		io->obj[i] = bfs_diskcache_obj(
			io->dc, bfs_dataset_real_path(bfs_shard_path(s), real),
			bfs_shard_file_size(s), bfs_shard_mtime_ns(s), (void *)(uintptr_t)(i + 1));
	}
	if (ds->objs) { /* a bucket: ranged GETs through the client */
		src.submit = object_submit;
		fo.backend = BFS_FETCH_CUSTOM;
		fo.source_retries = true; /* the client's retries (s3.h) */
	}
	if (io->dc) {
		src.local = cached_read;
		src.fetched = fetched;
		/* what the cache keeps (all of a dataset that fits, else a stable
		 * part: diskcache.h) is read in whole blocks, so that each is
		 * written whole and a later read finds all of its blocks; the rest
		 * is read as asked, as without the cache */
		src.kept_at = kept_at;
		src.has = held;
		fo.align = BFS_DC_BLOCK;
	}
	rc = bfs_fetch_new(out, (uint32_t)ds->nshards, &src, &fo);
	if (rc) {
		free(io->obj);
		free(io->failed);
		free(io->promoted);
		free(io);
		return rc;
	}
	m->io = io;
	if (io->dc)
		bfs_diskcache_set_complete(io->dc, copy_complete, io);
	for (size_t i = 0; i < ds->nshards; i++) {
		if (o->all || bfs_shard_is_remote(ds->shards[i]))
			bfs_shard_set_fetch(ds->shards[i], *out, (uint32_t)i);
		/* copies made whole by an earlier mount: local from the start */
		if (io->obj[i] && bfs_dcobj_complete(io->obj[i]))
			promote(io, i);
	}
	return 0;
}

void bfs_dataset_fetch_free(const struct bfs_dataset *ds, struct bfs_fetch *f)
{
	struct bfs_dataset *m = (struct bfs_dataset *)ds;

	if (!f)
		return;
	for (size_t i = 0; i < ds->nshards; i++)
		bfs_shard_set_fetch(ds->shards[i], NULL, 0);
	/* a bucket's reads in flight end now, cancelled, not later through a
	 * freed stage (which then had to be left behind, and leaked) */
	bfs_fetch_stop(f);
	if (ds->objs)
		(void)bfs_objsrc_end_reads(ds->objs, END_READS_WAIT_MS);
	bfs_fetch_free(f);
	if (m->io && m->io->dc)
		bfs_diskcache_set_complete(m->io->dc, NULL, NULL);
	if (m->io) {
		free(m->io->obj);
		free(m->io->failed);
		free(m->io->promoted);
		free(m->io);
		m->io = NULL;
	}
}
