/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_jpeg — the single-core floor of the 'photo' workload: TurboJPEG
 * decode + the project's resize in a plain C loop, no FUSE, no threads.
 *
 *   bench_jpeg [--feature NAME] [--size HxW] [--limit N] SHARD...
 *
 * For every record of the (plain or compressed) shards, in file order:
 * parse the tf.train.Example (libbfsdecoder, no CRC check), take the one
 * bytes value of NAME (default image/encoded), decode it with one reused
 * TurboJPEG handle at the DCT scale batchfs picks for a stretch to HxW
 * (the smallest of 1/8, 1/4, 1/2 still at least as large as the target on
 * the axis reduced least; else full size), into one reused buffer, as RGB,
 * then bfs_resize (decoder/image/resize.h, bilinear) the whole decoded image to
 * HxW (default 224x224) into one reused output row. Every step is what
 * batchfs does for `-o image=NAME:HxW`, without its per-image allocations
 * and fresh handles: the floor a one-core loop reaches.
 *
 * Prints one JSON line: records, decoded (images), seconds (the loop,
 * wall clock), cpu_seconds, records_s, pixels (source pixels decoded),
 * checksum (sum of all output bytes, so the work cannot be skipped).
 * Exit status 1 on any record it cannot decode (naming shard and record).
 */
#include "example.h"
#include "image.h"
#include "record.h"
#include "resize.h"
#include "bench_clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <turbojpeg.h>

struct loop {
	const char *feature, *path;
	uint32_t h, w;
	uint64_t limit, records, decoded, pixels, checksum;
	tjhandle tj;
	uint8_t *buf, *out;
	size_t bufcap;
};

static int one_image(struct loop *l, uint64_t index, const uint8_t *data, size_t len)
{
	int iw, ih, sub, cs, sw, sh;
	double sx, sy;
	tjscalingfactor sf = { 1, 1 };
	size_t need;
	struct bfs_region r;

	if (tjDecompressHeader3(l->tj, data, (unsigned long)len, &iw, &ih, &sub, &cs) != 0)
		goto bad;
	sx = (double)l->w / iw;
	sy = (double)l->h / ih;
	sf.denom = (int)bfs_image_dct_denom(sx > sy ? sx : sy);
	sw = TJSCALED(iw, sf);
	sh = TJSCALED(ih, sf);
	need = (size_t)sw * (size_t)sh * 3;
	if (need > l->bufcap) {
		free(l->buf);
		l->buf = malloc(need);
		l->bufcap = l->buf ? need : 0;
		if (!l->buf) {
			fprintf(stderr, "bench_jpeg: out of memory\n");
			return -1;
		}
	}
	if (tjDecompress2(l->tj, data, (unsigned long)len, l->buf, sw, 0, sh, TJPF_RGB,
			  TJFLAG_STOPONWARNING) != 0)
		goto bad;
	r = (struct bfs_region){ 0, 0, sw, sh };
	if (bfs_resize(l->buf, (uint32_t)sw, (uint32_t)sh, (size_t)sw * 3, 3, r, l->out, l->w, l->h,
		       (size_t)l->w * 3, BFS_FILTER_BILINEAR) != 0) {
		fprintf(stderr, "bench_jpeg: %s record %" PRIu64 ": resize failed\n", l->path,
			index);
		return -1;
	}
	/* touch the output so that nothing above can be optimised away */
	for (size_t k = 0; k < (size_t)l->w * l->h * 3; k += 4096)
		l->checksum += l->out[k];
	l->pixels += (uint64_t)iw * (uint64_t)ih;
	l->decoded++;
	return 0;
bad:
	fprintf(stderr, "bench_jpeg: %s record %" PRIu64 ": %s\n", l->path, index,
		tjGetErrorStr2(l->tj));
	return -1;
}

static int on_record(void *ctx, uint64_t index, uint64_t offset, const uint8_t *data, uint32_t len)
{
	struct loop *l = ctx;
	struct bfs_example *ex = NULL;
	const struct bfs_values *v;
	int rc;

	(void)offset;
	if (l->limit && l->records >= l->limit)
		return 1; /* stop the scan: enough records */
	l->records++;
	if (bfs_example_decode(&ex, data, len) != 0) {
		fprintf(stderr, "bench_jpeg: %s record %" PRIu64 ": %s\n", l->path, index,
			bfs_err_msg());
		return -1;
	}
	v = bfs_example_find(ex, l->feature);
	if (!v || v->kind != BFS_KIND_BYTES || v->count != 1) {
		fprintf(stderr, "bench_jpeg: %s record %" PRIu64 ": no single bytes value '%s'\n",
			l->path, index, l->feature);
		bfs_example_free(ex);
		return -1;
	}
	rc = one_image(l, index, v->b[0].data, v->b[0].len);
	bfs_example_free(ex);
	return rc;
}

int main(int argc, char **argv)
{
	struct loop l = { .feature = "image/encoded", .h = 224, .w = 224 };
	double t0, c0, secs, cpu;
	int i, rc = 0;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (strcmp(argv[i], "--feature") == 0 && i + 1 < argc) {
			l.feature = argv[++i];
		} else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			if (sscanf(argv[++i], "%" SCNu32 "x%" SCNu32, &l.h, &l.w) != 2 || !l.h ||
			    !l.w || l.h > 16384 || l.w > 16384) {
				fprintf(stderr, "bench_jpeg: --size HxW, e.g. 224x224\n");
				return 2;
			}
		} else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
			l.limit = strtoull(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: bench_jpeg [--feature NAME] [--size HxW] "
					"[--limit N] SHARD...\n");
			return 2;
		}
	}
	if (i == argc) {
		fprintf(stderr, "bench_jpeg: no shards\n");
		return 2;
	}
	l.tj = tjInitDecompress();
	l.out = malloc((size_t)l.w * l.h * 3);
	if (!l.tj || !l.out) {
		fprintf(stderr, "bench_jpeg: cannot set up TurboJPEG\n");
		return 1;
	}
	t0 = now();
	c0 = cpu_now();
	for (; i < argc && rc == 0; i++) {
		struct bfs_shard *s = NULL;

		l.path = argv[i];
		rc = bfs_shard_open(&s, argv[i], BFS_COMP_AUTO);
		if (rc) {
			fprintf(stderr, "bench_jpeg: %s: %s\n", argv[i], bfs_err_msg());
			break;
		}
		rc = bfs_shard_scan(s, false, on_record, &l);
		if (rc > 0) /* --limit reached */
			i = argc;
		else if (rc < 0 && rc != -1)
			fprintf(stderr, "bench_jpeg: %s: %s\n", argv[i], bfs_err_msg());
		bfs_shard_close(s);
		if (rc > 0)
			rc = 0;
	}
	secs = now() - t0;
	cpu = cpu_now() - c0;
	tjDestroy(l.tj);
	free(l.buf);
	free(l.out);
	if (rc)
		return 1;
	printf("{\"records\": %" PRIu64 ", \"decoded\": %" PRIu64 ", \"seconds\": %.6f, "
	       "\"cpu_seconds\": %.6f, \"records_s\": %.3f, \"pixels\": %" PRIu64
	       ", \"checksum\": %" PRIu64 "}\n",
	       l.records, l.decoded, secs, cpu, secs > 0 ? (double)l.records / secs : 0.0, l.pixels,
	       l.checksum);
	return 0;
}
