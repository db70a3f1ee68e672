/* SPDX-License-Identifier: Apache-2.0 */
/* s3obj.c — the objects of a listing, freed. See s3obj.h. */
#include "s3obj.h"

#include <stdlib.h>
#include <string.h>

void bfs_s3_object_destroy(struct bfs_s3_object *o)
{
	if (!o)
		return;
	free(o->key);
	free(o->etag);
	memset(o, 0, sizeof(*o));
}

void bfs_s3_objects_free(struct bfs_s3_object *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		bfs_s3_object_destroy(&v[i]);
	free(v);
}
