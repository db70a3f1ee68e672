/* SPDX-License-Identifier: Apache-2.0 */
/*
 * statscmd.c — `batchfs stats [--json] MOUNTPOINT`: one snapshot of a
 * mount's stats.json, for people (a line per part of the daemon, then the
 * keys no line showed), or with --json for scripts (every key with its
 * value as the daemon wrote it). The snapshot and the units are watch.h's.
 */
#include "statscmd.h"

#include "watch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_json(const struct bfs_watch_snap *s)
{
	printf("{\n");
	for (size_t i = 0; i < s->n; i++)
		printf("  \"%s\": %s%s\n", s->v[i].key, s->v[i].raw, i + 1 < s->n ? "," : "");
	printf("}\n");
}

/* A text key's value without its quotes ("" when absent or not text). */
static const char *text_of(char *buf, size_t cap, const struct bfs_watch_snap *s, enum bfs_stat id)
{
	const struct bfs_watch_kv *e = bfs_watch_key(s, id);
	size_t n = e && !e->isnum ? strlen(e->raw) : 0;

	snprintf(buf, cap, "%.*s", n >= 2 ? (int)(n - 2) : 0, n >= 2 ? e->raw + 1 : "");
	return buf;
}

/* `stats`'s credentials line (a bucket read with credentials), as
 * docs/credentials.md shows it: the place, the key id (masked), the
 * expiry as a date, the refreshes. */
static void print_creds(const struct bfs_watch_snap *s)
{
	char from[300], id[64], when[64], n[32], fails[32], answers[32];
	double refreshes = bfs_watch_val(s, BFS_STAT_CREDENTIALS_REFRESHES);
	const struct bfs_watch_kv *valid = bfs_watch_key(s, BFS_STAT_CREDENTIALS_VALID);

	if (!bfs_watch_key(s, BFS_STAT_CREDENTIALS))
		return;
	text_of(from, sizeof(from), s, BFS_STAT_CREDENTIALS);
	text_of(id, sizeof(id), s, BFS_STAT_CREDENTIALS_KEY_ID);
	bfs_watch_fmt_key(when, sizeof(when), s, BFS_STAT_CREDENTIALS_EXPIRES);
	printf("credentials %s%s%s, %s%s, refreshed %s time%s\n", from, *id ? ", key id " : "", id,
	       strcmp(when, "never") == 0 ? "never expires" : "expires ",
	       strcmp(when, "never") == 0 ? "" : when, bfs_watch_fmt_n(n, sizeof(n), refreshes),
	       refreshes == 1 ? "" : "s");
	printf("            %s now; %s refreshes failed, %s answers 'token expired'\n",
	       valid && strcmp(valid->raw, "true") == 0 ? "valid" : "not valid",
	       bfs_watch_fmt_key(fails, sizeof(fails), s, BFS_STAT_CREDENTIALS_REFRESH_FAILURES),
	       bfs_watch_fmt_key(answers, sizeof(answers), s,
				 BFS_STAT_CREDENTIALS_EXPIRED_ANSWERS));
}

