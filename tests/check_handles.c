/* SPDX-License-Identifier: MIT */
/* tests/check_handles.c: the per-session handle tables of daemon/handles.c.
 *
 * The handle layout is part of the contract (handles.h): tag:24 |
 * generation:16 | index+1:24, so the tests build forged handles from it. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"
#include "hipd.h"
#include "run.h"

#define TAG_SHIFT 40
#define GEN_SHIFT 24
#define INDEX_MASK 0xffffffu

static uint64_t make(uint32_t tag, uint16_t gen, uint32_t idx1)
{
  return ((uint64_t)tag << TAG_SHIFT) | ((uint64_t)gen << GEN_SHIFT) |
         (uint64_t)(idx1 & INDEX_MASK);
}

static uint32_t tag_of(uint64_t h)
{
  return (uint32_t)(h >> TAG_SHIFT);
}

static uint16_t gen_of(uint64_t h)
{
  return (uint16_t)(h >> GEN_SHIFT);
}

static uint32_t idx1_of(uint64_t h)
{
  return (uint32_t)(h & INDEX_MASK);
}

/* check records the place of every ck_assert that passes (one write
 * each), which makes loops of a million assertions slow; CHECK reports
 * only failures, at the line that uses it. */
#define CHECK(expr, ...)                                                       \
  do {                                                                         \
    if (!(expr))                                                               \
      ck_abort_msg(__VA_ARGS__);                                               \
  } while (0)

/* Objects are addresses in this array: distinct and easy to check. */
static int objs[8192];

static void *get_ok(handle_table_t *t, uint64_t h, handle_type_t type)
{
  void *o = NULL;
  int rc = handles_get(t, h, type, &o);

  CHECK(rc == 0 && o != NULL, "handle 0x%llx (type %d): %s",
        (unsigned long long)h, (int)type, hipd_err_name(rc));
  return o;
}

static int get_rc(handle_table_t *t, uint64_t h, handle_type_t type)
{
  static int sentinel;
  void *o = &sentinel;
  int rc = handles_get(t, h, type, &o);

  CHECK(rc == 0 || o == &sentinel, "handle 0x%llx: *obj changed on failure",
        (unsigned long long)h);
  return rc;
}

/* ----------------------------------------------------------- basics */

START_TEST(test_init_tag)
{
  handle_table_t t;
  uint32_t first = 0;
  int differ = 0;

  for (int i = 0; i < 64; i++) {
    handles_init(&t, 0);
    ck_assert_uint_ne(t.tag, 0);
    ck_assert_uint_le(t.tag, 0xffffff);
    ck_assert_uint_eq(t.used, 0);
    ck_assert_uint_eq(t.cap, 0);
    ck_assert_uint_eq(t.max, INDEX_MASK);
    if (i == 0)
      first = t.tag;
    else if (t.tag != first)
      differ = 1;
    handles_destroy(&t);
  }
  ck_assert_msg(differ, "64 tables all got tag %u", first);
}
END_TEST

