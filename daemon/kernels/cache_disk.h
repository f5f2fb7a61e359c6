/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache_disk.h: the kernel cache's disk tier, private to
 * daemon/kernels/ (cache.c is its only user; the contract of the cache as
 * a whole is in cache.h).
 *
 * It holds the directory (opened and checked once), the authentication
 * key, the index of the entries on disk with their sizes, last uses and
 * owners (the uid whose compile wrote each, recorded in its header), and
 * the entry format (a header with an HMAC-SHA-256, then the payload).
 * cache_disk_store() and cache_disk_load() run on pool threads; everything
 * else runs on the loop thread. Without cache_disk_open() (a memory-only
 * cache) the index is empty and nothing touches a disk.
 */
#ifndef HIPD_KERNELS_CACHE_DISK_H
#define HIPD_KERNELS_CACHE_DISK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "cache_key.h"
#include "util/err.h"

/* Buckets of the tiers' hash tables. */
/* Why a disk entry was discarded (cache_disk_load's *why). */
enum { CACHE_DISK_OK = 0, CACHE_DISK_CORRUPT, CACHE_DISK_UNAUTHENTICATED };

/* Create @p dir if need be (0700), open and check it, load or make its
 * key, index its entries (reading each one's owner from its header) and
 * evict down to @p max_bytes (cache_disk_evict()); removals run on
 * @p loop's pool. @return 0, or HIPD_EPERM / HIPD_EIO / HIPD_ENOMEM /
 * HIPD_EINTERNAL with @p err (see cache_init); cache_disk_close() then
 * releases what was opened. */
int cache_disk_open(uv_loop_t *loop, const char *dir, uint64_t max_bytes,
                    hipd_err_t *err);
/* Forget the index, close the directory, wipe the key. */
void cache_disk_close(void);
/* The directory, NULL when memory-only. */
const char *cache_disk_dir(void);
/* Entries and bytes on disk, entries evicted from it. */
void cache_disk_stats(uint64_t *entries, uint64_t *bytes, uint64_t *evictions);

/* Whether the index knows @p key (only those are read from disk). */
bool cache_disk_known(const cache_key_t *key);
/* Mark @p key used now (a memory hit), for the LRU order. */
void cache_disk_touch(const cache_key_t *key);
/* Index @p key as on disk with its payload of @p len bytes, used now,
 * written by @p owner's compile (a uid: its bytes count against it). */
void cache_disk_add(const cache_key_t *key, size_t len, uint32_t owner);
/* Drop @p key from the index (its file was removed already). */
void cache_disk_forget(const cache_key_t *key);
/* Remove entries until under the cap: each time the least recently used
 * of the owner that holds the most bytes on disk, so that one tenant's
 * kernels push out its own entries before the others'; never @p keep
 * (the entry just written; NULL for none), nor the last entry. */
void cache_disk_evict(const cache_key_t *keep);
/* Remove every entry (the files on the pool). */
void cache_disk_clear(void);
/* Call @p fn for each entry on disk, with its size and last use. */
void cache_disk_list(void (*fn)(void *ctx, const cache_key_t *key,
                                uint64_t bytes, uint64_t atime_s),
                     void *ctx);

/* Pool thread: write an authenticated entry atomically, recording
 * @p owner (the uid whose compile made it) in its header. @return 0 or
 * HIPD_EIO (nothing was stored). */
int cache_disk_store(const cache_key_t *key, const void *data, size_t len,
                     uint32_t owner);
/* Pool thread: load and verify an entry, marking it used (its mtime)
 * when @p mark_used. @return 0 with *data (malloc'd), *len and *owner (0
 * for entries that did not record one); HIPD_ENOENT when there is none;
 * HIPD_EIO when it was bad and is now removed, with *why
 * CACHE_DISK_CORRUPT or CACHE_DISK_UNAUTHENTICATED. */
int cache_disk_load(const cache_key_t *key, void **data, size_t *len,
                    uint32_t *owner, int mark_used, int *why);
/* Every entry, most recently used first (across restarts: the last use
 * is kept in the file's mtime, written at cache_disk_close() for entries
 * used since start), into *keys and their payload sizes into *lens (both
 * malloc'd, NULL when there is none), *n of them. @return 0 or
 * HIPD_ENOMEM. Loop thread. */
int cache_disk_recent(cache_key_t **keys, uint64_t **lens, size_t *n);

#endif
