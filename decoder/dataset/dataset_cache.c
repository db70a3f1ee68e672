/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dataset_cache.c — what index_dir keeps of a dataset between mounts: each
 * shard's index (a file of its own, or an entry of its directory's pack
 * when small: ixpack.h), loaded over the jobs threads and checked against
 * the shard's size and mtime, written back after a scan; and the inferred
 * schema. A cache file that cannot be written costs a rescan next time,
 * never a failed mount; one that is old or corrupt is named once and
 * rebuilt.
 *
 * Does not: scan (dataset_scan.c) or read records.
 */
#include "dataset_impl.h"

#include "ixpack.h"
#include "pfor.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ----------------------------------------------------------- index cache */

/* A shard's absolute path: its real path when it resolves, else as given. */
const char *bfs_dataset_real_path(const char *path, char real[PATH_MAX])
{
	return realpath(path, real) ? real : path;
}

/* Shard i's absolute path: realpath once per shard and mount (it costs a
 * getcwd and a readlink per path component). Called for distinct i by the
 * load workers, then by one thread. NULL: out of memory. */
static const char *shard_abs(struct bfs_dataset *ds, size_t i)
{
	if (!ds->abs[i]) {
		char real[PATH_MAX];

		ds->abs[i] = strdup(bfs_dataset_real_path(bfs_shard_path(ds->shards[i]), real));
	}
	return ds->abs[i];
}

/* DIR/<hash of abs>SUFFIX: every cache file of a shard (.idx, counts). */
static int cache_name(char *dst, size_t cap, const char *dir, const char *abs, const char *suffix)
{
	uint64_t h = bfs_fnv1a(0xcbf29ce484222325ull, abs, strlen(abs));

	if ((size_t)snprintf(dst, cap, "%s/%016llx%s", dir, (unsigned long long)h, suffix) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

static void idx_file(char *dst, size_t cap, const char *dir, const char *abs)
{
	(void)cache_name(dst, cap, dir, abs, ".idx");
}

int bfs_dataset_cache_file(const struct bfs_dataset *ds, size_t i, const char *dir,
			   const char *suffix, char *dst, size_t cap, char *abs, size_t abscap)
{
	char real[PATH_MAX];
	const char *p;

	if (i >= ds->nshards)
		return -EINVAL;
	/* resolved at open when the dataset has an index_dir; a dataset
	 * opened without one resolves here */
	p = ds->abs && ds->abs[i] ? ds->abs[i]
				  : bfs_dataset_real_path(bfs_shard_path(ds->shards[i]), real);
	if (strlen(p) >= abscap)
		return -ENAMETOOLONG;
	memcpy(abs, p, strlen(p) + 1);
	return cache_name(dst, cap, dir, abs, suffix);
}

/* Is name "<16 hex digits><one of the suffixes>", as cache_name writes? */
static bool shard_cache_name(const char *name, const char *const *suffixes, size_t nsuf)
{
	size_t n = strlen(name);

	if (n <= 16 || strspn(name, "0123456789abcdef") < 16)
		return false;
	for (size_t s = 0; s < nsuf; s++)
		if (strcmp(name + 16, suffixes[s]) == 0)
			return true;
	return false;
}

void bfs_dataset_drop_cache_files(const struct bfs_dataset *ds, const char *dir,
				  const char *const *suffixes, size_t nsuf, const bool *drop)
{
	char **names = NULL;
	size_t n = 0, cap = 0, first = 0;
	struct dirent *de;
	DIR *d;

	while (first < ds->nshards && !drop[first])
		first++;
	if (first == ds->nshards || !(d = opendir(dir)))
		return; /* nothing to drop: not even a listing */
	while ((de = readdir(d)) != NULL)
		if (shard_cache_name(de->d_name, suffixes, nsuf) &&
		    bfs_source_push(&names, &n, &cap, de->d_name) != 0)
			break; /* out of memory: the names listed so far */
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), bfs_source_strcmp);
	for (size_t i = first; n && i < ds->nshards; i++) {
		for (size_t s = 0; drop[i] && s < nsuf; s++) {
			char file[PATH_MAX + 64], abs[PATH_MAX];
			const char *base;

			if (bfs_dataset_cache_file(ds, i, dir, suffixes[s], file, sizeof(file), abs,
						   sizeof(abs)) != 0)
				break;
			base = file + strlen(dir) + 1;
			if (bsearch(&base, names, n, sizeof(*names), bfs_source_strcmp))
				(void)unlink(file);
		}
	}
	bfs_source_free(names, n);
}