static void print_human(const struct bfs_watch_snap *s, const char *mnt)
{
	char a[64], b[64], c[64], d[64], e[64], f[64], line[256], more[16][512];
	double up = bfs_watch_val(s, BFS_STAT_UPTIME_SECONDS);
	int n;
	double br = bfs_watch_val(s, BFS_STAT_BYTES_READ);

	printf("mount       %s (up %s s)\n", mnt, bfs_watch_fmt_n(a, sizeof(a), up));
	printf("records     %s%s, %s batches per epoch\n",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS),
	       bfs_watch_of_sources(c, sizeof(c), s),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_PER_EPOCH));
	printf("served      %s records, %s in %s reads (%s failed)",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_SERVED),
	       bfs_watch_fmt_bytes(b, sizeof(b), br),
	       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_READS),
	       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_FAILED_READS));
	if (up > 0 && !isnan(br))
		printf("; %s MB/s since mount", bfs_watch_fmt_f(e, sizeof(e), br / 1e6 / up, 1));
	printf("\n");
	printf("decoded     %s records: %s batches, %s chunks of all/, in %s s of decoding "
	       "(%s errors)\n",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_DECODED),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_DECODED),
	       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_CHUNKS_DECODED),
	       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_DECODE_SECONDS),
	       bfs_watch_fmt_key(e, sizeof(e), s, BFS_STAT_DECODE_ERRORS));
	printf("cache       %s%% hits (%s hits, %s waits for a decode, %s misses)\n",
	       bfs_watch_fmt_f(a, sizeof(a),
			       bfs_watch_hit_pct(bfs_watch_val(s, BFS_STAT_CACHE_HITS),
						 bfs_watch_val(s, BFS_STAT_CACHE_WAITS),
						 bfs_watch_val(s, BFS_STAT_CACHE_MISSES)),
			       1),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_HITS),
	       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_WAITS),
	       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_MISSES));
	printf("            %s of %s held (peak %s) in %s entries, %s evictions\n",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_CACHE_BYTES),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_BUDGET),
	       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_PEAK_BYTES),
	       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_ENTRIES),
	       bfs_watch_fmt_key(e, sizeof(e), s, BFS_STAT_CACHE_EVICTIONS));
	printf("prefetch    %s ready ahead, %s queued, %s decoding now; %s issued\n",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_PREFETCH_READY),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_PREFETCH_QUEUED),
	       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_DECODING),
	       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_PREFETCH_ISSUED));
	if (bfs_watch_key(s, BFS_STAT_IO_READS)) {
		printf("source      %s source reads, %s (%s ranges, %s of them sharing a read), "
		       "%s retried, %s failed\n",
		       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_IO_READS),
		       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_IO_BYTES),
		       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_IO_RANGES),
		       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_IO_MERGED),
		       bfs_watch_fmt_key(e, sizeof(e), s, BFS_STAT_IO_RETRIES),
		       bfs_watch_fmt_key(line, sizeof(line), s, BFS_STAT_IO_FAILED));
		printf("            %s in flight of %s (peak %s), %s queued; %s of %s buffered "
		       "(peak %s)\n",
		       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_IO_INFLIGHT),
		       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_IO_DEPTH),
		       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_IO_PEAK_INFLIGHT),
		       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_IO_PENDING),
		       bfs_watch_fmt_key(e, sizeof(e), s, BFS_STAT_IO_BUFFERED),
		       bfs_watch_fmt_key(line, sizeof(line), s, BFS_STAT_IO_READAHEAD),
		       bfs_watch_fmt_key(f, sizeof(f), s, BFS_STAT_IO_PEAK_BUFFERED));
		printf("            decoders waited %s times (%s s); %s units planned ahead, "
		       "%s built from a plan, %s without\n",
		       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_IO_WAITS),
		       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_IO_WAIT_SECONDS),
		       bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_IO_PLANNED),
		       bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_IO_CLAIMED),
		       bfs_watch_fmt_key(e, sizeof(e), s, BFS_STAT_IO_UNPLANNED));
		/* "reads by threads: FUSE source, ..." (the reason names the backend) */
		const struct bfs_watch_kv *be = bfs_watch_key(s, BFS_STAT_IO_BACKEND);
		const struct bfs_watch_kv *why = bfs_watch_key(s, BFS_STAT_IO_BACKEND_REASON);
		if (why && !why->isnum && strlen(why->raw) > 2)
			printf("            reads by %.*s\n", (int)strlen(why->raw) - 2,
			       why->raw + 1);
		else if (be && !be->isnum && strlen(be->raw) > 2)
			printf("            reads by %.*s\n", (int)strlen(be->raw) - 2,
			       be->raw + 1);
	}
	printf("errors      %s\n", bfs_watch_fmt_errors(line, sizeof(line), s));
	printf("index       %s, %s (%s corrupt records); schema %s\n",
	       bfs_watch_val(s, BFS_STAT_INDEX_REUSED) > 0 ? "reused" : "built at mount",
	       bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_INDEX_BYTES),
	       bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_INDEX_CORRUPT_RECORDS),
	       bfs_watch_val(s, BFS_STAT_SCHEMA_REUSED) > 0 ? "reused"
							    : "inferred or given at mount");
	print_creds(s);
	n = bfs_watch_others(more, 16, 100, 12, NULL, s);
	for (int i = 0; i < n; i++)
		printf("%s\n", more[i]);
}

int bfs_tool_stats(int argc, char **argv)
{
	const char *mnt = NULL;
	bool json = false;
	struct bfs_watch_snap s = { 0 };
	char err[4400];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return printf("usage: batchfs stats [--json] MOUNTPOINT\n"), 0;
		else if (argv[i][0] == '-' && argv[i][1])
			return bfs_watch_bad_arg("stats", "unknown option", argv[i]);
		else if (mnt)
			return bfs_watch_bad_arg("stats", "one MOUNTPOINT only, got another",
						 argv[i]);
		else
			mnt = argv[i];
	}
	if (!mnt)
		return bfs_watch_bad_arg("stats", "MOUNTPOINT missing", NULL);
	if (bfs_watch_read(&s, mnt, err, sizeof(err)) != 0) {
		fprintf(stderr, "batchfs: %s\n", err);
		return 1;
	}
	if (json)
		print_json(&s);
	else
		print_human(&s, mnt);
	bfs_watch_clear(&s);
	return fflush(stdout) == 0 ? 0 : 1;
}
