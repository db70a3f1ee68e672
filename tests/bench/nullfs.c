/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nullfs — a null FUSE filesystem for the benchmark: a read-only tree of
 * files whose bytes all come from one in-memory buffer, so reading it costs
 * only what FUSE itself costs. It sets up its connection as batchfs does
 * (1 MiB max_write, max_readahead raised, splice writes when the kernel
 * offers them, the same attribute timeouts) so that it is the ceiling
 * batchfs could reach.
 *
 *   nullfs MOUNTPOINT [-f] [-o files=K,size=BYTES] [-o manifest=FILE]
 *          [-o direct_io] [-o keep_cache] [-o nosplice] [-o threads=N]
 *
 * files=K,size=S   K files file-000000 .. in the root, S bytes each
 * manifest=FILE    instead, the tree of FILE: one "SIZE RELPATH" per line,
 *                  '/' making directories (readtree --manifest writes it
 *                  from a batchfs mount, so the trees match file for file)
 * direct_io        open files with direct_io (no page cache)
 * keep_cache       open files with keep_cache (a re-read is served from the
 *                  page cache without asking the daemon); without it the
 *                  kernel drops a file's cached pages on every open
 * nosplice         reply with fuse_reply_buf instead of fuse_reply_data
 * threads=N        max FUSE worker threads (default 16, as batchfs)
 * span=BYTES       size of the one buffer (K/M/G suffixes; default: the
 *                  largest file). Files start at successive page-aligned
 *                  offsets in it, wrapping, so that with a span larger than
 *                  the CPU caches every reply is copied from DRAM, as a
 *                  daemon serving freshly decoded batches copies it.
 *
 * Mounted read-only with default_permissions, as batchfs is. Daemonizes once
 * mounted unless -f; unmount with fusermount3 -u.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define TIMEOUT 86400.0

struct node {
	char *name;
	fuse_ino_t parent;
	int dir;
	uint64_t size;
	uint64_t off; /* of its bytes in `data` */
	fuse_ino_t *kids;
	size_t nkids, cap;
};

struct cfg {
	unsigned files;
	char *size;
	char *manifest;
	int direct_io;
	int keep_cache;
	int nosplice;
	unsigned threads;
	char *span;
};

static struct node *nodes; /* ino i is nodes[i - 1]; the root is ino 1 */
static size_t nnodes, capnodes;
static uint8_t *data; /* as long as the largest file */
static struct cfg cfg;

static const struct fuse_opt opt_spec[] = { { "files=%u", offsetof(struct cfg, files), 0 },
					    { "size=%s", offsetof(struct cfg, size), 0 },
					    { "manifest=%s", offsetof(struct cfg, manifest), 0 },
					    { "direct_io", offsetof(struct cfg, direct_io), 1 },
					    { "keep_cache", offsetof(struct cfg, keep_cache), 1 },
					    { "nosplice", offsetof(struct cfg, nosplice), 1 },
					    { "threads=%u", offsetof(struct cfg, threads), 0 },
					    { "span=%s", offsetof(struct cfg, span), 0 },
					    FUSE_OPT_END };

/* ------------------------------------------------------------ the tree */

static struct node *N(fuse_ino_t ino)
{
	return ino >= 1 && ino <= nnodes ? &nodes[ino - 1] : NULL;
}

static fuse_ino_t add_node(fuse_ino_t parent, const char *name, size_t len, int dir, uint64_t size)
{
	struct node *p;

	if (nnodes == capnodes) {
		capnodes = capnodes ? capnodes * 2 : 1024;
		nodes = realloc(nodes, capnodes * sizeof(*nodes));
		if (!nodes)
			abort();
	}
	struct node *n = &nodes[nnodes++];
	memset(n, 0, sizeof(*n));
	n->name = strndup(name, len);
	if (!n->name)
		abort();
	n->parent = parent;
	n->dir = dir;
	n->size = size;
	if (parent) {
		p = N(parent);
		if (p->nkids == p->cap) {
			p->cap = p->cap ? p->cap * 2 : 8;
			p->kids = realloc(p->kids, p->cap * sizeof(*p->kids));
			if (!p->kids)
				abort();
		}
		p->kids[p->nkids++] = nnodes;
	}
	return nnodes;
}

/* Child `name` (len bytes) of dir, or 0. Manifests come in sorted order, so
 * the last child is tried first. */
