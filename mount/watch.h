/* SPDX-License-Identifier: Apache-2.0 */
/*
 * watch.h — a running mount's stats.json, read the way `batchfs stats`
 * (statscmd.c) and `batchfs top` (topcmd.c) show it.
 *
 * A snapshot is the file's members in its order, read through the
 * decoder's JSON reader (schema_json.h): a value that is not a number (a
 * string, an object) is kept as its JSON text and shown as is. Keys,
 * labels and units come from the daemon's table (fs/fs.h): the commands
 * name keys by their place in it (bfs_watch_key, which marks the key
 * shown) and write each value as its unit there says (bfs_watch_fmt_key);
 * every key that no line showed is listed after them by its label
 * (bfs_watch_others), so a key added to the table shows in both.
 *
 * Not thread-safe (the commands are one thread).
 */
#ifndef BFS_WATCH_H
#define BFS_WATCH_H

#include "fs.h"

#include <stdbool.h>
#include <stddef.h>

struct bfs_watch_kv {
	char *key;
	char *raw; /* the value's JSON text */
	double num;
	bool isnum;
	bool shown; /* a line of the view showed it (bfs_watch_key) */
};

struct bfs_watch_snap {
	struct bfs_watch_kv *v;
	size_t n;
	double t; /* CLOCK_MONOTONIC seconds (bfs_now_ns) when read */
};

/* Read MNT/stats.json afresh into s (cleared first). Returns 0, or -1 with
 * one line (without "batchfs: ") in err: not a mount, unreadable, not a
 * JSON object. */
int bfs_watch_read(struct bfs_watch_snap *s, const char *mnt, char *err, size_t errcap);
void bfs_watch_clear(struct bfs_watch_snap *s);

/* The entry of the table's key id, NULL when absent (an older daemon);
 * it is marked shown. */
const struct bfs_watch_kv *bfs_watch_key(const struct bfs_watch_snap *s, enum bfs_stat id);
/* A counter's value; NAN when absent or not a number. */
double bfs_watch_val(const struct bfs_watch_snap *s, enum bfs_stat id);
/* The change per second of key id from a to b; NAN without two samples
 * (a NULL or empty). */
double bfs_watch_rate(const struct bfs_watch_snap *a, const struct bfs_watch_snap *b,
		      enum bfs_stat id);

/* Values as text into buf (returned), "-" for NAN: an integer with
 * thousands separators; bytes in binary units ("512 B", "48.0 MiB"); a
 * number with prec decimals; key id's value as the table's unit says. */
const char *bfs_watch_fmt_n(char *buf, size_t cap, double x);
const char *bfs_watch_fmt_bytes(char *buf, size_t cap, double x);
const char *bfs_watch_fmt_f(char *buf, size_t cap, double x, int prec);
const char *bfs_watch_fmt_key(char *buf, size_t cap, const struct bfs_watch_snap *s,
			      enum bfs_stat id);
/* hits / (hits + waits + misses) in percent, NAN when there was no access */
double bfs_watch_hit_pct(double hits, double waits, double misses);
/* The errors line of both: the four error counters, and the source errors
 * when there are any. */
const char *bfs_watch_fmt_errors(char *buf, size_t cap, const struct bfs_watch_snap *s);
/* ", the sources hold N" after a mixture's records per epoch; "" when an
 * epoch is all of the source's. */
const char *bfs_watch_of_sources(char *buf, size_t cap, const struct bfs_watch_snap *s);
/* The keys of s that no line showed, in stats.json's order, as "label
 * value" items (a count since mount as its rate per second when p, an
 * earlier sample, is given) after a head of `indent` columns ("other" on
 * the first line), into at most max lines of about `width` columns.
 * Returns the lines written. */
int bfs_watch_others(char (*lines)[512], int max, size_t width, int indent,
		     const struct bfs_watch_snap *p, const struct bfs_watch_snap *s);

/* A bad argument of command cmd ("stats", "top"): the line and the usage,
 * on stderr. Returns 2, the exit status. */
int bfs_watch_bad_arg(const char *cmd, const char *msg, const char *arg);

#endif
