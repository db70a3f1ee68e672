/*
 * options.h — the mount's `-o key=value` options (docs/contract.md's table),
 * parsed with libfuse's fuse_opt so standard FUSE options pass through.
 *
 * Every bad value is reported as one line naming the option, before
 * anything is opened or mounted.
 */
#ifndef BFS_OPTIONS_H
#define BFS_OPTIONS_H

#include "batch.h"
#include "fetch.h"
#include "record.h"

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>

#define BFS_PREFETCH_DEFAULT UINT_MAX
#define BFS_SHADOW_SIZE_DEFAULT ((uint64_t)8 << 30) /* shadow copies in index_dir */
#define BFS_IO_DEPTH_MAX 4096

struct bfs_options {
	uint64_t batch_size;
	uint64_t seed;
	bool shuffle;
	bool block; /* shuffle=block (with shuffle set) */
	uint64_t block_size, window; /* shuffle=block: 4M, 64 */
	uint64_t epochs;
	bool drop_remainder;
	char *schema_file;
	char *features;
	uint64_t rank, world;
	bool all_ranks; /* world=W without rank: rank-0000/ ... rank-(W-1)/ */
	bool verify;
	enum bfs_on_corrupt on_corrupt;
	uint64_t cache_size;
	unsigned prefetch; /* 0: no prefetch; BFS_PREFETCH_DEFAULT until parsed: 2 x threads */
	unsigned threads;
	uint64_t chunk_rows; /* rows decoded together for all/; 0: about 2 MiB of them */
	char *index_dir;
	bool shadow; /* plain copies of compressed shards in index_dir (decoder/shadow.h) */
	uint64_t shadow_size; /* their total bytes there, at most; 0: none */
	char *split; /* split=NAME: a TFDS dataset folder's split */
	char *image[8]; /* image=FEATURE:HxW[:C], in the order given */
	unsigned nimage;
	uint64_t image_max_pixels; /* 0: the default (image.h) */
	unsigned io_depth; /* source reads in flight at most; 0: auto */
	uint64_t readahead; /* source bytes fetched ahead, at most; 0: auto */
	enum bfs_fetch_backend io_backend; /* io_backend=: BFS_FETCH_AUTO unless asked */
	char *disk_cache; /* disk_cache=DIR: source bytes kept on a local disk; NULL: off */
	uint64_t disk_cache_size; /* its bound; 0: 10% of DIR's file system */
	/* SOURCE a bucket: endpoint=, region=, no_sign_request (s3.h) */
	char *endpoint, *region;
	bool no_sign_request;
	enum bfs_compression compression;
	bool follow_symlinks;
	int cuda_device; /* -1 off */
	unsigned cuda_pool; /* device buffers of the CUDA path; 0: the default (4) */
	unsigned max_read; /* FUSE's max_read=, passed through; 0: none */
	int watch_fd; /* -1; else a pipe whose end of file stops the mount */
	bool foreground;
	bool debug;
	char *source;
	char *mountpoint;
	bool help, version;
};

/* Parse argv (argv[0] = program). On success *fuse_argc and *fuse_argv hold the
 * arguments for libfuse (program name + pass-through options), malloc'd;
 * free with bfs_options_free_argv. Returns 0, or 1 after printing one line
 * naming the bad option to stderr. */
int bfs_options_parse(struct bfs_options *o, int argc, char **argv, int *fuse_argc,
		      char ***fuse_argv);
void bfs_options_free_argv(int argc, char **argv);
void bfs_options_destroy(struct bfs_options *o);

/* "batch_size=32,seed=0,..." — the effective options, malloc'd. */
char *bfs_options_describe(const struct bfs_options *o);

/* Parse "1G", "512M", "4096". -EINVAL on anything else or overflow. */
int bfs_parse_size(uint64_t *out, const char *s);
int bfs_parse_u64(uint64_t *out, const char *s);
/* XDG_CACHE_HOME/batchfs or HOME/.cache/batchfs, malloc'd. */
int bfs_default_index_dir(char **out);

#endif
