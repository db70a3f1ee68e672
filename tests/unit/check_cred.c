/* SPDX-License-Identifier: Apache-2.0 */
/* check_cred.c — cloud credentials (decoder/cloud/cred.h): the timing
 * policy, credential values, the keeper against a provider of its own
 * (credentials that expire in a second or two, a provider that fails and
 * comes back, the store's "expired" signal), a fork while its thread waits
 * or fetches, a keeper freed while its endpoint hangs, times and STS answers
 * parsed, secrets scrubbed, and the HTTP request's errors. */
#include "common.h"
#include "cred.h"
#include "http.h"
#include "s3xml.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* ---- the timing policy ---- */

START_TEST(an_hour_long_credential_is_refreshed_minutes_ahead_a_short_one_halfway)
{
	ck_assert_int_eq(bfs_cred_refresh_lead(3600 * 1000), 15 * 60 * 1000);
	ck_assert_int_eq(bfs_cred_refresh_lead(6 * 3600 * 1000), 15 * 60 * 1000);
	ck_assert_int_eq(bfs_cred_refresh_lead(4000), 2000);
	ck_assert_int_eq(bfs_cred_refresh_lead(0), 0);
	ck_assert_int_eq(bfs_cred_refresh_lead(-5), 0);
	ck_assert_int_eq(bfs_cred_guard_ms(3600 * 1000), 10 * 1000);
	ck_assert_int_eq(bfs_cred_guard_ms(4000), 400);
	/* the refresh always comes before the guard stops handing it out */
	for (int64_t life = 10; life < 10LL * 3600 * 1000; life = life * 3 + 7)
		ck_assert(bfs_cred_refresh_lead(life) > bfs_cred_guard_ms(life));
}
END_TEST

START_TEST(retries_back_off_with_jitter_up_to_half_a_minute)
{
	for (uint64_t r = 0; r < 1000; r += 97) {
		unsigned first = bfs_cred_retry_ms(1, r), tenth = bfs_cred_retry_ms(10, r);

		ck_assert(first >= 250 && first <= 500);
		ck_assert(tenth >= 15000 && tenth <= 30000);
		ck_assert(bfs_cred_retry_ms(3, r) >= 1000 && bfs_cred_retry_ms(3, r) <= 2000);
	}
}
END_TEST

/* ---- values ---- */

START_TEST(a_credential_checks_its_fields_and_counts_references)
{
	struct bfs_cred *c = NULL, *d;

	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_SIGV4, "AKID", NULL, NULL, 0, "src", NULL),
			 -EINVAL);
	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_SIGV4, "AKID", "se\ncret", NULL, 0, "src", NULL),
			 -EINVAL);
	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_BEARER, NULL, NULL, "", 0, "src", NULL),
			 -EINVAL);
	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_SIGV4, "AKID", "S", "T", 0, "", NULL), -EINVAL);
	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_SIGV4, "AKID", "S", "", 5, "src", "role"), 0);
	ck_assert_ptr_null(c->token); /* an empty token is none */
	ck_assert_str_eq(c->account, "role");
	ck_assert_int_eq(c->expires, 5);
	d = bfs_cred_ref(c);
	ck_assert_ptr_eq(c, d);
	bfs_cred_unref(c);
	ck_assert_str_eq(d->secret, "S"); /* still alive */
	bfs_cred_unref(d);
	ck_assert_int_eq(bfs_cred_new(&c, BFS_CRED_BEARER, "ignored", "ignored", "ya29.tok", 0,
				      "metadata server", NULL),
			 0);
	ck_assert_ptr_null(c->key_id);
	ck_assert_str_eq(c->token, "ya29.tok");
	bfs_cred_unref(c);
	bfs_cred_unref(NULL);
}
END_TEST

