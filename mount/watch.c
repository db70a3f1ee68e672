/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.c — `batchfs stats` and `batchfs top`: a mount's stats.json read the
 * way a person or a script reads it. No jansson here (schema.c is its only
 * user): stats.json is one flat object that the daemon writes itself, so a
 * small strict reader of {"key": value, ...} is enough; a value that is not
 * a number (a string, an object) is kept as text and shown as is.
 *
 * Keys, labels and units come from the daemon's table (fs/fs.h): the
 * lines below name keys by their place in it and write each value as its
 * unit there says (fmt_key), and every key of the snapshot
 * that no line shows is listed after them by its label, so a key added to
 * the table shows here too.
 */
#include "watch.h"

#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ snapshot */

struct kv {
	char *key;
	char *raw; /* the value's JSON text */
	double num;
	bool isnum;
	bool shown; /* a line of the view showed it (see key) */
};

struct snap {
	struct kv *v;
	size_t n;
	double t; /* CLOCK_MONOTONIC seconds when read */
};

static void snap_clear(struct snap *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].key);
		free(s->v[i].raw);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* p at an opening '"': returns just past the closing one, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* p at the start of a value: returns just past it, or NULL. */
static const char *skip_value(const char *p, const char *end)
{
	int depth = 0;

	if (p < end && *p == '"')
		return skip_string(p, end);
	while (p < end) {
		char c = *p;
		if (c == '"') {
			p = skip_string(p, end);
			if (!p)
				return NULL;
			continue;
		}
		if (c == '{' || c == '[') {
			depth++;
		} else if (c == '}' || c == ']') {
			if (depth == 0)
				break;
			if (--depth == 0)
				return p + 1;
		} else if (depth == 0 &&
			   (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r')) {
			break;
		}
		p++;
	}
	return depth == 0 ? p : NULL;
}

/* Parse stats.json text into s. Returns 0, or -1 with a reason in why. */
static int snap_parse(struct snap *s, const char *text, size_t len, char *why, size_t whylen)
{
	const char *p = text, *end = text + len, *k0, *k1, *v0;
	size_t cap = 0;

	p = skip_ws(p, end);
	if (p == end || *p != '{') {
		snprintf(why, whylen, "not a JSON object (byte %zu)", (size_t)(p - text));
		return -1;
	}
	p = skip_ws(p + 1, end);
	if (p < end && *p == '}') {
		p++;
		goto tail;
	}
	for (;;) {
		if (p == end || *p != '"')
			goto bad;
		k0 = p + 1;
		p = skip_string(p, end);
		if (!p)
			goto bad_at_end;
		k1 = p - 1;
		p = skip_ws(p, end);
		if (p == end || *p != ':')
			goto bad;
		p = skip_ws(p + 1, end);
		v0 = p;
		p = skip_value(p, end);
		if (!p)
			goto bad_at_end;
		if (p == v0)
			goto bad;
		if (s->n == cap) {
			size_t ncap = cap ? 2 * cap : 32;
			struct kv *nv = realloc(s->v, ncap * sizeof(*nv));
			if (!nv) {
				snprintf(why, whylen, "out of memory");
				return -1;
			}
			s->v = nv;
			cap = ncap;
		}
		struct kv *e = &s->v[s->n];
		e->key = strndup(k0, (size_t)(k1 - k0));
		e->raw = strndup(v0, (size_t)(p - v0));
		if (!e->key || !e->raw) {
			free(e->key);
			free(e->raw);
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		s->n++;
		e->shown = false;
		e->isnum = true;
		if (strcmp(e->raw, "true") == 0) {
			e->num = 1;
		} else if (strcmp(e->raw, "false") == 0) {
			e->num = 0;
		} else {
			char *q;
			errno = 0;
			e->num = strtod(e->raw, &q);
			e->isnum = *e->raw != '\0' && *q == '\0' && errno == 0 &&
				   strchr("-0123456789", *e->raw) != NULL;
			/* anything else must be a string, object, array or null:
			 * --json passes values on as they are */
			if (!e->isnum && !strchr("\"{[", *e->raw) && strcmp(e->raw, "null") != 0) {
				p = v0;
				goto bad;
			}
		}
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p = skip_ws(p + 1, end);
			continue;
		}
		if (p < end && *p == '}') {
			p++;
			break;
		}
		goto bad;
	}
tail:
	p = skip_ws(p, end);
	while (p < end && *p == '\0') /* tolerate NUL padding */
		p++;
	if (p != end)
		goto bad;
	return 0;
bad:
	snprintf(why, whylen, "not a flat JSON object: unexpected %s at byte %zu",
		 p == end ? "end" : "character", (size_t)(p - text));
	return -1;
bad_at_end:
	snprintf(why, whylen, "not a flat JSON object: unterminated value");
	return -1;
}

/* Read MNT/stats.json afresh into s (cleared first). Returns 0, or -1 with
 * one line (without "batchfs: ") in err. */
static int snap_read(struct snap *s, const char *mnt, char *err, size_t errcap)
{
	char path[4096], why[160];
	char *buf = NULL;
	size_t len = 0, cap = 0;
	struct stat st;
	int fd, rc = -1;

	snap_clear(s);
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
		snap_clear(s);
		goto out;
	}
	s->t = mono_now();
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

static struct kv *find(const struct snap *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].key, name) == 0)
			return &s->v[i];
	return NULL;
}