START_TEST(test_add_get_remove)
{
  handle_table_t t;
  uint64_t h1 = 0, h2 = 0, h3 = 0;
  void *o;

  handles_init(&t, 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[1], &h1), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[2], &h2), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_EVENT, &objs[3], &h3), 0);
  ck_assert_uint_eq(t.used, 3);

  /* The documented layout: the first handle is slot 0, generation 1. */
  ck_assert_uint_eq(h1, make(t.tag, 1, 1));
  ck_assert_uint_eq(h2, make(t.tag, 1, 2));
  ck_assert_uint_eq(h3, make(t.tag, 1, 3));

  ck_assert_ptr_eq(get_ok(&t, h1, HANDLE_STREAM), &objs[1]);
  ck_assert_ptr_eq(get_ok(&t, h2, HANDLE_BUFFER), &objs[2]);
  ck_assert_ptr_eq(get_ok(&t, h3, HANDLE_EVENT), &objs[3]);
  ck_assert_ptr_eq(get_ok(&t, h1, HANDLE_ANY), &objs[1]);
  ck_assert_ptr_eq(get_ok(&t, h2, HANDLE_ANY), &objs[2]);

  o = NULL;
  ck_assert_int_eq(handles_remove(&t, h2, HANDLE_BUFFER, &o), 0);
  ck_assert_ptr_eq(o, &objs[2]);
  ck_assert_uint_eq(t.used, 2);
  ck_assert_int_eq(get_rc(&t, h2, HANDLE_BUFFER), HIPD_ESTALE);
  ck_assert_int_eq(get_rc(&t, h2, HANDLE_ANY), HIPD_ESTALE);
  o = &objs[0];
  ck_assert_int_eq(handles_remove(&t, h2, HANDLE_BUFFER, &o), HIPD_ESTALE);
  ck_assert_ptr_eq(o, &objs[0]);
  ck_assert_uint_eq(t.used, 2);

  /* The others are unaffected; remove may be told to drop the object. */
  ck_assert_ptr_eq(get_ok(&t, h1, HANDLE_STREAM), &objs[1]);
  ck_assert_ptr_eq(get_ok(&t, h3, HANDLE_EVENT), &objs[3]);
  ck_assert_int_eq(handles_remove(&t, h1, HANDLE_ANY, NULL), 0);
  ck_assert_int_eq(handles_remove(&t, h3, HANDLE_EVENT, NULL), 0);
  ck_assert_uint_eq(t.used, 0);
  ck_assert_int_eq(get_rc(&t, h1, HANDLE_ANY), HIPD_ESTALE);
  ck_assert_int_eq(get_rc(&t, h3, HANDLE_ANY), HIPD_ESTALE);
  handles_destroy(&t);
}
END_TEST

/* A freed slot is reused; its old handles stay stale. */
START_TEST(test_stale_after_reuse)
{
  handle_table_t t;
  uint64_t keep, old[6], now;

  handles_init(&t, 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[0], &keep), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[1], &old[0]), 0);
  for (int i = 1; i < 6; i++) {
    ck_assert_int_eq(handles_remove(&t, old[i - 1], HANDLE_BUFFER, NULL), 0);
    ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[1 + i], &old[i]), 0);
    /* The same slot, a new generation, so a different handle. */
    ck_assert_uint_eq(idx1_of(old[i]), idx1_of(old[0]));
    ck_assert_uint_ne(gen_of(old[i]), gen_of(old[i - 1]));
    ck_assert_uint_ne(old[i], old[i - 1]);
    ck_assert_ptr_eq(get_ok(&t, old[i], HANDLE_BUFFER), &objs[1 + i]);
    for (int j = 0; j < i; j++) {
      ck_assert_int_eq(get_rc(&t, old[j], HANDLE_BUFFER), HIPD_ESTALE);
      ck_assert_int_eq(get_rc(&t, old[j], HANDLE_ANY), HIPD_ESTALE);
      /* Removing through an old handle does not free the new object. */
      ck_assert_int_eq(handles_remove(&t, old[j], HANDLE_ANY, NULL),
                       HIPD_ESTALE);
    }
    ck_assert_ptr_eq(get_ok(&t, old[i], HANDLE_BUFFER), &objs[1 + i]);
  }
  now = old[5];
  ck_assert_ptr_eq(get_ok(&t, keep, HANDLE_STREAM), &objs[0]);
  ck_assert_uint_eq(t.used, 2);
  ck_assert_uint_eq(t.count[HANDLE_BUFFER], 1);
  ck_assert_int_eq(handles_remove(&t, now, HANDLE_BUFFER, NULL), 0);
  handles_destroy(&t);
}
END_TEST

