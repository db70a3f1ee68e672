/* SPDX-License-Identifier: Apache-2.0 */
/* credprocess.c — the credential_process provider: a profile's command run,
 * its JSON output read as credentials. The chain (credaws.c) builds it. */
#include "credaws_impl.h"

#include "cjson.h"
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MAX_PROCESS_OUT (64u * 1024)
#define PROCESS_TIMEOUT_MS (60 * 1000)

/* ---- credential_process ---- */

void bfs_credaws_process_free(void *ctx)
{
	struct process *p = ctx;

	if (!p)
		return;
	free(p->command);
	free(p->desc);
	free(p);
}

/* Split a command line as a POSIX shell would its words (blanks, '...',
 * "...", backslash), with no expansion: what botocore does (shlex). */
static int split_words(const char *cmd, char ***argv_out, char **buf_out)
{
	size_t n = strlen(cmd), nw = 0;
	char *buf = malloc(n + 1), *w = buf;
	char **argv = calloc(n / 2 + 2, sizeof(char *));
	const char *p = cmd;

	if (!buf || !argv) {
		free(buf);
		free(argv);
		return -ENOMEM;
	}
	while (*p) {
		bool word = false;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		argv[nw++] = w;
		while (*p && *p != ' ' && *p != '\t') {
			word = true;
			if (*p == '\'') {
				const char *e = strchr(p + 1, '\'');

				if (!e)
					goto bad;
				memcpy(w, p + 1, (size_t)(e - p - 1));
				w += e - p - 1;
				p = e + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
						p++;
					*w++ = *p;
				}
				if (*p != '"')
					goto bad;
				p++;
			} else if (*p == '\\' && p[1]) {
				*w++ = p[1];
				p += 2;
			} else {
				*w++ = *p++;
			}
		}
		(void)word;
		*w++ = '\0';
	}
	if (nw == 0)
		goto bad;
	argv[nw] = NULL;
	*argv_out = argv;
	*buf_out = buf;
	return 0;
bad:
	free(buf);
	free(argv);
	return -EINVAL;
}

#define PROCESS_POLL_MS 20 /* how soon a fetch told to give up kills the process */

/* Read the process's output from fd into o until it ends or the deadline
 * passes, or the fetch is told to give up (the process then killed); wait
 * for it. False when it was killed so. */
static bool process_read(int fd, pid_t pid, int64_t deadline, struct bfs_s3_str *o, int *status)
{
	char buf[4096];
	bool timed_out = false;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - bfs_cred_now_ms();
		int rc;
		ssize_t n;

		if (left <= 0 || bfs_cred_fetch_cancelled()) {
			timed_out = true;
			kill(pid, SIGKILL);
			break;
		}
		rc = poll(&pf, 1, (int)(left < PROCESS_POLL_MS ? left : PROCESS_POLL_MS));
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		bfs_s3_str_add(o, buf, (size_t)n);
	}
	explicit_bzero(buf, sizeof(buf));
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return !timed_out;
}

/* The credentials in the output o of command argv0 (of provider p). */
static int process_creds(const struct process *p, const char *argv0, const struct bfs_s3_str *o,
			 struct bfs_cred **out, char *why, size_t cap)
{
	struct bfs_cjson *j = bfs_credaws_json_object(o->p, o->n);
	int64_t ver = 0;
	int rc;

	if (!j || bfs_cjson_int(j, "Version", &ver) || ver != 1) {
		snprintf(why, cap,
			 "credential_process %.200s: its output is not JSON with \"Version\": 1",
			 argv0);
		if (j) {
			bfs_cjson_wipe(j, "SecretAccessKey");
			bfs_cjson_wipe(j, "SessionToken");
		}
		bfs_cjson_free(j);
		return -EIO;
	}
	rc = bfs_credaws_json_creds(j, "SessionToken", true, p->desc, NULL, out, why, cap);
	if (rc) {
		char w[WHY];

		snprintf(w, sizeof(w), "credential_process %.200s: %s", argv0, why);
		snprintf(why, cap, "%s", w);
	}
	return rc;
}

int bfs_credaws_process_fetch(void *ctx, struct bfs_cred **out, char *why, size_t cap)
{
	struct process *p = ctx;
	posix_spawn_file_actions_t fa;
	struct bfs_s3_str o = { .max = MAX_PROCESS_OUT };
	char **argv = NULL, *words = NULL;
	int fds[2] = { -1, -1 }, status = 0, rc;
	pid_t pid;
	int64_t deadline = bfs_cred_now_ms() + PROCESS_TIMEOUT_MS;
	bool timed_out;

	if (split_words(p->command, &argv, &words)) {
		snprintf(why, cap, "credential_process: cannot split the command line");
		return -EINVAL;
	}
	if (pipe2(fds, O_CLOEXEC)) {
		snprintf(why, cap, "credential_process: pipe: %s", strerror(errno));
		rc = -EIO;
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	fds[1] = -1;
	if (rc) {
		snprintf(why, cap, "credential_process: cannot run %.200s: %s", argv[0],
			 strerror(rc));
		rc = -EIO;
		goto out;
	}
	timed_out = !process_read(fds[0], pid, deadline, &o, &status);
	if (timed_out && bfs_cred_fetch_cancelled()) {
		snprintf(why, cap, "credential_process %.200s: given up (the keeper stops)",
			 argv[0]);
		rc = -ECANCELED;
		goto out;
	}
	if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (timed_out)
			snprintf(why, cap, "credential_process %.200s ran over %d s", argv[0],
				 PROCESS_TIMEOUT_MS / 1000);
		else
			snprintf(why, cap, "credential_process %.200s failed (%s %d)", argv[0],
				 WIFEXITED(status) ? "exit status" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		rc = -EIO;
		goto out;
	}
	if (o.err) {
		snprintf(why, cap, "credential_process %.200s: %s", argv[0],
			 o.err == -EFBIG ? "its output is over 64 KiB" : "out of memory");
		rc = o.err == -ENOMEM ? -ENOMEM : -EIO;
		goto out;
	}
	rc = process_creds(p, argv[0], &o, out, why, cap);
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (o.p)
		explicit_bzero(o.p, o.cap);
	bfs_s3_str_free(&o);
	free(argv);
	free(words);
	return rc;
}