/* The entry of the table's key id, NULL when absent (an older daemon).
 * It is marked shown: the keys no line asked for are listed after the
 * lines (others). */
static const struct kv *key(const struct snap *s, enum bfs_stat id)
{
	struct kv *e = find(s, bfs_stat_keys[id].name);

	if (e)
		e->shown = true;
	return e;
}

static double num(const struct kv *e)
{
	return e && e->isnum ? e->num : NAN;
}

/* A counter's value; NAN when absent or not a number. */
static double val(const struct snap *s, enum bfs_stat id)
{
	return num(key(s, id));
}

/* The change per second of name's value from a to b; NAN without two
 * samples. */
static double rate_of(const struct snap *a, const struct snap *b, const char *name)
{
	double dt;

	if (!a || !a->n)
		return NAN;
	dt = b->t - a->t;
	if (dt <= 0)
		return NAN;
	return (num(find(b, name)) - num(find(a, name))) / dt;
}

static double rate(const struct snap *a, const struct snap *b, enum bfs_stat id)
{
	key(b, id);
	return rate_of(a, b, bfs_stat_keys[id].name);
}

/* --------------------------------------------------------------- text */

/* An integer with thousands separators, "-" for NAN. */
static const char *fmt_n(char *buf, size_t cap, double x)
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
static const char *fmt_bytes(char *buf, size_t cap, double x)
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
static const char *fmt_f(char *buf, size_t cap, double x, int prec)
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
		return fmt_bytes(buf, cap, x);
	case BFS_SUNIT_SECONDS:
		return fmt_f(buf, cap, x, 2);
	case BFS_SUNIT_FLAG:
		snprintf(buf, cap, "%s", x > 0 ? "yes" : "no");
		return buf;
	case BFS_SUNIT_TIME:
		return fmt_time(buf, cap, x);
	default:
		return fmt_n(buf, cap, x);
	}
}

/* The value of key id in s, as the table writes its unit (fmt_unit). */
static const char *fmt_key(char *buf, size_t cap, const struct snap *s, enum bfs_stat id)
{
	return fmt_unit(buf, cap, bfs_stat_keys[id].unit, val(s, id));
}

/* hits / (hits + waits + misses) in percent, NAN when there was no access */
static double hit_pct(double hits, double waits, double misses)
{
	double all = hits + waits + misses;

	return all > 0 ? 100.0 * hits / all : NAN;
}

static double sum_errors(const struct snap *s)
{
	double e = 0;
	static const enum bfs_stat keys[] = { BFS_STAT_CORRUPT_RECORDS, BFS_STAT_SOURCE_ERRORS,
					      BFS_STAT_FAILED_READS, BFS_STAT_DECODE_ERRORS };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		double v = val(s, keys[i]);
		if (!isnan(v))
			e += v;
	}
	return e;
}

/* The key of e as "label value": the table's label and unit (a count since
 * mount as its rate per second when p, an earlier sample, is given), or,
 * for a key the table does not know (a newer daemon), its name and JSON
 * text. */
static void fmt_other(char *buf, size_t cap, const struct kv *e, const struct snap *p,
		      const struct snap *s)
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
static int others(char (*lines)[512], int max, size_t width, int indent, const struct snap *p,
		  const struct snap *s)
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

