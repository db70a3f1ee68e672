/*
 * dataset.c — SOURCE resolution, per-shard index cache (small shards'
 * indexes in one pack per directory, ixpack.h), parallel scan and schema
 * inference (see dataset.h).
 *
 * The scan threads are the one place in decoder/ that uses threads; they
 * exist only while bfs_dataset_open runs.
 */
#include "dataset.h"

#include "crc32c.h"
#include "diskcache.h"
#include "example.h"
#include "fetch.h"
#include "ixpack.h"
#include "objsrc.h"
#include "pfor.h"
#include "shadow.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

struct bfs_dataset {
	size_t nshards;
	struct bfs_shard **shards;
	uint64_t *first; /* [nshards + 1]: global index of each shard's first record */
	uint64_t nrecords;
	uint32_t max_len;
	struct bfs_schema *schema;
	bool index_reused;
	bool schema_reused;
	uint64_t undecodable;
	uint64_t bad_records; /* data CRC mismatches met by the scan */
	char **cut; /* [nshards]: why a shard cut short was kept (opts.keep_cut), else NULL */
	struct bfs_shadows *shadows; /* NULL: no shadow copies */
	/* [nshards], with index_dir: each shard's absolute path (the cache key),
	 * resolved once by the load workers; an entry is NULL until then, or
	 * when out of memory (that shard is then not cached) */
	char **abs;
	bool ix_dir_ok; /* index_dir exists (made once, not per shard) */
	/* with index_dir, while open runs: the index packs (ixpack.h) of the
	 * shards' directories, sorted by directory hash, and each shard's
	 * (SIZE_MAX: none, its index has a file of its own); NULL after */
	struct pack_group *packs;
	size_t npacks;
	size_t *pack_of;
	struct dsio *io; /* while an I/O stage reads the shards */
	/* SOURCE a bucket: its objects, and those passed over */
	struct bfs_objsrc *objs;
	char **passed;
	size_t npassed;
};

struct pack_group {
	uint64_t dirhash; /* of the shards' real directory */
	char *file; /* INDEX_DIR/<dirhash>.pack.idx */
	struct bfs_ixpack *pk; /* as read at open; NULL: none, or bad */
	bool dirty; /* bad, or an entry of one of ours stale or corrupt: write it */
};

/* ---------------------------------------------------------------- source */

void bfs_source_free(char **paths, size_t n)
{
	if (!paths)
		return;
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_path(char ***v, size_t *n, size_t *cap, const char *p)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		char **nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[*n] = strdup(p);
	if (!(*v)[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Is `path` (a symlink inside dir `root`) leading outside root? */
static bool leads_outside(const char *root_real, const char *path)
{
	char real[PATH_MAX];
	size_t rl = strlen(root_real);

	if (!realpath(path, real))
		return true;
	return !(strncmp(real, root_real, rl) == 0 && (real[rl] == '/' || real[rl] == '\0'));
}

bool bfs_source_not_shard(const char *name)
{
	/* .shadow: batchfs's own plain copies of compressed shards, when
	 * index_dir is the source folder itself */
	static const char *const ext[] = { ".json",  ".txt", ".md",    ".crc",
					   ".pbtxt", ".idx", ".shadow" };
	size_t n = strlen(name);

	if (name[0] == '_')
		return true;
	for (size_t i = 0; i < BFS_ARRAY_SIZE(ext); i++) {
		size_t e = strlen(ext[i]);
		if (n >= e && strcmp(name + n - e, ext[i]) == 0)
			return true;
	}
	return false;
}

int bfs_source_passed_over(char ***out, size_t *nout, const char *dir)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	struct stat st;
	DIR *d;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return 0;
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL && !rc)
		if (de->d_name[0] != '.' && bfs_source_not_shard(de->d_name))
			rc = push_path(&v, &n, &cap, de->d_name);
	closedir(d);
	if (rc) {
		bfs_source_free(v, n);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof(*v), str_cmp);
	*out = v;
	*nout = n;
	return 0;
}

static int resolve_dir(char ***v, size_t *n, size_t *cap, const char *dir, bool follow)
{
	char root_real[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!realpath(dir, root_real))
		return bfs_err_set(-errno, "%s: %s", dir, strerror(errno));
	d = opendir(dir);
	if (!d)
		return bfs_err_set(-errno, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) != NULL && !rc) {
		char path[PATH_MAX];
		struct stat st, lst;

		if (de->d_name[0] == '.' || bfs_source_not_shard(de->d_name))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		if (lstat(path, &lst) != 0)
			continue;
		if (S_ISLNK(lst.st_mode)) {
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			if (!follow && leads_outside(root_real, path)) {
				rc = bfs_err_set(-ELOOP,
						 "%s: symlink leads outside the source directory "
						 "(use -o follow_symlinks to allow it)",
						 path);
				break;
			}
		} else if (!S_ISREG(lst.st_mode)) {
			continue;
		}
		rc = push_path(v, n, cap, path);
	}
	closedir(d);
	return rc;
}

