/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checks.c — the mount's checks before anything is mounted (see checks.h).
 */
#include "checks.h"

#include "example.h"
#include "image.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the mount point */

/* /proc/self/mountinfo writes space, tab, newline and backslash in a path
 * as \ooo: decode in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* 1 when a mount is at `abs` (any filesystem, bind mounts too, which keep
 * st_dev), with the type and source of the topmost one; 0 when none; -1
 * when mountinfo cannot be read. */
static int mounted_at(const char *abs, char *type, size_t tcap, char *src, size_t scap)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root MOUNTPOINT opts [optional...] - type source superopts */
		char *save = NULL, *mp = NULL, *tok = strtok_r(line, " \n", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " \n", &save);
		mp = tok;
		if (!mp)
			continue;
		unescape(mp);
		if (strcmp(mp, abs) != 0)
			continue;
		found = 1;
		snprintf(type, tcap, "?");
		snprintf(src, scap, "?");
		while ((tok = strtok_r(NULL, " \n", &save)) != NULL && strcmp(tok, "-") != 0)
			;
		if (tok && (tok = strtok_r(NULL, " \n", &save)) != NULL) {
			snprintf(type, tcap, "%s", tok);
			if ((tok = strtok_r(NULL, " \n", &save)) != NULL) {
				unescape(tok);
				snprintf(src, scap, "%s", tok);
			}
		}
		/* go on: the last line for a path is the topmost mount */
	}
	free(line);
	fclose(f);
	return found;
}

bool bfs_mountpoint_taken(const char *arg, const char *abs)
{
	char type[64], src[256], parent[PATH_MAX + 4];
	struct stat st, pst;
	int r = mounted_at(abs, type, sizeof(type), src, sizeof(src));

	if (r < 0) { /* no mountinfo: another device than the parent's, or the root */
		snprintf(parent, sizeof(parent), "%s/..", abs);
		r = stat(abs, &st) == 0 && stat(parent, &pst) == 0 &&
		    (st.st_dev != pst.st_dev || st.st_ino == pst.st_ino);
		type[0] = '\0';
	}
	if (!r)
		return false;
	if (!type[0])
		fprintf(stderr,
			"batchfs: %s: already a mount point; unmount it first or choose another "
			"folder\n",
			arg);
	else if (strncmp(type, "fuse", 4) == 0)
		fprintf(stderr,
			"batchfs: %s: already a mount point (%s); unmount it first (fusermount3 -u "
			"%s) or choose another folder\n",
			arg, type, arg);
	else
		fprintf(stderr,
			"batchfs: %s: already a mount point (%s from %s); unmount it first or "
			"choose another folder\n",
			arg, type, src);
	return true;
}

static void print_unusable(const char *arg, int err)
{
	if (err == ENOENT)
		fprintf(stderr, "batchfs: %s: mount point does not exist\n", arg);
	else if (err == ENOTDIR)
		fprintf(stderr, "batchfs: %s: mount point is not a directory\n", arg);
	else if (err == ENOTCONN) /* its attributes may still be cached: at open */
		fprintf(stderr,
			"batchfs: %s: a dead FUSE mount (its daemon is gone); unmount it first: "
			"fusermount3 -u %s\n",
			arg, arg);
	else
		fprintf(stderr, "batchfs: %s: cannot use the mount point: %s\n", arg,
			strerror(err));
}

/* The holder of the folder's lock holds it exclusive while it mounts,
 * shared once mounted, and lets go when its session ends (fs/lifecycle.h):
 * a shared holder at a folder that is no longer a mount point is a daemon
 * that was unmounted and is only exiting. */
#define EXITING_WAIT_MS 10000
#define EXITING_POLL_MS 10

static int lock_folder(const char *arg, const char *abs, int fd)
{
	const struct timespec pause = { 0, EXITING_POLL_MS * 1000000L };
	int waited = 0;

	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
			return 0; /* locked, or no locks here: mount unguarded */
		if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
			fprintf(stderr, "batchfs: %s: another batchfs is mounting on it\n", arg);
			return -1;
		}
		(void)flock(fd, LOCK_UN);
		if (bfs_mountpoint_taken(arg, abs))
			return -1;
		if (waited >= EXITING_WAIT_MS) {
			fprintf(stderr,
				"batchfs: %s: the batchfs unmounted from it has not exited after "
				"%d s (it may still serve files opened before a lazy unmount); "
				"stop it or choose another folder\n",
				arg, waited / 1000);
			return -1;
		}
		nanosleep(&pause, NULL);
		waited += EXITING_POLL_MS;
	}
}