/* A handle of one session's table used on another's. */
START_TEST(test_foreign)
{
  handle_table_t a, b;
  uint64_t ha, hb, hb2;
  void *o;

  handles_init(&a, 0);
  handles_init(&b, 0);
  while (b.tag == a.tag) {
    handles_destroy(&b);
    handles_init(&b, 0);
  }
  ck_assert_int_eq(handles_add(&a, HANDLE_STREAM, &objs[1], &ha), 0);
  ck_assert_int_eq(handles_add(&b, HANDLE_STREAM, &objs[2], &hb), 0);
  /* Same slot, same generation: only the tag tells them apart. */
  ck_assert_uint_eq(ha & 0xffffffffffULL, hb & 0xffffffffffULL);
  ck_assert_uint_ne(ha, hb);

  ck_assert_int_eq(get_rc(&b, ha, HANDLE_STREAM), HIPD_EFOREIGN);
  ck_assert_int_eq(get_rc(&b, ha, HANDLE_ANY), HIPD_EFOREIGN);
  ck_assert_int_eq(get_rc(&a, hb, HANDLE_ANY), HIPD_EFOREIGN);
  o = NULL;
  ck_assert_int_eq(handles_remove(&b, ha, HANDLE_ANY, &o), HIPD_EFOREIGN);
  ck_assert_ptr_null(o);
  ck_assert_uint_eq(b.used, 1);
  ck_assert_ptr_eq(get_ok(&b, hb, HANDLE_STREAM), &objs[2]);
  ck_assert_ptr_eq(get_ok(&a, ha, HANDLE_STREAM), &objs[1]);

  /* Foreign whatever the rest of the bits: beyond B's capacity, freed in
   * A, or of another type. */
  ck_assert_int_eq(get_rc(&b, make(a.tag, 1, 1000), HANDLE_ANY), HIPD_EFOREIGN);
  ck_assert_int_eq(handles_remove(&a, ha, HANDLE_STREAM, NULL), 0);
  ck_assert_int_eq(get_rc(&b, ha, HANDLE_ANY), HIPD_EFOREIGN);
  ck_assert_int_eq(get_rc(&b, ha, HANDLE_EVENT), HIPD_EFOREIGN);
  ck_assert_int_eq(handles_add(&b, HANDLE_EVENT, &objs[3], &hb2), 0);
  ck_assert_int_eq(get_rc(&a, hb2, HANDLE_EVENT), HIPD_EFOREIGN);
  handles_destroy(&a);
  handles_destroy(&b);
}
END_TEST

/* Handles this table never issued, with its own tag. */
START_TEST(test_forged)
{
  handle_table_t t;
  uint64_t h[3], freed;

  handles_init(&t, 0);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[i], &h[i]), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[3], &freed), 0);
  ck_assert_int_eq(handles_remove(&t, freed, HANDLE_BUFFER, NULL), 0);
  ck_assert_uint_eq(t.cap, 16);

  ck_assert_int_eq(get_rc(&t, 0, HANDLE_ANY), HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, 0, HANDLE_BUFFER), HIPD_EHANDLE);
  ck_assert_int_eq(handles_remove(&t, 0, HANDLE_ANY, NULL), HIPD_EHANDLE);
  /* Index 0 (index+1 field zero) and generation 0 are never issued. */
  ck_assert_int_eq(get_rc(&t, make(t.tag, 1, 0), HANDLE_ANY), HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, make(t.tag, 0, 1), HANDLE_ANY), HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, make(t.tag, 0, 0), HANDLE_ANY), HIPD_EHANDLE);
  /* Beyond the capacity. */
  ck_assert_int_eq(get_rc(&t, make(t.tag, 1, t.cap + 1), HANDLE_ANY),
                   HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, make(t.tag, 1, INDEX_MASK), HANDLE_ANY),
                   HIPD_EHANDLE);
  ck_assert_int_eq(
      handles_remove(&t, make(t.tag, 1, t.cap + 1), HANDLE_ANY, NULL),
      HIPD_EHANDLE);
  /* Within the capacity, a slot never used. */
  ck_assert_int_eq(get_rc(&t, make(t.tag, 1, 10), HANDLE_ANY), HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, make(t.tag, 1, t.cap), HANDLE_ANY), HIPD_EHANDLE);
  /* A freed slot's current generation was never handed out. */
  ck_assert_int_eq(
      get_rc(&t, make(t.tag, gen_of(freed) + 1, idx1_of(freed)), HANDLE_ANY),
      HIPD_EHANDLE);
  ck_assert_int_eq(get_rc(&t, freed, HANDLE_ANY), HIPD_ESTALE);
  /* Generations ahead of a live slot. */
  static const uint16_t ahead[] = {1, 2, 3, 100, 0x7fff};
  for (size_t i = 0; i < sizeof(ahead) / sizeof(ahead[0]); i++) {
    uint64_t f =
        make(t.tag, (uint16_t)(gen_of(h[1]) + ahead[i]), idx1_of(h[1]));
    ck_assert_int_eq(get_rc(&t, f, HANDLE_ANY), HIPD_EHANDLE);
    ck_assert_int_eq(handles_remove(&t, f, HANDLE_ANY, NULL), HIPD_EHANDLE);
  }
  ck_assert_uint_eq(t.used, 3);

  /* Random bits with this table's tag: a handle resolves only if it is
   * one of those issued, and out-of-range fields are never "stale". */
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  int ehandle = 0;
  for (int i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint64_t f = make(t.tag, gen_of(x), idx1_of(x));
    int rc = get_rc(&t, f, HANDLE_ANY);
    if (f == h[0] || f == h[1] || f == h[2]) {
      CHECK(rc == 0, "issued 0x%llx: %d", (unsigned long long)f, rc);
      continue;
    }
    if (idx1_of(f) == 0 || gen_of(f) == 0 || idx1_of(f) > t.cap)
      CHECK(rc == HIPD_EHANDLE, "forged 0x%llx: %d", (unsigned long long)f, rc);
    else
      CHECK(rc == HIPD_EHANDLE || rc == HIPD_ESTALE, "forged 0x%llx: %d",
            (unsigned long long)f, rc);
    ehandle += rc == HIPD_EHANDLE;
  }
  ck_assert_int_ge(ehandle, 99000);
  ck_assert_uint_eq(t.used, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_ptr_eq(get_ok(&t, h[i], HANDLE_BUFFER), &objs[i]);
  handles_destroy(&t);
}
END_TEST