int bfs_source_resolve(char ***out, size_t *nout, const char *source, bool follow)
{
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct stat st;
	int rc = 0;

	if (stat(source, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			rc = resolve_dir(&v, &n, &cap, source, follow);
		else if (S_ISREG(st.st_mode))
			rc = push_path(&v, &n, &cap, source);
		else
			rc = bfs_err_set(-EINVAL, "%s: not a regular file or directory", source);
	} else if (strpbrk(source, "*?[")) {
		glob_t g;
		int grc = glob(source, 0, NULL, &g);

		if (grc == 0) {
			for (size_t i = 0; i < g.gl_pathc && !rc; i++) {
				if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
					rc = push_path(&v, &n, &cap, g.gl_pathv[i]);
			}
			globfree(&g);
		} else if (grc != GLOB_NOMATCH) {
			rc = bfs_err_set(-EIO, "%s: glob failed", source);
		}
	} else {
		rc = bfs_err_set(-errno, "%s: %s", source, strerror(errno));
	}
	if (!rc && n == 0)
		rc = bfs_err_set(-ENOENT, "%s: no shard files found", source);
	if (rc) {
		bfs_source_free(v, n);
		return rc;
	}
	qsort(v, n, sizeof(*v), str_cmp);
	*out = v;
	*nout = n;
	return 0;
}

/* ----------------------------------------------------------- index cache */

/* A shard's absolute path: its real path when it resolves, else as given. */
static const char *resolve(const char *path, char real[PATH_MAX])
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

		ds->abs[i] = strdup(resolve(bfs_shard_path(ds->shards[i]), real));
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
	p = ds->abs && ds->abs[i] ? ds->abs[i] : resolve(bfs_shard_path(ds->shards[i]), real);
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
		    push_path(&names, &n, &cap, de->d_name) != 0)
			break; /* out of memory: the names listed so far */
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), str_cmp);
	for (size_t i = first; n && i < ds->nshards; i++) {
		for (size_t s = 0; drop[i] && s < nsuf; s++) {
			char file[PATH_MAX + 64], abs[PATH_MAX];
			const char *base;

			if (bfs_dataset_cache_file(ds, i, dir, suffixes[s], file, sizeof(file), abs,
						   sizeof(abs)) != 0)
				break;
			base = file + strlen(dir) + 1;
			if (bsearch(&base, names, n, sizeof(*names), str_cmp))
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
static bool idx_packed(struct bfs_dataset *ds, size_t i)
{
	const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
	struct bfs_index_key k;

	if (!ds->packs || !ix || !ds->abs[i] || ds->pack_of[i] == SIZE_MAX)
		return false;
	idx_key(&k, ds->abs[i], ds->shards[i]);
	return bfs_index_file_bytes(ix, &k) < BFS_IXPACK_ENTRY_MAX;
}

/* Best effort: a failure to write the cache only costs a rescan next time. */
static void idx_save(struct bfs_dataset *ds, const char *dir, size_t i)
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

static void packs_free(struct bfs_dataset *ds)
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
			packs_free(ds);
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
	for (size_t i = 0; ds->packs && i < ds->nshards; i++) {
		size_t lo = 0, hi = ds->npacks;

		if (ds->pack_of[i] == SIZE_MAX)
			continue;
		while (lo + 1 < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ds->packs[mid].dirhash <= dirh[i])
				lo = mid;
			else
				hi = mid;
		}
		ds->pack_of[i] = lo;
	}
	free(h);
}

static void load_all(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need)
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
 * and mtime and load. Best effort, like idx_save: 0 or the -errno of the
 * failure (written or not decides whether its shards lose their own files). */
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
		if (!ok[i] || !idx_packed(ds, i))
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
static void packs_save(struct bfs_dataset *ds, const char *dir, const bool *ok, const bool *cached)
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
		if (ok[i] && !cached[i] && idx_packed(ds, i))
			write[ds->pack_of[i]] = true;
	for (size_t g = 0; g < ds->npacks; g++)
		if (write[g] && pack_save(ds, g, ok) != 0)
			write[g] = false; /* not written: the files of their own stay */
	drop = calloc(ds->nshards ? ds->nshards : 1, sizeof(*drop));
	for (size_t i = 0; drop && i < ds->nshards; i++)
		drop[i] = ok[i] && idx_packed(ds, i) && write[ds->pack_of[i]];
	if (drop)
		bfs_dataset_drop_cache_files(ds, dir, own, BFS_ARRAY_SIZE(own), drop);
	free(drop);
	free(write);
}

