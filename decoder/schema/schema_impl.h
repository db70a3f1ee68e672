/* SPDX-License-Identifier: Apache-2.0 */
/*
 * schema_impl.h — what the schema module's files share: schema.c (names,
 * specs and schemas, selection, image=), schema_json.c (JSON in and out,
 * TFDS features.json, and schema_json.h's mixture files and objects: the
 * only file that includes jansson), schema_infer.c
 * (inference) and schema_check.c (a record's ragged counts). Internal to
 * the module: users include schema.h.
 */
#ifndef BFS_SCHEMA_IMPL_H
#define BFS_SCHEMA_IMPL_H

#include "schema.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* "feature list" or "feature", for messages. */
const char *bfs_spec_what(const struct bfs_feature_spec *f);
/* Free f's class names (f->names), leaving none. */
void bfs_spec_names_free(struct bfs_feature_spec *f);
/* The index of the spec named item[0..len) among a[0..n) (sorted by
 * name), or -1. */
ssize_t bfs_spec_find_n(const struct bfs_feature_spec *a, size_t n, const char *item, size_t len);

#endif
