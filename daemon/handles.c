/* SPDX-License-Identifier: MIT */
/* daemon/handles.c: generation-checked handle tables. */
#include "config.h"

#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "handles.h"
#include "hipd.h"
#include "util/clock.h"

#define INDEX_BITS 24
#define GEN_BITS 16
#define INDEX_MASK ((1u << INDEX_BITS) - 1)
#define GEN_MASK ((1u << GEN_BITS) - 1)

static uint32_t random_tag(void)
{
  uint32_t v = 0;

  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) {
    v = (uint32_t)(util_now_ns() % 1000000000u) ^
        (uint32_t)((uintptr_t)&v >> 4);
  }
  v &= 0xffffff;
  return v ? v : 1;
}

void handles_init(handle_table_t *t, uint32_t max)
{
  *t = (handle_table_t){0};
  t->max = max == 0 || max > INDEX_MASK ? INDEX_MASK : max;
  t->tag = random_tag();
}

void handles_destroy(handle_table_t *t)
{
  free(t->slots);
  t->slots = NULL;
  t->cap = t->used = t->free_head = 0;
}

static uint64_t make_handle(const handle_table_t *t, uint32_t index,
                            uint16_t gen)
{
  return ((uint64_t)t->tag << (INDEX_BITS + GEN_BITS)) |
         ((uint64_t)gen << INDEX_BITS) | (uint64_t)(index + 1);
}

int handles_add(handle_table_t *t, handle_type_t type, void *obj, uint64_t *out)
{
  uint32_t index;

  if (t->used >= t->max)
    return HIPD_ETOOMANY;
  if (t->free_head != 0) {
    index = t->free_head - 1;
    t->free_head = t->slots[index].next;
  } else {
    if (t->cap == t->max)
      return HIPD_ETOOMANY;
    uint32_t ncap = t->cap ? t->cap * 2 : 16;
    if (ncap > t->max)
      ncap = t->max;
    handle_slot_t *n = realloc(t->slots, ncap * sizeof(*n));
    if (n == NULL)
      return HIPD_ENOMEM;
    for (uint32_t i = t->cap; i < ncap; i++)
      n[i] = (handle_slot_t){.obj = NULL, .next = 0, .gen = 1, .type = 0};
    /* Thread the new slots onto the free list, lowest index first. */
    for (uint32_t i = ncap; i-- > t->cap + 1;)
      n[i - 1].next = i + 1;
    n[ncap - 1].next = 0;
    t->slots = n;
    index = t->cap;
    t->free_head = t->cap + 1 < ncap ? t->cap + 2 : 0;
    t->cap = ncap;
  }
  t->slots[index].obj = obj;
  t->slots[index].type = (uint8_t)type;
  t->slots[index].next = 0;
  t->used++;
  t->count[type]++;
  *out = make_handle(t, index, t->slots[index].gen);
  return 0;
}

static int lookup(const handle_table_t *t, uint64_t h, handle_type_t type,
                  uint32_t *index)
{
  uint32_t tag = (uint32_t)(h >> (INDEX_BITS + GEN_BITS));
  uint16_t gen = (uint16_t)((h >> INDEX_BITS) & GEN_MASK);
  uint32_t idx1 = (uint32_t)(h & INDEX_MASK);

  if (h == 0 || idx1 == 0 || gen == 0)
    return HIPD_EHANDLE;
  if (tag != t->tag)
    return HIPD_EFOREIGN;
  if (idx1 > t->cap)
    return HIPD_EHANDLE;
  const handle_slot_t *s = &t->slots[idx1 - 1];
  if (s->obj == NULL || s->gen != gen) {
    /* An older generation of this slot was issued and freed: stale. The
     * current generation of a free slot, or a generation ahead of the
     * slot, was never issued: forged. */
    uint16_t behind = (uint16_t)(s->gen - gen);
    return behind != 0 && behind < 0x8000 ? HIPD_ESTALE : HIPD_EHANDLE;
  }
  if (type != HANDLE_ANY && s->type != type)
    return HIPD_EHANDLETYPE;
  *index = idx1 - 1;
  return 0;
}

int handles_get(const handle_table_t *t, uint64_t h, handle_type_t type,
                void **obj)
{
  uint32_t index;
  int rc = lookup(t, h, type, &index);

  if (rc == 0)
    *obj = t->slots[index].obj;
  return rc;
}

int handles_remove(handle_table_t *t, uint64_t h, handle_type_t type,
                   void **obj)
{
  uint32_t index;
  int rc = lookup(t, h, type, &index);

  if (rc != 0)
    return rc;
  handle_slot_t *s = &t->slots[index];
  if (obj)
    *obj = s->obj;
  t->count[s->type]--;
  s->obj = NULL;
  s->gen = (uint16_t)(s->gen + 1) ? (uint16_t)(s->gen + 1) : 1;
  s->next = t->free_head;
  t->free_head = index + 1;
  t->used--;
  return 0;
}

void handles_foreach(handle_table_t *t, handle_type_t type,
                     void (*fn)(void *ctx, uint64_t h, void *obj), void *ctx)
{
  for (uint32_t i = 0; i < t->cap; i++) {
    handle_slot_t *s = &t->slots[i];
    if (s->obj != NULL && (type == HANDLE_ANY || s->type == type))
      fn(ctx, make_handle(t, i, s->gen), s->obj);
  }
}

const char *handles_type_name(handle_type_t type)
{
  static const char *const names[] = {"handle", "stream", "event",
                                      "buffer", "kernel", "shared buffer"};
  return type < HANDLE_TYPE_COUNT ? names[type] : "none";
}