START_TEST(test_wrong_type)
{
  handle_table_t t;
  uint64_t h;
  void *o;

  handles_init(&t, 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[5], &h), 0);
  for (int type = HANDLE_STREAM + 1; type < HANDLE_TYPE_COUNT; type++) {
    ck_assert_int_eq(get_rc(&t, h, (handle_type_t)type), HIPD_EHANDLETYPE);
    o = &objs[0];
    ck_assert_int_eq(handles_remove(&t, h, (handle_type_t)type, &o),
                     HIPD_EHANDLETYPE);
    ck_assert_ptr_eq(o, &objs[0]);
  }
  ck_assert_uint_eq(t.used, 1);
  ck_assert_uint_eq(t.count[HANDLE_STREAM], 1);
  ck_assert_ptr_eq(get_ok(&t, h, HANDLE_STREAM), &objs[5]);
  ck_assert_ptr_eq(get_ok(&t, h, HANDLE_ANY), &objs[5]);
  /* Staleness is reported before the type. */
  ck_assert_int_eq(handles_remove(&t, h, HANDLE_ANY, &o), 0);
  ck_assert_ptr_eq(o, &objs[5]);
  ck_assert_uint_eq(t.count[HANDLE_STREAM], 0);
  ck_assert_int_eq(get_rc(&t, h, HANDLE_EVENT), HIPD_ESTALE);
  handles_destroy(&t);
}
END_TEST

