/* SPDX-License-Identifier: MIT */
/* daemon/kernels/cache.h: the compiled-kernel cache, shared by all
 * sessions, in memory and on disk, persistent across restarts.
 *
 * An entry is keyed by a SHA-256 of everything that changes the binary
 * (source, options, target architecture, driver and compiler versions, our
 * prelude version): the caller feeds those parts to a cache_keyer_t. Disk
 * entries are written atomically (temporary file, fsync, rename) and carry
 * an HMAC-SHA-256 under a key only hipd holds (.hmac-key in the directory,
 * made at first start); an entry that is truncated or does not
 * authenticate (planted, changed, another key, an older format) is deleted
 * and compiled again, never loaded. cache_init() refuses a directory, key
 * or entry that is a symbolic link, not hipd's euid's, or writable by
 * group or others. A size cap evicts entries, in memory and on disk
 * alike, from the uid whose compiles hold the most bytes there (the
 * tenant of the request that compiled an entry; on disk recorded in its
 * header), least recently used first. Concurrent requests for one key cause one
 * compilation: the others wait for it. Disk loads run on libuv's thread pool,
 * compiles (and the disk writes of their results) on the compile pool's threads
 * (compile/compile_pool.h), never on the loop thread nor in libuv's pool;
 * everything else here is loop-thread only.
 */
#ifndef HIPD_CACHE_H
#define HIPD_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cache_key.h"
#include "util/err.h"

/* Incremental key derivation. Each part is length-prefixed, so ("ab","c")
 * and ("a","bc") differ. */
typedef struct cache_keyer cache_keyer_t;
/* Start a key in *@p out. @return 0, HIPD_ENOMEM, or HIPD_EINTERNAL when
 * libcrypto cannot start a SHA-256 digest (*@p out is then NULL). */
int cache_keyer_create(cache_keyer_t **out);
/* cache_keyer_create() for callers that cannot fail (tests): NULL on
 * failure. */
cache_keyer_t *cache_keyer_new(void);
void cache_keyer_add(cache_keyer_t *k, const char *label, const void *data,
                     size_t len);
void cache_keyer_add_str(cache_keyer_t *k, const char *label, const char *s);
/* Finish into @p out and free the keyer. */
void cache_keyer_finish(cache_keyer_t *k, cache_key_t *out);

/* A compiled binary, reference-counted on the loop thread so that an
 * eviction never frees bytes a kernel still uses. */
typedef struct cache_blob {
  int refs;
  size_t len;
  unsigned char data[];
} cache_blob_t;
/* A blob of a copy of @p len bytes at @p data, with one reference; NULL
 * when out of memory. */
cache_blob_t *cache_blob_new(const void *data, size_t len);
void cache_blob_ref(cache_blob_t *b);
void cache_blob_unref(cache_blob_t *b);

typedef enum {
  CACHE_MISS = 0,   /* compiled now */
  CACHE_HIT_MEMORY, /* found in memory */
  CACHE_HIT_DISK,   /* loaded from disk (e.g. after a restart) */
  CACHE_WAITED,     /* another request compiled or loaded it meanwhile */
} cache_source_t;

/* Compile on a compile pool thread (it may call compile_run()): on success set
 * *out (malloc'd bytes, passed to the cache) and *len and return 0; on failure
 * return a negative code and write the compiler's log into @p log. Either
 * way it may set @p timing's helper_ns and helper_cpu_ns (zeros given). */
typedef struct cache_timing cache_timing_t;
typedef int (*cache_compile_fn)(void *arg, void **out, size_t *len, char *log,
                                size_t logsz, cache_timing_t *timing);
/* Where a request's time went before its answer (nanoseconds; 0 for what
 * did not happen): waiting for a compile pool thread, the compile (the
 * compile function: a helper's round trip and its compiler), of that the
 * compiler's call as its helper measured it (wall-clock and the helper's
 * CPU time: the compile function sets these two), reading the disk. */
struct cache_timing {
  uint64_t wait_ns, compile_ns, helper_ns, helper_cpu_ns, disk_ns;
};
/* During a cache_done_fn: the timing of the answer it is given (one a
 * waiter shares with the request it waited for); zeros at any other time,
 * so that an answer that did not come from the cache (a refusal before
 * it) reads nothing. Loop thread. */
const cache_timing_t *cache_done_timing(void);
/* Set what cache_done_timing() says during the callbacks that follow
 * (NULL: zeros again, once they ran): a process whose cache is elsewhere
 * (a worker) hands on its listener's. Loop thread. */
void cache_set_done_timing(const cache_timing_t *t);

/* The answer, on the loop thread. @p blob is borrowed: take a reference to
 * keep it. @p log is the compiler's log on failure ("" otherwise). */
typedef void (*cache_done_fn)(void *ctx, int status, cache_blob_t *blob,
                              cache_source_t source, const char *log);

