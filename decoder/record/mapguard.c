/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mapguard.c — SIGBUS-guarded copies from file mappings (see mapguard.h).
 *
 * The handler runs with SA_NODEFER so that SIGBUS is not added to the
 * thread's mask while it runs: siglongjmp back into the guarded copy then
 * leaves the mask as it was, and sigsetjmp need not save it (saving it is
 * a sigprocmask system call per copy).
 */
#include "mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

static __thread sigjmp_buf *volatile guard_jb;
static struct sigaction previous;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_err;

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	sigjmp_buf *jb = guard_jb;

	(void)si;
	(void)uctx;
	if (jb) {
		guard_jb = NULL;
		siglongjmp(*jb, 1);
	}
	/* not a guarded copy: restore what was there and let the fault repeat */
	sigaction(sig, &previous, NULL);
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &previous) != 0)
		init_err = -errno;
}

int bfs_mapguard_init(void)
{
	pthread_once(&once, install);
	return init_err;
}

int bfs_mapguard_copy(void *dst, const void *src, size_t n)
{
	sigjmp_buf jb;

	if (n == 0) /* an empty record: dst may be NULL */
		return 0;
	if (sigsetjmp(jb, 0) != 0)
		return -EIO;
	guard_jb = &jb;
	__asm__ volatile("" ::: "memory"); /* the copy stays inside the guard */
	memcpy(dst, src, n);
	__asm__ volatile("" ::: "memory");
	guard_jb = NULL;
	return 0;
}

int bfs_mapguard_touch(const void *const *addrs, size_t n)
{
	sigjmp_buf jb;
	unsigned char acc = 0;

	if (sigsetjmp(jb, 0) != 0)
		return -EIO;
	guard_jb = &jb;
	__asm__ volatile("" ::: "memory");
	for (size_t i = 0; i < n; i++)
		acc ^= *(const volatile unsigned char *)addrs[i];
	__asm__ volatile("" ::: "memory");
	guard_jb = NULL;
	__asm__ volatile("" : : "r"(acc));
	return 0;
}
