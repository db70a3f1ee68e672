/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cntcache.c — the ragged counts cache of a dataset: which file holds a
 * shard's counts (its directory's counts pack, or a file of its own), load,
 * put, and the one write of each pack (see cntcache.h).
 *
 * Pack bytes are untrusted: ixpack.c checks the container, and every entry
 * goes through every check of a counts file (counts.c) before a count of
 * it is used or it is carried into a new pack.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cntcache.h"

#include "common.h"
#include "counts.h"
#include "ixpack.h"

#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The counts pack of one directory (for this cache's description). */
struct group {
	uint64_t dirhash;
	char *file; /* INDEX_DIR/<dirhash>-<deschash>.cntpack.idx */
	bool read; /* the file was read (pk: NULL if absent or bad) */
	struct bfs_ixpack *pk;
	bool *live; /* [count of pk]: the entry loaded for one of our shards */
	bool dirty; /* the file bad, or an entry bad or stale: write it */
	struct bfs_ixpack_writer *w; /* entries put; NULL: none yet */
	uint64_t *put; /* their path hashes */
	size_t nput, capput;
};

struct bfs_cntcache {
	const struct bfs_dataset *ds;
	char *dir;
	char *desc;
	size_t desclen;
	uint64_t deschash;
	uint32_t nslots;
	char own[48]; /* "-<deschash>.cnt.idx": a shard's file of its own */
	char old[48]; /* "-<deschash>.cnt": the retired name of that file */
	void (*on_note)(void *ctx, const char *shard, const char *msg);
	void *note_ctx;
	struct group *g; /* sorted by dirhash */
	size_t ng;
	size_t *group_of; /* [nshards]: shard i's group; SIZE_MAX: none */
	bool *in_pack; /* [nshards]: shard i's counts loaded from or put in its pack */
	int dir_rc; /* 1: not made yet; else bfs_cache_dir_make's result */
	bool said_write; /* one note for files not written */
};

static void note(const struct bfs_cntcache *cc, const char *shard, const char *msg)
{
	if (cc->on_note)
		cc->on_note(cc->note_ctx, shard, msg);
}

/* A file not written costs a count pass next time: one note per cache. */
static void note_write(struct bfs_cntcache *cc, int rc)
{
	char msg[PATH_MAX + 256];

	if (cc->said_write)
		return;
	cc->said_write = true;
	snprintf(msg, sizeof(msg),
		 "%s: cannot write ragged counts (%s): the next mount counts again", cc->dir,
		 strerror(-rc));
	note(cc, NULL, msg);
}