static fuse_ino_t find_kid_linear(const struct node *d, const char *name, size_t len)
{
	for (size_t i = d->nkids; i-- > 0;) {
		const struct node *k = N(d->kids[i]);
		if (strlen(k->name) == len && memcmp(k->name, name, len) == 0)
			return d->kids[i];
	}
	return 0;
}

static int cmp_kids(const void *a, const void *b)
{
	return strcmp(N(*(const fuse_ino_t *)a)->name, N(*(const fuse_ino_t *)b)->name);
}

static fuse_ino_t find_kid(const struct node *d, const char *name)
{
	size_t lo = 0, hi = d->nkids;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(N(d->kids[mid])->name, name);
		if (c == 0)
			return d->kids[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		end++;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (end == s || *end)
		return -1;
	*out = v;
	return 0;
}

static int load_manifest(const char *path, uint64_t *maxsize)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long lineno = 0;

	if (!f) {
		fprintf(stderr, "nullfs: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		unsigned long long size;
		int used = 0;

		lineno++;
		if (line[len - 1] == '\n')
			line[--len] = 0;
		if (len == 0)
			continue;
		if (sscanf(line, "%llu %n", &size, &used) != 1 || !line[used]) {
			fprintf(stderr, "nullfs: %s:%lu: expected SIZE PATH\n", path, lineno);
			fclose(f);
			free(line);
			return -1;
		}
		fuse_ino_t dir = 1;
		const char *p = line + used;
		for (;;) {
			const char *slash = strchr(p, '/');
			if (!slash) {
				if (find_kid_linear(N(dir), p, strlen(p))) {
					fprintf(stderr, "nullfs: %s:%lu: duplicate path\n", path,
						lineno);
					fclose(f);
					free(line);
					return -1;
				}
				add_node(dir, p, strlen(p), 0, size);
				break;
			}
			if (slash > p) {
				fuse_ino_t k = find_kid_linear(N(dir), p, (size_t)(slash - p));
				if (!k)
					k = add_node(dir, p, (size_t)(slash - p), 1, 0);
				if (!N(k)->dir) {
					fprintf(stderr,
						"nullfs: %s:%lu: a file used as a directory\n",
						path, lineno);
					fclose(f);
					free(line);
					return -1;
				}
				dir = k;
			}
			p = slash + 1;
		}
		if (size > *maxsize)
			*maxsize = size;
	}
	free(line);
	fclose(f);
	return 0;
}

static int build_tree(void)
{
	uint64_t maxsize = 0;

	add_node(0, "", 0, 1, 0);
	if (cfg.manifest) {
		if (load_manifest(cfg.manifest, &maxsize) != 0)
			return -1;
	} else {
		uint64_t size = 0;
		if (!cfg.size || parse_size(cfg.size, &size) != 0 || cfg.files == 0) {
			fprintf(stderr, "nullfs: give -o files=K,size=BYTES or -o manifest=FILE\n");
			return -1;
		}
		for (unsigned i = 0; i < cfg.files; i++) {
			char name[32];
			int n = snprintf(name, sizeof(name), "file-%06u", i);
			add_node(1, name, (size_t)n, 0, size);
		}
		maxsize = size;
	}
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].nkids > 1)
			qsort(nodes[i].kids, nodes[i].nkids, sizeof(fuse_ino_t), cmp_kids);
	uint64_t span = maxsize;
	if (cfg.span && (parse_size(cfg.span, &span) != 0 || span < maxsize)) {
		fprintf(stderr,
			"nullfs: span=%s: a size of at least the largest file (%" PRIu64
			" bytes)\n",
			cfg.span, maxsize);
		return -1;
	}
	/* file offsets in creation (= manifest = reading) order, wrapping */
	uint64_t pos = 0;
	for (size_t i = 0; i < nnodes; i++) {
		if (nodes[i].dir)
			continue;
		if (pos + nodes[i].size > span)
			pos = 0;
		nodes[i].off = pos;
		pos = (pos + nodes[i].size + 4095) & ~(uint64_t)4095;
	}
	/* one buffer for every file, with real (not zero-page) contents */
	data = malloc(span ? span : 1);
	if (!data) {
		fprintf(stderr, "nullfs: cannot allocate %" PRIu64 " bytes\n", span);
		return -1;
	}
	uint64_t seed = span < 4096 ? span : 4096;
	for (uint64_t i = 0; i < seed; i++)
		data[i] = (uint8_t)(i * 131u + 7u);
	for (uint64_t done = seed; done < span;) {
		uint64_t k = done < span - done ? done : span - done;
		memcpy(data + done, data, k);
		done += k;
	}
	return 0;
}