START_TEST(times_are_parsed_as_the_endpoints_write_them)
{
	time_t t;

	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27T13:05:02Z", &t), 0);
	ck_assert_int_eq(t, 1795784702);
	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27T13:05:02.123456Z", &t), 0);
	ck_assert_int_eq(t, 1795784702);
	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27T13:05:02+00:00", &t), 0);
	ck_assert_int_eq(t, 1795784702);
	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27 13:05:02Z", &t), 0);
	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27T13:05:02+02:00", &t), -EINVAL);
	ck_assert_int_eq(bfs_cred_parse_time("2026-13-27T13:05:02Z", &t), -EINVAL);
	ck_assert_int_eq(bfs_cred_parse_time("2026-11-27T13:05Z", &t), -EINVAL);
	ck_assert_int_eq(bfs_cred_parse_time("tomorrow", &t), -EINVAL);
	ck_assert_int_eq(bfs_cred_parse_time(NULL, &t), -EINVAL);
}
END_TEST

START_TEST(secrets_are_scrubbed_from_a_line)
{
	char msg[128] = "denied: token ToKeN-123 and secret S3cr3t,\nagain ToKeN-123";
	const char *secrets[] = { "S3cr3t", "ToKeN-123", NULL, "ab" };

	bfs_cred_scrub(msg, sizeof(msg), secrets, 4);
	ck_assert_str_eq(msg, "denied: token [redacted] and secret [redacted], again [redacted]");
}
END_TEST

/* ---- the keeper, against a provider of the test's ---- */

struct fake {
	pthread_mutex_t m;
	int life_s; /* each credential lasts this long; 0: never expires */
	bool failing;
	unsigned fetches;
	int64_t fetched_ms[64];
	time_t expires[64];
};

static int fake_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct fake *f = ctx;
	char id[32];
	time_t exp;
	int rc;

	pthread_mutex_lock(&f->m);
	if (f->failing) {
		pthread_mutex_unlock(&f->m);
		snprintf(why, cap, "the metadata server answered HTTP 503");
		return -EIO;
	}
	exp = f->life_s ? time(NULL) + f->life_s : 0;
	if (f->fetches < 64) {
		f->fetched_ms[f->fetches] = bfs_cred_now_ms();
		f->expires[f->fetches] = exp;
	}
	snprintf(id, sizeof(id), "ASIAFAKE%04u", f->fetches++);
	pthread_mutex_unlock(&f->m);
	rc = bfs_cred_new(out, BFS_CRED_SIGV4, id, "fake-secret-value", "fake-session-token", exp,
			  "the fake provider", "fake-role");
	return rc;
}

static struct fake *fake_new(int life_s)
{
	struct fake *f = calloc(1, sizeof(*f));

	ck_assert_ptr_nonnull(f);
	pthread_mutex_init(&f->m, NULL);
	f->life_s = life_s;
	return f;
}

static void fake_set(struct fake *f, bool failing)
{
	pthread_mutex_lock(&f->m);
	f->failing = failing;
	pthread_mutex_unlock(&f->m);
}

static unsigned fake_fetches(struct fake *f)
{
	unsigned n;

	pthread_mutex_lock(&f->m);
	n = f->fetches;
	pthread_mutex_unlock(&f->m);
	return n;
}

static struct bfs_cred_keeper *keeper_of(struct fake *f)
{
	struct bfs_cred_provider p = { .name = "the fake provider", .fetch = fake_fetch, .ctx = f };
	struct bfs_cred_keeper *k = NULL;

	ck_assert_int_eq(bfs_cred_keeper_new(&k, &p, NULL), 0);
	return k;
}

START_TEST(a_credential_that_never_expires_is_fetched_once)
{
	struct fake *f = fake_new(0);
	struct bfs_cred_keeper *k = keeper_of(f);
	struct bfs_cred *a, *b;
	struct bfs_cred_stats st;
	char why[256], line[512];

	sleep_ms(200);
	ck_assert_int_eq(bfs_cred_keeper_get(k, &a, why, sizeof(why)), 0);
	ck_assert_int_eq(bfs_cred_keeper_get(k, &b, why, sizeof(why)), 0);
	ck_assert_ptr_eq(a, b);
	ck_assert_uint_eq(fake_fetches(f), 1);
	bfs_cred_keeper_stats(k, &st);
	ck_assert_uint_eq(st.refreshes, 1);
	ck_assert(st.valid && st.expires == 0);
	bfs_cred_keeper_describe(k, line, sizeof(line));
	ck_assert_str_eq(line, "the fake provider `fake-role`, key id ****0000, with a session "
			       "token");
	ck_assert_ptr_null(strstr(line, "fake-secret"));
	/* stats.json's credentials_key_id: the same masked id */
	bfs_cred_keeper_key_id(k, line, sizeof(line));
	ck_assert_str_eq(line, "****0000");
	bfs_cred_unref(a);
	bfs_cred_unref(b);
	bfs_cred_keeper_unref(k);
	free(f);
}
END_TEST