static void idx_key(struct bfs_index_key *k, const char *abs, const struct bfs_shard *s)
{
	k->path = abs;
	k->comp = (uint32_t)bfs_shard_compression(s);
	k->file_size = bfs_shard_file_size(s);
	k->mtime_ns = bfs_shard_mtime_ns(s);
}

/* Does shard i's index go into its directory's pack (ixpack.h) rather
 * than a file of its own? Small indexes do (BFS_IXPACK_ENTRY_MAX). */
bool bfs_dataset_idx_packed(struct bfs_dataset *ds, size_t i)
{
	const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
	struct bfs_index_key k;

	if (!ds->packs || !ix || !ds->abs[i] || ds->pack_of[i] == SIZE_MAX)
		return false;
	idx_key(&k, ds->abs[i], ds->shards[i]);
	return bfs_index_file_bytes(ix, &k) < BFS_IXPACK_ENTRY_MAX;
}

/* Best effort: a failure to write the cache only costs a rescan next time. */
void bfs_dataset_idx_save(struct bfs_dataset *ds, const char *dir, size_t i)
{
	char path[PATH_MAX + 32];
	const char *abs = shard_abs(ds, i);
	struct bfs_index_key k;

	if (!ds->ix_dir_ok || !abs || !bfs_shard_get_index(ds->shards[i]))
		return;
	idx_file(path, sizeof(path), dir, abs);
	idx_key(&k, abs, ds->shards[i]);
	(void)bfs_index_save(bfs_shard_get_index(ds->shards[i]), path, &k);
}

/* Shard i's entry in its directory's pack: 1 loaded, 0 not (a corrupt
 * entry is named in note; a stale or corrupt one marks the pack to be
 * written again). Called from the load workers: *dirty under lock. */
static int pack_load_one(struct bfs_dataset *ds, size_t i, const struct bfs_index_key *k,
			 pthread_mutex_t *lock, char *note, size_t cap)
{
	struct pack_group *g;
	struct bfs_index *ix = NULL;
	enum bfs_index_load_result r;
	bool had = false;
	char why[256];

	if (!ds->packs || ds->pack_of[i] == SIZE_MAX)
		return 0;
	g = &ds->packs[ds->pack_of[i]];
	if (!g->pk)
		return 0;
	r = bfs_ixpack_get(g->pk, k, &ix, &had, why, sizeof(why));
	if (r == BFS_INDEX_BAD)
		snprintf(note, cap, "index pack %s: the entry of %s: %s; rebuilding it", g->file,
			 k->path, why);
	if (r != BFS_INDEX_LOADED && had) {
		pthread_mutex_lock(lock);
		g->dirty = true;
		pthread_mutex_unlock(lock);
	}
	if (r != BFS_INDEX_LOADED)
		return 0;
	if (bfs_shard_compression(ds->shards[i]) == BFS_COMP_AUTO)
		(void)bfs_shard_detect(ds->shards[i], (enum bfs_compression)ix->comp);
	if (bfs_shard_set_index(ds->shards[i], ix) != 0) {
		snprintf(note, cap, "index pack %s: the entry of %s: %s; rebuilding it", g->file,
			 k->path, bfs_err_msg());
		bfs_index_free(ix);
		pthread_mutex_lock(lock);
		g->dirty = true;
		pthread_mutex_unlock(lock);
		return 0;
	}
	return 1;
}

/* Returns 1 if loaded (from the shard's pack entry, else its own file), 0
 * if no valid entry; one that is there but old, truncated or corrupt is
 * named in `note` (one log line: it is rebuilt). */
static int idx_load(struct bfs_dataset *ds, const char *dir, size_t i, pthread_mutex_t *lock,
		    char *note, size_t cap)
{
	char path[PATH_MAX + 32], why[256];
	const char *abs = shard_abs(ds, i);
	struct bfs_shard *s = ds->shards[i];
	struct bfs_index_key k;
	struct bfs_index *ix = NULL;
	enum bfs_index_load_result r;

	note[0] = '\0';
	if (!abs)
		return 0;
	idx_key(&k, abs, s);
	if (pack_load_one(ds, i, &k, lock, note, cap))
		return 1;
	if (note[0]) /* a corrupt pack entry: rebuilt into the pack */
		return 0;
	idx_file(path, sizeof(path), dir, abs);
	r = bfs_index_load(&ix, path, &k, why, sizeof(why));
	if (r == BFS_INDEX_BAD)
		snprintf(note, cap, "index cache %s: %s; rebuilding it", path, why);
	if (r != BFS_INDEX_LOADED)
		return 0;
	/* opened undetected: the entry matched the shard's size and mtime, so
	 * its compression is the shard's (one read of the shard saved) */
	if (bfs_shard_compression(s) == BFS_COMP_AUTO)
		(void)bfs_shard_detect(s, (enum bfs_compression)ix->comp);
	if (bfs_shard_set_index(s, ix) != 0) {
		snprintf(note, cap, "index cache %s: %s; rebuilding it", path, bfs_err_msg());
		bfs_index_free(ix);
		return 0;
	}
	return 1;
}