/* ---------------------------------------------------------- arguments */

static int bad_arg(const char *cmd, const char *msg, const char *arg)
{
	fprintf(stderr, "batchfs %s: %s%s%s\n", cmd, msg, arg ? ": " : "", arg ? arg : "");
	fprintf(stderr, "usage: batchfs %s\n",
		strcmp(cmd, "top") == 0 ? "top [--interval SECONDS] [--count N] MOUNTPOINT"
					: "stats [--json] MOUNTPOINT");
	return 2;
}

/* --------------------------------------------------------------- stats */

static void print_json(const struct snap *s)
{
	printf("{\n");
	for (size_t i = 0; i < s->n; i++)
		printf("  \"%s\": %s%s\n", s->v[i].key, s->v[i].raw, i + 1 < s->n ? "," : "");
	printf("}\n");
}

/* A text key's value without its quotes ("" when absent or not text). */
static const char *text_of(char *buf, size_t cap, const struct snap *s, enum bfs_stat id)
{
	const struct kv *e = key(s, id);
	size_t n = e && !e->isnum ? strlen(e->raw) : 0;

	snprintf(buf, cap, "%.*s", n >= 2 ? (int)(n - 2) : 0, n >= 2 ? e->raw + 1 : "");
	return buf;
}

/* `stats`'s credentials line (a bucket read with credentials), as
 * docs/credentials.md shows it: the place, the key id (masked), the
 * expiry as a date, the refreshes. */
static void print_creds(const struct snap *s)
{
	char from[300], id[64], when[64], n[32], fails[32], answers[32];
	double refreshes = val(s, BFS_STAT_CREDENTIALS_REFRESHES);
	const struct kv *valid = key(s, BFS_STAT_CREDENTIALS_VALID);

	if (!key(s, BFS_STAT_CREDENTIALS))
		return;
	text_of(from, sizeof(from), s, BFS_STAT_CREDENTIALS);
	text_of(id, sizeof(id), s, BFS_STAT_CREDENTIALS_KEY_ID);
	fmt_key(when, sizeof(when), s, BFS_STAT_CREDENTIALS_EXPIRES);
	printf("credentials %s%s%s, %s%s, refreshed %s time%s\n", from, *id ? ", key id " : "", id,
	       strcmp(when, "never") == 0 ? "never expires" : "expires ",
	       strcmp(when, "never") == 0 ? "" : when, fmt_n(n, sizeof(n), refreshes),
	       refreshes == 1 ? "" : "s");
	printf("            %s now; %s refreshes failed, %s answers 'token expired'\n",
	       valid && strcmp(valid->raw, "true") == 0 ? "valid" : "not valid",
	       fmt_key(fails, sizeof(fails), s, BFS_STAT_CREDENTIALS_REFRESH_FAILURES),
	       fmt_key(answers, sizeof(answers), s, BFS_STAT_CREDENTIALS_EXPIRED_ANSWERS));
}

/* The errors line of `stats` and `top`: the four error counters, and the
 * source errors when there are any. */
static const char *fmt_errors(char *buf, size_t cap, const struct snap *s)
{
	char a[32], b[32], c[32], d[32], e[64] = "";
	double src = val(s, BFS_STAT_SOURCE_ERRORS);

	if (!isnan(src) && src > 0) {
		char n[32];

		snprintf(e, sizeof(e), ", %s source errors", fmt_n(n, sizeof(n), src));
	}
	snprintf(buf, cap, "%s corrupt records, %s skipped, %s failed reads, %s decode errors%s",
		 fmt_key(a, sizeof(a), s, BFS_STAT_CORRUPT_RECORDS),
		 fmt_key(b, sizeof(b), s, BFS_STAT_SKIPPED_RECORDS),
		 fmt_key(c, sizeof(c), s, BFS_STAT_FAILED_READS),
		 fmt_key(d, sizeof(d), s, BFS_STAT_DECODE_ERRORS), e);
	return buf;
}

/* ", the sources hold N" after a mixture's records per epoch (its epoch is
 * L records of its stream); "" when an epoch is all of the source's. */
