/* SPDX-License-Identifier: MIT */
/* daemon/resources.h: everything a session owns, in one place.
 *
 * What it owns: a session's handles to its objects (adding and removing
 * them, with the reference each handle holds), its memory quota (the
 * bytes counted against --mem-quota: one check, one counter, for
 * mem.alloc*, shm.create and zero-copy buffers), its default streams (one
 * per device, made on first use, not counted under --max-streams, never
 * destroyed by the client), the counts session.info reports, and the
 * release of all of it when the session closes, in dependency order.
 *
 * Who calls it: methods/ (the handlers create and free through it) and
 * session.c (res_release_all() at the teardown's safe point). It calls
 * the object layer (objects/) and the handle table; it never answers a
 * call: failures come back as a code and a bounded message. Loop thread.
 */
#ifndef HIPD_RESOURCES_H
#define HIPD_RESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "handles.h"
#include "util/err.h"

struct session;
struct device;
struct stream;
struct buffer;
struct event;
struct shm;
struct kernel;

/* A session's resource state (in session_t; only resources.c uses it). */
typedef struct res {
  uint64_t mem_used; /* bytes counted against the quota */
  struct res_default {
    struct stream *st; /* NULL until first used */
    uint64_t handle;   /* its handle (the client cannot destroy it) */
  } * defaults;        /* per device, indexed by global id */
  uint32_t ndefaults;  /* default streams made (not under max_streams) */
} res_t;

/* ---- the memory quota ---- */
/* Count @p bytes against the session's quota and its tenant's
 * (--tenant-mem-quota), or refuse with HIPD_EQUOTA and the message naming
 * the quota ("N bytes would exceed this session's quota ...", "... would
 * exceed tenant uid 1001's quota of Q bytes (M in use by its 3
 * sessions)").
 * Every reservation is released once: by res_mem_release() when what it
 * was for is not made, else with the buffer or shared buffer it became. */
int res_mem_reserve(struct session *s, const struct device *dev, uint64_t bytes,
                    hipd_err_t *err);
void res_mem_release(struct session *s, int dev, uint64_t bytes);

/* ---- objects under handles ---- */
/* Keep new buffer @p b (its reference passes to the handle) with the
 * quota bytes @p reserved for it. @return 0 and the handle, or a code
 * (HIPD_ECANCELED for a closing session): then the reservation is
 * released and @p b dropped. */
int res_buffer_add(struct session *s, struct buffer *b, uint64_t reserved,
                   uint64_t *h);
/* mem.free: the handle goes now, the memory after the work queued on it. */
void res_buffer_free(struct session *s, uint64_t h, struct buffer *b);
/* Keep shared buffer @p m, whose size was reserved (as res_buffer_add). */
int res_shm_add(struct session *s, struct shm *m, uint64_t *h);
void res_shm_free(struct session *s, uint64_t h, struct shm *m);
/* Keep kernel @p k (HIPD_ECANCELED when closing; on failure @p k's
 * reference is dropped). */
int res_kernel_add(struct session *s, struct kernel *k, uint64_t *h);
void res_kernel_free(struct session *s, uint64_t h, struct kernel *k);

/* A stream or event under a handle before its driver object exists: on
 * failure the caller drops it. */
int res_stream_add(struct session *s, struct stream *st, uint64_t *h);
int res_event_add(struct session *s, struct event *ev, uint64_t *h);
void res_stream_free(struct session *s, uint64_t h, struct stream *st);
void res_event_free(struct session *s, uint64_t h, struct event *ev);
/* Its creation failed: drop the handle @p h and its reference, unless the
 * client or the session's close released it already. */
void res_stream_forget(struct session *s, uint64_t h);
void res_event_forget(struct session *s, uint64_t h);

/* ---- streams ---- */
/* The streams the session made with stream.create and holds. */
uint32_t res_streams_created(const struct session *s);
/* May the session make one more stream? 0, or HIPD_ETOOMANY with the
 * message naming the limit: --max-streams (this session's) or
 * --tenant-max-streams (all its uid's sessions). */
int res_stream_admit(const struct session *s, hipd_err_t *err);
/* The session's default stream on @p dev, made on first use (and again
 * after the device's context was reset). @return 0, or HIPD_EDEVLOST
 * with an empty message when @p dev is lost (the caller says why), or a
 * code with the message. */
int res_default_stream(struct session *s, struct device *dev,
                       struct stream **st, uint64_t *h, hipd_err_t *err);
/* Is @p st one of the session's default streams? */
int res_stream_is_default(const struct session *s, const struct stream *st);

/* ---- counts ---- */
/* The session's handles in all (HANDLE_ANY) or of @p type. */
uint32_t res_count(const struct session *s, handle_type_t type);

/* Release everything the session owns, in dependency order (kernels,
 * events, buffers, shared buffers, then streams; the queued work holds
 * its own references, so each driver object goes after the work that
 * uses it), and its profiling records. Once, at the session's teardown. */
void res_release_all(struct session *s);

#endif
