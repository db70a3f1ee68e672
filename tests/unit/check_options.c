/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_options.c — the mount's table of options (mount/options.h) and
 * what is made from it: the defaults it sets, --help's list, the hint for
 * a misspelt option, and the man page's MOUNT OPTIONS (doc/batchfs.1.scd),
 * whose headings must be exactly the table's and say the same defaults, so
 * that an option added, renamed or given a new default in one place and
 * not the other fails here. The same for the credential chains: the man
 * page's CREDENTIALS and --help name every place of decoder/cloud's table
 * (credplaces.h), the man page every variable and file of it, and the table
 * holds every AWS_, GOOGLE_, GCE_ and CLOUDSDK_ variable the cloud unit's
 * sources name.
 */
#include "options.h"

#include "credplaces.h"

#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* *name=a*|*b*|*c*: the man page's choices */
static int man_choices(char *dst, size_t dst_cap, const struct bfs_option *t)
{
	size_t n = 0;

	for (const char *p = t->arg; p;) {
		const char *bar = strchr(p, '|');
		int len = (int)(bar ? (size_t)(bar - p) : strlen(p));
		int r = n ? snprintf(dst + n, dst_cap - n, "|*%.*s*", len, p)
			  : snprintf(dst, dst_cap, "*%s=%.*s*", t->name, len, p);

		if (r < 0 || (size_t)r >= dst_cap - n)
			return -ENOSPC;
		n += (size_t)r;
		p = bar ? bar + 1 : NULL;
	}
	return 0;
}

/* The option's heading in the man page's MOUNT OPTIONS (scdoc): t->man,
 * or *NAME=*_ARG_, *NAME=a*|*b* for choices, *NAME* for a flag. Returns
 * 0, or -ENOSPC when it does not fit dst. */
static int man_heading(char *dst, size_t dst_cap, const struct bfs_option *t)
{
	int r;

	if (t->man)
		r = snprintf(dst, dst_cap, "%s", t->man);
	else if (t->kind != BFS_OPT_VALUE)
		r = snprintf(dst, dst_cap, "*%s*", t->name);
	else if (strchr(t->arg, '|'))
		return man_choices(dst, dst_cap, t);
	else
		r = snprintf(dst, dst_cap, "*%s=*_%s_", t->name, t->arg);
	return r < 0 || (size_t)r >= dst_cap ? -ENOSPC : 0;
}

#define MAX_HEADINGS 128

/* The man page's MOUNT OPTIONS: each heading (a line at column 0 followed
 * by its tab-indented paragraph) and its paragraph, spaces collapsed,
 * scdoc's '*' dropped, lower case. */