static const char *of_sources(char *buf, size_t cap, const struct snap *s)
{
	double epoch = val(s, BFS_STAT_RECORDS), all = val(s, BFS_STAT_SOURCE_RECORDS);
	char n[32];

	buf[0] = '\0';
	if (!isnan(all) && !isnan(epoch) && all != epoch)
		snprintf(buf, cap, " per epoch (the sources hold %s)", fmt_n(n, sizeof(n), all));
	return buf;
}

static void print_human(const struct snap *s, const char *mnt)
{
	char a[64], b[64], c[64], d[64], e[64], f[64], line[256], more[16][512];
	double up = val(s, BFS_STAT_UPTIME_SECONDS);
	int n;
	double br = val(s, BFS_STAT_BYTES_READ);

	printf("mount       %s (up %s s)\n", mnt, fmt_n(a, sizeof(a), up));
	printf("records     %s%s, %s batches per epoch\n",
	       fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS), of_sources(c, sizeof(c), s),
	       fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_PER_EPOCH));
	printf("served      %s records, %s in %s reads (%s failed)",
	       fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_SERVED), fmt_bytes(b, sizeof(b), br),
	       fmt_key(c, sizeof(c), s, BFS_STAT_READS),
	       fmt_key(d, sizeof(d), s, BFS_STAT_FAILED_READS));
	if (up > 0 && !isnan(br))
		printf("; %s MB/s since mount", fmt_f(e, sizeof(e), br / 1e6 / up, 1));
	printf("\n");
	printf("decoded     %s records: %s batches, %s chunks of all/, in %s s of decoding "
	       "(%s errors)\n",
	       fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_DECODED),
	       fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_DECODED),
	       fmt_key(c, sizeof(c), s, BFS_STAT_CHUNKS_DECODED),
	       fmt_key(d, sizeof(d), s, BFS_STAT_DECODE_SECONDS),
	       fmt_key(e, sizeof(e), s, BFS_STAT_DECODE_ERRORS));
	printf("cache       %s%% hits (%s hits, %s waits for a decode, %s misses)\n",
	       fmt_f(a, sizeof(a),
		     hit_pct(val(s, BFS_STAT_CACHE_HITS), val(s, BFS_STAT_CACHE_WAITS),
			     val(s, BFS_STAT_CACHE_MISSES)),
		     1),
	       fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_HITS),
	       fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_WAITS),
	       fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_MISSES));
	printf("            %s of %s held (peak %s) in %s entries, %s evictions\n",
	       fmt_key(a, sizeof(a), s, BFS_STAT_CACHE_BYTES),
	       fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_BUDGET),
	       fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_PEAK_BYTES),
	       fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_ENTRIES),
	       fmt_key(e, sizeof(e), s, BFS_STAT_CACHE_EVICTIONS));
	printf("prefetch    %s ready ahead, %s queued, %s decoding now; %s issued\n",
	       fmt_key(a, sizeof(a), s, BFS_STAT_PREFETCH_READY),
	       fmt_key(b, sizeof(b), s, BFS_STAT_PREFETCH_QUEUED),
	       fmt_key(c, sizeof(c), s, BFS_STAT_DECODING),
	       fmt_key(d, sizeof(d), s, BFS_STAT_PREFETCH_ISSUED));
	if (key(s, BFS_STAT_IO_READS)) {
		printf("source      %s source reads, %s (%s ranges, %s of them sharing a read), "
		       "%s retried, %s failed\n",
		       fmt_key(a, sizeof(a), s, BFS_STAT_IO_READS),
		       fmt_key(b, sizeof(b), s, BFS_STAT_IO_BYTES),
		       fmt_key(c, sizeof(c), s, BFS_STAT_IO_RANGES),
		       fmt_key(d, sizeof(d), s, BFS_STAT_IO_MERGED),
		       fmt_key(e, sizeof(e), s, BFS_STAT_IO_RETRIES),
		       fmt_key(line, sizeof(line), s, BFS_STAT_IO_FAILED));
		printf("            %s in flight of %s (peak %s), %s queued; %s of %s buffered "
		       "(peak %s)\n",
		       fmt_key(a, sizeof(a), s, BFS_STAT_IO_INFLIGHT),
		       fmt_key(b, sizeof(b), s, BFS_STAT_IO_DEPTH),
		       fmt_key(c, sizeof(c), s, BFS_STAT_IO_PEAK_INFLIGHT),
		       fmt_key(d, sizeof(d), s, BFS_STAT_IO_PENDING),
		       fmt_key(e, sizeof(e), s, BFS_STAT_IO_BUFFERED),
		       fmt_key(line, sizeof(line), s, BFS_STAT_IO_READAHEAD),
		       fmt_key(f, sizeof(f), s, BFS_STAT_IO_PEAK_BUFFERED));
		printf("            decoders waited %s times (%s s); %s units planned ahead, "
		       "%s built from a plan, %s without\n",
		       fmt_key(a, sizeof(a), s, BFS_STAT_IO_WAITS),
		       fmt_key(b, sizeof(b), s, BFS_STAT_IO_WAIT_SECONDS),
		       fmt_key(c, sizeof(c), s, BFS_STAT_IO_PLANNED),
		       fmt_key(d, sizeof(d), s, BFS_STAT_IO_CLAIMED),
		       fmt_key(e, sizeof(e), s, BFS_STAT_IO_UNPLANNED));
		/* "reads by threads: FUSE source, ..." (the reason names the backend) */
		const struct kv *be = key(s, BFS_STAT_IO_BACKEND);
		const struct kv *why = key(s, BFS_STAT_IO_BACKEND_REASON);
		if (why && !why->isnum && strlen(why->raw) > 2)
			printf("            reads by %.*s\n", (int)strlen(why->raw) - 2,
			       why->raw + 1);
		else if (be && !be->isnum && strlen(be->raw) > 2)
			printf("            reads by %.*s\n", (int)strlen(be->raw) - 2,
			       be->raw + 1);
	}
	printf("errors      %s\n", fmt_errors(line, sizeof(line), s));
	printf("index       %s, %s (%s corrupt records); schema %s\n",
	       val(s, BFS_STAT_INDEX_REUSED) > 0 ? "reused" : "built at mount",
	       fmt_key(a, sizeof(a), s, BFS_STAT_INDEX_BYTES),
	       fmt_key(b, sizeof(b), s, BFS_STAT_INDEX_CORRUPT_RECORDS),
	       val(s, BFS_STAT_SCHEMA_REUSED) > 0 ? "reused" : "inferred or given at mount");
	print_creds(s);
	n = others(more, 16, 100, 12, NULL, s);
	for (int i = 0; i < n; i++)
		printf("%s\n", more[i]);
}

