/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3obj.h — an object as a listing names it (s3.h's bfs_s3_list, s3xml.h's
 * parse of a page), and how it is freed.
 */
#ifndef BFS_S3OBJ_H
#define BFS_S3OBJ_H

#include <stddef.h>
#include <stdint.h>

/* The longest ETag kept, its NUL included. */
#define BFS_S3_ETAG_MAX 256

struct bfs_s3_object {
	char *key;
	uint64_t size;
	char *etag; /* as the store sends it, quotes included: what If-Match wants */
};

/* An array of n objects from bfs_s3_list, freed. Accepts NULL. */
void bfs_s3_objects_free(struct bfs_s3_object *v, size_t n);
void bfs_s3_object_destroy(struct bfs_s3_object *o); /* its strings; accepts zeroed */

#endif
