/*
 * faultfs — a read-only FUSE passthrough whose reads can be made to fail or
 * to stall, for testing batchfs over a failing or slow source disk.
 *
 *   faultfs SOURCE_DIR MOUNTPOINT CONTROL_FILE [FUSE options...]
 *
 * Serves SOURCE_DIR (one level: regular files) at MOUNTPOINT, read-only,
 * every open with direct_io so that each read reaches this process. Before
 * each read it reads CONTROL_FILE (outside the mount; missing or empty = no
 * fault); its first line is one of
 *
 *   ok
 *   eio [SUBSTRING]        reads of files whose name contains SUBSTRING
 *                          (all files if none) fail with EIO
 *   delay MS [SUBSTRING]   those reads sleep MS milliseconds, then succeed
 *
 * Runs in the foreground (-f is added) until unmounted. Test tool only.
 */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

static const char *source, *control;

enum fault { F_NONE, F_EIO, F_DELAY };

/* The fault that applies to `path` now, and the delay in ms for F_DELAY. */
static enum fault current_fault(const char *path, long *ms)
{
	char line[512], what[16], sub[256];
	FILE *f = fopen(control, "r");
	int n;

	*ms = 0;
	if (!f)
		return F_NONE;
	if (!fgets(line, sizeof(line), f)) {
		fclose(f);
		return F_NONE;
	}
	fclose(f);
	sub[0] = '\0';
	if (sscanf(line, "%15s", what) != 1)
		return F_NONE;
	if (strcmp(what, "eio") == 0) {
		n = sscanf(line, "%*s %255s", sub);
		if (n == 1 && !strstr(path, sub))
			return F_NONE;
		return F_EIO;
	}
	if (strcmp(what, "delay") == 0) {
		n = sscanf(line, "%*s %ld %255s", ms, sub);
		if (n < 1)
			return F_NONE;
		if (n == 2 && !strstr(path, sub))
			return F_NONE;
		return F_DELAY;
	}
	return F_NONE;
}

static int real_path(char *out, size_t cap, const char *path)
{
	if ((size_t)snprintf(out, cap, "%s%s", source, path) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

static int ff_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	int rc = real_path(p, sizeof(p), path);

	(void)fi;
	if (rc)
		return rc;
	if (lstat(p, st) != 0)
		return -errno;
	st->st_mode &= ~(mode_t)0222;
	return 0;
}

static int ff_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	char p[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = real_path(p, sizeof(p), path);

	(void)off, (void)fi, (void)flags;
	if (rc)
		return rc;
	d = opendir(p);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (fill(buf, de->d_name, NULL, 0, 0))
			break;
	closedir(d);
	return 0;
}

static int ff_open(const char *path, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	int fd, rc = real_path(p, sizeof(p), path);

	if (rc)
		return rc;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	fi->direct_io = 1; /* every read comes here, none from the page cache */
	return 0;
}

static int ff_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	long ms;
	ssize_t n;

	switch (current_fault(path, &ms)) {
	case F_EIO:
		return -EIO;
	case F_DELAY: {
		struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		break;
	}
	default:
		break;
	}
	n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int ff_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = ff_getattr,
	.readdir = ff_readdir,
	.open = ff_open,
	.read = ff_read,
	.release = ff_release,
};

int main(int argc, char **argv)
{
	char **fargv;
	int fargc = 0;

	if (argc < 4) {
		fprintf(stderr,
			"usage: faultfs SOURCE_DIR MOUNTPOINT CONTROL_FILE [FUSE options]\n");
		return 2;
	}
	source = realpath(argv[1], NULL);
	control = argv[3];
	if (!source) {
		perror(argv[1]);
		return 1;
	}
	fargv = calloc((size_t)argc + 4, sizeof(*fargv));
	if (!fargv)
		return 1;
	fargv[fargc++] = argv[0];
	fargv[fargc++] = argv[2];
	fargv[fargc++] = "-f";
	fargv[fargc++] = "-oro";
	for (int i = 4; i < argc; i++)
		fargv[fargc++] = argv[i];
	return fuse_main(fargc, fargv, &ops, NULL);
}