typedef struct {
  uint64_t hits_memory, hits_disk, misses, waits;
  uint64_t warmed; /* entries loaded from disk at start (cache_warm) */
  uint64_t compile_failures, evictions;
  uint64_t corrupt;        /* disk entries discarded, for any reason */
  uint64_t auth_failures;  /* of those, entries that failed authentication */
  uint64_t entries, bytes; /* in memory */
  uint64_t disk_entries, disk_bytes; /* on disk */
  uint64_t max_bytes;
  const char *dir; /* NULL when memory-only */
} cache_stats_t;

/* Start the cache in @p dir (created 0700 if missing; NULL or "" for
 * memory only) with a cap of @p max_bytes on disk and in memory. Checks
 * the directory, reads or creates its key, scans the entries (at start-up,
 * before the loop runs). @return 0; HIPD_EPERM when the directory, the key
 * or an entry may have been touched by someone else (@p err names the
 * path and the problem); HIPD_EIO when it cannot be created or read. The
 * code returned is also @p err's. */
int cache_init(uv_loop_t *loop, const char *dir, uint64_t max_bytes,
               hipd_err_t *err);
/* Forget everything, in memory; close the disk. A compile's disk write
 * still running is waited for first (the loop runs meanwhile). Loop
 * thread. */
void cache_shutdown(void);
/* A warm start: load the disk's entries into memory in the background,
 * most recently used first (the order of use before the restart), until
 * @p budget bytes (at most the cap; 0: none), one at a time on libuv's
 * pool, so that the first request for a kernel that was hot before the
 * restart is a memory hit. A request for an entry being loaded waits for
 * it. Loop thread, after cache_init(). */
void cache_warm(uint64_t budget);
/* Called for each entry a warm start loaded (@p tenant: whose compile
 * made it), once in memory; NULL: none. Loop thread. */
typedef void (*cache_warmed_fn)(const cache_key_t *key,
                                const cache_blob_t *blob, uint32_t tenant);
void cache_set_warmed_hook(cache_warmed_fn fn);
/* The default directory: /var/cache/hipd for root, else
 * $XDG_CACHE_HOME/hipd or ~/.cache/hipd. malloc'd. */
char *cache_default_dir(void);

/* Find @p key, or compile it with fn(arg) once. @p done runs on the loop
 * thread: at once on a memory hit, later otherwise. @p arg must live until
 * @p done runs (compile_arg is used only by the request that compiles). */
void cache_get(const cache_key_t *key, cache_compile_fn fn, void *arg,
               cache_done_fn done, void *ctx);
/* The same, with CACHE_REFRESH: compile even if the key is cached, and
 * replace the entry (a compile already running for the key is waited for
 * instead: its result is fresh). */
enum { CACHE_REFRESH = 1 };
/* @p tenant (a uid) is whose compile it is, should it need one: tenants
 * take turns on the compile pool (compile_pool_submit). */
void cache_get_flags(const cache_key_t *key, int flags, uint32_t tenant,
                     cache_compile_fn fn, void *arg, cache_done_fn done,
                     void *ctx);
/* A request for @p key was answered from a module loaded already (in
 * this process or a worker: kernels.h's kernels_set_touch): a memory hit
 * and the entry's use (its place in the LRU order, in memory and on
 * disk), where the cache still holds it. Loop thread. */
void cache_touch(const cache_key_t *key);
/* Call @p fn for the entries in memory that @p tenant's compiles made,
 * most recently used first, at most @p max_entries of them and @p
 * max_bytes of binaries in all (an entry that does not fit is skipped).
 * @p fn must not change the cache. Loop thread. */
void cache_each_recent(uint32_t tenant, size_t max_entries, uint64_t max_bytes,
                       void (*fn)(void *ctx, const cache_key_t *key,
                                  const cache_blob_t *blob),
                       void *ctx);
/* Compiles, disk loads and the disk writes of compiles running on the
 * pools now (loop thread). */
unsigned cache_pending(void);
/* Whether the request for @p key would be a memory hit (no side effects). */
int cache_has(const cache_key_t *key);
/* Is a load or compile of @p key in flight (a cache_get_flags() without
 * CACHE_REFRESH then waits for it, compiling nothing of its own)? Loop
 * thread. */
int cache_inflight(const cache_key_t *key);
/* Would a request for @p key (with CACHE_REFRESH when @p refresh) compile
 * or load, and so hold a compile slot until answered? Not a memory hit,
 * nor one that waits for a load or compile of the same key in flight that
 * someone asked for; one that joins a warm start's load (cache_warm) does:
 * it takes that load over, and compiles its own source should the entry
 * not load. The compile admission rule (compile_pool_admit()) of the
 * worker's own fetch (kernels.c) and of the listener's
 * (privsep/workers_compile.c), which keep the source of such a request.
 * Loop thread. */
int cache_would_compile(const cache_key_t *key, int refresh);
void cache_get_stats(cache_stats_t *st);
/* Forget every entry, in memory and on disk (files removed on a pool
 * thread). Kernels holding blobs keep them. */
void cache_clear(void);
/* Call @p fn for every entry: on disk (its size there and last use, unix
 * seconds), then those in memory only (atime 0). Loop thread. */
void cache_list(void (*fn)(void *ctx, const cache_key_t *key, uint64_t bytes,
                           uint64_t atime_s),
                void *ctx);

#endif
