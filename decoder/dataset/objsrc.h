/* SPDX-License-Identifier: Apache-2.0 */
/*
 * objsrc.h — a dataset's shards in a bucket: the objects a source URL
 * names (s3://BUCKET/PREFIX/, s3://BUCKET/KEY, a glob on the last part,
 * gs://...), each a shard read through the object-store client (s3.h).
 *
 * A shard's name is its URL; its version (the mtime slot of the caches'
 * keys) is a hash of the ETag it was listed with, and every read of it
 * carries that ETag (If-Match): an object replaced since it was listed
 * fails its reads (-ESTALE, "the object changed ... re-mount") instead of
 * mixing two versions. The scan of a shard reads it as one stream (several
 * chunks in flight); other reads are ranged GETs; the I/O stage's reads go
 * to the client's queue (bfs_objsrc_submit), many in flight.
 *
 * Fork: the client runs a thread, which a fork does not carry. Before a
 * fork the client is stopped; it starts again, in the parent and in the
 * child, at its next use.
 *
 * Thread-safety: every function may be called from any thread once
 * bfs_objsrc_list has returned.
 */
#ifndef BFS_OBJSRC_H
#define BFS_OBJSRC_H

#include "fetch.h"
#include "record.h"
#include "s3.h"

struct bfs_objsrc;

/* A source over url with the mount's options (endpoint, region,
 * no_sign_request), its endpoint and credentials resolved as s3.h says;
 * max_conns: requests in flight at most. Nothing is read yet. -EINVAL (a
 * bad URL or option), -EACCES (no credentials), -ENOMEM; one line. */
int bfs_objsrc_new(struct bfs_objsrc **out, const char *url, const struct bfs_s3_options *opt,
		   unsigned max_conns);
void bfs_objsrc_free(struct bfs_objsrc *s); /* accepts NULL; after its shards are closed */

/* List the objects url names: *names (malloc'd URLs, sorted as S3 sorts
 * keys) of those that may be shards, *passed those passed over as a
 * directory's are (not_shard of the last part of the key, or a name
 * starting with '.'), and, for s3://B/PREFIX/, its folders (the keys past
 * a '/' under the prefix, "folder/" markers: a directory's folders are not
 * read), each named once as a URL ending in '/'; free both with
 * bfs_source_free. A listing that finds no object is
 * -ENOENT "no shard files found". Errors (one line naming the bucket and
 * the reason): -ENOENT, -EACCES, -EIO... */
int bfs_objsrc_list(struct bfs_objsrc *s, bool (*not_shard)(const char *name), char ***names,
		    size_t *n, char ***passed, size_t *npassed);
/* Open listed object i as a shard (compression detected later). */
int bfs_objsrc_open_shard(struct bfs_objsrc *s, size_t i, struct bfs_shard **out);

/* Read r, a read of the I/O stage (BFS_FETCH_CUSTOM) of shard, which was
 * opened here: a ranged GET with the shard's ETag, queued in the client;
 * bfs_fetch_read_done is called once, on the client's thread. */
void bfs_objsrc_submit(struct bfs_objsrc *s, struct bfs_fetch_read *r, struct bfs_shard *shard);

/* The stage ends (bfs_fetch_stop was called: no read starts any more):
 * every read of it still in the client is cancelled (s3.h), and waited for
 * up to wait_ms, so that none ends later, through a stage already freed.
 * true when none is left. */
bool bfs_objsrc_end_reads(struct bfs_objsrc *s, unsigned wait_ms);

/* One line for README.txt: the endpoint, region, where the credentials
 * came from (never a secret). */
void bfs_objsrc_describe(const struct bfs_objsrc *s, char *dst, size_t cap);
/* The keeper of the source's credentials (borrowed, for the source's life),
 * NULL for anonymous requests: for stats.json and errors.txt. */
struct bfs_cred_keeper *bfs_objsrc_keeper(const struct bfs_objsrc *s);

#endif