int bfs_tool_stats(int argc, char **argv)
{
	const char *mnt = NULL;
	bool json = false;
	struct snap s = { 0 };
	char err[4400];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return printf("usage: batchfs stats [--json] MOUNTPOINT\n"), 0;
		else if (argv[i][0] == '-' && argv[i][1])
			return bad_arg("stats", "unknown option", argv[i]);
		else if (mnt)
			return bad_arg("stats", "one MOUNTPOINT only, got another", argv[i]);
		else
			mnt = argv[i];
	}
	if (!mnt)
		return bad_arg("stats", "MOUNTPOINT missing", NULL);
	if (snap_read(&s, mnt, err, sizeof(err)) != 0) {
		fprintf(stderr, "batchfs: %s\n", err);
		return 1;
	}
	if (json)
		print_json(&s);
	else
		print_human(&s, mnt);
	snap_clear(&s);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ----------------------------------------------------------------- top */

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

static struct termios saved_tio;
static bool tio_saved, screen_on;

static void screen_leave(void)
{
	if (screen_on) {
		fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen */
		fflush(stdout);
		screen_on = false;
	}
	if (tio_saved) {
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
		tio_saved = false;
	}
}

/* One frame of the terminal view, from the previous sample (may be empty)
 * and the current one; lines are cut to the terminal's width. */
static void draw_frame(const struct snap *p, const struct snap *s, const char *mnt, double interval)
{
	char a[64], b[64], c[64], d[64], errs[256];
	const char *lines[32];
	char store[32][512];
	int nl = 0, cols = 80, rows = 24;
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
		cols = ws.ws_col;
		rows = ws.ws_row > 0 ? ws.ws_row : rows;
	}