START_TEST(test_counts)
{
  handle_table_t t;
  uint64_t h[12];
  static const handle_type_t types[12] = {
      HANDLE_STREAM, HANDLE_STREAM, HANDLE_STREAM, HANDLE_EVENT,
      HANDLE_EVENT,  HANDLE_BUFFER, HANDLE_BUFFER, HANDLE_BUFFER,
      HANDLE_BUFFER, HANDLE_KERNEL, HANDLE_SHM,    HANDLE_SHM};
  uint32_t want[HANDLE_TYPE_COUNT] = {0};

  handles_init(&t, 0);
  for (int i = 0; i < 12; i++) {
    ck_assert_int_eq(handles_add(&t, types[i], &objs[i], &h[i]), 0);
    want[types[i]]++;
    for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
      ck_assert_uint_eq(t.count[k], want[k]);
  }
  ck_assert_uint_eq(t.count[HANDLE_STREAM], 3);
  ck_assert_uint_eq(t.count[HANDLE_EVENT], 2);
  ck_assert_uint_eq(t.count[HANDLE_BUFFER], 4);
  ck_assert_uint_eq(t.count[HANDLE_KERNEL], 1);
  ck_assert_uint_eq(t.count[HANDLE_SHM], 2);
  ck_assert_uint_eq(t.count[HANDLE_ANY], 0);
  ck_assert_uint_eq(t.used, 12);

  for (int i = 0; i < 12; i += 2) {
    ck_assert_int_eq(handles_remove(&t, h[i], HANDLE_ANY, NULL), 0);
    want[types[i]]--;
    /* A failed remove changes nothing. */
    ck_assert_int_eq(handles_remove(&t, h[i], HANDLE_ANY, NULL), HIPD_ESTALE);
    for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
      ck_assert_uint_eq(t.count[k], want[k]);
  }
  ck_assert_uint_eq(t.used, 6);
  ck_assert_uint_eq(t.count[HANDLE_STREAM], 1);
  ck_assert_uint_eq(t.count[HANDLE_BUFFER], 2);
  ck_assert_uint_eq(t.count[HANDLE_SHM], 1);
  handles_destroy(&t);
}
END_TEST

/* ------------------------------------------------------------- limits */

static void fill_to_max(uint32_t max)
{
  handle_table_t t;
  uint64_t *h = calloc(max + 1, sizeof(*h));
  uint64_t extra = 12345;

  ck_assert_ptr_nonnull(h);
  handles_init(&t, max);
  ck_assert_uint_eq(t.max, max);
  for (uint32_t i = 0; i < max; i++)
    ck_assert_int_eq(handles_add(&t, HANDLE_EVENT, &objs[i], &h[i]), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_EVENT, &objs[max], &extra),
                   HIPD_ETOOMANY);
  ck_assert_uint_eq(extra, 12345);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[max], &extra),
                   HIPD_ETOOMANY);
  ck_assert_uint_eq(t.used, max);
  ck_assert_uint_eq(t.count[HANDLE_EVENT], max);
  ck_assert_uint_eq(t.count[HANDLE_STREAM], 0);
  ck_assert_uint_le(t.cap, max);
  for (uint32_t i = 0; i < max; i++)
    ck_assert_ptr_eq(get_ok(&t, h[i], HANDLE_EVENT), &objs[i]);

  /* Freeing one makes room for exactly one. */
  ck_assert_int_eq(handles_remove(&t, h[max / 2], HANDLE_EVENT, NULL), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[max], &h[max / 2]), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[max], &extra),
                   HIPD_ETOOMANY);
  ck_assert_ptr_eq(get_ok(&t, h[max / 2], HANDLE_STREAM), &objs[max]);
  for (uint32_t i = 0; i < max; i++)
    if (i != max / 2)
      ck_assert_ptr_eq(get_ok(&t, h[i], HANDLE_EVENT), &objs[i]);
  handles_destroy(&t);
  free(h);
}

START_TEST(test_max)
{
  /* Below, at, just above and between the growth steps (16, 32, 64...). */
  static const uint32_t maxes[] = {1, 2, 5, 15, 16, 17, 20, 31, 32, 33, 100};

  for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++)
    fill_to_max(maxes[i]);
}
END_TEST

START_TEST(test_max_default)
{
  handle_table_t t;

  handles_init(&t, 0);
  ck_assert_uint_eq(t.max, INDEX_MASK);
  handles_destroy(&t);
  handles_init(&t, UINT32_MAX);
  ck_assert_uint_eq(t.max, INDEX_MASK);
  handles_destroy(&t);
  handles_init(&t, INDEX_MASK + 1);
  ck_assert_uint_eq(t.max, INDEX_MASK);
  handles_destroy(&t);
  handles_init(&t, HANDLES_MAX_DEFAULT);
  ck_assert_uint_eq(t.max, HANDLES_MAX_DEFAULT);
  handles_destroy(&t);
}
END_TEST

