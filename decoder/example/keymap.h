/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keymap.h — a fixed set of names (feature names of a schema) looked up by
 * byte string in O(1): an open-addressing hash table built once.
 *
 * The record decoder meets every feature key of every record; a lookup per
 * key against the schema keeps decoding linear in the features present,
 * however many the schema or the record has. The lookup is inline: it runs
 * once per key of every record.
 *
 * Does not: copy the names (they are borrowed and must outlive the map),
 * change after creation. Thread-safety: immutable after bfs_keymap_new;
 * lookups may run on any number of threads.
 */
#ifndef BFS_KEYMAP_H
#define BFS_KEYMAP_H

#include "common.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct bfs_keymap_slot {
	uint64_t hash;
	uint64_t word; /* bfs_keymap_word of a name of at most 8 bytes */
	const char *name; /* NULL: empty */
	size_t len;
	long idx;
};

struct bfs_keymap {
	size_t mask; /* table size - 1; the table is at most half full */
	struct bfs_keymap_slot *t;
	size_t n;
	size_t *slot_of; /* [n]: where in t name i is (its first copy's slot) */
};

/* Map names[i] (NUL-terminated, borrowed) to i. Equal names: the first wins.
 * Errors: -ENOMEM. n may be 0. */
int bfs_keymap_new(struct bfs_keymap **out, const char *const *names, size_t n);
void bfs_keymap_free(struct bfs_keymap *m); /* accepts NULL */

/* A key of at most 8 bytes as one word that determines its bytes (given
 * its length): two overlapping 4-byte loads, or the first, middle and last
 * bytes of a shorter key. */
static inline uint64_t bfs_keymap_word(const uint8_t *p, size_t len)
{
	uint32_t a, b;

	if (len >= 4) {
		memcpy(&a, p, 4);
		memcpy(&b, p + len - 4, 4);
		return (uint64_t)a | (uint64_t)b << 32;
	}
	if (len == 0)
		return 0;
	return (uint64_t)p[0] | (uint64_t)p[len / 2] << 8 | (uint64_t)p[len - 1] << 16;
}

static inline uint64_t bfs_keymap_mix(uint64_t h)
{
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 31;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 29);
}

/* 64-bit hash of a byte string, a word at a time. Names come from the
 * schema, not an adversary; a collision costs a probe, never a wrong answer. */
static inline uint64_t bfs_keymap_hash(const uint8_t *p, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull * (len + 1), w;

	if (len <= 8)
		return bfs_keymap_mix(h ^ bfs_keymap_word(p, len));
	for (size_t i = 0; i + 8 < len; i += 8) {
		memcpy(&w, p + i, 8);
		h = bfs_keymap_mix(h ^ w);
	}
	memcpy(&w, p + len - 8, 8); /* the last 8 bytes, overlapping */
	return bfs_keymap_mix(h ^ w);
}

/* The index of the name equal to key[0..len), or -1. */
static inline long bfs_keymap_find(const struct bfs_keymap *m, const uint8_t *key, size_t len)
{
	uint64_t h = bfs_keymap_hash(key, len);
	uint64_t w = len <= 8 ? bfs_keymap_word(key, len) : 0;

	for (size_t k = (size_t)h & m->mask; m->t[k].name; k = (k + 1) & m->mask) {
		const struct bfs_keymap_slot *s = &m->t[k];
		if (s->hash != h || s->len != len)
			continue;
		if (len <= 8 ? s->word == w : memcmp(s->name, key, len) == 0)
			return s->idx;
	}
	return -1;
}

/* Whether key[0..len) is name k (k < n): one comparison, no hashing. The
 * decoder uses it to confirm a guess (the key at the same position in the
 * previous record) before falling back to bfs_keymap_find. */
static inline bool bfs_keymap_is(const struct bfs_keymap *m, size_t k, const uint8_t *key,
				 size_t len)
{
	const struct bfs_keymap_slot *s = &m->t[m->slot_of[k]];

	if (s->len != len)
		return false;
	return len <= 8 ? s->word == bfs_keymap_word(key, len) : memcmp(s->name, key, len) == 0;
}

#endif
