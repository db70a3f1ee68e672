/*
 * checks.c — the mount's checks before anything is mounted (see checks.h).
 */
#include "checks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
		snprintf(type, sizeof(type), "?");
		snprintf(src, sizeof(src), "?");
	}
	if (!r)
		return false;
	if (strncmp(type, "fuse", 4) == 0)
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
	if (flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
		fprintf(stderr, "batchfs: %s: another batchfs is mounting on it\n", arg);
		close(fd);
		return -1;
	}
	if (bfs_mountpoint_taken(arg, abs)) {
		close(fd);
		return -1;
	}
	return fd;
}