#define LINE(...)                                                                                  \
	do {                                                                                       \
		snprintf(store[nl], sizeof(store[nl]), __VA_ARGS__);                               \
		lines[nl] = store[nl];                                                             \
		nl++;                                                                              \
	} while (0)
	LINE("batchfs top  %s   up %s s   every %.1f s   q quits", mnt,
	     fmt_n(a, sizeof(a), val(s, BFS_STAT_UPTIME_SECONDS)), interval);
	LINE("records %s%s, %s batches per epoch", fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS),
	     of_sources(c, sizeof(c), s), fmt_key(b, sizeof(b), s, BFS_STAT_BATCHES_PER_EPOCH));
	LINE("%s", "");
	LINE("served   %11s records/s %8s MB/s %9s reads/s",
	     fmt_n(a, sizeof(a), rate(p, s, BFS_STAT_RECORDS_SERVED)),
	     fmt_f(b, sizeof(b), rate(p, s, BFS_STAT_BYTES_READ) / 1e6, 1),
	     fmt_n(c, sizeof(c), rate(p, s, BFS_STAT_READS)));
	LINE("decode   %11s records/s %8s batches/s %5s chunks/s  busy %s",
	     fmt_n(a, sizeof(a), rate(p, s, BFS_STAT_RECORDS_DECODED)),
	     fmt_f(b, sizeof(b), rate(p, s, BFS_STAT_BATCHES_DECODED), 1),
	     fmt_f(c, sizeof(c), rate(p, s, BFS_STAT_CHUNKS_DECODED), 1),
	     fmt_f(d, sizeof(d), rate(p, s, BFS_STAT_DECODE_SECONDS), 2));
	double ih = NAN;
	if (p && p->n) {
		ih = hit_pct(val(s, BFS_STAT_CACHE_HITS) - val(p, BFS_STAT_CACHE_HITS),
			     val(s, BFS_STAT_CACHE_WAITS) - val(p, BFS_STAT_CACHE_WAITS),
			     val(s, BFS_STAT_CACHE_MISSES) - val(p, BFS_STAT_CACHE_MISSES));
	}
	LINE("cache    %s%% hits now, %s%% since mount; %s entries", fmt_f(a, sizeof(a), ih, 1),
	     fmt_f(b, sizeof(b),
		   hit_pct(val(s, BFS_STAT_CACHE_HITS), val(s, BFS_STAT_CACHE_WAITS),
			   val(s, BFS_STAT_CACHE_MISSES)),
		   1),
	     fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_ENTRIES));
	LINE("         %s held of %s (peak %s), %s evictions",
	     fmt_key(a, sizeof(a), s, BFS_STAT_CACHE_BYTES),
	     fmt_key(b, sizeof(b), s, BFS_STAT_CACHE_BUDGET),
	     fmt_key(c, sizeof(c), s, BFS_STAT_CACHE_PEAK_BYTES),
	     fmt_key(d, sizeof(d), s, BFS_STAT_CACHE_EVICTIONS));
	LINE("prefetch depth %s: %s ready ahead, %s queued; %s decoding now",
	     fmt_n(a, sizeof(a),
		   val(s, BFS_STAT_PREFETCH_READY) + val(s, BFS_STAT_PREFETCH_QUEUED)),
	     fmt_key(b, sizeof(b), s, BFS_STAT_PREFETCH_READY),
	     fmt_key(c, sizeof(c), s, BFS_STAT_PREFETCH_QUEUED),
	     fmt_key(d, sizeof(d), s, BFS_STAT_DECODING));
	if (key(s, BFS_STAT_IO_READS)) {
		LINE("source   %11s reads/s %10s MB/s  %s in flight, %s queued, %s buffered",
		     fmt_n(a, sizeof(a), rate(p, s, BFS_STAT_IO_READS)),
		     fmt_f(b, sizeof(b), rate(p, s, BFS_STAT_IO_BYTES) / 1e6, 1),
		     fmt_key(c, sizeof(c), s, BFS_STAT_IO_INFLIGHT),
		     fmt_key(d, sizeof(d), s, BFS_STAT_IO_PENDING),
		     fmt_key(errs, sizeof(errs), s, BFS_STAT_IO_BUFFERED));
		LINE("         %s source reads, %s retried, %s failed; decoders waited %s s",
		     fmt_key(a, sizeof(a), s, BFS_STAT_IO_READS),
		     fmt_key(b, sizeof(b), s, BFS_STAT_IO_RETRIES),
		     fmt_key(c, sizeof(c), s, BFS_STAT_IO_FAILED),
		     fmt_key(d, sizeof(d), s, BFS_STAT_IO_WAIT_SECONDS));
	}
	LINE("errors   %s", fmt_errors(errs, sizeof(errs), s));
	LINE("totals   %s records served, %s in %s reads",
	     fmt_key(a, sizeof(a), s, BFS_STAT_RECORDS_SERVED),
	     fmt_key(b, sizeof(b), s, BFS_STAT_BYTES_READ),
	     fmt_key(c, sizeof(c), s, BFS_STAT_READS));