/* ---------------------------------------------------------- schema cache */

static void schema_file(char *dst, size_t cap, const char *dir, struct bfs_dataset *ds)
{
	uint64_t h = 0xcbf29ce484222325ull;

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

static int schema_load(struct bfs_schema **out, const char *file)
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

static void schema_save(const char *dir, const char *file, const struct bfs_schema *s)
{
	struct iovec iov;
	char *json = NULL;

	if (bfs_cache_dir_make(dir) != 0 || bfs_schema_to_json(&json, s, NULL) != 0)
		return;
	iov = (struct iovec){ json, strlen(json) };
	(void)bfs_write_file_atomic(file, &iov, 1); /* best effort, like the index */
	free(json);
}

/* ------------------------------------------------------------------ scan */

struct scan_ctx {
	struct bfs_dataset *ds;
	const struct bfs_dataset_opts *o;
	bool *need_scan; /* [nshards] */
	const bool *cached; /* [nshards] or NULL: index loaded from index_dir (not saved again) */
	bool *scanned; /* [nshards]: scanned without error */
	bool infer;
	struct bfs_infer *inf;
	/* guards inf, done_bytes, the dataset's undecodable and bad_records,
	 * and the calls of on_bad and progress */
	pthread_mutex_t lock;
	uint64_t done_bytes, total_bytes;
};

struct rec_ctx {
	struct scan_ctx *sc;
	size_t shard;
};

static int on_record(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct rec_ctx *rc = ctx;
	struct scan_ctx *sc = rc->sc;
	struct bfs_example *ex = NULL;
	int err;

	if (bfs_example_decode(&ex, data, len) != 0) {
		/* corrupt content: skipped by inference, reported on read */
		pthread_mutex_lock(&sc->lock);
		sc->ds->undecodable++;
		pthread_mutex_unlock(&sc->lock);
		return 0;
	}
	pthread_mutex_lock(&sc->lock);
	err = bfs_infer_add(sc->inf, ex);
	if (err)
		bfs_err_prefix("%s: record %llu at offset %llu",
			       bfs_shard_path(sc->ds->shards[rc->shard]), (unsigned long long)index,
			       (unsigned long long)offset);
	pthread_mutex_unlock(&sc->lock);
	bfs_example_free(ex);
	return err;
}

static void on_bad(void *ctx, uint64_t index, uint64_t offset, const char *msg)
{
	struct rec_ctx *rc = ctx;
	struct scan_ctx *sc = rc->sc;

	(void)index;
	(void)offset;
	pthread_mutex_lock(&sc->lock);
	sc->ds->bad_records++;
	if (sc->o->on_bad)
		sc->o->on_bad(sc->o->progress_ctx, bfs_shard_path(sc->ds->shards[rc->shard]), msg);
	pthread_mutex_unlock(&sc->lock);
}

/* Shard i's scan stopped at a record cut short (err, its message set):
 * with opts.keep_cut its whole records before the cut are kept and the
 * message stays in ds->cut[i] (returns 0); else the error is returned,
 * saying what keep_cut would do. A kept shard's index is never cached: an
 * index does not say that its shard was cut, and every open scans that
 * shard again (and reports it again) until the file is whole. */
static int keep_cut(struct scan_ctx *sc, size_t i, int err)
{
	uint64_t n = bfs_shard_nrecords(sc->ds->shards[i]);
	char why[1024];

	snprintf(why, sizeof(why), "%s", bfs_err_msg());
	if (!sc->o->keep_cut)
		return bfs_err_set(err,
				   "%s; the shard is cut short (with on_corrupt=skip its %" PRIu64
				   " whole records before the cut are served)",
				   why, n);
	if (asprintf(&sc->ds->cut[i],
		     "%s; the shard is cut short: its %" PRIu64
		     " whole records before the cut are kept",
		     why, n) < 0) {
		sc->ds->cut[i] = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Scan shard i if it needs it; its error (message set) stops the pass
 * (bfs_pfor): the shards being scanned finish, no other starts. */
static int scan_one(void *arg, size_t i)
{
	struct scan_ctx *sc = arg;
	struct bfs_shadow_writer *w;
	struct rec_ctx rc;
	int err;

	if (!sc->need_scan[i])
		return 0;
	rc.sc = sc;
	rc.shard = i;
	/* CRCs are checked; a corrupt record is indexed and reported, and is
	 * handled per on_corrupt when a batch holding it is read */
	bfs_shard_set_bad_fn(sc->ds->shards[i], on_bad, &rc);
	w = sc->ds->shadows ? bfs_shadow_begin(sc->ds->shadows, sc->ds->shards[i]) : NULL;
	err = bfs_shard_scan(sc->ds->shards[i], true, sc->infer ? on_record : NULL, &rc);
	bfs_shadow_end(w, err);
	bfs_shard_set_bad_fn(sc->ds->shards[i], NULL, NULL);
	if (err && !strstr(bfs_err_msg(), bfs_shard_path(sc->ds->shards[i])))
		bfs_err_prefix("%s", bfs_shard_path(sc->ds->shards[i]));
	if (err && err != -ENOMEM && bfs_shard_cut(sc->ds->shards[i]))
		err = keep_cut(sc, i, err);
	/* a small index goes into its directory's pack, written once
	 * after the scan (packs_save) */
	if (!err && sc->o->index_dir && !(sc->cached && sc->cached[i]) && !idx_packed(sc->ds, i) &&
	    !sc->ds->cut[i])
		idx_save(sc->ds, sc->o->index_dir, i);
	sc->scanned[i] = !err && !sc->ds->cut[i];
	pthread_mutex_lock(&sc->lock);
	sc->done_bytes += bfs_shard_file_size(sc->ds->shards[i]);
	if (sc->o->progress)
		sc->o->progress(sc->o->progress_ctx, sc->done_bytes, sc->total_bytes);
	pthread_mutex_unlock(&sc->lock);
	return err;
}

static int run_scan(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need,
		    const bool *cached, bool *scanned, bool infer)
{
	struct scan_ctx sc;
	int rc = 0;

	memset(&sc, 0, sizeof(sc));
	sc.ds = ds;
	sc.o = o;
	sc.need_scan = need;
	sc.cached = cached;
	sc.scanned = scanned;
	sc.infer = infer;
	for (size_t i = 0; i < ds->nshards; i++)
		if (need[i])
			sc.total_bytes += bfs_shard_file_size(ds->shards[i]);
	if (infer) {
		rc = bfs_infer_new(&sc.inf);
		if (rc)
			return rc;
	}
	pthread_mutex_init(&sc.lock, NULL);
	rc = bfs_pfor(ds->nshards, o->jobs, scan_one, &sc);
	pthread_mutex_destroy(&sc.lock);
	if (!rc && infer)
		rc = bfs_infer_finish(&ds->schema, sc.inf);
	bfs_infer_free(sc.inf);
	return rc;
}

/* ------------------------------------------------------------------ open */

/* ------------------------------------------------------- the I/O stage */

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
	atomic_bool *failed; /* [nshards]: the shard's promoted copy failed a read */
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

static bool cached_read(void *ctx, uint32_t obj, uint64_t off, uint8_t *dst, uint64_t len)
{
	const struct dsio *io = ctx;

	return io->obj[obj] && bfs_dcobj_read(io->obj[obj], dst, (size_t)len, off) == 0;
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

/* A read of a promoted shard's copy failed (the record was read from the
 * source instead): the copy goes, the next mount fetches it again. Once
 * per shard: the copy stays attached (its other records are good), so
 * each later read of a bad record fails again; one line and one delete
 * are enough (a second delete would take a copy made again since). */
static void copy_failed(void *ctx, const struct bfs_shard *s, const char *msg)
{
	const struct dsio *io = ctx;

	for (size_t i = 0; i < io->ds->nshards; i++)
		if (io->ds->shards[i] == s && io->obj[i] &&
		    !atomic_exchange(&io->failed[i], true)) {
			io_note(io, "disk_cache: %s: %s; its copy is deleted", bfs_shard_path(s),
				msg);
			bfs_dcobj_drop(io->obj[i]);
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
	if (!bfs_shard_promote(s, view, copy_failed, io))
		bfs_shard_close(view);
}

static void copy_complete(void *ctx, void *user)
{
	struct dsio *io = ctx;

	promote(io, (size_t)(uintptr_t)user - 1);
}

int bfs_dataset_fetch_new(struct bfs_fetch **out, const struct bfs_dataset *ds,
			  const struct bfs_dataset_io *o)
{
	struct bfs_fetch_source src = { .pin = shard_pin,
					.unpin = shard_unpin,
					.size = shard_size };
	struct bfs_fetch_opts fo = o->fetch;
	struct bfs_dataset *m = (struct bfs_dataset *)ds; /* the stage is attached to it */
	struct dsio *io;
	uint64_t total = 0;
	int rc;

	*out = NULL;
	if (ds->nshards > UINT32_MAX)
		return bfs_err_set(-EFBIG, "too many shards for the I/O stage");
	io = calloc(1, sizeof(*io));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	if (!io || !(io->obj = calloc(ds->nshards ? ds->nshards : 1, sizeof(*io->obj))) ||
	    !(io->failed = calloc(ds->nshards ? ds->nshards : 1, sizeof(*io->failed)))) {
		if (io)
			free(io->obj);
		free(io);
		return -ENOMEM;
	}
	io->ds = m;
	io->dc = o->dc;
	io->note = o->note;
	io->ctx = o->ctx;
	src.ctx = io;
	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_shard *s = ds->shards[i];
		char real[PATH_MAX];

		total += bfs_shard_file_size(s);
		if (!io->dc || !(o->all || bfs_shard_is_remote(s)))
			continue;
		io->obj[i] = bfs_diskcache_obj(io->dc, resolve(bfs_shard_path(s), real),
					       bfs_shard_file_size(s), bfs_shard_mtime_ns(s),
					       (void *)(uintptr_t)(i + 1));
	}
	if (ds->objs) { /* a bucket: ranged GETs through the client */
		src.submit = object_submit;
		fo.backend = BFS_FETCH_CUSTOM;
	}
	if (io->dc) {
		src.local = cached_read;
		src.fetched = fetched;
		/* a dataset that fits is kept whole: reads of whole blocks */
		if (total <= o->dc_limit)
			fo.align = BFS_DC_BLOCK;
	}
	rc = bfs_fetch_new(out, (uint32_t)ds->nshards, &src, &fo);
	if (rc) {
		free(io->obj);
		free(io->failed);
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
	bfs_fetch_free(f);
	if (m->io && m->io->dc)
		bfs_diskcache_set_complete(m->io->dc, NULL, NULL);
	if (m->io) {
		free(m->io->obj);
		free(m->io->failed);
		free(m->io);
		m->io = NULL;
	}
}

void bfs_dataset_close(struct bfs_dataset *ds)
{
	if (!ds)
		return;
	for (size_t i = 0; i < ds->nshards; i++)
		bfs_shard_close(ds->shards[i]);
	bfs_objsrc_free(ds->objs); /* after the shards: they read through it */
	bfs_source_free(ds->passed, ds->npassed);
	bfs_shadows_free(ds->shadows); /* after the shards: their copies report to it */
	for (size_t i = 0; ds->cut && i < ds->nshards; i++)
		free(ds->cut[i]);
	free(ds->cut);
	free(ds->shards);
	free(ds->first);
	for (size_t i = 0; ds->abs && i < ds->nshards; i++)
		free(ds->abs[i]);
	free(ds->abs);
	packs_free(ds);
	free(ds->pack_of);
	bfs_schema_free(ds->schema);
	free(ds);
}

/* Shadow copies (shadow.h): the set over index_dir; an indexed compressed
 * shard without a valid copy is scanned again to write one, when the copy
 * would fit. */
static int shadows_open(struct bfs_dataset *ds, const struct bfs_dataset_opts *o, bool *need,
			bool *any_scan)
{
	struct bfs_shadow_opts so = {
		.dir = o->index_dir,
		.budget = o->shadow_size,
		.note = o->on_note,
		.ctx = o->progress_ctx,
	};
	int rc;

	if (!o->index_dir || !o->shadow_size)
		return 0;
	rc = bfs_shadows_new(&ds->shadows, &so);
	for (size_t i = 0; !rc && i < ds->nshards; i++) {
		if (!need[i] && bfs_shadow_wanted(ds->shadows, ds->shards[i])) {
			need[i] = true;
			ds->index_reused = false;
			*any_scan = true;
		}
	}
	return rc;
}

int bfs_dataset_open(struct bfs_dataset **out, const char *source, const struct bfs_dataset_opts *o)
{
	struct bfs_dataset *ds = calloc(1, sizeof(*ds));
	char **paths = NULL;
	size_t npaths = 0;
	bool *need = NULL, *cached = NULL, *scanned = NULL;
	char sfile[PATH_MAX + 64];
	bool any_scan = false, lazy;
	int rc;

	if (!ds)
		return -ENOMEM;
	if (bfs_s3_url_is(source)) {
		rc = bfs_objsrc_new(&ds->objs, source, o->s3, o->s3_conns);
		if (!rc)
			rc = bfs_objsrc_list(ds->objs, bfs_source_not_shard, &paths, &npaths,
					     &ds->passed, &ds->npassed);
	} else {
		rc = bfs_source_resolve(&paths, &npaths, source, o->follow_symlinks);
	}
	if (rc)
		goto fail;
	/* an array of pointers: sizeof(struct bfs_shard *) is meant */
	ds->shards = calloc(npaths, sizeof(*ds->shards)); /* NOLINT(bugprone-sizeof-expression) */
	ds->first = calloc(npaths + 1, sizeof(*ds->first));
	ds->cut = calloc(npaths ? npaths : 1, sizeof(*ds->cut));
	need = calloc(npaths, sizeof(*need));
	cached = calloc(npaths, sizeof(*cached));
	scanned = calloc(npaths, sizeof(*scanned));
	ds->abs = o->index_dir ? calloc(npaths, sizeof(*ds->abs)) : NULL;
	ds->pack_of = o->index_dir ? calloc(npaths, sizeof(*ds->pack_of)) : NULL;
	if (!ds->shards || !ds->first || !ds->cut || !need || !cached || !scanned ||
	    (o->index_dir && (!ds->abs || !ds->pack_of))) {
		rc = -ENOMEM;
		goto fail;
	}
	/* with an index cache, a shard's compression comes from its entry when
	 * there is one: detected below only for the shards to scan */
	lazy = o->index_dir && o->comp == BFS_COMP_AUTO;
	for (size_t i = 0; i < npaths; i++) {
		if (ds->objs) {
			/* an object opens undetected; without an index cache
			 * its compression is found (or set) now, as a file's */
			rc = bfs_objsrc_open_shard(ds->objs, i, &ds->shards[i]);
			if (!rc) {
				ds->nshards++;
				rc = lazy ? 0 : bfs_shard_detect(ds->shards[i], o->comp);
				if (!rc)
					continue;
				ds->nshards--;
				bfs_shard_close(ds->shards[i]);
				ds->shards[i] = NULL;
			}
		} else {
			rc = lazy ? bfs_shard_open_undetected(&ds->shards[i], paths[i])
				  : bfs_shard_open(&ds->shards[i], paths[i], o->comp);
		}
		if (rc) {
			if (!strstr(bfs_err_msg(), paths[i]))
				bfs_err_prefix("%s", paths[i]);
			goto fail;
		}
		ds->nshards++;
	}
	ds->index_reused = o->index_dir != NULL;
	if (o->index_dir)
		load_all(ds, o, need);
	else
		for (size_t i = 0; i < ds->nshards; i++)
			need[i] = true;
	for (size_t i = 0; i < ds->nshards; i++) {
		cached[i] = !need[i];
		if (need[i]) {
			ds->index_reused = false;
			any_scan = true;
		}
		if (need[i] && lazy) {
			rc = bfs_shard_detect(ds->shards[i], BFS_COMP_AUTO);
			if (rc) {
				if (!strstr(bfs_err_msg(), paths[i]))
					bfs_err_prefix("%s", paths[i]);
				goto fail;
			}
		}
	}
	rc = shadows_open(ds, o, need, &any_scan);
	if (rc)
		goto fail;
	if (o->infer) {
		if (o->index_dir) {
			schema_file(sfile, sizeof(sfile), o->index_dir, ds);
			if (schema_load(&ds->schema, sfile) == 0)
				ds->schema_reused = true;
		}
		if (!ds->schema) {
			/* inference must see every record: scan all shards */
			for (size_t i = 0; i < ds->nshards; i++)
				need[i] = true;
			any_scan = true;
		}
	}
	if (any_scan) {
		ds->ix_dir_ok = o->index_dir && bfs_cache_dir_make(o->index_dir) == 0;
		rc = run_scan(ds, o, need, cached, scanned, o->infer && !ds->schema);
		/* the good indexes (also after a failed scan, as the files of
		 * their own are): scanned, or loaded and not scanned again */
		for (size_t i = 0; i < ds->nshards; i++)
			scanned[i] = scanned[i] || (cached[i] && !need[i]);
		packs_save(ds, o->index_dir, scanned, cached);
		if (rc)
			goto fail;
		if (o->infer && o->index_dir && !ds->schema_reused)
			schema_save(o->index_dir, sfile, ds->schema);
	}
	for (size_t i = 0; ds->shadows && i < ds->nshards; i++)
		(void)bfs_shadow_attach(ds->shadows, ds->shards[i]);
	/* from each index's header: no walk over the records */
	for (size_t i = 0; i < ds->nshards; i++) {
		ds->first[i + 1] = ds->first[i] + bfs_shard_nrecords(ds->shards[i]);
		if (bfs_shard_max_len(ds->shards[i]) > ds->max_len)
			ds->max_len = bfs_shard_max_len(ds->shards[i]);
	}
	ds->nrecords = ds->first[ds->nshards];
	packs_free(ds); /* their entries were copied */
	bfs_source_free(paths, npaths);
	free(need);
	free(cached);
	free(scanned);
	*out = ds;
	return 0;
fail:
	bfs_source_free(paths, npaths);
	free(need);
	free(cached);
	free(scanned);
	bfs_dataset_close(ds);
	return rc;
}

/* -------------------------------------------------------------- accessors */

size_t bfs_dataset_nshards(const struct bfs_dataset *ds)
{
	return ds->nshards;
}

struct bfs_shard *bfs_dataset_shard(const struct bfs_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->shards[i] : NULL;
}

uint64_t bfs_dataset_nrecords(const struct bfs_dataset *ds)
{
	return ds->nrecords;
}

uint32_t bfs_dataset_max_record_len(const struct bfs_dataset *ds)
{
	return ds->max_len;
}

const struct bfs_schema *bfs_dataset_schema(const struct bfs_dataset *ds)
{
	return ds->schema;
}

bool bfs_dataset_index_reused(const struct bfs_dataset *ds)
{
	return ds->index_reused;
}

bool bfs_dataset_schema_reused(const struct bfs_dataset *ds)
{
	return ds->schema_reused;
}

uint64_t bfs_dataset_undecodable(const struct bfs_dataset *ds)
{
	return ds->undecodable;
}

const char *bfs_dataset_cut(const struct bfs_dataset *ds, size_t i)
{
	return i < ds->nshards ? ds->cut[i] : NULL;
}

uint64_t bfs_dataset_bad_records(const struct bfs_dataset *ds)
{
	return ds->bad_records;
}

uint64_t bfs_dataset_index_bytes(const struct bfs_dataset *ds)
{
	uint64_t b = (ds->nshards + 1) * sizeof(uint64_t);

	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
		b += ix ? bfs_index_bytes(ix) : 0;
	}
	return b;
}

uint64_t bfs_dataset_index_anon_bytes(const struct bfs_dataset *ds)
{
	uint64_t b = (ds->nshards + 1) * sizeof(uint64_t);

	for (size_t i = 0; i < ds->nshards; i++) {
		const struct bfs_index *ix = bfs_shard_get_index(ds->shards[i]);
		b += ix ? bfs_index_anon_bytes(ix) : 0;
	}
	return b;
}

int bfs_dataset_locate(const struct bfs_dataset *ds, uint64_t rec, size_t *shard, uint64_t *local,
		       uint64_t *offset)
{
	size_t lo = 0, hi = ds->nshards;

	if (rec >= ds->nrecords)
		return -ENOENT;
	/* find the last shard whose first record <= rec */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (ds->first[mid] <= rec)
			lo = mid;
		else
			hi = mid;
	}
	while (lo + 1 < ds->nshards && ds->first[lo + 1] <= rec)
		lo++;
	*shard = lo;
	*local = rec - ds->first[lo];
	if (offset)
		*offset = bfs_index_offset(bfs_shard_get_index(ds->shards[lo]), *local);
	return 0;
}

uint32_t bfs_dataset_record_len(const struct bfs_dataset *ds, uint64_t rec)
{
	size_t sh;
	uint64_t local;

	if (bfs_dataset_locate(ds, rec, &sh, &local, NULL) != 0)
		return 0;
	return bfs_index_len(bfs_shard_get_index(ds->shards[sh]), local);
}

void bfs_dataset_record_lens(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			     uint32_t *lens)
{
	enum { BLOCK = 64 };
	const struct bfs_index *ix[BLOCK];
	uint64_t local[BLOCK];

	/* In blocks: locate every record of the block, then look them up:
	 * the lookups are independent, so that the cache misses of random
	 * records overlap (a prefetch hint is dropped on a TLB miss:
	 * measured). */
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t m = n - i < BLOCK ? n - i : BLOCK;
		for (size_t k = 0; k < m; k++) {
			size_t sh;
			ix[k] = NULL;
			if (bfs_dataset_locate(ds, recs[i + k], &sh, &local[k], NULL) == 0)
				ix[k] = bfs_shard_get_index(ds->shards[sh]);
		}
		for (size_t k = 0; k < m; k++)
			lens[i + k] = ix[k] ? bfs_index_len(ix[k], local[k]) : 0;
	}
}

int bfs_dataset_read(const struct bfs_dataset *ds, uint64_t rec, uint8_t *dst, size_t cap,
		     uint32_t *len, bool verify)
{
	size_t sh;
	uint64_t local, off;
	int rc = bfs_dataset_locate(ds, rec, &sh, &local, &off);

	if (rc)
		return bfs_err_set(rc, "record %llu out of range", (unsigned long long)rec);
	*len = bfs_index_len(bfs_shard_get_index(ds->shards[sh]), local);
	rc = bfs_shard_read(ds->shards[sh], local, dst, cap, verify);
	if (rc && !strstr(bfs_err_msg(), bfs_shard_path(ds->shards[sh])))
		bfs_err_prefix("%s", bfs_shard_path(ds->shards[sh]));
	return rc;
}

struct rec_ref {
	uint64_t local; /* record within its shard */
	size_t k; /* index into the caller's arrays */
	size_t shard;
};

static int ref_cmp_local(const void *a, const void *b)
{
	uint64_t x = ((const struct rec_ref *)a)->local, y = ((const struct rec_ref *)b)->local;
	return x < y ? -1 : x > y;
}

/* Stable sort of refs by shard: two 8-bit radix passes when shard numbers
 * fit 16 bits (a batch of random records costs two linear passes, not a
 * comparison sort), else qsort on (shard, k). */
static int ref_cmp_shard(const void *a, const void *b)
{
	const struct rec_ref *x = a, *y = b;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

static void sort_by_shard(struct rec_ref *refs, struct rec_ref *tmp, size_t n, size_t nshards)
{
	if (nshards > 1 && nshards <= 65536) {
		struct rec_ref *from = refs, *to = tmp;
		for (unsigned shift = 0; shift < 16; shift += 8) {
			size_t count[257] = { 0 };
			if (shift && nshards <= 256)
				break;
			for (size_t i = 0; i < n; i++)
				count[((from[i].shard >> shift) & 255) + 1]++;
			for (size_t d = 1; d <= 256; d++)
				count[d] += count[d - 1];
			for (size_t i = 0; i < n; i++)
				to[count[(from[i].shard >> shift) & 255]++] = from[i];
			struct rec_ref *t = from;
			from = to;
			to = t;
		}
		if (from != refs)
			memcpy(refs, from, n * sizeof(*refs));
	} else if (nshards > 1) {
		qsort(refs, n, sizeof(*refs), ref_cmp_shard);
	}
}

int bfs_dataset_read_many(const struct bfs_dataset *ds, const uint64_t *recs, size_t n,
			  uint8_t *const *dst, bool verify, int *errs, char **msgs)
{
	struct rec_ref *refs = malloc((n ? n : 1) * 2 * sizeof(*refs));
	uint64_t *local = malloc((n ? n : 1) * sizeof(*local));
	uint8_t **d = malloc((n ? n : 1) * sizeof(*d));
	int *e = malloc((n ? n : 1) * sizeof(*e));
	char **m = malloc((n ? n : 1) * sizeof(*m));
	size_t nrefs = 0;
	int rc = 0;

	if (!refs || !local || !d || !e || !m) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		size_t sh;
		uint64_t loc;

		errs[k] = 0;
		msgs[k] = NULL;
		if (bfs_dataset_locate(ds, recs[k], &sh, &loc, NULL) != 0) {
			errs[k] = bfs_err_set(-ENOENT, "record %llu out of range",
					      (unsigned long long)recs[k]);
			msgs[k] = strdup(bfs_err_msg());
			continue;
		}
		refs[nrefs++] = (struct rec_ref){ loc, k, sh };
	}
	/* one run per shard; a compressed shard's run in file order, so that
	 * it is inflated once per run of nearby records (a mapped or pread
	 * shard takes any order) */
	sort_by_shard(refs, refs + n, nrefs, ds->nshards);
	for (size_t i = 0, j; i < nrefs; i = j) {
		struct bfs_shard *s = ds->shards[refs[i].shard];

		for (j = i; j < nrefs && refs[j].shard == refs[i].shard; j++)
			;
		if (bfs_shard_compression(s) != BFS_COMP_NONE)
			qsort(refs + i, j - i, sizeof(*refs), ref_cmp_local);
		for (size_t t = i; t < j; t++) {
			local[t - i] = refs[t].local;
			d[t - i] = dst[refs[t].k];
		}
		bfs_shard_read_many(s, local, j - i, d, verify, e, m);
		for (size_t t = i; t < j; t++) {
			errs[refs[t].k] = e[t - i];
			msgs[refs[t].k] = m[t - i];
		}
	}
out:
	free(refs);
	free(local);
	free(d);
	free(e);
	free(m);
	return rc;
}
