/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c — a mount's stats.json read for `batchfs stats` and `batchfs top`
 * (see watch.h): the snapshot, its keys by the daemon's table, and the
 * values written as the table's units say.
 */
#include "watch.h"

#include "schema_json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ snapshot */

void bfs_watch_clear(struct bfs_watch_snap *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].key);
		free(s->v[i].raw);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* stats.json's text into s: its members, through the decoder's JSON
 * reader (schema_json.h). Returns 0, or -1 with a reason in why. */
static int snap_parse(struct bfs_watch_snap *s, const char *text, size_t len, char *why,
		      size_t whylen)
{
	struct bfs_json_member *m = NULL;
	size_t n = 0;

	if (bfs_json_members(&m, &n, text, len) != 0) {
		snprintf(why, whylen, "%s", bfs_err_msg());
		return -1;
	}
	s->v = calloc(n ? n : 1, sizeof(*s->v));
	if (!s->v) {
		bfs_json_members_free(m, n);
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) /* the strings move */
		s->v[i] = (struct bfs_watch_kv){
			.key = m[i].key, .raw = m[i].text, .num = m[i].num, .isnum = m[i].isnum
		};
	s->n = n;
	free(m);
	return 0;
}

/* Read MNT/stats.json afresh into s (cleared first). Returns 0, or -1 with
 * one line (without "batchfs: ") in err. */
