/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gcptool — drives Google's Application Default Credentials (credgcp.h,
 * cred.h) from the command line, for tests/cloud. The credentials come from
 * the environment and the files, as a mount's do; nothing secret is ever
 * printed (no token, key or assertion: only where they came from, and
 * counts).
 *
 *   gcptool chain [SECONDS [EVERY_MS]]
 *       walk the chain, print "source: LINE" (bfs_cred_keeper_describe);
 *       then for SECONDS ask the keeper for a credential every EVERY_MS
 *       (default 100) as a mount's requests do, and print one JSON line:
 *       {"gets": N, "ok": N, "failed": N, "expired_handed_out": N,
 *        "tokens": N distinct tokens seen, "refreshes": N, "failures": N,
 *        "first_fail_ms": ms after start of the first failed get or -1,
 *        "last_fail_ms", "recovered": whether a get after the last failure
 *        succeeded, "why": the first failure's line}
 *
 * No credentials at all: "gcptool: no Google credentials: looked in ..."
 * and exit status 2; another error: "gcptool: MESSAGE" and exit status 1.
 */
#include "common.h"
#include "cred.h"
#include "credgcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TOKENS 4096

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A token's FNV-1a hash: tokens are told apart without being kept. */
static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

static int chain(double seconds, long every_ms)
{
	struct bfs_cred_keeper *k = NULL;
	struct bfs_cred_stats st;
	char looked[4096], line[1024], why[1024], first_why[1024] = "";
	static uint64_t seen[MAX_TOKENS];
	size_t nseen = 0;
	uint64_t gets = 0, ok = 0, failed = 0, expired = 0;
	int64_t t0, first_fail = -1, last_fail = -1;
	bool recovered = true;
	int rc;

	rc = bfs_credgcp_chain(&k, NULL, looked, sizeof(looked));
	if (rc == -ENOENT) {
		fprintf(stderr, "gcptool: no Google credentials: looked in %s\n", looked);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "gcptool: %s\n", bfs_err_msg());
		return 1;
	}
	bfs_cred_keeper_describe(k, line, sizeof(line));
	printf("source: %s\n", line);
	fflush(stdout);
	t0 = mono_ms();
	while (mono_ms() - t0 < (int64_t)(seconds * 1000)) {
		struct bfs_cred *c = NULL;
		struct timespec nap = { every_ms / 1000, (every_ms % 1000) * 1000000L };

		gets++;
		if (bfs_cred_keeper_get(k, &c, why, sizeof(why)) == 0) {
			uint64_t h = fnv(c->token ? c->token : "");
			bool known = false;

			ok++;
			if (c->kind != BFS_CRED_BEARER)
				expired++; /* counted as wrong: gs:// ADC gives Bearer tokens */
			if (c->expires && (int64_t)c->expires * 1000 <= bfs_cred_now_ms())
				expired++;
			for (size_t i = 0; i < nseen; i++)
				known |= seen[i] == h;
			if (!known && nseen < MAX_TOKENS)
				seen[nseen++] = h;
			if (last_fail >= 0)
				recovered = true;
			bfs_cred_unref(c);
		} else {
			failed++;
			last_fail = mono_ms() - t0;
			if (first_fail < 0) {
				first_fail = last_fail;
				snprintf(first_why, sizeof(first_why), "%s", why);
			}
			recovered = false;
		}
		nanosleep(&nap, NULL);
	}
	bfs_cred_keeper_stats(k, &st);
	for (char *p = first_why; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
	printf("{\"gets\": %" PRIu64 ", \"ok\": %" PRIu64 ", \"failed\": %" PRIu64
	       ", \"expired_handed_out\": %" PRIu64 ", \"tokens\": %zu, \"refreshes\": %" PRIu64
	       ", \"failures\": %" PRIu64 ", \"first_fail_ms\": %" PRId64
	       ", \"last_fail_ms\": %" PRId64 ", \"recovered\": %s, \"why\": \"%s\"}\n",
	       gets, ok, failed, expired, nseen, st.refreshes, st.failures, first_fail, last_fail,
	       recovered ? "true" : "false", first_why);
	bfs_cred_keeper_unref(k);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "chain") == 0)
		return chain(argc > 2 ? atof(argv[2]) : 0, argc > 3 ? atol(argv[3]) : 100);
	fprintf(stderr, "usage: gcptool chain [SECONDS [EVERY_MS]]\n");
	return 1;
}