/* Thousands of handles, through many reallocations, with removals and
 * re-additions in between. */
START_TEST(test_growth)
{
  enum { N = 6000 };
  handle_table_t t;
  static uint64_t h[N];
  static int live[N];

  handles_init(&t, 0);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(
        handles_add(&t, (handle_type_t)(1 + i % 5), &objs[i], &h[i]), 0);
    ck_assert_uint_ne(h[i], 0);
    ck_assert_uint_eq(tag_of(h[i]), t.tag);
    ck_assert_uint_eq(idx1_of(h[i]), (uint32_t)i + 1);
    live[i] = 1;
    /* Earlier handles survive each reallocation. */
    if ((i & (i - 1)) == 0)
      for (int j = 0; j <= i; j++)
        CHECK(get_ok(&t, h[j], (handle_type_t)(1 + j % 5)) == &objs[j],
              "handle %d of %d: wrong object", j, i);
  }
  ck_assert_uint_ge(t.cap, N);
  ck_assert_uint_eq(t.used, N);

  /* Remove every third; the rest still resolve, the removed are stale. */
  for (int i = 0; i < N; i += 3) {
    ck_assert_int_eq(handles_remove(&t, h[i], HANDLE_ANY, NULL), 0);
    live[i] = 0;
  }
  uint32_t cap = t.cap;
  for (int i = 0; i < N; i++) {
    if (live[i])
      CHECK(get_ok(&t, h[i], HANDLE_ANY) == &objs[i], "%d: wrong object", i);
    else
      CHECK(get_rc(&t, h[i], HANDLE_ANY) == HIPD_ESTALE, "%d: not stale", i);
  }

  /* Re-adding fills the freed slots before growing. */
  for (int i = 0; i < N; i += 3) {
    uint64_t nh;
    ck_assert_int_eq(
        handles_add(&t, HANDLE_KERNEL, &objs[N + i / 3 % 2000], &nh), 0);
    ck_assert_uint_le(idx1_of(nh), N);
    ck_assert_int_eq(get_rc(&t, h[i], HANDLE_ANY), HIPD_ESTALE);
    h[i] = nh;
  }
  ck_assert_uint_eq(t.cap, cap);
  ck_assert_uint_eq(t.used, N);
  for (int i = 0; i < N; i++) {
    if (i % 3 == 0)
      ck_assert_ptr_eq(get_ok(&t, h[i], HANDLE_KERNEL),
                       &objs[N + i / 3 % 2000]);
    else
      ck_assert_ptr_eq(get_ok(&t, h[i], (handle_type_t)(1 + i % 5)), &objs[i]);
  }
  /* All handles are distinct. */
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      CHECK(h[i] != h[j], "handles %d and %d are both 0x%llx", i, j,
            (unsigned long long)h[i]);
  handles_destroy(&t);
}
END_TEST

/* ------------------------------------------------------------ foreach */

typedef struct {
  handle_table_t *t;
  uint64_t *h; /* issued handles, by object index */
  int *seen;   /* visits per object index */
  int remove;  /* 1: remove every handle given; 2: only odd objects */
  int calls;
} visit_t;

static void visit_cb(void *ctx, uint64_t h, void *obj)
{
  visit_t *v = ctx;
  int i = (int)((int *)obj - objs);

  ck_assert_int_ge(i, 0);
  ck_assert_int_lt(i, (int)(sizeof(objs) / sizeof(objs[0])));
  ck_assert_uint_eq(h, v->h[i]); /* the handle that was issued for it */
  v->seen[i]++;
  v->calls++;
  if (v->remove == 1 || (v->remove == 2 && i % 2 == 1)) {
    void *o = NULL;
    ck_assert_int_eq(handles_remove(v->t, h, HANDLE_ANY, &o), 0);
    ck_assert_ptr_eq(o, obj);
  }
}