int bfs_watch_read(struct bfs_watch_snap *s, const char *mnt, char *err, size_t errcap)
{
	char path[4096], why[300];
	char *buf = NULL;
	size_t len = 0, cap = 0;
	struct stat st;
	int fd, rc = -1;

	bfs_watch_clear(s);
	snprintf(path, sizeof(path), "%s/stats.json", mnt);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			snprintf(err, errcap, "%s: not a batchfs mount (no stats.json)", mnt);
		else
			snprintf(err, errcap, "%s: %s", path, strerror(errno));
		return -1;
	}
	/* a GETATTR makes the daemon take a fresh snapshot */
	if (fstat(fd, &st) != 0) {
		snprintf(err, errcap, "%s: %s", path, strerror(errno));
		goto out;
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? 2 * cap : 8192;
			char *nb;
			if (ncap > (1u << 20)) {
				snprintf(err, errcap, "%s: larger than 1 MiB, not stats.json",
					 path);
				goto out;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				snprintf(err, errcap, "%s: out of memory", path);
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t k = read(fd, buf + len, cap - len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(err, errcap, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	if (snap_parse(s, buf ? buf : "", len, why, sizeof(why)) != 0) {
		snprintf(err, errcap, "%s: %s", path, why);
		bfs_watch_clear(s);
		goto out;
	}
	s->t = (double)bfs_now_ns() / 1e9;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

/* -------------------------------------------------------------- keys */

static struct bfs_watch_kv *find(const struct bfs_watch_snap *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].key, name) == 0)
			return &s->v[i];
	return NULL;
}

/* The entry of the table's key id, NULL when absent (an older daemon).
 * It is marked shown: the keys no line asked for are listed after the
 * lines (others). */
const struct bfs_watch_kv *bfs_watch_key(const struct bfs_watch_snap *s, enum bfs_stat id)
{
	struct bfs_watch_kv *e = find(s, bfs_stat_keys[id].name);

	if (e)
		e->shown = true;
	return e;
}

static double num(const struct bfs_watch_kv *e)
{
	return e && e->isnum ? e->num : NAN;
}

/* A counter's value; NAN when absent or not a number. */
double bfs_watch_val(const struct bfs_watch_snap *s, enum bfs_stat id)
{
	return num(bfs_watch_key(s, id));
}

/* The change per second of name's value from a to b; NAN without two
 * samples. */
static double rate_of(const struct bfs_watch_snap *a, const struct bfs_watch_snap *b,
		      const char *name)
{
	double dt;

	if (!a || !a->n)
		return NAN;
	dt = b->t - a->t;
	if (dt <= 0)
		return NAN;
	return (num(find(b, name)) - num(find(a, name))) / dt;
}

double bfs_watch_rate(const struct bfs_watch_snap *a, const struct bfs_watch_snap *b,
		      enum bfs_stat id)
{
	bfs_watch_key(b, id);
	return rate_of(a, b, bfs_stat_keys[id].name);
}

/* --------------------------------------------------------------- text */

/* An integer with thousands separators, "-" for NAN. */
const char *bfs_watch_fmt_n(char *buf, size_t cap, double x)
{
	char digits[32];
	size_t n, o = 0;
	bool neg = x < 0;

	if (isnan(x)) {
		snprintf(buf, cap, "-");
		return buf;
	}
	snprintf(digits, sizeof(digits), "%.0f", neg ? -x : x);
	n = strlen(digits);
	if (neg && o + 1 < cap)
		buf[o++] = '-';
	for (size_t i = 0; i < n && o + 2 < cap; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

/* A byte count in binary units: "512 B", "48.0 MiB". */
const char *bfs_watch_fmt_bytes(char *buf, size_t cap, double x)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	if (isnan(x)) {
		snprintf(buf, cap, "-");
		return buf;
	}
	while (x >= 1024 && u < 5) {
		x /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%.0f B", x);
	else
		snprintf(buf, cap, "%.1f %s", x, unit[u]);
	return buf;
}

/* "12.3" or "-" */
const char *bfs_watch_fmt_f(char *buf, size_t cap, double x, int prec)
{
	if (isnan(x) || isinf(x))
		snprintf(buf, cap, "-");
	else
		snprintf(buf, cap, "%.*f", prec, x);
	return buf;
}

/* A moment (seconds since the epoch) as a date, "2026-11-27 13:05:02 UTC";
 * 0 is "never", NAN "-". */
static const char *fmt_time(char *buf, size_t cap, double x)
{
	time_t t = (time_t)x;
	struct tm tm;

	if (isnan(x) || x < 0)
		snprintf(buf, cap, "-");
	else if (x == 0)
		snprintf(buf, cap, "never");
	else if (!gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, cap, "%.0f", x);
	return buf;
}

/* x as the table writes its unit: a count with thousands separators,
 * bytes in binary units, seconds with two decimals (the unit itself is
 * the caller's to write), a flag as yes or no; "-" for NAN but a flag. */
static const char *fmt_unit(char *buf, size_t cap, enum bfs_stat_unit u, double x)
{
	switch (u) {
	case BFS_SUNIT_BYTES:
		return bfs_watch_fmt_bytes(buf, cap, x);
	case BFS_SUNIT_SECONDS:
		return bfs_watch_fmt_f(buf, cap, x, 2);
	case BFS_SUNIT_FLAG:
		snprintf(buf, cap, "%s", x > 0 ? "yes" : "no");
		return buf;
	case BFS_SUNIT_TIME:
		return fmt_time(buf, cap, x);
	default:
		return bfs_watch_fmt_n(buf, cap, x);
	}
}

/* The value of key id in s, as the table writes its unit (fmt_unit). */
const char *bfs_watch_fmt_key(char *buf, size_t cap, const struct bfs_watch_snap *s,
			      enum bfs_stat id)
{
	return fmt_unit(buf, cap, bfs_stat_keys[id].unit, bfs_watch_val(s, id));
}

/* hits / (hits + waits + misses) in percent, NAN when there was no access */
double bfs_watch_hit_pct(double hits, double waits, double misses)
{
	double all = hits + waits + misses;

	return all > 0 ? 100.0 * hits / all : NAN;
}

/* The key of e as "label value": the table's label and unit (a count since
 * mount as its rate per second when p, an earlier sample, is given), or,
 * for a key the table does not know (a newer daemon), its name and JSON
 * text. */
static void fmt_other(char *buf, size_t cap, const struct bfs_watch_kv *e,
		      const struct bfs_watch_snap *p, const struct bfs_watch_snap *s)
{
	const struct bfs_stat_key *k = bfs_stat_find(e->key);
	const char *rate_unit = "";
	double x = e->num;
	char v[64];

	if (!k || !e->isnum) {
		size_t n = strlen(e->raw);

		if (n >= 2 && e->raw[0] == '"') /* a name, without its quotes */
			snprintf(buf, cap, "%s %.*s", k ? k->label : e->key, (int)(n - 2),
				 e->raw + 1);
		else
			snprintf(buf, cap, "%s %s", k ? k->label : e->key, e->raw);
		return;
	}
	if (p && k->kind == BFS_SKIND_TOTAL) {
		x = rate_of(p, s, e->key);
		rate_unit = "/s";
	}
	fmt_unit(v, sizeof(v), k->unit, x);
	if (k->unit == BFS_SUNIT_SECONDS)
		strcat(v, " s");
	snprintf(buf, cap, "%s %s%s", k->label, v, rate_unit);
}

/* The keys of s that no line showed (see key), in stats.json's order, as
 * "label value" items after a head of `indent` columns ("other" on the
 * first line), into at most max lines of about `width` columns. Returns
 * the lines written. */
int bfs_watch_others(char (*lines)[512], int max, size_t width, int indent,
		     const struct bfs_watch_snap *p, const struct bfs_watch_snap *s)
{
	char item[300];
	size_t len = 0;
	int nl = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].shown)
			continue;
		fmt_other(item, sizeof(item), &s->v[i], p, s);
		if (nl > 0 && len + 2 + strlen(item) <= width) {
			len += (size_t)snprintf(lines[nl - 1] + len, 512 - len, ", %s", item);
			continue;
		}
		if (nl == max)
			break;
		len = (size_t)snprintf(lines[nl], 512, "%-*s%s", indent, nl ? "" : "other", item);
		if (len >= 512)
			len = 511;
		nl++;
	}
	return nl;
}