START_TEST(short_credentials_are_refreshed_before_they_expire_and_never_handed_out_expired)
{
	struct fake *f = fake_new(2);
	struct bfs_cred_keeper *k = keeper_of(f);
	struct bfs_cred_stats st;
	int64_t end = bfs_cred_now_ms() + 4500;
	unsigned gets = 0;
	char why[256], line[512];

	while (bfs_cred_now_ms() < end) {
		struct bfs_cred *c = NULL;
		int rc = bfs_cred_keeper_get(k, &c, why, sizeof(why));

		/* no get fails, none is past its expiry */
		ck_assert_msg(rc == 0, "get failed: %s", why);
		ck_assert((int64_t)c->expires * 1000 > bfs_cred_now_ms());
		bfs_cred_unref(c);
		gets++;
		sleep_ms(5);
	}
	ck_assert_uint_gt(gets, 100);
	/* each credential after the first was fetched before the one before it
	 * expired (ahead of it, in the background) */
	pthread_mutex_lock(&f->m);
	ck_assert_uint_ge(f->fetches, 3);
	for (unsigned i = 1; i < f->fetches && i < 64; i++)
		ck_assert_int_lt(f->fetched_ms[i], (int64_t)f->expires[i - 1] * 1000);
	pthread_mutex_unlock(&f->m);
	bfs_cred_keeper_stats(k, &st);
	ck_assert_uint_ge(st.refreshes, 3);
	ck_assert_uint_eq(st.failures, 0);
	bfs_cred_keeper_describe(k, line, sizeof(line));
	ck_assert_ptr_nonnull(strstr(line, ", expires 20"));
	ck_assert_ptr_nonnull(strstr(line, " times"));
	bfs_cred_keeper_unref(k);
	free(f);
}
END_TEST

START_TEST(the_stores_expired_signal_refreshes_once)
{
	struct fake *f = fake_new(3600);
	struct bfs_cred_keeper *k = keeper_of(f);
	struct bfs_cred *old = NULL, *c = NULL;
	struct bfs_cred_stats st;
	char why[256];
	int rc, tries = 0;

	ck_assert_int_eq(bfs_cred_keeper_get(k, &old, why, sizeof(why)), 0);
	bfs_cred_keeper_expired(k, old);
	bfs_cred_keeper_expired(k, old); /* many requests, one refresh */
	while ((rc = bfs_cred_keeper_get(k, &c, why, sizeof(why))) == -EAGAIN && tries++ < 200)
		sleep_ms(5);
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_ne(c, old);
	ck_assert_str_ne(c->key_id, old->key_id);
	sleep_ms(100);
	ck_assert_uint_eq(fake_fetches(f), 2);
	/* the old one, signalled late, changes nothing */
	bfs_cred_keeper_expired(k, old);
	bfs_cred_keeper_stats(k, &st);
	ck_assert_uint_eq(st.expired_signals, 1);
	ck_assert(st.valid);
	bfs_cred_unref(old);
	bfs_cred_unref(c);
	bfs_cred_keeper_unref(k);
	free(f);
}
END_TEST