START_TEST(test_foreach)
{
  enum { N = 300 };
  handle_table_t t;
  static uint64_t h[N];
  static int seen[N];
  visit_t v = {.t = &t, .h = h, .seen = seen};

  handles_init(&t, 0);
  /* No calls on an empty table. */
  handles_foreach(&t, HANDLE_ANY, visit_cb, &v);
  ck_assert_int_eq(v.calls, 0);

  for (int i = 0; i < N; i++)
    ck_assert_int_eq(
        handles_add(&t, (handle_type_t)(1 + i % 5), &objs[i], &h[i]), 0);
  /* Make holes so that live and free slots alternate. */
  for (int i = 0; i < N; i += 7)
    ck_assert_int_eq(handles_remove(&t, h[i], HANDLE_ANY, NULL), 0);

  handles_foreach(&t, HANDLE_ANY, visit_cb, &v);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(seen[i], i % 7 == 0 ? 0 : 1);
  ck_assert_uint_eq((uint32_t)v.calls, t.used);

  /* One type only. */
  memset(seen, 0, sizeof(seen));
  v.calls = 0;
  handles_foreach(&t, HANDLE_EVENT, visit_cb, &v);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(seen[i], (1 + i % 5 == HANDLE_EVENT && i % 7 != 0));
  ck_assert_uint_eq((uint32_t)v.calls, t.count[HANDLE_EVENT]);

  /* Removing some of the handles given. */
  memset(seen, 0, sizeof(seen));
  v.calls = 0;
  v.remove = 2;
  uint32_t before = t.used;
  handles_foreach(&t, HANDLE_ANY, visit_cb, &v);
  ck_assert_uint_eq((uint32_t)v.calls, before);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(seen[i], i % 7 == 0 ? 0 : 1);
    if (i % 7 == 0 || i % 2 == 1)
      ck_assert_int_ne(get_rc(&t, h[i], HANDLE_ANY), 0);
    else
      ck_assert_ptr_eq(get_ok(&t, h[i], HANDLE_ANY), &objs[i]);
  }

  /* Removing every handle given: each visited once, the table ends empty. */
  memset(seen, 0, sizeof(seen));
  v.calls = 0;
  v.remove = 1;
  before = t.used;
  handles_foreach(&t, HANDLE_ANY, visit_cb, &v);
  ck_assert_uint_eq((uint32_t)v.calls, before);
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(seen[i], (i % 7 != 0 && i % 2 == 0) ? 1 : 0);
    ck_assert_int_eq(get_rc(&t, h[i], HANDLE_ANY), HIPD_ESTALE);
  }
  ck_assert_uint_eq(t.used, 0);
  for (int k = 0; k < HANDLE_TYPE_COUNT; k++)
    ck_assert_uint_eq(t.count[k], 0);

  v.calls = 0;
  handles_foreach(&t, HANDLE_ANY, visit_cb, &v);
  ck_assert_int_eq(v.calls, 0);
  handles_destroy(&t);
}
END_TEST

/* ----------------------------------------------------------- wraparound */