/* Load every shard's cached index, over `jobs` threads (each load reads
 * and checks its entry or whole file). need[i] is set for the shards to
 * scan. */
struct load_ctx {
	struct bfs_dataset *ds;
	const struct bfs_dataset_opts *o;
	bool *need;
	uint64_t *dirh; /* [nshards]: the hash of each shard's real directory */
	pthread_mutex_t lock; /* guards the notes and the packs' dirty flags */
};

static int resolve_one(void *arg, size_t i)
{
	struct load_ctx *lc = arg;
	const char *abs = shard_abs(lc->ds, i);
	const char *slash = abs ? strrchr(abs, '/') : NULL;

	/* the pack of the shard's (real) directory */
	lc->ds->pack_of[i] = slash ? 0 : SIZE_MAX;
	lc->dirh[i] = slash ? bfs_ixpack_dir_hash(abs) : 0;
	return 0;
}

static int load_one(void *arg, size_t i)
{
	struct load_ctx *lc = arg;
	char note[2 * PATH_MAX + 512];

	lc->need[i] = !idx_load(lc->ds, lc->o->index_dir, i, &lc->lock, note, sizeof(note));
	if (note[0] && lc->o->on_note) {
		pthread_mutex_lock(&lc->lock);
		lc->o->on_note(lc->o->progress_ctx, bfs_shard_path(lc->ds->shards[i]), note);
		pthread_mutex_unlock(&lc->lock);
	}
	return 0; /* a shard without a good entry is scanned */
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void bfs_dataset_free_packs(struct bfs_dataset *ds)
{
	for (size_t g = 0; ds->packs && g < ds->npacks; g++) {
		bfs_ixpack_free(ds->packs[g].pk);
		free(ds->packs[g].file);
	}
	free(ds->packs);
	ds->packs = NULL;
	ds->npacks = 0;
}

/* The packs of the shards' directories (dirh[i]: shard i's; pack_of[i]
 * SIZE_MAX for a shard without one), and pack_of[i] each shard's. Each
 * pack is read once; a bad one is one note and is rewritten. Out of
 * memory: no packs (every index goes to a file of its own). */
static void packs_open(struct bfs_dataset *ds, const struct bfs_dataset_opts *o,
		       const uint64_t *dirh)
{
	uint64_t *h = malloc((ds->nshards ? ds->nshards : 1) * sizeof(*h));
	size_t nh = 0;

	for (size_t i = 0; h && i < ds->nshards; i++)
		if (ds->pack_of[i] != SIZE_MAX)
			h[nh++] = dirh[i];
	if (h)
		qsort(h, nh, sizeof(*h), u64_cmp);
	ds->packs = h ? calloc(nh ? nh : 1, sizeof(*ds->packs)) : NULL;
	for (size_t j = 0; ds->packs && j < nh; j++) {
		struct pack_group *g;
		char why[256];

		if (ds->npacks && ds->packs[ds->npacks - 1].dirhash == h[j])
			continue;
		g = &ds->packs[ds->npacks++];
		g->dirhash = h[j];
		if (asprintf(&g->file, "%s/%016llx.pack.idx", o->index_dir,
			     (unsigned long long)h[j]) < 0) {
			g->file = NULL;
			ds->npacks--;
			free(h);
			bfs_dataset_free_packs(ds);
			return;
		}
		if (bfs_ixpack_load(&g->pk, g->file, why, sizeof(why)) == BFS_INDEX_BAD) {
			char note[PATH_MAX + 512];

			g->dirty = true;
			snprintf(note, sizeof(note), "index pack %s: %s; rebuilding it", g->file,
				 why);
			if (o->on_note)
				o->on_note(o->progress_ctx, NULL, note);
		}
	}
	for (size_t i = 0; ds->packs && i < ds->nshards; i++)
		if (ds->pack_of[i] != SIZE_MAX)
			ds->pack_of[i] =
				bfs_sorted_u64_floor(ds->packs, ds->npacks, sizeof(*ds->packs),
						     offsetof(struct pack_group, dirhash), dirh[i]);
	free(h);
}

void bfs_dataset_load_indexes(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need)
{
	struct load_ctx lc = { .ds = ds, .o = o, .need = need };

	lc.dirh = malloc((ds->nshards ? ds->nshards : 1) * sizeof(*lc.dirh));
	pthread_mutex_init(&lc.lock, NULL);
	if (lc.dirh) {
		(void)bfs_pfor(ds->nshards, o->jobs, resolve_one, &lc);
		packs_open(ds, o, lc.dirh);
		free(lc.dirh);
	}
	if (!ds->packs)
		for (size_t i = 0; i < ds->nshards; i++)
			ds->pack_of[i] = SIZE_MAX;
	(void)bfs_pfor(ds->nshards, o->jobs, load_one, &lc);
	pthread_mutex_destroy(&lc.lock);
}

/* Is hash h among the sorted hs[0..n)? */
static bool u64_in(const uint64_t *hs, size_t n, uint64_t h)
{
	return n && bsearch(&h, hs, n, sizeof(*hs), u64_cmp) != NULL;
}

/* Write group g's pack again: the small indexes of this dataset's shards
 * in that directory that are good (ok[i]: loaded or scanned), and the
 * entries of the old pack for other shards (another dataset's glob in the
 * same directory, sharing index_dir) that still match their shard's size
 * and mtime and load. Best effort, like bfs_dataset_idx_save: 0 or the
 * -errno of the failure (written or not decides whether its shards lose
 * their own files). */
static int pack_save(struct bfs_dataset *ds, size_t gi, const bool *ok)
{
	struct pack_group *g = &ds->packs[gi];
	struct bfs_ixpack_writer *w = NULL;
	uint64_t *mine = malloc((ds->nshards ? ds->nshards : 1) * sizeof(*mine));
	size_t nmine = 0;
	int rc = mine ? bfs_ixpack_writer_new(&w) : -ENOMEM;

	for (size_t i = 0; !rc && i < ds->nshards; i++) {
		struct bfs_index_key k;

		if (ds->pack_of[i] != gi || !ds->abs[i])
			continue;
		mine[nmine++] = bfs_ixpack_hash(ds->abs[i]);
		if (!ok[i] || !bfs_dataset_idx_packed(ds, i))
			continue;
		idx_key(&k, ds->abs[i], ds->shards[i]);
		rc = bfs_ixpack_add(w, bfs_shard_get_index(ds->shards[i]), &k);
	}
	if (mine)
		qsort(mine, nmine, sizeof(*mine), u64_cmp);
	for (size_t e = 0; !rc && g->pk && e < bfs_ixpack_count(g->pk); e++) {
		char path[PATH_MAX + 1], why[256];
		struct bfs_index_key k;
		struct bfs_index *ix = NULL;
		const uint8_t *p;
		struct stat st;
		uint64_t h;
		size_t len;

		bfs_ixpack_entry(g->pk, e, &h, &p, &len);
		if (u64_in(mine, nmine, h) ||
		    !bfs_index_image_key(p, len, &k, path, sizeof(path)) || stat(path, &st) != 0 ||
		    !S_ISREG(st.st_mode) || (uint64_t)st.st_size != k.file_size ||
		    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != k.mtime_ns ||
		    bfs_index_from_bytes(&ix, p, len, &k, why, sizeof(why)) != BFS_INDEX_LOADED)
			continue; /* ours (written above), gone, changed or corrupt */
		bfs_index_free(ix);
		rc = bfs_ixpack_add_bytes(w, h, p, len);
	}
	if (!rc)
		rc = bfs_ixpack_write(w, g->file);
	bfs_ixpack_writer_free(w);
	free(mine);
	return rc;
}

/* After a scan: write each pack that changed (a small index scanned, or an
 * entry stale or corrupt). ok[i]: shard i's index is good. A shard whose
 * index went into a pack written here loses the file of its own in dir
 * (DIR/<hash>.idx, as idx_file names it) that another batchfs (one file
 * per shard) or a larger version of the shard left: nothing reads it. */
void bfs_dataset_save_packs(struct bfs_dataset *ds, const char *dir, const bool *ok,
			    const bool *cached)
{
	static const char *const own[] = { ".idx" };
	bool *write = ds->packs ? calloc(ds->npacks ? ds->npacks : 1, sizeof(*write)) : NULL;
	bool *drop = NULL;

	if (!write || !ds->ix_dir_ok) {
		free(write);
		return;
	}
	for (size_t g = 0; g < ds->npacks; g++)
		write[g] = ds->packs[g].dirty;
	for (size_t i = 0; i < ds->nshards; i++)
		if (ok[i] && !cached[i] && bfs_dataset_idx_packed(ds, i))
			write[ds->pack_of[i]] = true;
	for (size_t g = 0; g < ds->npacks; g++)
		if (write[g] && pack_save(ds, g, ok) != 0)
			write[g] = false; /* not written: the files of their own stay */
	drop = calloc(ds->nshards ? ds->nshards : 1, sizeof(*drop));
	for (size_t i = 0; drop && i < ds->nshards; i++)
		drop[i] = ok[i] && bfs_dataset_idx_packed(ds, i) && write[ds->pack_of[i]];
	if (drop)
		bfs_dataset_drop_cache_files(ds, dir, own, BFS_ARRAY_SIZE(own), drop);
	free(drop);
	free(write);
}

/* ---------------------------------------------------------- schema cache */

/* The rules of inference (schema.h) the cached schemas follow: a new rule
 * (2: `Feature {}` counts as present, untyped_features) names new files,
 * so that no schema inferred by an older one is reused. */
#define INFER_RULES "infer 2"

void bfs_dataset_schema_file(char *dst, size_t cap, const char *dir, struct bfs_dataset *ds)
{
	uint64_t h = bfs_fnv1a(0xcbf29ce484222325ull, INFER_RULES, sizeof(INFER_RULES));

	for (size_t i = 0; i < ds->nshards; i++) {
		struct bfs_shard *sh = ds->shards[i];
		const char *abs = shard_abs(ds, i);
		uint64_t sz = bfs_shard_file_size(sh);
		int64_t mt = bfs_shard_mtime_ns(sh);
		uint32_t comp = (uint32_t)bfs_shard_compression(sh);

		if (!abs) { /* out of memory: a name no schema file has */
			h = bfs_fnv1a(h, "\0", 1);
			continue;
		}
		h = bfs_fnv1a(h, abs, strlen(abs) + 1);
		h = bfs_fnv1a(h, &sz, sizeof(sz));
		h = bfs_fnv1a(h, &mt, sizeof(mt));
		h = bfs_fnv1a(h, &comp, sizeof(comp));
	}
	snprintf(dst, cap, "%s/schema-%016llx.json", dir, (unsigned long long)h);
}

int bfs_dataset_schema_load(struct bfs_schema **out, const char *file)
{
	FILE *f = fopen(file, "rb");
	char *buf = NULL;
	long len;
	int rc = -ENOENT;

	if (!f)
		return rc;
	if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || len > (16 << 20) ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	buf[len] = '\0';
	rc = bfs_schema_from_json(out, buf, (size_t)len);
out:
	free(buf);
	fclose(f);
	return rc;
}

/* The mixed-features line beside schema file `file`: FILE.mixed. */
char *bfs_dataset_mixed_load(const char *file)
{
	char path[PATH_MAX + 8], line[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s.mixed", file);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	return line[0] ? strdup(line) : NULL;
}

void bfs_dataset_mixed_save(const char *file, const char *line)
{
	char path[PATH_MAX + 8];
	struct iovec iov[2];

	snprintf(path, sizeof(path), "%s.mixed", file);
	if (!line) {
		(void)unlink(path); /* a stale one of an older scan */
		return;
	}
	iov[0] = (struct iovec){ (void *)line, strlen(line) };
	iov[1] = (struct iovec){ "\n", 1 };
	(void)bfs_write_file_atomic(path, iov, 2); /* best effort, like the schema */
}

void bfs_dataset_schema_save(const char *dir, const char *file, const struct bfs_schema *s)
{
	struct iovec iov;
	char *json = NULL;

	if (bfs_cache_dir_make(dir) != 0 || bfs_schema_to_json(&json, s, NULL) != 0)
		return;
	iov = (struct iovec){ json, strlen(json) };
	(void)bfs_write_file_atomic(file, &iov, 1); /* best effort, like the index */
	free(json);
}
