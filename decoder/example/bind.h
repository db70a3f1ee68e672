/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bind.h — bound decoding of (Sequence)Examples, for the batch builder:
 * the features a schema names are looked up by hash as the wire bytes are
 * walked (one O(1) lookup per key, duplicates replaced in place: the last
 * one wins), and only those are materialised, into scratch memory reused
 * from record to record; bytes values point into the record's own bytes.
 * Every other feature is still walked and checked, so a record is
 * accepted exactly when the fast decoder would accept it. No sorting, no
 * allocation per record. The values are example.h's.
 *
 * A bind is one thread's: it holds the last record's values until the next
 * bfs_example_bind. The keymaps (keymap.h) map context feature names to
 * 0..nctx-1 and feature list names to 0..nlists-1; both are borrowed.
 */
#ifndef BFS_BIND_H
#define BFS_BIND_H

#include "example.h"

struct bfs_bind;
struct bfs_keymap;
int bfs_bind_new(struct bfs_bind **out, const struct bfs_keymap *ctx, size_t nctx,
		 const struct bfs_keymap *lists, size_t nlists);
void bfs_bind_free(struct bfs_bind *b); /* accepts NULL */

/* Decode data[0..len) into b. data must stay alive while the values are
 * used. Returns 0; -EAGAIN for a shape left to the reference decoder (the
 * caller then uses bfs_example_decode, which also names what is wrong);
 * -ENOMEM. After a failure every slot reads as absent. */
int bfs_example_bind(struct bfs_bind *b, const uint8_t *data, size_t len);

/* Values of context name k: kind BFS_KIND_NONE when absent or `Feature {}`,
 * as bfs_example_find's would be. Borrowed until the next bind. */
const struct bfs_values *bfs_bind_values(struct bfs_bind *b, size_t k);
/* Feature list k, or NULL when absent (its name field is NULL). */
const struct bfs_feature_list *bfs_bind_list(const struct bfs_bind *b, size_t k);

/* Columns: while binding, context name k's values go straight to row r
 * (bfs_bind_row) of a column at base — base + r * n * 4 for n floats,
 * + r * 8 for one int64, + r * n for one bytes value of n bytes — when the
 * record holds exactly that shape (anything else is bound as usual, and
 * the caller fills the row). bfs_bind_values(b, k) then reads that row.
 * kind NONE, a NULL base or n 0 takes column k away. The batch builder
 * uses it so that a fixed-shape feature costs one copy in the walk. */
void bfs_bind_column(struct bfs_bind *b, size_t k, enum bfs_kind kind, uint32_t n, uint8_t *base);
void bfs_bind_row(struct bfs_bind *b, uint64_t row);
/* After a successful bind: how many names were written to their columns,
 * and whether name k was (a failed bind wrote none, as far as these say). */
size_t bfs_bind_nwritten(const struct bfs_bind *b);
bool bfs_bind_written(const struct bfs_bind *b, size_t k);

#endif