START_TEST(a_provider_down_past_expiry_fails_gets_with_why_then_recovers)
{
	struct fake *f = fake_new(1);
	struct bfs_cred_keeper *k = keeper_of(f);
	struct bfs_cred *c = NULL;
	struct bfs_cred_stats st;
	char why[512], line[512];
	int rc = 0, tries = 0;

	fake_set(f, true);
	sleep_ms(2200); /* expired by now, every refresh failed */
	rc = bfs_cred_keeper_get(k, &c, why, sizeof(why));
	ck_assert_int_eq(rc, -EACCES);
	ck_assert_ptr_nonnull(strstr(why, "the credentials from the fake provider expired at 20"));
	ck_assert_ptr_nonnull(strstr(why, "could not be refreshed"));
	ck_assert_ptr_nonnull(strstr(why, "could not be refreshed: the metadata server answered "
					  "HTTP 503"));
	bfs_cred_keeper_stats(k, &st);
	ck_assert(!st.valid && st.failures >= 1);
	/* errors.txt's line: once, then not again within the minute */
	ck_assert(bfs_cred_keeper_errline(k, line, sizeof(line)));
	ck_assert_ptr_nonnull(strstr(line, "cannot refresh the credentials from the fake provider: "
					   "the metadata server answered HTTP 503"));
	sleep_ms(1100);
	bfs_cred_keeper_get(k, &c, why, sizeof(why)); /* asks it again (a second since) */
	sleep_ms(100);
	ck_assert(!bfs_cred_keeper_errline(k, line, sizeof(line)));
	/* back: a get asks again within a second or so, not after the backoff */
	fake_set(f, false);
	while ((rc = bfs_cred_keeper_get(k, &c, why, sizeof(why))) != 0 && tries++ < 300)
		sleep_ms(10);
	ck_assert_int_eq(rc, 0);
	bfs_cred_unref(c);
	bfs_cred_keeper_unref(k);
	free(f);
}
END_TEST

START_TEST(a_first_fetch_that_fails_fails_the_keeper_with_the_providers_line)
{
	struct fake *f = fake_new(60);
	struct bfs_cred_provider p = { .name = "the fake provider", .fetch = fake_fetch, .ctx = f };
	struct bfs_cred_keeper *k = NULL;

	fake_set(f, true);
	ck_assert_int_eq(bfs_cred_keeper_new(&k, &p, NULL), -EIO);
	ck_assert_str_eq(bfs_err_msg(), "the fake provider: the metadata server answered HTTP 503");
	free(f);
}
END_TEST

/* ---- fork, and a keeper freed while it fetches ---- */

/* Wait up to ms for child pid: its exit status, or -1 (it was then killed). */
static int wait_child(pid_t pid, int ms)
{
	int st = 0;

	for (int waited = 0; waited < ms; waited += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* A daemon detaching: the process forks while the keeper's thread waits
 * for its next refresh (a credential that lasts an hour). The child's
 * keeper works, and is freed (its thread stopped) at once. */
START_TEST(a_keeper_forked_while_its_thread_waits_works_and_goes_in_the_child)
{
	struct fake *f = fake_new(3600);
	struct bfs_cred_keeper *k = keeper_of(f);
	struct bfs_cred *c = NULL;
	char why[256];
	pid_t pid;

	sleep_ms(100); /* the thread waits for the refresh, 45 minutes ahead */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL); /* check's handler would end the test */
		alarm(5);
		if (bfs_cred_keeper_get(k, &c, why, sizeof(why)) != 0)
			_exit(2);
		bfs_cred_keeper_expired(k, c); /* a refresh, on a thread of the child */
		bfs_cred_unref(c);
		for (int i = 0; i < 200; i++) {
			if (bfs_cred_keeper_get(k, &c, why, sizeof(why)) == 0) {
				bfs_cred_unref(c);
				break;
			}
			sleep_ms(5);
		}
		if (fake_fetches(f) != 2)
			_exit(3);
		bfs_cred_keeper_unref(k);
		_exit(0);
	}
	ck_assert_int_eq(wait_child(pid, 8000), 0);
	/* the parent's keeper goes on */
	ck_assert_int_eq(bfs_cred_keeper_get(k, &c, why, sizeof(why)), 0);
	bfs_cred_unref(c);
	bfs_cred_keeper_unref(k);
	free(f);
}
END_TEST

/* A credential endpoint that takes connections and never answers: a socket
 * listening on loopback that nobody accepts from. */
static int listen_mute(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A provider asking such an endpoint, as the real ones ask theirs. */
static int mute_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct bfs_http_req r = { .method = "GET", .url = ctx };
	struct bfs_http_resp resp;
	int rc = bfs_http_request(&r, &resp, why, cap);

	(void)out;
	if (rc == 0) {
		snprintf(why, cap, "it answered HTTP %ld", resp.status);
		bfs_http_resp_free(&resp);
		rc = -EIO;
	}
	return rc;
}