#undef LINE
	/* the other keys, as many lines of them as the terminal has left */
	int room = rows - 1 - nl < 32 - nl ? rows - 1 - nl : 32 - nl;
	int k = others(store + nl, room > 0 ? room : 0, (size_t)cols, 9, p, s);
	for (int i = 0; i < k; i++, nl++)
		lines[nl] = store[nl];
	fputs("\033[H", stdout);
	for (int i = 0; i < nl; i++) {
		int w = (int)strlen(lines[i]);
		fwrite(lines[i], 1, (size_t)(w < cols ? w : cols), stdout);
		fputs("\033[K\n", stdout);
	}
	fputs("\033[J", stdout);
	fflush(stdout);
}

static const char plain_head[] =
	"uptime     rec/s     MB/s   reads/s  dec_rec/s  busy   hit%"
	"  cache_MiB  ahead queued errors src_reads/s src_MB/s       served\n";

static void plain_line(const struct snap *p, const struct snap *s)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];

	printf("%6.0f %9s %8s %9s %10s %5s %6s %10.1f %6.0f %6.0f %6.0f %11s %8s %12.0f\n",
	       val(s, BFS_STAT_UPTIME_SECONDS),
	       fmt_f(a, sizeof(a), rate(p, s, BFS_STAT_RECORDS_SERVED), 1),
	       fmt_f(b, sizeof(b), rate(p, s, BFS_STAT_BYTES_READ) / 1e6, 1),
	       fmt_f(c, sizeof(c), rate(p, s, BFS_STAT_READS), 0),
	       fmt_f(d, sizeof(d), rate(p, s, BFS_STAT_RECORDS_DECODED), 0),
	       fmt_f(e, sizeof(e), rate(p, s, BFS_STAT_DECODE_SECONDS), 2),
	       fmt_f(f, sizeof(f),
		     hit_pct(val(s, BFS_STAT_CACHE_HITS) - val(p, BFS_STAT_CACHE_HITS),
			     val(s, BFS_STAT_CACHE_WAITS) - val(p, BFS_STAT_CACHE_WAITS),
			     val(s, BFS_STAT_CACHE_MISSES) - val(p, BFS_STAT_CACHE_MISSES)),
		     1),
	       val(s, BFS_STAT_CACHE_BYTES) / 1048576.0, val(s, BFS_STAT_PREFETCH_READY),
	       val(s, BFS_STAT_PREFETCH_QUEUED), sum_errors(s),
	       fmt_f(g, sizeof(g), key(s, BFS_STAT_IO_READS) ? rate(p, s, BFS_STAT_IO_READS) : NAN,
		     0),
	       fmt_f(h, sizeof(h),
		     key(s, BFS_STAT_IO_BYTES) ? rate(p, s, BFS_STAT_IO_BYTES) / 1e6 : NAN, 1),
	       val(s, BFS_STAT_RECORDS_SERVED));
	fflush(stdout);
}

struct top_args {
	const char *mnt;
	double interval;
	long count; /* 0: until q, Ctrl-C or a signal */
};

/* top's arguments. *done: exit now with the status returned (--help, or
 * a bad argument after its usage line). */