static int dir_make(struct bfs_cntcache *cc)
{
	if (cc->dir_rc == 1)
		cc->dir_rc = bfs_cache_dir_make(cc->dir);
	return cc->dir_rc;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- new / free ------------------------------------------------------------ */

void bfs_cntcache_free(struct bfs_cntcache *cc)
{
	if (!cc)
		return;
	for (size_t j = 0; j < cc->ng; j++) {
		free(cc->g[j].file);
		bfs_ixpack_free(cc->g[j].pk);
		free(cc->g[j].live);
		bfs_ixpack_writer_free(cc->g[j].w);
		free(cc->g[j].put);
	}
	free(cc->g);
	free(cc->group_of);
	free(cc->in_pack);
	free(cc->desc);
	free(cc->dir);
	free(cc);
}

/* The groups of the shards' directories, and each shard's. */
static int groups_make(struct bfs_cntcache *cc)
{
	size_t n = bfs_dataset_nshards(cc->ds), nh = 0;
	uint64_t *dirh = malloc((n ? n : 1) * sizeof(*dirh));
	uint64_t *h = malloc((n ? n : 1) * sizeof(*h));
	char file[PATH_MAX + 64], abs[PATH_MAX];
	int rc = 0;

	cc->group_of = malloc((n ? n : 1) * sizeof(*cc->group_of));
	cc->in_pack = calloc(n ? n : 1, sizeof(*cc->in_pack));
	if (!dirh || !h || !cc->group_of || !cc->in_pack) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		cc->group_of[i] = SIZE_MAX;
		if (bfs_dataset_cache_file(cc->ds, i, cc->dir, "", file, sizeof(file), abs,
					   sizeof(abs)) != 0 ||
		    !strchr(abs, '/'))
			continue;
		dirh[i] = bfs_ixpack_dir_hash(abs);
		cc->group_of[i] = 0;
		h[nh++] = dirh[i];
	}
	qsort(h, nh, sizeof(*h), u64_cmp);
	cc->g = calloc(nh ? nh : 1, sizeof(*cc->g));
	if (!cc->g) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < nh; j++) {
		struct group *g;

		if (cc->ng && cc->g[cc->ng - 1].dirhash == h[j])
			continue;
		g = &cc->g[cc->ng++];
		g->dirhash = h[j];
		if (asprintf(&g->file, "%s/%016llx-%016llx.cntpack.idx", cc->dir,
			     (unsigned long long)h[j], (unsigned long long)cc->deschash) < 0) {
			g->file = NULL;
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (cc->group_of[i] != SIZE_MAX)
			cc->group_of[i] =
				bfs_sorted_u64_floor(cc->g, cc->ng, sizeof(*cc->g),
						     offsetof(struct group, dirhash), dirh[i]);
out:
	free(dirh);
	free(h);
	return rc;
}

int bfs_cntcache_new(struct bfs_cntcache **out, const struct bfs_dataset *ds,
		     const struct bfs_plan *p, const char *index_dir,
		     void (*on_note)(void *ctx, const char *shard, const char *msg), void *note_ctx)
{
	struct bfs_cntcache *cc = calloc(1, sizeof(*cc));
	int rc;

	*out = NULL;
	if (!cc)
		return -ENOMEM;
	cc->ds = ds;
	cc->nslots = (uint32_t)p->nslots;
	cc->on_note = on_note;
	cc->note_ctx = note_ctx;
	cc->dir_rc = 1;
	cc->dir = strdup(index_dir);
	rc = cc->dir ? bfs_counts_desc(p, &cc->desc, &cc->desclen) : -ENOMEM;
	if (!rc) {
		cc->deschash = bfs_fnv1a(0xcbf29ce484222325ull, cc->desc, cc->desclen);
		snprintf(cc->own, sizeof(cc->own), "-%016llx.cnt.idx",
			 (unsigned long long)cc->deschash);
		snprintf(cc->old, sizeof(cc->old), "-%016llx.cnt",
			 (unsigned long long)cc->deschash);
		rc = groups_make(cc);
	}
	if (rc) {
		bfs_cntcache_free(cc);
		return rc;
	}
	*out = cc;
	return 0;
}

/* ---- a shard's key and file ------------------------------------------------ */

/* Shard i's key (k->path is abs) and the name of a file of its own; whether
 * its counts go in its directory's pack. */
static int key_of(const struct bfs_cntcache *cc, size_t i, char *file, size_t cap, char *abs,
		  size_t abscap, struct bfs_counts_key *k, bool *packed)
{
	const struct bfs_shard *sh = bfs_dataset_shard(cc->ds, i);

	if (bfs_dataset_cache_file(cc->ds, i, cc->dir, cc->own, file, cap, abs, abscap) != 0)
		return -EINVAL;
	k->path = abs;
	k->comp = (uint32_t)bfs_shard_compression(sh);
	k->file_size = bfs_shard_file_size(sh);
	k->mtime_ns = bfs_shard_mtime_ns(sh);
	k->nrecords = bfs_shard_nrecords(sh);
	k->nslots = cc->nslots;
	k->desc = cc->desc;
	k->desclen = cc->desclen;
	*packed = cc->group_of[i] != SIZE_MAX && bfs_counts_file_bytes(k) < BFS_IXPACK_ENTRY_MAX;
	return 0;
}

/* ---- load ------------------------------------------------------------------ */

static void group_read(struct bfs_cntcache *cc, struct group *g)
{
	char why[256], msg[PATH_MAX + 512];

	g->read = true;
	if (bfs_ixpack_load(&g->pk, g->file, why, sizeof(why)) == BFS_INDEX_BAD) {
		g->dirty = true;
		snprintf(msg, sizeof(msg), "ragged counts pack %s: %s; rebuilding it", g->file,
			 why);
		note(cc, NULL, msg);
		return;
	}
	if (g->pk) {
		size_t n = bfs_ixpack_count(g->pk);

		g->live = calloc(n ? n : 1, sizeof(*g->live));
		if (!g->live) { /* out of memory: as if there were no pack */
			bfs_ixpack_free(g->pk);
			g->pk = NULL;
		}
	}
}

/* Shard i's entry in its pack. A corrupt one is one note; a corrupt or
 * stale one marks the pack to be written again. */
static bool pack_load(struct bfs_cntcache *cc, size_t i, const struct bfs_counts_key *k,
		      uint32_t *const *cols)
{
	struct group *g = &cc->g[cc->group_of[i]];
	uint64_t h = bfs_ixpack_hash(k->path);
	char why[256], msg[2 * PATH_MAX + 512];

	if (!g->read)
		group_read(cc, g);
	if (!g->pk)
		return false;
	for (size_t e = bfs_ixpack_find(g->pk, h); e < bfs_ixpack_count(g->pk); e++) {
		const uint8_t *p;
		uint64_t eh;
		size_t len;
		enum bfs_counts_result r;

		bfs_ixpack_entry(g->pk, e, &eh, &p, &len);
		if (eh != h)
			break;
		/* another shard's path may hash the same: STALE, the path checked */
		r = bfs_counts_from_bytes(p, len, k, cols, why, sizeof(why));
		if (r == BFS_COUNTS_LOADED) {
			g->live[e] = true;
			cc->in_pack[i] = true;
			return true;
		}
		g->dirty = true;
		if (r == BFS_COUNTS_BAD) {
			snprintf(msg, sizeof(msg),
				 "ragged counts pack %s: the entry of %s: %s; rebuilding it",
				 g->file, k->path, why);
			note(cc, bfs_shard_path(bfs_dataset_shard(cc->ds, i)), msg);
		}
	}
	return false;
}

bool bfs_cntcache_load(struct bfs_cntcache *cc, size_t i, uint32_t *const *cols)
{
	char file[PATH_MAX + 64], abs[PATH_MAX], why[256], msg[PATH_MAX + 512];
	struct bfs_counts_key k;
	enum bfs_counts_result r;
	bool packed;

	if (key_of(cc, i, file, sizeof(file), abs, sizeof(abs), &k, &packed) != 0)
		return false;
	if (packed)
		return pack_load(cc, i, &k, cols);
	r = bfs_counts_load(file, &k, cols, why, sizeof(why));
	if (r == BFS_COUNTS_STALE || r == BFS_COUNTS_BAD) {
		snprintf(msg, sizeof(msg), "ragged counts cache %s: %s; rebuilding it", file, why);
		note(cc, bfs_shard_path(bfs_dataset_shard(cc->ds, i)), msg);
	}
	return r == BFS_COUNTS_LOADED;
}

/* ---- put and save ---------------------------------------------------------- */

static int pack_put(struct group *g, const struct bfs_counts_key *k, const uint32_t *const *cols)
{
	uint64_t h = bfs_ixpack_hash(k->path);
	uint8_t *p = NULL;
	size_t len = 0;
	int rc;

	if (g->nput == g->capput) {
		size_t nc = g->capput ? 2 * g->capput : 64;
		uint64_t *np = realloc(g->put, nc * sizeof(*np));

		if (!np)
			return -ENOMEM;
		g->put = np;
		g->capput = nc;
	}
	if (!g->w && bfs_ixpack_writer_new(&g->w) != 0)
		return -ENOMEM;
	rc = bfs_counts_image(k, cols, &p, &len);
	if (!rc)
		rc = bfs_ixpack_add_bytes(g->w, h, p, len);
	free(p);
	if (!rc)
		g->put[g->nput++] = h;
	return rc;
}

void bfs_cntcache_put(struct bfs_cntcache *cc, size_t i, const uint32_t *const *cols)
{
	char file[PATH_MAX + 64], abs[PATH_MAX];
	struct bfs_counts_key k;
	bool packed;
	int rc = key_of(cc, i, file, sizeof(file), abs, sizeof(abs), &k, &packed);

	if (!rc && packed) {
		rc = pack_put(&cc->g[cc->group_of[i]], &k, cols);
		cc->in_pack[i] = !rc;
	} else if (!rc) {
		rc = dir_make(cc);
		if (!rc)
			rc = bfs_counts_save(file, &k, cols);
		/* the file under its old name, which SOURCE as index_dir took
		 * for a shard, is not read any more */
		if (!rc && bfs_dataset_cache_file(cc->ds, i, cc->dir, cc->old, file, sizeof(file),
						  abs, sizeof(abs)) == 0)
			(void)unlink(file);
	}
	if (rc)
		note_write(cc, rc);
}

/* Does entry e of g's old pack go into the new one? Not if it was put again
 * (hash among put[0..nput), sorted); yes if it loaded for one of our
 * shards; else if it is a sound entry for our slots whose shard is still
 * there with the size and mtime it records (another dataset's shard in the
 * same directory). */
static bool keep_old(const struct bfs_cntcache *cc, const struct group *g, size_t e)
{
	char path[PATH_MAX + 1], why[256];
	struct bfs_counts_key k;
	const uint8_t *p;
	struct stat st;
	uint64_t h;
	size_t len;

	bfs_ixpack_entry(g->pk, e, &h, &p, &len);
	if (g->nput && bsearch(&h, g->put, g->nput, sizeof(h), u64_cmp))
		return false;
	if (g->live[e])
		return true;
	return bfs_counts_image_key(p, len, &k, path, sizeof(path)) && k.nslots == cc->nslots &&
	       k.desclen == cc->desclen && memcmp(k.desc, cc->desc, k.desclen) == 0 &&
	       bfs_ixpack_hash(path) == h && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == k.file_size &&
	       (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == k.mtime_ns &&
	       bfs_counts_from_bytes(p, len, &k, NULL, why, sizeof(why)) == BFS_COUNTS_LOADED;
}

static int pack_save(struct bfs_cntcache *cc, struct group *g)
{
	int rc = 0;

	if (!g->read)
		group_read(cc, g);
	if (!g->w && bfs_ixpack_writer_new(&g->w) != 0)
		return -ENOMEM;
	if (g->nput)
		qsort(g->put, g->nput, sizeof(*g->put), u64_cmp);
	for (size_t e = 0; !rc && g->pk && e < bfs_ixpack_count(g->pk); e++) {
		const uint8_t *p;
		uint64_t h;
		size_t len;

		if (!keep_old(cc, g, e))
			continue;
		bfs_ixpack_entry(g->pk, e, &h, &p, &len);
		rc = bfs_ixpack_add_bytes(g->w, h, p, len);
	}
	if (!rc)
		rc = dir_make(cc);
	if (!rc) /* one file, one write; no entry left: the file removed */
		rc = bfs_ixpack_write(g->w, g->file);
	return rc;
}

/* The shards whose counts are in a pack just written lose their files of
 * their own (a .cnt.idx from when the shard was larger, or one under the
 * retired .cnt name): nothing reads them. */
static void drop_own_files(struct bfs_cntcache *cc, const bool *written)
{
	const char *const names[] = { cc->old, cc->own };
	size_t n = bfs_dataset_nshards(cc->ds);
	bool *drop = calloc(n ? n : 1, sizeof(*drop));

	for (size_t i = 0; drop && i < n; i++)
		drop[i] = cc->in_pack[i] && written[cc->group_of[i]];
	if (drop)
		bfs_dataset_drop_cache_files(cc->ds, cc->dir, names, BFS_ARRAY_SIZE(names), drop);
	free(drop);
}

void bfs_cntcache_save(struct bfs_cntcache *cc)
{
	bool *written = cc ? calloc(cc->ng ? cc->ng : 1, sizeof(*written)) : NULL;

	for (size_t j = 0; cc && j < cc->ng; j++) {
		struct group *g = &cc->g[j];
		int rc;

		if (!g->nput && !g->dirty)
			continue;
		rc = pack_save(cc, g);
		if (rc)
			note_write(cc, rc);
		else if (written)
			written[j] = true;
		/* written: what was put is in the file now */
		bfs_ixpack_writer_free(g->w);
		g->w = NULL;
		g->nput = 0;
		g->dirty = false;
	}
	if (written)
		drop_own_files(cc, written);
	free(written);
}
