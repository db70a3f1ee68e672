/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_memfd.h — fuzz input as a file: the bytes written to a memfd,
 * reachable by path as /proc/self/fd/N. Shared by the targets that open
 * files (record, batch).
 */
#ifndef BFS_FUZZ_MEMFD_H
#define BFS_FUZZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Returns the fd (close it when done) with its path in path[cap], or -1. */
static inline int bfs_fuzz_memfd(const char *name, const uint8_t *data, size_t size, char *path,
				 size_t cap)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	for (size_t off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)n;
	}
	snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

#endif