int bfs_mountpoint_claim(const char *arg, char *abs)
{
	struct stat st;
	int fd;

	if (stat(arg, &st) != 0) {
		print_unusable(arg, errno);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		print_unusable(arg, ENOTDIR);
		return -1;
	}
	if (!realpath(arg, abs))
		snprintf(abs, PATH_MAX, "%s", arg);
	fd = open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		print_unusable(arg, errno);
		return -1;
	}
	/* Two batchfs started on one folder at once would both find it free
	 * (an index build can take minutes before the mount): the first to
	 * lock the folder mounts. After the mount, a third one opens the
	 * mount's root instead and finds a mount point. */
	if (lock_folder(arg, abs, fd) != 0) {
		close(fd);
		return -1;
	}
	if (bfs_mountpoint_taken(arg, abs)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- the features there are */

#define NAMES_SHOWN 12

char *bfs_feature_names(const struct bfs_schema *s, bool bytes_only)
{
	size_t total = 0, shown = 0;
	char *out = strdup(""), *t;

	for (size_t i = 0; out && i < s->nfeatures + s->nlists; i++) {
		bool list = i >= s->nfeatures;
		const struct bfs_feature_spec *f =
			list ? &s->lists[i - s->nfeatures] : &s->features[i];

		if (bytes_only && (list || f->kind != BFS_KIND_BYTES))
			continue;
		if (total++ >= NAMES_SHOWN)
			continue;
		if (asprintf(&t, "%s%s%s%s", out, shown++ ? ", " : "", list ? "feature_lists/" : "",
			     f->name) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	if (out && total > NAMES_SHOWN) {
		if (asprintf(&t, "%s, ... (%zu in all)", out, total) < 0)
			t = NULL;
		free(out);
		out = t;
	}
	return out;
}

/* ---- image= on features that hold no images */

#define IMAGE_SAMPLES 8

struct sample {
	unsigned nonempty, images;
	uint8_t first[32]; /* the start of the first non-empty value */
	size_t first_len, first_total;
};

static void sample_record(const struct bfs_dataset *ds, uint64_t rec, const char *name,
			  struct sample *sm)
{
	uint32_t len = bfs_dataset_record_len(ds, rec), got = 0;
	uint8_t *buf = malloc(len ? len : 1);
	struct bfs_example *ex = NULL;

	if (!buf)
		return;
	if (bfs_dataset_read(ds, rec, buf, len ? len : 1, &got, false) == 0 &&
	    bfs_example_decode(&ex, buf, got) == 0) {
		for (size_t i = 0; i < ex->nfeatures; i++) {
			const struct bfs_values *v = &ex->features[i].v;

			if (strcmp(ex->features[i].name, name) != 0 || v->kind != BFS_KIND_BYTES)
				continue;
			for (size_t k = 0; k < v->count; k++) {
				if (v->b[k].len == 0)
					continue;
				if (sm->nonempty++ == 0) {
					sm->first_total = v->b[k].len;
					sm->first_len = v->b[k].len < sizeof(sm->first)
								? v->b[k].len
								: sizeof(sm->first);
					memcpy(sm->first, v->b[k].data, sm->first_len);
				}
				if (bfs_image_sniff(v->b[k].data, v->b[k].len) != BFS_IMAGE_UNKNOWN)
					sm->images++;
			}
		}
	}
	bfs_example_free(ex);
	free(buf);
}

/* Printable UTF-8 (a sequence cut at the end of the bytes counts)? */
static bool looks_like_text(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t ch = p[i];
		size_t more = ch < 0x80 ? 0 : (ch & 0xe0) == 0xc0 ? 1 : (ch & 0xf0) == 0xe0 ? 2 : 3;

		if (ch < 0x80 &&
		    ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f))
			return false;
		if (ch >= 0x80 && (ch < 0xc2 || ch > 0xf4))
			return false;
		for (size_t k = 1; k <= more; k++)
			if (i + k < n && (p[i + k] & 0xc0) != 0x80)
				return false;
		i += 1 + more;
	}
	return true;
}

/* "text, ... (e.g. "Wiesbaden is ...")" or "other bytes (e.g. 0a 1b ...)" */
static void describe(const struct sample *sm, char *out, size_t cap)
{
	char shown[sizeof(sm->first) * 3 + 8];
	size_t n = 0;

	if (looks_like_text(sm->first, sm->first_len)) {
		for (size_t i = 0; i < sm->first_len && i < 24; i++) {
			uint8_t ch = sm->first[i];
			shown[n++] = ch >= 0x20 && ch < 0x7f && ch != '"' ? (char)ch : '.';
		}
		shown[n] = '\0';
		snprintf(out, cap, "text, not JPEG or PNG images (e.g. \"%s%s\")", shown,
			 sm->first_total > 24 ? "..." : "");
		return;
	}
	for (size_t i = 0; i < sm->first_len && i < 8; i++)
		n += (size_t)snprintf(shown + n, sizeof(shown) - n, "%s%02x", i ? " " : "",
				      sm->first[i]);
	snprintf(out, cap, "other bytes, not JPEG or PNG images (e.g. %zu bytes: %s%s)",
		 sm->first_total, shown, sm->first_total > 8 ? " ..." : "");
}

int bfs_check_image_options(const struct bfs_dataset *ds, const struct bfs_schema *s,
			    const bool *was_image, char *const *image_opts, unsigned nimage)
{
	uint64_t n = bfs_dataset_nrecords(ds);

	for (size_t i = 0; i < s->nfeatures; i++) {
		const struct bfs_feature_spec *f = &s->features[i];
		struct sample sm = { 0 };
		size_t len = strlen(f->name);
		const char *opt = NULL;
		char what[200];

		if (!f->image || was_image[i] || f->content != BFS_IMAGE_UNKNOWN)
			continue;
		for (unsigned k = 0; k < nimage; k++)
			if (strncmp(image_opts[k], f->name, len) == 0 && image_opts[k][len] == ':')
				opt = image_opts[k];
		/* records spread over the dataset: over its shards too */
		for (uint64_t k = 0; k < IMAGE_SAMPLES && k < n; k++)
			sample_record(ds, n <= IMAGE_SAMPLES ? k : k * (n / IMAGE_SAMPLES), f->name,
				      &sm);
		if (sm.nonempty == 0 || sm.images > 0)
			continue; /* only empty values seen, or some images */
		describe(&sm, what, sizeof(what));
		fprintf(stderr, "batchfs: option 'image=%s': feature '%s' holds %s\n",
			opt ? opt : f->name, f->name, what);
		return -1;
	}
	return 0;
}
