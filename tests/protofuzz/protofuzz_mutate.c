/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_mutate.c: mutations of a valid request: arity,
 * types, huge and negative integers, floats, nil, strings and bins, nested
 * containers, stale, foreign, forged and wrong-kind handles, method names
 * (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* ------------------------------------------------------------ mutation */

static uint64_t pick_stale(conn_t *c)
{
  pool_t *p = &c->stale[rnd(K_NKINDS)];
  return p->n ? p->o[rnd((uint32_t)p->n)].h : rnd64();
}

/* A random value of any type, for a param that does not expect it (or,
 * by chance, does). Nesting stays within the decode limit. */

static val_t random_value(conn_t *c, int depth)
{
  static const uint64_t huge[] = {1ull << 31, (1ull << 32) - 1,
                                  1ull << 32, 1ull << 63,
                                  UINT64_MAX, 65536,
                                  1025,       256};
  static const int64_t neg[] = {
      -1, -2, INT32_MIN, INT64_MIN, -(int64_t)(1ull << 32), -255};
  static const uint32_t lens[] = {1,   15,   16,    63,    64,     255,
                                  256, 1024, 16384, 65536, BIG_LEN};
  val_t v;

  switch (rnd(depth >= 3 ? 16 : 19)) {
  case 0:
    return v_nil();
  case 1:
    return v_bool((int)rnd(2));
  case 2:
    return v_int((int64_t)rnd(11) - 5);
  case 3:
    return v_int(neg[rnd(6)]);
  case 4:
    return v_uint(huge[rnd(8)]);
  case 5: {
    static const double f[] = {0.0, 1.0, 1.5, -1.0, 1e30};
    return v_f32(chance(5) ? NAN : f[rnd(5)]);
  }
  case 6: {
    static const double f[] = {0.0, 1.0, 4096.0, -0.0, 1e300};
    return v_f64(chance(5) ? INFINITY : f[rnd(5)]);
  }
  case 7:
    return v_strn("", 0);
  case 8:
    return v_strn(bigbuf, lens[rnd(chance(8) ? 11 : 8)]);
  case 9: {
    char *s = aalloc(8);
    memcpy(s, "ab\0cd", 5);
    return v_strn(s, 5);
  }
  case 10:
    return v_bin(bigbuf, chance(2) ? 0 : lens[rnd(chance(8) ? 11 : 8)]);
  case 11:
    return v_uint(rnd64());
  case 12:
    return v_uint(pick_stale(c));
  case 13:
    return v_uint(nforeign ? foreign[rnd(nforeign)] : rnd64());
  case 14: {
    obj_t *o = pick(c, (int)rnd(K_NKINDS));
    return v_uint(o ? o->h : 0);
  }
  case 15:
    return v_uint(0);
  case 16: {
    uint32_t n = rnd(5);
    v = v_arr(n);
    for (uint32_t i = 0; i < n; i++)
      v.kids[i] = random_value(c, depth + 1);
    return v;
  }
  case 17: {
    uint32_t n = rnd(4);
    v = v_map(n);
    for (uint32_t i = 0; i < n; i++) {
      v.kids[2 * i] = chance(4) ? random_value(c, depth + 1)
                                : v_str(chance(2) ? "code" : "x");
      v.kids[2 * i + 1] = random_value(c, depth + 1);
    }
    return v;
  }
  default: {
    /* A chain of nested arrays, up to the depth the daemon accepts for a
     * param at this depth. */
    uint32_t n = 1 + rnd(12 - (uint32_t)depth);
    val_t top = v_arr(1), *cur = &top;
    for (uint32_t i = 1; i < n; i++) {
      cur->kids[0] = v_arr(1);
      cur = &cur->kids[0];
    }
    cur->kids[0] = v_uint(1);
    return top;
  }
  }
}

/* Replace one value somewhere inside @p v (an array or map) at random. */

static void mutate_nested(conn_t *c, val_t *v, int depth)
{
  if ((v->t != V_ARR && v->t != V_MAP) || v->n == 0) {
    *v = random_value(c, depth);
    return;
  }
  val_t *k = &v->kids[rnd(v->t == V_MAP ? 2 * v->n : v->n)];
  if ((k->t == V_ARR || k->t == V_MAP) && chance(2))
    mutate_nested(c, k, depth + 1);
  else
    *k = random_value(c, depth + 1);
}

/* Mutate a request in place, in a way that stays within the protocol: the
 * daemon must answer it. */

void mutate_request(conn_t *c, req_t *r)
{
  val_t *p = &r->params;
  uint32_t i;

  switch (rnd(12)) {
  case 0: /* one param fewer */
    if (p->n > 0) {
      p->n--;
      snprintf(r->mut, sizeof(r->mut), "dropped last param");
      break;
    }
    /* fall through */
  case 1: { /* more params */
    uint32_t extra = chance(6) ? 250 + rnd(20) : 1 + rnd(3);
    val_t np = v_arr(p->n + extra);
    memcpy(np.kids, p->kids, sizeof(val_t) * p->n);
    for (i = p->n; i < np.n; i++)
      np.kids[i] = chance(2) ? v_nil() : random_value(c, 2);
    *p = np;
    snprintf(r->mut, sizeof(r->mut), "%u extra params", extra);
    break;
  }
  case 2: /* no params */
    p->n = 0;
    snprintf(r->mut, sizeof(r->mut), "no params");
    break;
  case 3:
  case 4:
  case 5:
  case 6: /* one param replaced */
    if (p->n == 0)
      goto method;
    i = rnd(p->n);
    p->kids[i] = random_value(c, 2);
    snprintf(r->mut, sizeof(r->mut), "param %u replaced", i);
    break;
  case 7:
  case 8: /* something inside a param */
    if (p->n == 0)
      goto method;
    i = rnd(p->n);
    mutate_nested(c, &p->kids[i], 2);
    snprintf(r->mut, sizeof(r->mut), "inside param %u", i);
    break;
  case 9: /* params not an array is a violation: see mutate_frame */
  case 10:
  method : {
    /* The method name. */
    static const char *const names[] = {
        "",    "HELLO", "mem.", "mem.alloc ", "nosuch.method",
        "pin", "pingg", "zzz",  "a.b.c.d.e.f"};
    switch (rnd(5)) {
    case 0:
      r->method = names[rnd(9)];
      r->method_len = (uint32_t)strlen(r->method);
      break;
    case 1: { /* with a NUL byte */
      char *s = aalloc(r->method_len + 2);
      memcpy(s, r->method, r->method_len);
      s[r->method_len] = '\0';
      s[r->method_len + 1] = 'x';
      r->method = s;
      r->method_len += 2;
      break;
    }
    case 2: /* long */
      r->method = bigbuf;
      r->method_len = 64 + rnd(4096);
      break;
    case 3: /* truncated */
      if (r->method_len > 0)
        r->method_len = rnd(r->method_len);
      break;
    default: /* as bin: accepted, the same method */
      r->method_bin = 1;
      break;
    }
    snprintf(r->mut, sizeof(r->mut), "method name '%.*s'%s",
             (int)(r->method_len > 24 ? 24 : r->method_len), r->method,
             r->method_bin ? " as bin" : "");
    break;
  }
  default: /* two mutations */
    mutate_request(c, r);
    char first[96];
    memcpy(first, r->mut, sizeof(first));
    mutate_request(c, r);
    size_t l = strlen(r->mut);
    snprintf(r->mut + l, sizeof(r->mut) - l, ", %s", first);
    break;
  }
}