static int top_args(struct top_args *a, int argc, char **argv, bool *done)
{
	*a = (struct top_args){ .interval = 1.0 };
	*done = true;
	for (int i = 1; i < argc; i++) {
		char *endp;
		if (strcmp(argv[i], "--interval") == 0 || strcmp(argv[i], "-n") == 0) {
			if (++i == argc)
				return bad_arg("top", "--interval needs SECONDS", NULL);
			errno = 0;
			a->interval = strtod(argv[i], &endp);
			if (*endp || errno || !(a->interval >= 0.05 && a->interval <= 3600))
				return bad_arg("top", "--interval: seconds from 0.05 to 3600, got",
					       argv[i]);
		} else if (strcmp(argv[i], "--count") == 0 || strcmp(argv[i], "-c") == 0) {
			if (++i == argc)
				return bad_arg("top", "--count needs N", NULL);
			errno = 0;
			a->count = strtol(argv[i], &endp, 10);
			if (*endp || errno || a->count < 1)
				return bad_arg("top", "--count: a positive integer, got", argv[i]);
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: batchfs top [--interval SECONDS] [--count N] MOUNTPOINT\n");
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return bad_arg("top", "unknown option", argv[i]);
		} else if (a->mnt) {
			return bad_arg("top", "one MOUNTPOINT only, got another", argv[i]);
		} else {
			a->mnt = argv[i];
		}
	}
	if (!a->mnt)
		return bad_arg("top", "MOUNTPOINT missing", NULL);
	*done = false;
	return 0;
}

/* SIGINT, SIGTERM and SIGHUP stop top: they stay blocked except inside
 * ppoll, so none is lost between a check of stop_sig and the wait. *orig:
 * the mask before. */
static void top_signals(sigset_t *orig)
{
	struct sigaction sa;
	sigset_t block;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, orig);
}

/* The terminal: keys one by one when stdin is one too, our own screen
 * with the first frame; off a terminal, the plain lines' header. */
static void top_screen(const struct top_args *a, const struct snap *first, bool tty, bool keys)
{
	if (keys && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		struct termios t = saved_tio;
		t.c_lflag &=
			(tcflag_t) ~(ICANON | ECHO); /* keys one by one, unechoed; ISIG stays */
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tio_saved = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	}
	if (tty) {
		fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout); /* own screen, no cursor */
		screen_on = true;
		draw_frame(NULL, first, a->mnt, a->interval);
	} else {
		fputs(plain_head, stdout);
		fflush(stdout);
	}
}

/* Wait until `due` (mono_now's clock): false when a stopping signal came
 * or q (or Ctrl-C) was pressed meanwhile. */
static bool top_wait(double due, bool keys, const sigset_t *orig)
{
	double left;

	while (!stop_sig && (left = due - mono_now()) > 0) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		struct timespec ts = { .tv_sec = (time_t)left,
				       .tv_nsec = (long)((left - (double)(time_t)left) * 1e9) };
		int r = ppoll(&pfd, keys ? 1 : 0, &ts, orig);
		if (r > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
			char ch;
			ssize_t k = read(STDIN_FILENO, &ch, 1);
			if (k <= 0 || ch == 'q' || ch == 'Q' || ch == 3 /* ^C */)
				return false;
		}
	}
	return !stop_sig;
}

int bfs_tool_top(int argc, char **argv)
{
	struct top_args a;
	struct snap prev = { 0 }, cur = { 0 };
	sigset_t orig;
	bool tty, keys, done;
	char err[4400];
	int ret = top_args(&a, argc, argv, &done);

	if (done)
		return ret;
	if (snap_read(&cur, a.mnt, err, sizeof(err)) != 0) {
		fprintf(stderr, "batchfs: %s\n", err);
		return 1;
	}
	top_signals(&orig);
	tty = isatty(STDOUT_FILENO);
	keys = tty && isatty(STDIN_FILENO);
	top_screen(&a, &cur, tty, keys);
	ret = 0; /* q, Ctrl-C, a signal or the count done */
	for (long n = 0; !a.count || n < a.count; n++) {
		if (!top_wait(cur.t + a.interval, keys, &orig))
			break;
		snap_clear(&prev);
		prev = cur;
		memset(&cur, 0, sizeof(cur));
		if (snap_read(&cur, a.mnt, err, sizeof(err)) != 0) {
			/* the mount went away: say so on the restored screen */
			screen_leave();
			fprintf(stderr, "batchfs: %s\n", err);
			ret = 1;
			break;
		}
		if (tty)
			draw_frame(&prev, &cur, a.mnt, a.interval);
		else
			plain_line(&prev, &cur);
		if (ferror(stdout)) { /* a closed pipe */
			ret = 1;
			break;
		}
	}
	screen_leave();
	sigprocmask(SIG_SETMASK, &orig, NULL);
	snap_clear(&prev);
	snap_clear(&cur);
	return ret;
}
