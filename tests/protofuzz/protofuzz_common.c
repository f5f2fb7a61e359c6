/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_common.c: what every part of the fuzzer uses: the
 * first failure, the PRNG, the statistics, the value tree requests are built
 * from, the pools of live objects, and the method table
 * (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

struct pf_opt opt = {12, 0, UINT64_MAX, NULL, NULL, 6, 0};

/* ------------------------------------------------------------ failures */

int failed;

char fail_text[4096];

/* Record the first failure; the main loop stops at the next turn. */

void fail(const char *fmt, ...)
{
  va_list ap;

  if (failed)
    return;
  failed = 1;
  va_start(ap, fmt);
  vsnprintf(fail_text, sizeof(fail_text), fmt, ap);
  va_end(ap);
  fprintf(stderr, "protofuzz: FAIL: %s\n", fail_text);
}

/* ---------------------------------------------------------------- PRNG */

uint64_t rng_next(rng_t *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

rng_t rng; /* the main thread's */

uint64_t rnd64(void)
{
  return rng_next(&rng);
}

uint32_t rnd(uint32_t n)
{
  return n == 0 ? 0 : (uint32_t)(rnd64() % n);
}

/* One chance in @p n. */

int chance(uint32_t n)
{
  return rnd(n) == 0;
}

/* ---------------------------------------------------------- statistics */

struct pf_st st;

/* ---------------------------------------------------------- value tree */

uint8_t *arena;

size_t arena_used;

void *aalloc(size_t n)
{
  void *p;

  n = (n + 15) & ~(size_t)15;
  if (arena_used + n > ARENA_SIZE) {
    fprintf(stderr, "protofuzz: arena exhausted (a fuzzer bug)\n");
    abort();
  }
  p = arena + arena_used;
  arena_used += n;
  memset(p, 0, n);
  return p;
}

char *bigbuf; /* BIG_LEN printable bytes, no NUL */

val_t v_nil(void)
{
  return (val_t){.t = V_NIL};
}

val_t v_bool(int b)
{
  return (val_t){.t = V_BOOL, .x.b = b};
}

val_t v_uint(uint64_t u)
{
  return (val_t){.t = V_UINT, .x.u = u};
}

val_t v_int(int64_t i)
{
  return i >= 0 ? v_uint((uint64_t)i) : (val_t){.t = V_INT, .x.i = i};
}

val_t v_f32(double f)
{
  return (val_t){.t = V_F32, .x.f = f};
}

val_t v_f64(double f)
{
  return (val_t){.t = V_F64, .x.f = f};
}

val_t v_strn(const char *p, size_t n)
{
  return (val_t){.t = V_STR, .p = p, .n = (uint32_t)n};
}

val_t v_str(const char *s)
{
  return v_strn(s, strlen(s));
}

val_t v_bin(const void *p, size_t n)
{
  return (val_t){.t = V_BIN, .p = p, .n = (uint32_t)n};
}

val_t v_arr(uint32_t n)
{
  val_t v = {.t = V_ARR, .n = n};

  v.kids = aalloc(sizeof(val_t) * (n ? n : 1));
  return v;
}

val_t v_map(uint32_t n)
{
  val_t v = {.t = V_MAP, .n = n};

  v.kids = aalloc(sizeof(val_t) * 2 * (n ? n : 1));
  return v;
}

void pack_val(msgpack_packer *pk, const val_t *v)
{
  switch (v->t) {
  case V_NIL:
    msgpack_pack_nil(pk);
    break;
  case V_BOOL:
    v->x.b ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
    break;
  case V_INT:
    msgpack_pack_int64(pk, v->x.i);
    break;
  case V_UINT:
    msgpack_pack_uint64(pk, v->x.u);
    break;
  case V_F32:
    msgpack_pack_float(pk, (float)v->x.f);
    break;
  case V_F64:
    msgpack_pack_double(pk, v->x.f);
    break;
  case V_STR:
    msgpack_pack_str(pk, v->n);
    msgpack_pack_str_body(pk, v->p, v->n);
    break;
  case V_BIN:
    msgpack_pack_bin(pk, v->n);
    msgpack_pack_bin_body(pk, v->p, v->n);
    break;
  case V_ARR:
    msgpack_pack_array(pk, v->n);
    for (uint32_t i = 0; i < v->n; i++)
      pack_val(pk, &v->kids[i]);
    break;
  case V_MAP:
    msgpack_pack_map(pk, v->n);
    for (uint32_t i = 0; i < 2 * v->n; i++)
      pack_val(pk, &v->kids[i]);
    break;
  }
}

/* ------------------------------------------------------------- objects */

void pool_add(pool_t *p, obj_t o)
{
  if (p->n == POOL_MAX) /* forget the oldest: it stays alive, unnamed */
    memmove(p->o, p->o + 1, sizeof(p->o[0]) * --p->n);
  p->o[p->n++] = o;
}

obj_t *pool_pick(pool_t *p)
{
  return p->n ? &p->o[rnd((uint32_t)p->n)] : NULL;
}

void pool_remove(pool_t *p, uint64_t h)
{
  for (int i = 0; i < p->n; i++)
    if (p->o[i].h == h) {
      memmove(p->o + i, p->o + i + 1, sizeof(p->o[0]) * (p->n - i - 1));
      p->n--;
      return;
    }
}

/* Handles of every session the fuzzer opened, live or gone: foreign to all
 * the others. */

uint64_t foreign[64];

unsigned nforeign;

/* ---------------------------------------------------------- connections */

conn_t *conns[MAX_CONNS];

int compiles;

unsigned conn_serial;

harness_daemon_t *daemon_;

/* ------------------------------------------------------ the method table */

const method_t *methods;

unsigned nmethods;

/* Does method @p midx compile (kernel.compile*, run_source)? */

int is_compile(int midx)
{
  const char *m = methods[midx].name;

  return strncmp(m, "kernel.compile", 14) == 0 || strcmp(m, "run_source") == 0;
}

int method_index(const char *name)
{
  for (unsigned i = 0; i < nmethods; i++)
    if (strcmp(methods[i].name, name) == 0)
      return (int)i;
  return -1;
}