START_TEST(test_generation_wraparound)
{
  handle_table_t t;
  uint64_t keep, cur, prev = 0;
  unsigned wraps = 0;

  handles_init(&t, 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_STREAM, &objs[0], &keep), 0);
  ck_assert_int_eq(handles_add(&t, HANDLE_BUFFER, &objs[1], &cur), 0);
  uint32_t slot = idx1_of(cur);
  for (int i = 0; i < 70000; i++) {
    void *o = NULL;
    int rc = handles_remove(&t, cur, HANDLE_BUFFER, &o);
    CHECK(rc == 0 && o == &objs[1 + i % 2], "%d: remove: %d", i, rc);
    rc = get_rc(&t, cur, HANDLE_ANY);
    CHECK(rc == HIPD_ESTALE, "%d: freed handle: %d", i, rc);
    prev = cur;
    rc = handles_add(&t, HANDLE_BUFFER, &objs[1 + (i + 1) % 2], &cur);
    CHECK(rc == 0, "%d: add: %d", i, rc);
    CHECK(cur != 0 && cur != prev, "%d: handle 0x%llx after 0x%llx", i,
          (unsigned long long)cur, (unsigned long long)prev);
    CHECK(idx1_of(cur) == slot && tag_of(cur) == t.tag && gen_of(cur) != 0,
          "%d: handle 0x%llx", i, (unsigned long long)cur);
    /* Generations count up by one, skipping 0 when they wrap. */
    uint16_t want = (uint16_t)(gen_of(prev) + 1);
    if (want == 0) {
      want = 1;
      wraps++;
    }
    CHECK(gen_of(cur) == want, "%d: generation %u after %u", i, gen_of(cur),
          gen_of(prev));
    CHECK(get_ok(&t, cur, HANDLE_BUFFER) == &objs[1 + (i + 1) % 2],
          "%d: wrong object", i);
    rc = get_rc(&t, prev, HANDLE_BUFFER);
    CHECK(rc == HIPD_ESTALE, "%d: previous handle: %d", i, rc);
    rc = handles_remove(&t, prev, HANDLE_ANY, NULL);
    CHECK(rc == HIPD_ESTALE, "%d: remove previous: %d", i, rc);
  }
  ck_assert_uint_eq(wraps, 1);
  ck_assert_uint_eq(t.used, 2);
  ck_assert_uint_eq(t.count[HANDLE_BUFFER], 1);
  ck_assert_ptr_eq(get_ok(&t, keep, HANDLE_STREAM), &objs[0]);
  handles_destroy(&t);
}
END_TEST

/* ---------------------------------------------------------------- misc */

START_TEST(test_type_name)
{
  ck_assert_str_eq(handles_type_name(HANDLE_ANY), "handle");
  ck_assert_str_eq(handles_type_name(HANDLE_STREAM), "stream");
  ck_assert_str_eq(handles_type_name(HANDLE_EVENT), "event");
  ck_assert_str_eq(handles_type_name(HANDLE_BUFFER), "buffer");
  ck_assert_str_eq(handles_type_name(HANDLE_KERNEL), "kernel");
  ck_assert_str_eq(handles_type_name(HANDLE_SHM), "shared buffer");
  ck_assert_str_eq(handles_type_name(HANDLE_TYPE_COUNT), "none");
  ck_assert_str_eq(handles_type_name((handle_type_t)200), "none");
}
END_TEST

START_TEST(test_destroy)
{
  handle_table_t t;
  uint64_t h;

  handles_init(&t, 0);
  handles_destroy(&t);
  handles_destroy(&t); /* twice is harmless */
  ck_assert_ptr_null(t.slots);

  handles_init(&t, 4);
  ck_assert_int_eq(handles_add(&t, HANDLE_SHM, &objs[0], &h), 0);
  handles_destroy(&t);
  ck_assert_ptr_null(t.slots);
  ck_assert_uint_eq(t.cap, 0);
  ck_assert_uint_eq(t.used, 0);
  /* Nothing resolves in a destroyed table. */
  ck_assert_int_eq(get_rc(&t, h, HANDLE_ANY), HIPD_EHANDLE);
}
END_TEST

/* ---------------------------------------------------------------- main */

static Suite *handles_suite(void)
{
  Suite *s = suite_create("handles");
  TCase *tc;

  tc = tcase_create("lookup");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_init_tag);
  tcase_add_test(tc, test_add_get_remove);
  tcase_add_test(tc, test_stale_after_reuse);
  tcase_add_test(tc, test_foreign);
  tcase_add_test(tc, test_forged);
  tcase_add_test(tc, test_wrong_type);
  tcase_add_test(tc, test_counts);
  tcase_add_test(tc, test_type_name);
  tcase_add_test(tc, test_destroy);
  suite_add_tcase(s, tc);

  tc = tcase_create("capacity");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_max);
  tcase_add_test(tc, test_max_default);
  tcase_add_test(tc, test_growth);
  tcase_add_test(tc, test_foreach);
  tcase_add_test(tc, test_generation_wraparound);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(handles_suite());
}