struct man {
	char *text;
	size_t n;
	const char *heading[MAX_HEADINGS];
	char *para[MAX_HEADINGS];
	bool claimed[MAX_HEADINGS];
};

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	ck_assert_msg(f, "cannot open %s", path);
	do {
		if (len + 4096 > cap) {
			cap = 2 * cap + 4096;
			buf = realloc(buf, cap + 1);
			ck_assert(buf);
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

static void normalize_append(char *dst, const char *line)
{
	size_t n = strlen(dst);

	for (const char *p = line; *p; p++) {
		if (*p == '*')
			continue;
		if (isspace((unsigned char)*p)) {
			if (n && dst[n - 1] != ' ')
				dst[n++] = ' ';
			continue;
		}
		dst[n++] = (char)tolower((unsigned char)*p);
	}
	if (n && dst[n - 1] != ' ')
		dst[n++] = ' ';
	dst[n] = '\0';
}

static void man_load(struct man *m)
{
	char *p, *end, *next;
	char *lines[2048];
	size_t nl = 0;

	memset(m, 0, sizeof(*m));
	m->text = slurp(SRCDIR "/doc/batchfs.1.scd");
	p = strstr(m->text, "\n# MOUNT OPTIONS\n");
	ck_assert_msg(p, "no MOUNT OPTIONS section");
	p += strlen("\n# MOUNT OPTIONS\n");
	end = strstr(p, "\n# ");
	ck_assert(end);
	*end = '\0';
	for (; p && nl < BFS_ARRAY_SIZE(lines); p = next) {
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		lines[nl++] = p;
	}
	for (size_t i = 0; i + 1 < nl; i++) {
		if (!*lines[i] || lines[i][0] == '\t' || lines[i + 1][0] != '\t')
			continue;
		ck_assert(m->n < MAX_HEADINGS);
		m->heading[m->n] = lines[i];
		m->para[m->n] = calloc(1, 4096);
		ck_assert(m->para[m->n]);
		for (size_t j = i + 1; j < nl && lines[j][0] == '\t'; j++) {
			ck_assert(strlen(m->para[m->n]) + strlen(lines[j]) + 2 < 4096);
			normalize_append(m->para[m->n], lines[j]);
		}
		m->n++;
	}
	ck_assert_uint_gt(m->n, 20);
}

static void man_free(struct man *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->para[i]);
	free(m->text);
}

static const char *shown_default(const struct bfs_option *t)
{
	const char *def = t->def ? t->def : t->init;

	return def && *def ? def : NULL;
}

START_TEST(every_option_has_its_man_heading_and_every_heading_its_option)
{
	struct man m;
	size_t n;
	const struct bfs_option *t = bfs_options_table(&n);

	man_load(&m);
	for (size_t i = 0; i < n; i++) {
		char h[256];
		bool found = false;

		if (t[i].kind == BFS_OPT_COMMAND)
			continue;
		ck_assert_int_eq(man_heading(h, sizeof(h), &t[i]), 0);
		for (size_t j = 0; j < m.n; j++)
			if (strcmp(m.heading[j], h) == 0)
				found = m.claimed[j] = true;
		ck_assert_msg(found, "option %s: no heading '%s' in the man page's MOUNT OPTIONS",
			      t[i].name, h);
	}
	for (size_t j = 0; j < m.n; j++)
		ck_assert_msg(
			m.claimed[j],
			"man page heading '%s' is no option of the table (mount/options_table.c)",
			m.heading[j]);
	man_free(&m);
}
END_TEST

START_TEST(the_man_page_says_the_defaults_help_says)
{
	struct man m;
	size_t n;
	const struct bfs_option *t = bfs_options_table(&n);

	man_load(&m);
	for (size_t i = 0; i < n; i++) {
		const char *def = shown_default(&t[i]);
		char h[256], a[128], b[128], c[128];
		bool found = false;

		if (!def || t[i].kind == BFS_OPT_COMMAND)
			continue;
		ck_assert_int_eq(man_heading(h, sizeof(h), &t[i]), 0);
		snprintf(a, sizeof(a), "default %s", def);
		snprintf(b, sizeof(b), "default: %s", def);
		snprintf(c, sizeof(c), "%s (the default)", def);
		for (char *p = a; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		for (char *p = b; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		for (char *p = c; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		for (size_t j = 0; j < m.n; j++)
			if (strcmp(m.heading[j], h) == 0)
				found = strstr(m.para[j], a) || strstr(m.para[j], b) ||
					strstr(m.para[j], c);
		ck_assert_msg(found, "option %s: the man page does not say its default, %s",
			      t[i].name, def);
	}
	man_free(&m);
}
END_TEST

START_TEST(help_lists_every_option_with_its_default)
{
	size_t n, len = 0;
	const struct bfs_option *t = bfs_options_table(&n);
	char *text = NULL;
	FILE *f = open_memstream(&text, &len);

	ck_assert(f);
	bfs_options_help(f);
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		const char *def = shown_default(&t[i]);
		char want[128];

		if (t[i].kind == BFS_OPT_COMMAND)
			continue;
		snprintf(want, sizeof(want), "\n  %s%s%s", t[i].alias ? t[i].alias : "",
			 t[i].alias ? ", " : "", t[i].name);
		ck_assert_msg(strstr(text, want) || strncmp(text, want + 1, strlen(want + 1)) == 0,
			      "--help has no line for %s", t[i].name);
		if (def) {
			snprintf(want, sizeof(want), "(default %s)", def);
			/* the text may wrap inside it: compare without the breaks */
			char *flat = strdup(text), *q = flat;
			for (const char *p = text; *p; p++) {
				if (*p == '\n')
					while (p[1] == ' ')
						p++;
				*q++ = *p == '\n' ? ' ' : *p;
			}
			*q = '\0';
			ck_assert_msg(strstr(flat, want), "--help does not say %s's default %s",
				      t[i].name, def);
			free(flat);
		}
	}
	free(text);
}
END_TEST

/* s with '*' and '\\' (scdoc's marks) dropped and every run of blanks one
 * space (malloc'd). */
static char *flatten(const char *s)
{
	char *out = malloc(strlen(s) + 1), *q = out;

	ck_assert(out);
	for (const char *p = s; *p; p++) {
		if (*p == '*' || *p == '\\')
			continue;
		if (isspace((unsigned char)*p)) {
			if (q > out && q[-1] != ' ')
				*q++ = ' ';
			continue;
		}
		*q++ = *p;
	}
	*q = '\0';
	return out;
}

/* The man page's section NAME (its text up to the next heading), flattened. */
static char *man_section(const char *name)
{
	char *text = slurp(SRCDIR "/doc/batchfs.1.scd"), head[64], *p, *end, *out;

	snprintf(head, sizeof(head), "\n# %s\n", name);
	p = strstr(text, head);
	ck_assert_msg(p, "the man page has no %s section", name);
	p += strlen(head);
	end = strstr(p, "\n# ");
	if (end)
		*end = '\0';
	out = flatten(p);
	free(text);
	return out;
}

START_TEST(the_man_page_names_every_credential_place_and_what_it_reads)
{
	size_t n;
	const struct bfs_cred_place *t = bfs_cred_places(&n);
	char *sec = man_section("CREDENTIALS");

	ck_assert_uint_gt(n, 10);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(strstr(sec, t[i].name),
			      "the man page's CREDENTIALS does not name '%s'", t[i].name);
		for (size_t k = 0; t[i].reads[k]; k++)
			ck_assert_msg(strstr(sec, t[i].reads[k]),
				      "the man page's CREDENTIALS does not name %s (%s %s)",
				      t[i].reads[k], t[i].scheme, t[i].name);
	}
	free(sec);
}
END_TEST

START_TEST(help_names_every_credential_place)
{
	size_t n, len = 0;
	const struct bfs_cred_place *t = bfs_cred_places(&n);
	char *text = NULL, *flat;
	FILE *f = open_memstream(&text, &len);

	ck_assert(f);
	bfs_options_help_sources(f);
	fclose(f);
	flat = flatten(text);
	ck_assert_msg(strstr(flat, "mixture file"), "--help does not say SOURCE may be a mixture");
	for (size_t i = 0; i < n; i++)
		if (t[i].cred)
			ck_assert_msg(strstr(flat, t[i].name), "--help does not name '%s' (%s)",
				      t[i].name, t[i].scheme);
	free(flat);
	free(text);
}
END_TEST

/* Whether name is a variable or file the table lists. */
static bool in_table(const char *name)
{
	size_t n;
	const struct bfs_cred_place *t = bfs_cred_places(&n);

	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; t[i].reads[k]; k++)
			if (strcmp(t[i].reads[k], name) == 0)
				return true;
	return false;
}

START_TEST(the_table_holds_every_variable_the_cloud_unit_reads)
{
	static const char *const prefixes[] = { "\"AWS_", "\"GOOGLE_", "\"GCE_", "\"CLOUDSDK_" };
	DIR *d = opendir(SRCDIR "/decoder/cloud");
	struct dirent *e;
	size_t seen = 0;

	ck_assert(d);
	while ((e = readdir(d))) {
		char path[4096], *src;
		size_t len = strlen(e->d_name);

		if (len < 3 || strcmp(e->d_name + len - 2, ".c") != 0 ||
		    strcmp(e->d_name, "credplaces.c") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/decoder/cloud/%s", SRCDIR, e->d_name);
		src = slurp(path);
		for (size_t i = 0; i < BFS_ARRAY_SIZE(prefixes); i++)
			for (const char *p = strstr(src, prefixes[i]); p;
			     p = strstr(p + 1, prefixes[i])) {
				char name[128];
				size_t k = 0;

				for (p++; k + 1 < sizeof(name) &&
					  (isupper((unsigned char)p[k]) ||
					   isdigit((unsigned char)p[k]) || p[k] == '_');
				     k++)
					name[k] = p[k];
				name[k] = '\0';
				if (p[k] != '"')
					continue; /* a prefix in a message, not a name */
				ck_assert_msg(
					in_table(name),
					"%s reads %s, which decoder/cloud/credplaces.c does not "
					"list (nor the man page, then)",
					e->d_name, name);
				seen++;
			}
		free(src);
	}
	closedir(d);
	ck_assert_uint_gt(seen, 25);
}
END_TEST

/* Parse argv, stderr into *err (malloc'd). */
static int parse_capture(struct bfs_options *o, char **argv, int argc, char **err)
{
	char path[] = "/tmp/check_options-XXXXXX";
	int fd = mkstemp(path), saved = dup(2), fargc = 0, rc;
	char **fargv = NULL;

	ck_assert(fd >= 0 && saved >= 0);
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	rc = bfs_options_parse(o, argc, argv, &fargc, &fargv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (rc == 0)
		bfs_options_free_argv(fargc, fargv);
	*err = calloc(1, 4096);
	ck_assert(*err);
	ck_assert(pread(fd, *err, 4095, 0) >= 0);
	close(fd);
	return rc;
}

START_TEST(a_misspelt_option_is_hinted_from_the_table)
{
	size_t n;
	const struct bfs_option *t = bfs_options_table(&n);

	for (size_t i = 0; i < n; i++) {
		struct bfs_options o;
		char arg[96], want[160], *err;
		char *argv[] = { "batchfs", "-o", arg, "src", "mnt", NULL };
		size_t len = strlen(t[i].name);

		if (t[i].name[0] == '-')
			continue;
		/* the name without its last letter */
		snprintf(arg, sizeof(arg), "%.*s%s", (int)(len - 1), t[i].name,
			 t[i].kind == BFS_OPT_VALUE ? "=1" : "");
		ck_assert_int_eq(parse_capture(&o, argv, 5, &err), 1);
		snprintf(want, sizeof(want), "batchfs: unknown option '%s' (did you mean %s?)\n",
			 arg, t[i].name);
		ck_assert_str_eq(err, want);
		free(err);
		bfs_options_destroy(&o);
	}
}
END_TEST

START_TEST(the_defaults_are_the_tables)
{
	struct bfs_options o;
	char *argv[] = { "batchfs", "src", "mnt", NULL }, *err;

	ck_assert_int_eq(parse_capture(&o, argv, 3, &err), 0);
	ck_assert_str_eq(err, "");
	free(err);
	ck_assert_uint_eq(o.batch_size, 32);
	ck_assert_uint_eq(o.seed, 0);
	ck_assert(o.shuffle && !o.block);
	ck_assert_uint_eq(o.block_size, 4u << 20);
	ck_assert_uint_eq(o.window, 64);
	ck_assert_uint_eq(o.epochs, 1);
	ck_assert_uint_eq(o.world, 1);
	ck_assert(!o.all_ranks);
	ck_assert(o.verify);
	ck_assert_int_eq(o.on_corrupt, BFS_ON_CORRUPT_FAIL);
	ck_assert_uint_eq(o.cache_size, 1u << 30);
	ck_assert(o.shadow);
	ck_assert_uint_eq(o.shadow_size, BFS_SHADOW_SIZE_DEFAULT);
	ck_assert_int_eq(o.compression, BFS_COMP_AUTO);
	ck_assert_uint_eq(o.io_depth, 0);
	ck_assert_uint_eq(o.readahead, 0);
	ck_assert_uint_eq(o.seek_span, 0);
	ck_assert_int_eq(o.cuda_device, -1);
	ck_assert_int_eq(o.watch_fd, -1);
	ck_assert_uint_eq(o.prefetch, 2 * o.threads);
	ck_assert_ptr_nonnull(o.index_dir);
	bfs_options_destroy(&o);
}
END_TEST

START_TEST(seek_span_is_checked_and_kept)
{
	struct bfs_options o;
	char arg[32] = "seek_span=256K", *err;
	char *argv[] = { "batchfs", "-o", arg, "src", "mnt", NULL };

	ck_assert_int_eq(parse_capture(&o, argv, 5, &err), 0);
	free(err);
	ck_assert_uint_eq(o.seek_span, 256u << 10);
	bfs_options_destroy(&o);
	snprintf(arg, sizeof(arg), "seek_span=32K");
	ck_assert_int_eq(parse_capture(&o, argv, 5, &err), 1);
	ck_assert_str_eq(err, "batchfs: option 'seek_span=32K': need a size of at least 64K, such "
			      "as 256K\n");
	free(err);
	bfs_options_destroy(&o);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, every_option_has_its_man_heading_and_every_heading_its_option);
	tcase_add_test(tc, the_man_page_says_the_defaults_help_says);
	tcase_add_test(tc, help_lists_every_option_with_its_default);
	tcase_add_test(tc, the_man_page_names_every_credential_place_and_what_it_reads);
	tcase_add_test(tc, help_names_every_credential_place);
	tcase_add_test(tc, the_table_holds_every_variable_the_cloud_unit_reads);
	tcase_add_test(tc, a_misspelt_option_is_hinted_from_the_table);
	tcase_add_test(tc, the_defaults_are_the_tables);
	tcase_add_test(tc, seek_span_is_checked_and_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