/* The errors line of `stats` and `top`: the four error counters, and the
 * source errors when there are any. */
const char *bfs_watch_fmt_errors(char *buf, size_t cap, const struct bfs_watch_snap *s)
{
	char a[32], b[32], c[32], d[32], e[64] = "";
	double src = bfs_watch_val(s, BFS_STAT_SOURCE_ERRORS);

	if (!isnan(src) && src > 0) {
		char n[32];

		snprintf(e, sizeof(e), ", %s source errors", bfs_watch_fmt_n(n, sizeof(n), src));
	}
	snprintf(buf, cap, "%s corrupt records, %s skipped, %s failed reads, %s decode errors%s",
		 bfs_watch_fmt_key(a, sizeof(a), s, BFS_STAT_CORRUPT_RECORDS),
		 bfs_watch_fmt_key(b, sizeof(b), s, BFS_STAT_SKIPPED_RECORDS),
		 bfs_watch_fmt_key(c, sizeof(c), s, BFS_STAT_FAILED_READS),
		 bfs_watch_fmt_key(d, sizeof(d), s, BFS_STAT_DECODE_ERRORS), e);
	return buf;
}

/* ", the sources hold N" after a mixture's records per epoch (its epoch is
 * L records of its stream); "" when an epoch is all of the source's. */
const char *bfs_watch_of_sources(char *buf, size_t cap, const struct bfs_watch_snap *s)
{
	double epoch = bfs_watch_val(s, BFS_STAT_RECORDS),
	       all = bfs_watch_val(s, BFS_STAT_SOURCE_RECORDS);
	char n[32];

	buf[0] = '\0';
	if (!isnan(all) && !isnan(epoch) && all != epoch)
		snprintf(buf, cap, " per epoch (the sources hold %s)",
			 bfs_watch_fmt_n(n, sizeof(n), all));
	return buf;
}

int bfs_watch_bad_arg(const char *cmd, const char *msg, const char *arg)
{
	fprintf(stderr, "batchfs %s: %s%s%s\n", cmd, msg, arg ? ": " : "", arg ? arg : "");
	fprintf(stderr, "usage: batchfs %s\n",
		strcmp(cmd, "top") == 0 ? "top [--interval SECONDS] [--count N] MOUNTPOINT"
					: "stats [--json] MOUNTPOINT");
	return 2;
}