static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	const struct node *n = N(ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (n->dir) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
	st->st_blksize = CHUNK;
}

/* ------------------------------------------------------------ handlers */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->max_readahead = conn->max_readahead > CHUNK ? conn->max_readahead : CHUNK;
	conn->max_write = CHUNK; /* also raises max_pages, so reads can be 1 MiB */
	if (!cfg.nosplice && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	conn->want &= ~(unsigned)FUSE_CAP_ASYNC_READ;
	conn->want |= conn->capable & FUSE_CAP_ASYNC_READ;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	const struct node *d = N(parent);
	struct fuse_entry_param e;
	fuse_ino_t k = d && d->dir ? find_kid(d, name) : 0;

	memset(&e, 0, sizeof(e));
	e.entry_timeout = TIMEOUT;
	if (!d) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (k) {
		e.ino = k;
		e.generation = 1;
		e.attr_timeout = TIMEOUT;
		fill_attr(k, &e.attr);
	}
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (!N(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct node *n = N(ino);

	if (!n || !n->dir) {
		fuse_reply_err(req, n ? ENOTDIR : ENOENT);
		return;
	}
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const struct node *d = N(ino);
	char *buf;
	size_t used = 0;

	(void)fi;
	if (!d || !d->dir) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* offsets: 0 ".", 1 "..", 2+i child i */
	for (uint64_t i = (uint64_t)off; i < d->nkids + 2; i++) {
		struct stat st;
		const char *name;
		size_t ent;

		memset(&st, 0, sizeof(st));
		if (i < 2) {
			name = i == 0 ? "." : "..";
			st.st_ino = i == 0 ? ino : (d->parent ? d->parent : ino);
			st.st_mode = S_IFDIR;
		} else {
			fuse_ino_t k = d->kids[i - 2];
			name = N(k)->name;
			st.st_ino = k;
			st.st_mode = N(k)->dir ? S_IFDIR : S_IFREG;
		}
		ent = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(i + 1));
		if (ent > size - used)
			break;
		used += ent;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct node *n = N(ino);

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->dir) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->direct_io = cfg.direct_io ? 1 : 0;
	fi->keep_cache = cfg.keep_cache ? 1 : 0;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	const struct node *n = N(ino);

	(void)fi;
	if (!n || n->dir) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	if ((uint64_t)off >= n->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > n->size - (uint64_t)off)
		size = (size_t)(n->size - (uint64_t)off);
	if (cfg.nosplice) {
		fuse_reply_buf(req, (const char *)data + n->off + (uint64_t)off, size);
		return;
	}
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	bv.buf[0].mem = data + n->off + (uint64_t)off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = { 0 };
	struct fuse_session *se = NULL;
	struct fuse_loop_config *lc = NULL;
	int ret = 1;

	cfg.threads = 16;
	if (fuse_opt_parse(&args, &cfg, opt_spec, NULL) != 0)
		return 1;
	if (fuse_parse_cmdline(&args, &opts) != 0)
		return 1;
	if (opts.show_help || !opts.mountpoint) {
		fprintf(stderr,
			"usage: nullfs MOUNTPOINT [-f] [-o files=K,size=BYTES | -o manifest=FILE]\n"
			"       [-o direct_io] [-o keep_cache] [-o nosplice] [-o threads=N]\n"
			"       [-o span=BYTES]\n");
		ret = opts.show_help ? 0 : 2;
		goto out;
	}
	if (build_tree() != 0)
		goto out;
	/* mounted as batchfs mounts: read-only (so no atime updates and the
	 * GETATTRs they cause), kernel permission checks */
	if (fuse_opt_add_arg(&args, "-oro,default_permissions,fsname=nullfs,subtype=nullfs") != 0)
		goto out;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;
	lc = fuse_loop_cfg_create();
	if (!lc)
		goto out_unmount;
	fuse_loop_cfg_set_max_threads(lc, cfg.threads ? cfg.threads : 16);
	fuse_loop_cfg_set_clone_fd(lc, 0);
	ret = fuse_session_loop_mt(se, lc) < 0 ? 1 : 0;
	fuse_loop_cfg_destroy(lc);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	free(opts.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
