/* SPDX-License-Identifier: MIT */
/* daemon/handles.h: a session's table of opaque 64-bit handles.
 *
 * A handle is  tag:24 | generation:16 | index+1:24  (bits 63..0). The tag is
 * random per session, the generation changes each time a slot is reused, so
 * a handle from another session, a freed handle and a forged one are each
 * told apart and rejected without ever being dereferenced. Lookups only ever
 * search the requesting session's own table, so no handle can reach another
 * session's objects whatever its bits are. Handle 0 is never valid.
 * Not thread-safe: used on the loop thread only.
 */
#ifndef HIPD_HANDLES_H
#define HIPD_HANDLES_H

#include <stdint.h>

typedef enum {
  HANDLE_ANY = 0,
  HANDLE_STREAM,
  HANDLE_EVENT,
  HANDLE_BUFFER,
  HANDLE_KERNEL,
  HANDLE_SHM,
  HANDLE_TYPE_COUNT
} handle_type_t;

typedef struct {
  void *obj;     /* the object, NULL when the slot is free */
  uint32_t next; /* next free slot index + 1, when free */
  uint16_t gen;  /* generation, never 0 */
  uint8_t type;  /* handle_type_t */
} handle_slot_t;

typedef struct {
  handle_slot_t *slots;
  uint32_t cap;       /* slots allocated */
  uint32_t used;      /* slots holding objects */
  uint32_t free_head; /* first free slot index + 1, 0 when none */
  uint32_t max;       /* most handles at once */
  uint32_t tag;       /* 24-bit per-session tag, never 0 */
  uint32_t count[HANDLE_TYPE_COUNT];
} handle_table_t;

#define HANDLES_MAX_DEFAULT (1u << 20)

/* Initialise an empty table with a fresh random tag. */
void handles_init(handle_table_t *t, uint32_t max);
/* Free the table's memory (not the objects: handles_foreach first). */
void handles_destroy(handle_table_t *t);
/* Store @p obj (non-NULL). @return 0 with *out, or HIPD_ETOOMANY/ENOMEM. */
int handles_add(handle_table_t *t, handle_type_t type, void *obj,
                uint64_t *out);
/* Find the object of handle @p h, which must be of @p type (or HANDLE_ANY).
 * @return 0 with *obj, HIPD_EHANDLE (not a handle of this table: forged,
 * null or out of range), HIPD_EFOREIGN (another session's), HIPD_ESTALE
 * (freed) or HIPD_EHANDLETYPE (another type; *obj untouched). */
int handles_get(const handle_table_t *t, uint64_t h, handle_type_t type,
                void **obj);
/* Like handles_get(), then free the slot; the handle becomes stale. */
int handles_remove(handle_table_t *t, uint64_t h, handle_type_t type,
                   void **obj);
/* Call @p fn for each live object of @p type (HANDLE_ANY: all); @p fn may
 * remove the handle it is given. */
void handles_foreach(handle_table_t *t, handle_type_t type,
                     void (*fn)(void *ctx, uint64_t h, void *obj), void *ctx);
/* Type of a handle's object, for error messages; "none" if not live. */
const char *handles_type_name(handle_type_t type);

#endif