/* A keeper whose thread is in a fetch from the endpoint on port. */
static struct bfs_cred_keeper *keeper_fetching(char *url, size_t cap, int port)
{
	struct bfs_cred_provider p = { .name = "a mute endpoint", .fetch = mute_fetch, .ctx = url };
	struct bfs_cred_keeper *k = NULL;
	struct bfs_cred *first = NULL;

	snprintf(url, cap, "http://127.0.0.1:%d/creds", port);
	ck_assert_int_eq(bfs_cred_new(&first, BFS_CRED_SIGV4, "ASIAFIRST", "s", "t",
				      time(NULL) + 3600, "a mute endpoint", NULL),
			 0);
	ck_assert_int_eq(bfs_cred_keeper_new(&k, &p, first), 0);
	bfs_cred_keeper_expired(k, first); /* the thread fetches now, and hangs */
	bfs_cred_unref(first);
	sleep_ms(300);
	return k;
}

/* An unmount while the credential endpoint hangs: freeing the keeper does
 * not wait for the request's timeouts (5 s a try, 10 s of tries). */
START_TEST(a_keeper_freed_while_its_endpoint_hangs_goes_at_once)
{
	char url[64];
	int port, fd = listen_mute(&port);
	struct bfs_cred_keeper *k = keeper_fetching(url, sizeof(url), port);
	int64_t t0 = bfs_cred_now_ms();

	bfs_cred_keeper_unref(k);
	ck_assert_int_lt(bfs_cred_now_ms() - t0, 500);
	close(fd);
}
END_TEST

/* A fork while the thread fetches from an endpoint that hangs: the fetch
 * gives up (no thread runs while the process forks), the fork does not
 * wait for the endpoint, and the parent's thread fetches again after it. */
START_TEST(a_fork_while_the_endpoint_hangs_does_not_wait_for_it)
{
	char url[64];
	int port, fd = listen_mute(&port);
	struct bfs_cred_keeper *k = keeper_fetching(url, sizeof(url), port);
	struct bfs_cred_stats st;
	int64_t t0 = bfs_cred_now_ms();
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		signal(SIGALRM, SIG_DFL); /* check's handler would end the test */
		alarm(5);
		bfs_cred_keeper_unref(k);
		_exit(0);
	}
	ck_assert_int_lt(bfs_cred_now_ms() - t0, 500);
	ck_assert_int_eq(wait_child(pid, 8000), 0);
	bfs_cred_keeper_stats(k, &st);
	ck_assert_uint_eq(st.failures, 0); /* given up is not a failure */
	ck_assert(!st.valid); /* dropped, and being fetched again */
	t0 = bfs_cred_now_ms();
	bfs_cred_keeper_unref(k);
	ck_assert_int_lt(bfs_cred_now_ms() - t0, 500);
	close(fd);
}
END_TEST

/* ---- STS answers ---- */

static const char sts_ok[] =
	"<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	"<AssumeRoleResult><SourceIdentity>x</SourceIdentity><AssumedRoleUser>"
	"<Arn>arn:aws:sts::123456789012:assumed-role/demo/s</Arn>"
	"<AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser><Credentials>"
	"<AccessKeyId>ASIAEXAMPLE</AccessKeyId><SecretAccessKey>wJalr/K7MDENG</SecretAccessKey>"
	"<SessionToken>AQoDYXdzEPT//////////wEXAMPLE</SessionToken>"
	"<Expiration>2026-11-27T13:05:02Z</Expiration></Credentials>"
	"<PackedPolicySize>6</PackedPolicySize></AssumeRoleResult>"
	"<ResponseMetadata><RequestId>c6104cbe</RequestId></ResponseMetadata>"
	"</AssumeRoleResponse>";

START_TEST(sts_answers_are_parsed)
{
	struct bfs_s3xml_sts x;
	char why[256];
	static const char err[] =
		"<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
		"<Type>Sender</Type><Code>AccessDenied</Code><Message>not allowed</Message>"
		"</Error><RequestId>r</RequestId></ErrorResponse>";
	static const char missing[] =
		"<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
		"<AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
		"<Expiration>2026-11-27T13:05:02Z</Expiration></Credentials>"
		"</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
	static const char twice[] =
		"<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A</AccessKeyId>"
		"<AccessKeyId>B</AccessKeyId></Credentials></AssumeRoleResult></"
		"AssumeRoleResponse>";
	static const char doctype[] = "<!DOCTYPE x [<!ENTITY a \"b\">]><AssumeRoleResponse/>";

	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, sts_ok, strlen(sts_ok), why, sizeof(why)), 0);
	ck_assert(!x.is_error);
	ck_assert_str_eq(x.key_id, "ASIAEXAMPLE");
	ck_assert_str_eq(x.secret, "wJalr/K7MDENG");
	ck_assert_str_eq(x.token, "AQoDYXdzEPT//////////wEXAMPLE");
	ck_assert_str_eq(x.expiration, "2026-11-27T13:05:02Z");
	ck_assert_str_eq(x.arn, "arn:aws:sts::123456789012:assumed-role/demo/s");
	bfs_s3xml_sts_destroy(&x);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, err, strlen(err), why, sizeof(why)), 0);
	ck_assert(x.is_error);
	ck_assert_str_eq(x.code, "AccessDenied");
	ck_assert_str_eq(x.message, "not allowed");
	ck_assert_ptr_null(x.key_id);
	bfs_s3xml_sts_destroy(&x);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, missing, strlen(missing), why, sizeof(why)),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(why, "SessionToken"));
	ck_assert_ptr_null(x.key_id);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, twice, strlen(twice), why, sizeof(why)), -EBADMSG);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, doctype, strlen(doctype), why, sizeof(why)),
			 -EBADMSG);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, "<Error/>", 8, why, sizeof(why)), -EBADMSG);
	ck_assert_int_eq(bfs_s3xml_parse_sts(&x, "{\"json\": 1}", 11, why, sizeof(why)), -EBADMSG);
}
END_TEST

/* ---- HTTP ---- */

START_TEST(an_http_request_to_nothing_says_so_quickly)
{
	struct bfs_http_req r = { .method = "GET",
				  .url = "http://127.0.0.1:9/latest/api/token?secret=x",
				  .tries = 2,
				  .connect_timeout_ms = 500 };
	struct bfs_http_resp resp;
	char why[256];
	int64_t t0 = bfs_cred_now_ms();

	ck_assert_int_eq(bfs_http_request(&r, &resp, why, sizeof(why)), -EHOSTUNREACH);
	ck_assert_ptr_nonnull(strstr(why, "http://127.0.0.1:9/latest/api/token"));
	ck_assert_ptr_null(strstr(why, "secret=x")); /* no query in the line */
	ck_assert_ptr_nonnull(strstr(why, "(2 tries)"));
	ck_assert_int_lt(bfs_cred_now_ms() - t0, 3000);
	r.url = "file:///etc/passwd";
	ck_assert_int_eq(bfs_http_request(&r, &resp, why, sizeof(why)), -EINVAL);
	bfs_http_resp_free(&resp);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cred");
	TCase *tc = tcase_create("cred");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, an_hour_long_credential_is_refreshed_minutes_ahead_a_short_one_halfway);
	tcase_add_test(tc, retries_back_off_with_jitter_up_to_half_a_minute);
	tcase_add_test(tc, a_credential_checks_its_fields_and_counts_references);
	tcase_add_test(tc, times_are_parsed_as_the_endpoints_write_them);
	tcase_add_test(tc, secrets_are_scrubbed_from_a_line);
	tcase_add_test(tc, a_credential_that_never_expires_is_fetched_once);
	tcase_add_test(
		tc,
		short_credentials_are_refreshed_before_they_expire_and_never_handed_out_expired);
	tcase_add_test(tc, the_stores_expired_signal_refreshes_once);
	tcase_add_test(tc, a_provider_down_past_expiry_fails_gets_with_why_then_recovers);
	tcase_add_test(tc, a_first_fetch_that_fails_fails_the_keeper_with_the_providers_line);
	tcase_add_test(tc, a_keeper_forked_while_its_thread_waits_works_and_goes_in_the_child);
	tcase_add_test(tc, a_keeper_freed_while_its_endpoint_hangs_goes_at_once);
	tcase_add_test(tc, a_fork_while_the_endpoint_hangs_does_not_wait_for_it);
	tcase_add_test(tc, sts_answers_are_parsed);
	tcase_add_test(tc, an_http_request_to_nothing_says_so_quickly);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
