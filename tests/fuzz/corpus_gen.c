/* SPDX-License-Identifier: MIT */
/* tests/fuzz/corpus_gen.c: writes the seed corpora of the fuzz targets.
 *
 *   fuzz_corpus_gen FIXTURES_DIR CORPUS_DIR     (make fuzz-corpus)
 *
 * FIXTURES_DIR is tests/codegen; CORPUS_DIR/<target>/ receives:
 *  frame/     valid frames of every msgpack type and message kind, frames at
 *             and past each limit, invalid bytes, each after the 5 bytes
 *             that choose fuzz_frame's limits;
 *  ir/        each fixture's IR packed to msgpack, followed by its generator
 *             options (_soa_params, _block annotations) as fuzz_ir reads them;
 *  ir_json/   each fixture's JSON text and a few small documents;
 *  dispatch/  request streams for every method family, with handle
 *             placeholders (fuzz_dispatch.c), and streams that break the
 *             protocol;
 *  ipc/       what a worker sends its listener and what a listener sends
 *             its worker (daemon/privsep), and what a metrics process
 *             sends its listener (m-*), after fuzz_ipc's mode byte:
 *             valid messages of every method, malformed params of each,
 *             wrong types, lengths near the channel's limits, unknown
 *             methods, truncated frames, answers of every bad shape;
 *  ring/      fuzz_ring's programs (its config byte, then opcodes and their
 *             operands, fuzz_ring.c): every ring method, bursts, `after`,
 *             rewrites, completions left unread (answers on the socket),
 *             cq_wait, the daemon's fields overwritten, frees under queued
 *             work, and each way of breaking the ring.
 * The output is deterministic; the files are committed, so a plain
 * `make check` needs no generation step.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ir_json.h"
#include "rpc.h"

static const char *out_dir;
static int failed;

static void die(const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  fprintf(stderr, "fuzz_corpus_gen: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void write_file(const char *target, const char *name, const void *p,
                       size_t len)
{
  char path[1024];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", out_dir, target);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/%s/%s", out_dir, target, name);
  if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, len, f) != len ||
      fclose(f) != 0) {
    fprintf(stderr, "fuzz_corpus_gen: %s: %s\n", path, strerror(errno));
    failed = 1;
  }
}

/* ------------------------------------------------------ building frames */

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} buf_t;

static void buf_init(buf_t *b)
{
  msgpack_sbuffer_init(&b->sb);
  msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

static void buf_raw(buf_t *b, const void *p, size_t n)
{
  msgpack_sbuffer_write(&b->sb, p, n);
}

static void pk_str(msgpack_packer *pk, const char *s)
{
  proto_pack_cstr(pk, s);
}

static void pk_bin(msgpack_packer *pk, const void *p, size_t n)
{
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
}

/* fuzz_dispatch's placeholder for the k-th handle returned so far. */
static void pk_handle(msgpack_packer *pk, uint8_t k)
{
  msgpack_pack_ext(pk, 1, 0x68);
  msgpack_pack_ext_body(pk, &k, 1);
}

/*
 * Append a request. @p fmt gives one char per param:
 *   u uint64   i int64   s str   b bin (ptr, len)   n nil   t true
 *   h handle placeholder (int)   a an array of uints (n, then uint64 *)
 *   A an array of str (n, then char **)   g launch args (raw msgpack)
 *   r raw bytes (ptr, len) packed as they are
 */
static void req(buf_t *b, uint32_t msgid, const char *method, const char *fmt,
                ...)
{
  va_list ap;

  va_start(ap, fmt);
  proto_pack_request(&b->pk, msgid, method, (uint32_t)strlen(fmt));
  for (const char *f = fmt; *f; f++) {
    switch (*f) {
    case 'u':
      msgpack_pack_uint64(&b->pk, va_arg(ap, uint64_t));
      break;
    case 'i':
      msgpack_pack_int64(&b->pk, va_arg(ap, int64_t));
      break;
    case 's':
      pk_str(&b->pk, va_arg(ap, const char *));
      break;
    case 'b': {
      const void *p = va_arg(ap, const void *);
      size_t n = va_arg(ap, size_t);
      pk_bin(&b->pk, p, n);
    } break;
    case 'n':
      msgpack_pack_nil(&b->pk);
      break;
    case 't':
      msgpack_pack_true(&b->pk);
      break;
    case 'h':
      pk_handle(&b->pk, (uint8_t)va_arg(ap, int));
      break;
    case 'a': {
      unsigned n = va_arg(ap, unsigned);
      const uint64_t *v = va_arg(ap, const uint64_t *);
      msgpack_pack_array(&b->pk, n);
      for (unsigned i = 0; i < n; i++)
        msgpack_pack_uint64(&b->pk, v[i]);
    } break;
    case 'A': {
      unsigned n = va_arg(ap, unsigned);
      const char *const *v = va_arg(ap, const char *const *);
      msgpack_pack_array(&b->pk, n);
      for (unsigned i = 0; i < n; i++)
        pk_str(&b->pk, v[i]);
    } break;
    case 'r': {
      const void *p = va_arg(ap, const void *);
      size_t n = va_arg(ap, size_t);
      buf_raw(b, p, n);
    } break;
    default:
      die("bad format '%c'", *f);
    }
  }
  va_end(ap);
}

static void hello(buf_t *b)
{
  req(b, 1, "hello", "is", (int64_t)1, "fuzz");
}

static void save(const char *target, const char *name, buf_t *b)
{
  write_file(target, name, b->sb.data, b->sb.size);
  msgpack_sbuffer_destroy(&b->sb);
}

/* ------------------------------------------------------------- frame/ */

/* fuzz_frame's limit bytes: depth, array % 32, map % 16, values - 1,
 * (size - 1) / 16. */
static void save_frame(const char *name, const uint8_t lim[5], buf_t *b)
{
  buf_t f;

  buf_init(&f);
  buf_raw(&f, lim, 5);
  buf_raw(&f, b->sb.data, b->sb.size);
  save("frame", name, &f);
  msgpack_sbuffer_destroy(&b->sb);
}

static void gen_frame(void)
{
  static const uint8_t roomy[5] = {16, 31, 15, 255, 255};
  static const uint8_t tight[5] = {3, 4, 2, 12, 4};
  static const uint8_t deep[5] = {33, 31, 15, 255, 255};
  uint8_t payload[300];
  buf_t b;

  for (size_t i = 0; i < sizeof(payload); i++)
    payload[i] = (uint8_t)i;

  buf_init(&b);
  hello(&b);
  save_frame("request-hello", roomy, &b);

  buf_init(&b);
  req(&b, 7, "ping", "b", payload, (size_t)200);
  save_frame("request-bin8", roomy, &b);

  buf_init(&b);
  req(&b, 4000000000u, "mem.write", "uub", (uint64_t)1 << 50, (uint64_t)0,
      payload, sizeof(payload));
  save_frame("request-bin16-big-msgid", roomy, &b);

  buf_init(&b);
  proto_pack_error_response(&b.pk, 9, HIPD_EPARAMS, "mem.read: %s",
                            "param 2 (length) must be a uint");
  save_frame("response-error", roomy, &b);

  buf_init(&b);
  proto_pack_notify(&b.pk, "log", 1);
  msgpack_pack_map(&b.pk, 2);
  pk_str(&b.pk, "level");
  msgpack_pack_int8(&b.pk, -3);
  pk_str(&b.pk, "x");
  msgpack_pack_double(&b.pk, 0.5);
  save_frame("notification-map", roomy, &b);

  /* Every scalar width. */
  buf_init(&b);
  proto_pack_request(&b.pk, 3, "types", 1);
  msgpack_pack_array(&b.pk, 15);
  msgpack_pack_uint8(&b.pk, 1);
  msgpack_pack_uint8(&b.pk, 200);
  msgpack_pack_uint16(&b.pk, 60000);
  msgpack_pack_uint64(&b.pk, (uint64_t)1 << 40);
  msgpack_pack_int8(&b.pk, -1);
  msgpack_pack_int8(&b.pk, -100);
  msgpack_pack_int16(&b.pk, -30000);
  msgpack_pack_int64(&b.pk, -((int64_t)1 << 40));
  pk_str(&b.pk, "");
  pk_str(&b.pk, "a string of more than thirty-one bytes: str8");
  msgpack_pack_float(&b.pk, 1.5f);
  msgpack_pack_true(&b.pk);
  msgpack_pack_false(&b.pk);
  msgpack_pack_ext(&b.pk, 4, 1);
  msgpack_pack_ext_body(&b.pk, "abcd", 4);
  msgpack_pack_ext(&b.pk, 3, 2);
  msgpack_pack_ext_body(&b.pk, "abc", 3);
  save_frame("request-scalars", roomy, &b);

  /* Nesting: exactly at the depth limit, one past it, and empty
   * containers far below it. */
  buf_init(&b);
  proto_pack_request(&b.pk, 5, "nest", 1);
  for (int i = 0; i < 13; i++)
    msgpack_pack_array(&b.pk, 1);
  msgpack_pack_array(&b.pk, 0);
  save_frame("nesting-at-limit", roomy, &b);

  buf_init(&b);
  proto_pack_request(&b.pk, 5, "nest", 1);
  for (int i = 0; i < 15; i++)
    msgpack_pack_array(&b.pk, 1);
  msgpack_pack_uint8(&b.pk, 1);
  save_frame("nesting-too-deep", roomy, &b);

  buf_init(&b);
  for (int i = 0; i < 31; i++)
    msgpack_pack_array(&b.pk, 1);
  msgpack_pack_map(&b.pk, 0);
  save_frame("nesting-empty-at-cap", deep, &b);

  /* Tight limits: an array, a map and a message just over each. */
  buf_init(&b);
  msgpack_pack_array(&b.pk, 5);
  for (int i = 0; i < 5; i++)
    msgpack_pack_uint8(&b.pk, (uint8_t)i);
  save_frame("array-over-limit", tight, &b);

  buf_init(&b);
  msgpack_pack_map(&b.pk, 2);
  for (int i = 0; i < 4; i++)
    msgpack_pack_uint8(&b.pk, (uint8_t)i);
  save_frame("map-at-limit", tight, &b);

  buf_init(&b);
  msgpack_pack_array(&b.pk, 3);
  for (int i = 0; i < 3; i++)
    msgpack_pack_array(&b.pk, 4);
  save_frame("nested-counts-over-size", tight, &b);

  buf_init(&b);
  msgpack_pack_array(&b.pk, 2);
  msgpack_pack_str(&b.pk, 100);
  msgpack_pack_str_body(&b.pk, payload, 100);
  msgpack_pack_nil(&b.pk);
  save_frame("message-over-size", tight, &b);

  /* Back to back, then garbage. */
  buf_init(&b);
  req(&b, 1, "ping", "");
  req(&b, 2, "ping", "s", "x");
  buf_raw(&b, "\xc1\xc1", 2);
  save_frame("two-frames-then-c1", roomy, &b);

  buf_init(&b);
  buf_raw(&b, "\x94\x00\x01\xa4pi", 6);
  save_frame("truncated-request", roomy, &b);

  /* Headers that claim more than any message may hold. */
  buf_init(&b);
  buf_raw(&b, "\x94\x00\x01\xa4ping\x91\xc6\xff\xff\xff\xff", 13);
  save_frame("bin32-huge", roomy, &b);

  buf_init(&b);
  buf_raw(&b, "\xdd\x00\x0f\xff\xff\xdd\x00\x0f\xff\xff", 10);
  save_frame("array32-nested-huge", roomy, &b);

  buf_init(&b);
  buf_raw(&b, "\xdf\x00\x01\x00\x00\x01\x02", 7);
  save_frame("map32-over-limit", roomy, &b);

  /* Regression: two nested arrays whose counts each fit the 49-byte
   * message but not together: refused at the second header, not scanned
   * as incomplete with a need past the limit. */
  {
    static const uint8_t small_msg[5] = {16, 200, 200, 255, 3};
    buf_init(&b);
    buf_raw(&b, "\xdc\x00\x28\xdc\x00\x28\x01", 7);
    save_frame("regress-need-beyond-max-message", small_msg, &b);
  }
}

/* ----------------------------------------------------- ir/ and ir_json/ */

static int cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void gen_ir(const char *fixtures)
{
  DIR *dir = opendir(fixtures);
  struct dirent *e;
  char *names[256];
  size_t n = 0;

  if (dir == NULL)
    die("%s: %s", fixtures, strerror(errno));
  while ((e = readdir(dir)) != NULL && n < 256) {
    size_t l = strlen(e->d_name);
    if (l > 8 && strcmp(e->d_name + l - 8, ".ir.json") == 0)
      names[n++] = strdup(e->d_name);
  }
  closedir(dir);
  if (n == 0)
    die("no .ir.json fixtures in %s", fixtures);
  qsort(names, n, sizeof(*names), cmp_str);
  for (size_t i = 0; i < n; i++) {
    char path[1024], err[300], name[300];
    size_t len;
    char *text;
    buf_t b;

    snprintf(path, sizeof(path), "%s/%s", fixtures, names[i]);
    if ((text = ir_json_read_file(path, &len)) == NULL)
      die("%s: %s", path, strerror(errno));
    write_file("ir_json", names[i], text, len);

    buf_init(&b);
    if (ir_json_to_msgpack(text, len, &b.sb, err, sizeof(err)) != 0)
      die("%s: %s", path, err);
    /* The options, when the fixture has any: [soa params, block]. */
    msgpack_sbuffer soa, blk;
    msgpack_sbuffer_init(&soa);
    msgpack_sbuffer_init(&blk);
    int hs = ir_json_member(text, len, "_soa_params", &soa, err, sizeof(err));
    int hb = ir_json_member(text, len, "_block", &blk, err, sizeof(err));
    if (hs < 0 || hb < 0)
      die("%s: %s", path, err);
    if (hs > 0 || hb > 0) {
      msgpack_pack_array(&b.pk, 2);
      if (hs > 0)
        buf_raw(&b, soa.data, soa.size);
      else
        msgpack_pack_nil(&b.pk);
      if (hb > 0)
        buf_raw(&b, blk.data, blk.size);
      else
        msgpack_pack_nil(&b.pk);
    }
    msgpack_sbuffer_destroy(&soa);
    msgpack_sbuffer_destroy(&blk);
    snprintf(name, sizeof(name), "%.*s.mp", (int)(strlen(names[i]) - 8),
             names[i]);
    if (strcmp(names[i], "vec_add.ir.json") == 0) {
      /* Regression (of the target): options that claim 2^32 elements are
       * framed before msgpack-c, which would allocate for them, sees
       * them. */
      buf_t r;
      buf_init(&r);
      buf_raw(&r, b.sb.data, b.sb.size);
      buf_raw(&r, "\x92\xdd\xff\xff\xff\xff", 6);
      save("ir", "regress-options-huge-array.mp", &r);
    }
    save("ir", name, &b);
    free(text);
    free(names[i]);
  }

  static const char *const small[] = {
      "{}",
      "[1, -2, 3.5e3, true, false, null, \"\\u00e9\\n\"]",
      "{\"ir\": 1, \"kernel\": {}}",
      "9223372036854775807",
      "-0.0",
      "[[[[[]]]]]",
      "{\"a\":",
      "\"\\ud83d\\ude00\""};
  for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
    char name[32];
    snprintf(name, sizeof(name), "small-%zu.json", i);
    write_file("ir_json", name, small[i], strlen(small[i]));
  }
}

/* --------------------------------------------------------- dispatch/ */

static const char kernel_src[] =
    "__global__ void k(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = 2.0f * x[i];\n"
    "}\n";

static void gen_dispatch(const char *fixtures)
{
  uint8_t bytes[256];
  buf_t b;

  for (size_t i = 0; i < sizeof(bytes); i++)
    bytes[i] = (uint8_t)(i * 7);

  /* Core methods, before and after hello. */
  buf_init(&b);
  req(&b, 1, "ping", "s", "before hello");
  req(&b, 2, "device.count", "");
  req(&b, 3, "no.such_method", "");
  hello(&b);
  req(&b, 4, "hello", "ns", "again");
  req(&b, 5, "ping", "b", bytes, (size_t)64);
  req(&b, 6, "daemon.info", "");
  req(&b, 7, "session.info", "");
  req(&b, 8, "backend.info", "");
  req(&b, 9, "supported_source_langs", "");
  req(&b, 10, "cache.stats", "");
  req(&b, 11, "cache.clear", "");
  req(&b, 12, "ping", "uu", (uint64_t)1, (uint64_t)2);
  proto_pack_notify(&b.pk, "ignored", 0);
  req(&b, 13, "hello", "i", (int64_t)0);
  save("dispatch", "core", &b);

  /* Devices. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "device.count", "");
  req(&b, 3, "device.list", "");
  req(&b, 4, "device.get", "");
  req(&b, 5, "device.get", "u", (uint64_t)0);
  req(&b, 6, "device.get", "u", (uint64_t)99);
  req(&b, 7, "device.set_current", "u", (uint64_t)0);
  req(&b, 8, "device.set_current", "n");
  req(&b, 9, "device.current", "");
  req(&b, 10, "device.synchronize", "");
  req(&b, 11, "device.synchronize", "u", (uint64_t)0);
  save("dispatch", "device", &b);

  /* Streams: handle 0 is the created stream, 1 the default one. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "stream.create", "");
  req(&b, 3, "stream.default", "");
  req(&b, 4, "stream.query", "h", 0);
  req(&b, 5, "stream.synchronize", "h", 0);
  req(&b, 6, "stream.destroy", "h", 1);
  req(&b, 7, "stream.destroy", "h", 0);
  req(&b, 8, "stream.query", "h", 0);
  req(&b, 9, "stream.create", "u", (uint64_t)5);
  req(&b, 10, "stream.query", "u", (uint64_t)12345);
  save("dispatch", "stream", &b);

  /* Memory: handles 0 and 1 buffers, 2 a stream. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "mem.alloc", "us", (uint64_t)64, "float32");
  req(&b, 3, "mem.alloc_custom", "uu", (uint64_t)32, (uint64_t)8);
  req(&b, 4, "stream.create", "");
  req(&b, 5, "mem.size", "h", 0);
  req(&b, 6, "mem.write", "hub", 0, (uint64_t)0, bytes, (size_t)256);
  req(&b, 7, "mem.read", "huu", 0, (uint64_t)16, (uint64_t)32);
  req(&b, 8, "mem.memset", "huuu", 1, (uint64_t)0, (uint64_t)256, (uint64_t)7);
  req(&b, 9, "mem.copy", "huhuu", 1, (uint64_t)8, 0, (uint64_t)0,
      (uint64_t)128);
  req(&b, 10, "mem.write_async", "hubh", 1, (uint64_t)0, bytes, (size_t)16, 2);
  req(&b, 11, "mem.read_async", "huuh", 1, (uint64_t)0, (uint64_t)16, 2);
  req(&b, 12, "mem.memset_async", "huuuh", 0, (uint64_t)4, (uint64_t)4,
      (uint64_t)255, 2);
  req(&b, 13, "mem.copy_async", "huhuuh", 0, (uint64_t)0, 1, (uint64_t)0,
      (uint64_t)64, 2);
  req(&b, 14, "stream.synchronize", "h", 2);
  req(&b, 15, "mem.read", "huu", 0, (uint64_t)250, (uint64_t)16);
  req(&b, 16, "mem.alloc", "us", (uint64_t)1 << 40, "byte");
  req(&b, 17, "mem.alloc", "us", (uint64_t)4, "quaternion");
  req(&b, 18, "mem.free", "h", 0);
  req(&b, 19, "mem.read", "huu", 0, (uint64_t)0, (uint64_t)1);
  req(&b, 20, "mem.info", "h", 1);
  save("dispatch", "memory", &b);

  /* Shared host buffers: handle 0 the shm (a memfd goes with shm.create),
   * 1 a buffer, 2 a stream. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "shm.create", "u", (uint64_t)65536);
  req(&b, 3, "mem.alloc", "us", (uint64_t)4096, "byte");
  req(&b, 4, "stream.create", "");
  req(&b, 5, "mem.write_shm", "huhuu", 1, (uint64_t)0, 0, (uint64_t)0,
      (uint64_t)4096);
  req(&b, 6, "mem.read_shm", "huhuu", 1, (uint64_t)0, 0, (uint64_t)4096,
      (uint64_t)4096);
  req(&b, 7, "mem.write_shm_async", "huhuuh", 1, (uint64_t)16, 0, (uint64_t)0,
      (uint64_t)64, 2);
  req(&b, 8, "mem.read_shm_async", "huhuuh", 1, (uint64_t)0, 0, (uint64_t)0,
      (uint64_t)64, 2);
  req(&b, 9, "mem.write_shm", "huhuu", 1, (uint64_t)0, 0, (uint64_t)65000,
      (uint64_t)4096);
  req(&b, 10, "stream.synchronize", "h", 2);
  req(&b, 11, "mem.alloc_zero_copy", "h", 0);
  req(&b, 12, "shm.free", "h", 0);
  req(&b, 13, "shm.create", "u", (uint64_t)1 << 20);
  save("dispatch", "shm", &b);

  /* Events: handles 0 and 2 events, 1 a stream. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "event.create", "");
  req(&b, 3, "stream.create", "");
  req(&b, 4, "event.query", "h", 0);
  req(&b, 5, "event.record", "h", 0);
  req(&b, 6, "event.create", "u", (uint64_t)0);
  req(&b, 7, "event.record", "hh", 2, 1);
  req(&b, 8, "event.synchronize", "h", 2);
  req(&b, 9, "event.query", "h", 0);
  req(&b, 10, "event.elapsed", "hh", 0, 2);
  req(&b, 11, "event.elapsed", "hh", 2, 0);
  req(&b, 12, "event.record", "hh", 0, 0);
  req(&b, 13, "event.destroy", "h", 0);
  req(&b, 14, "event.query", "h", 0);
  save("dispatch", "event", &b);

  /* Profiling. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "profile.enable", "");
  req(&b, 3, "mem.alloc", "us", (uint64_t)1024, "int32");
  req(&b, 4, "mem.memset", "huuu", 0, (uint64_t)0, (uint64_t)4096, (uint64_t)1);
  req(&b, 5, "session.profile", "");
  req(&b, 6, "session.profile", "t");
  req(&b, 7, "profile.disable", "");
  req(&b, 8, "session.profile", "n");
  save("dispatch", "profile", &b);

  /* Kernels (HIPD_CXX is `false` under libFuzzer: ECOMPILE; a replay
   * compiles them), launches and run_source. */
  {
    static const char *const opts[] = {"-O2", "-DN=4"};
    static const char *const badopt[] = {"-I/etc"};
    static const uint64_t grid[] = {1, 1, 1};
    buf_t args;

    buf_t bad;

    /* Handle 0 the kernel, 1 its buffer. */
    buf_init(&b);
    hello(&b);
    req(&b, 2, "kernel.compile", "ss", kernel_src, "k");
    req(&b, 3, "mem.alloc", "us", (uint64_t)16, "float32");
    req(&b, 4, "kernel.info", "h", 0);
    buf_init(&args);
    msgpack_pack_array(&args.pk, 2);
    msgpack_pack_array(&args.pk, 2);
    pk_str(&args.pk, "buf");
    pk_handle(&args.pk, 1);
    msgpack_pack_array(&args.pk, 2);
    pk_str(&args.pk, "i32");
    msgpack_pack_uint8(&args.pk, 16);
    buf_init(&bad);
    msgpack_pack_array(&bad.pk, 2);
    msgpack_pack_array(&bad.pk, 3);
    pk_str(&bad.pk, "buf");
    pk_handle(&bad.pk, 1);
    msgpack_pack_uint32(&bad.pk, 60);
    msgpack_pack_array(&bad.pk, 2);
    pk_str(&bad.pk, "f64");
    msgpack_pack_double(&bad.pk, 1.0);
    req(&b, 5, "kernel.launch", "haunnrt", 0, 3u, grid, (uint64_t)16,
        args.sb.data, args.sb.size);
    req(&b, 6, "mem.read", "huu", 1, (uint64_t)0, (uint64_t)64);
    req(&b, 7, "kernel.launch", "haunnr", 0, 3u, grid, (uint64_t)16,
        bad.sb.data, bad.sb.size);
    req(&b, 8, "kernel.launch", "huunnr", 0, (uint64_t)0, (uint64_t)4096,
        args.sb.data, args.sb.size);
    req(&b, 9, "kernel.compile", "ssAu", kernel_src, "k", 2u, opts,
        (uint64_t)0);
    req(&b, 10, "kernel.compile_cached", "ss", kernel_src, "k");
    req(&b, 11, "kernel.compile", "ssA", kernel_src, "k", 1u, badopt);
    /* Not "gfx90a": with libamdhip64 installed hiprtc would compile it, in
     * process, for most of a second per input. */
    req(&b, 12, "kernel.compile", "ssns", kernel_src, "k", "vax");
    req(&b, 13, "kernel.compile", "ss", kernel_src, "nope");
    req(&b, 14, "run_source", "sssuunr", kernel_src, "hip", "k", (uint64_t)16,
        (uint64_t)1, args.sb.data, args.sb.size);
    req(&b, 15, "run_source", "sssuunr", kernel_src, "cobol", "k", (uint64_t)16,
        (uint64_t)1, args.sb.data, args.sb.size);
    req(&b, 16, "kernel.destroy", "h", 0);
    req(&b, 17, "kernel.launch", "haunnr", 0, 3u, grid, (uint64_t)16,
        args.sb.data, args.sb.size);
    req(&b, 18, "execute_direct", "");
    msgpack_sbuffer_destroy(&bad.sb);
    msgpack_sbuffer_destroy(&args.sb);
    save("dispatch", "kernel", &b);
  }

  /* Code generation, on a fixture's IR. */
  {
    static const char *const soa[] = {"p"};
    static const uint64_t block[] = {64};
    char path[1024], err[300];
    size_t len;
    char *text;
    msgpack_sbuffer ir;

    snprintf(path, sizeof(path), "%s/vec_add.ir.json", fixtures);
    if ((text = ir_json_read_file(path, &len)) == NULL)
      die("%s: %s", path, strerror(errno));
    msgpack_sbuffer_init(&ir);
    if (ir_json_to_msgpack(text, len, &ir, err, sizeof(err)) != 0)
      die("%s: %s", path, err);
    free(text);
    buf_init(&b);
    hello(&b);
    req(&b, 2, "kernel.generate_source", "b", ir.data, ir.size);
    req(&b, 3, "kernel.generate_source", "ba", ir.data, ir.size, 1u, block);
    req(&b, 4, "kernel.generate_source", "bnAs", ir.data, ir.size, 1u, soa,
        "host-x86_64");
    req(&b, 5, "kernel.generate_source", "bnns", ir.data, ir.size, "sm_90");
    req(&b, 6, "kernel.compile_ir", "b", ir.data, ir.size);
    req(&b, 7, "kernel.generate_source", "b", "\x82\xa2ir\x01", (size_t)5);
    req(&b, 8, "intrinsics.list", "");
    req(&b, 9, "intrinsics.list", "s", "gfx90a");
    req(&b, 10, "intrinsics.find", "s", "Float32.sqrt");
    req(&b, 11, "intrinsics.register", "sssu", "My.twice", "(2 * %s)",
        "divergent", (uint64_t)1);
    req(&b, 12, "intrinsics.register", "sss", "sin", "sinf", "divergent");
    req(&b, 13, "intrinsics.register", "sss", "bad", "a;b", "uniform");
    req(&b, 14, "intrinsics.find", "s", "My.twice");
    req(&b, 15, "kernel.generate_source", "b", ir.data, ir.size);
    msgpack_sbuffer_destroy(&ir);
    save("dispatch", "codegen", &b);
  }

  /* Params of the wrong type for a sample of methods. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "mem.alloc", "ss", "ten", "float32");
  req(&b, 3, "mem.write", "iub", (int64_t)-1, (uint64_t)0, bytes, (size_t)4);
  req(&b, 4, "mem.read", "uuu", UINT64_MAX, UINT64_MAX, UINT64_MAX);
  req(&b, 5, "kernel.launch", "nnnnnn");
  req(&b, 6, "event.elapsed", "t");
  req(&b, 7, "device.get", "i", (int64_t)-5);
  req(&b, 8, "hello", "is", (int64_t)1,
      "a client name that is far too long "
      "to fit in the sixty-three bytes hello allows");
  save("dispatch", "bad-params", &b);

  /* Many pipelined requests, a repeated msgid, the largest msgid. */
  buf_init(&b);
  hello(&b);
  for (uint32_t i = 0; i < 300; i++)
    req(&b, i % 7, "ping", "u", (uint64_t)i);
  req(&b, UINT32_MAX, "ping", "");
  save("dispatch", "pipelined", &b);

  /* Protocol violations after answered requests: each closes the session. */
  buf_init(&b);
  hello(&b);
  req(&b, 2, "ping", "");
  proto_pack_response(&b.pk, 3);
  msgpack_pack_nil(&b.pk);
  save("dispatch", "violation-response", &b);

  buf_init(&b);
  hello(&b);
  buf_raw(&b, "\xc1", 1);
  save("dispatch", "violation-c1", &b);

  buf_init(&b);
  hello(&b);
  buf_raw(&b, "\x94\x00\x02\x07\x90", 5); /* method is not a string */
  save("dispatch", "violation-method-int", &b);

  buf_init(&b);
  hello(&b);
  buf_raw(&b, "\x94\x00\x02\xa4ping\xdd\x7f\xff\xff\xff", 13);
  save("dispatch", "violation-array-too-long", &b);

  /* An incomplete request at the end: the session waits for it. */
  buf_init(&b);
  hello(&b);
  buf_raw(&b, "\x94\x00\x02\xa4pi", 6);
  save("dispatch", "incomplete-tail", &b);
}

/* -------------------------------------------------------------- ipc/ */

/* fuzz_ipc's mode byte (fuzz_ipc.c). */
#define IPC_WORKER 0x01
#define IPC_COMPILE 0x02
#define IPC_FD 0x04
#define IPC_OWN_UID 0x08
#define IPC_CHUNK(c) ((uint8_t)((c) << 4))

#if defined(__x86_64__)
#define IPC_HOST_ARCH "host-x86_64"
#elif defined(__aarch64__)
#define IPC_HOST_ARCH "host-aarch64"
#else
#define IPC_HOST_ARCH "host"
#endif

static const char ipc_kernel[] =
    "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n";

static void ipc_save(const char *name, uint8_t mode, buf_t *b)
{
  buf_t f;

  buf_init(&f);
  buf_raw(&f, &mode, 1);
  buf_raw(&f, b->sb.data, b->sb.size);
  save("ipc", name, &f);
  msgpack_sbuffer_destroy(&b->sb);
}

/* compile [driver, arch, source (bin), kernel, [options], refresh]. */
static void ipc_compile(buf_t *b, uint32_t msgid, const char *drv,
                        const char *arch, const char *src, const char *name,
                        unsigned nopts, const char *const *opts,
                        uint64_t refresh)
{
  proto_pack_request(&b->pk, msgid, "compile", 6);
  pk_str(&b->pk, drv);
  pk_str(&b->pk, arch);
  pk_bin(&b->pk, src, strlen(src));
  pk_str(&b->pk, name);
  msgpack_pack_array(&b->pk, nopts);
  for (unsigned i = 0; i < nopts; i++)
    pk_str(&b->pk, opts[i]);
  msgpack_pack_uint64(&b->pk, refresh);
}

/* A compile request whose param @p bad (0-5) is replaced by the raw
 * msgpack @p raw (@p rawlen bytes). */
static void ipc_compile_bad(buf_t *b, uint32_t msgid, int bad, const void *raw,
                            size_t rawlen)
{
  proto_pack_request(&b->pk, msgid, "compile", 6);
  for (int i = 0; i < 6; i++) {
    if (i == bad) {
      buf_raw(b, raw, rawlen);
      continue;
    }
    switch (i) {
    case 0:
      pk_str(&b->pk, "cpu");
      break;
    case 1:
      pk_str(&b->pk, IPC_HOST_ARCH);
      break;
    case 2:
      pk_bin(&b->pk, ipc_kernel, strlen(ipc_kernel));
      break;
    case 3:
      pk_str(&b->pk, "k");
      break;
    case 4:
      msgpack_pack_array(&b->pk, 0);
      break;
    default:
      msgpack_pack_uint8(&b->pk, 0);
    }
  }
}

static void ipc_notify(buf_t *b, const char *method, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  proto_pack_notify(&b->pk, method, (uint32_t)strlen(fmt));
  for (const char *f = fmt; *f; f++) {
    if (*f == 'u')
      msgpack_pack_uint64(&b->pk, va_arg(ap, uint64_t));
    else if (*f == 'i')
      msgpack_pack_int64(&b->pk, va_arg(ap, int64_t));
    else
      pk_str(&b->pk, va_arg(ap, const char *));
  }
  va_end(ap);
}

/* An error object as a listener must not send it: @p code, or no code
 * (@p has_code 0), with or without a message. */
static void ipc_bad_error(buf_t *b, uint32_t msgid, int has_code, int64_t code,
                          int has_msg)
{
  msgpack_pack_array(&b->pk, 4);
  msgpack_pack_uint8(&b->pk, PROTO_RESPONSE);
  msgpack_pack_uint32(&b->pk, msgid);
  msgpack_pack_map(&b->pk, (size_t)(has_code + has_msg));
  if (has_code) {
    pk_str(&b->pk, "code");
    msgpack_pack_int64(&b->pk, code);
  }
  if (has_msg) {
    pk_str(&b->pk, "message");
    pk_str(&b->pk, "made up");
  }
  msgpack_pack_nil(&b->pk);
}

/* The answer to compile: [status, source, key, log, image|nil]. */
static void ipc_compiled(buf_t *b, uint32_t msgid, int64_t status,
                         int64_t source, const char *log, const void *img,
                         size_t imglen)
{
  static const uint8_t key[32] = {1, 2, 3};

  proto_pack_response(&b->pk, msgid);
  msgpack_pack_array(&b->pk, 5);
  msgpack_pack_int64(&b->pk, status);
  msgpack_pack_int64(&b->pk, source);
  pk_bin(&b->pk, key, sizeof(key));
  pk_str(&b->pk, log);
  if (img != NULL)
    pk_bin(&b->pk, img, imglen);
  else
    msgpack_pack_nil(&b->pk);
}

/* The answer to cache.stats: 13 uints and the directory. */
static void ipc_stats(buf_t *b, uint32_t msgid, unsigned n, const char *dir)
{
  proto_pack_response(&b->pk, msgid);
  msgpack_pack_array(&b->pk, n);
  for (unsigned i = 0; i < n && i < 13; i++)
    msgpack_pack_uint64(&b->pk, (uint64_t)i * 1000);
  if (n >= 14)
    pk_str(&b->pk, dir);
}

static void ipc_nil(buf_t *b, uint32_t msgid)
{
  proto_pack_response(&b->pk, msgid);
  msgpack_pack_nil(&b->pk);
}

/* admin [op, [params]]: a client's admin request (@p fmt as req()'s). */
static void ipc_admin(buf_t *b, uint32_t msgid, const char *op, const char *arg,
                      int64_t uarg)
{
  proto_pack_request(&b->pk, msgid, "admin", 2);
  pk_str(&b->pk, op);
  if (arg != NULL) {
    msgpack_pack_array(&b->pk, 1);
    pk_str(&b->pk, arg);
  } else if (uarg >= 0) {
    msgpack_pack_array(&b->pk, 1);
    msgpack_pack_uint64(&b->pk, (uint64_t)uarg);
  } else {
    msgpack_pack_array(&b->pk, 0);
  }
}

/* A worker's report (daemon/admin/report.h) with one session @p sid of
 * uid @p uid on device 0; @p bad: a malformed one (a session of 15). */
static void ipc_report(buf_t *b, uint32_t msgid, uint64_t sid, uint64_t uid,
                       int bad)
{
  msgpack_packer *pk = &b->pk;

  proto_pack_response(pk, msgid);
  msgpack_pack_array(pk, 6);
  msgpack_pack_uint8(pk, 1);
  msgpack_pack_int64(pk, 4321);
  msgpack_pack_array(pk, 1);
  msgpack_pack_array(pk, bad ? 15 : 16);
  msgpack_pack_uint64(pk, sid);
  msgpack_pack_int64(pk, 999);
  msgpack_pack_uint64(pk, uid);
  msgpack_pack_uint64(pk, uid);
  pk_str(pk, "client \"q\"\n");
  for (int i = 0; i < 10; i++)
    msgpack_pack_uint64(pk, (uint64_t)i * 7);
  if (!bad) {
    msgpack_pack_array(pk, 1);
    msgpack_pack_array(pk, 3);
    msgpack_pack_int(pk, 0);
    msgpack_pack_uint64(pk, 1);
    msgpack_pack_uint64(pk, 4096);
  }
  msgpack_pack_array(pk, 1); /* devices */
  msgpack_pack_array(pk, 8);
  msgpack_pack_int(pk, 0);
  pk_str(pk, "cpu:0");
  pk_str(pk, "cpu");
  msgpack_pack_uint64(pk, 1 << 30);
  msgpack_pack_uint64(pk, 1);
  msgpack_pack_uint64(pk, 4096);
  msgpack_pack_false(pk);
  msgpack_pack_array(pk, 6);
  msgpack_pack_int(pk, 0);
  for (int i = 0; i < 5; i++)
    msgpack_pack_uint64(pk, (uint64_t)i + 1);
  msgpack_pack_array(pk, 1); /* uids: uid, quota, faults, mps_threads,
                                mps_mem, counters */
  msgpack_pack_array(pk, 6);
  msgpack_pack_uint64(pk, uid);
  msgpack_pack_uint64(pk, 2);
  msgpack_pack_uint64(pk, 1);
  msgpack_pack_uint64(pk, 50);
  msgpack_pack_uint64(pk, 0);
  msgpack_pack_array(pk, 1);
  msgpack_pack_array(pk, 6);
  msgpack_pack_int(pk, 0);
  for (int i = 0; i < 5; i++)
    msgpack_pack_uint64(pk, (uint64_t)i + 1);
  msgpack_pack_array(pk, 2); /* requests */
  msgpack_pack_array(pk, 3);
  pk_str(pk, "mem.alloc");
  msgpack_pack_int(pk, 0);
  msgpack_pack_uint64(pk, 3);
  msgpack_pack_array(pk, 3);
  pk_str(pk, "mem.alloc");
  msgpack_pack_int(pk, -35);
  msgpack_pack_uint64(pk, 1);
}

static void gen_ipc_listener(void)
{
  static const char *const opts[] = {"-O2", "-DN=4"};
  char big[300];
  buf_t b;

  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';

  /* What a worker says of itself, and the counters. */
  buf_init(&b);
  ipc_notify(&b, "ready", "i", (int64_t)12345);
  req(&b, 1, "cache.stats", "");
  ipc_notify(&b, "closed", "u", (uint64_t)7);
  ipc_notify(&b, "closed", "");
  req(&b, 2, "cache.stats", "s", "ignored");
  req(&b, UINT32_MAX, "cache.stats", "");
  ipc_save("l-ready-stats-closed", 0, &b);

  /* A valid compile of a tiny CPU kernel (the budget allows one real
   * compile), then the counters; the same request again is a cache hit. */
  buf_init(&b);
  ipc_notify(&b, "ready", "i", (int64_t)1);
  ipc_compile(&b, 1, "cpu", IPC_HOST_ARCH, ipc_kernel, "k", 0, NULL, 0);
  req(&b, 2, "cache.stats", "");
  ipc_compile(&b, 3, "cpu", IPC_HOST_ARCH, ipc_kernel, "k", 0, NULL, 0);
  ipc_save("l-compile-valid", IPC_COMPILE, &b);

  /* Regression (ipc.c): a message that arrives in several reads is
   * delivered once its last byte is in, not when more bytes follow it. */
  buf_init(&b);
  ipc_compile(&b, 9, "cpu", IPC_HOST_ARCH, ipc_kernel, "k", 0, NULL, 0);
  ipc_save("l-regress-split-message", IPC_CHUNK(3), &b);
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  req(&b, 2, "cache.clear", "u", (uint64_t)4242);
  ipc_save("l-regress-split-1-byte", IPC_CHUNK(1), &b);

  /* Regression (workers.c): an adopted channel's compile is answered. A
   * compile without budget (its log says so), options and refresh. */
  buf_init(&b);
  ipc_compile(&b, 1, "cpu", IPC_HOST_ARCH, ipc_kernel, "k", 2, opts, 1);
  ipc_compile(&b, 2, "cpu", IPC_HOST_ARCH, "int main(", "k", 0, NULL, 0);
  ipc_compile(&b, 3, "cpu", IPC_HOST_ARCH, ipc_kernel, "not a name!", 0, NULL,
              0);
  ipc_save("l-regress-compile-answered", 0, &b);

  /* Nothing compiles these: unknown drivers and architectures. */
  buf_init(&b);
  ipc_compile(&b, 1, "cobol", IPC_HOST_ARCH, ipc_kernel, "k", 0, NULL, 0);
  ipc_compile(&b, 2, "cpu", "vax", ipc_kernel, "k", 0, NULL, 0);
  ipc_compile(&b, 3, "cpu", "", ipc_kernel, "k", 0, NULL, 0);
  ipc_compile(&b, 4, "", "", "", "", 0, NULL, 0);
  ipc_save("l-compile-unsupported", 0, &b);
  /* Replay only: fuzz_ipc does not run a hip compile under libFuzzer. */
  buf_init(&b);
  ipc_compile(&b, 1, "hip", "vax", ipc_kernel, "k", 0, NULL, 0);
  ipc_save("l-compile-hip-vax", 0, &b);

  /* Each param of compile malformed in turn: EPARAMS, the channel lives. */
  {
    static const struct {
      int param;
      const char *raw;
      size_t len;
    } bad[] = {
        {0, "\x07", 1}, /* driver int */
        {0,
         "\xd9\x20"
         "0123456789abcdef0123456789abcdef",
         34},                   /* 32 bytes */
        {1, "\xc0", 1},         /* arch nil */
        {2, "\x92\x01\x02", 3}, /* source array */
        {3, "\xc3", 1},         /* kernel true */
        {4, "\xa3-O2", 4},      /* options str */
        {4, "\x91\x05", 2},     /* an option int */
        {5, "\x02", 1},         /* refresh 2 */
        {5, "\xa1\x31", 2},     /* refresh "1" */
        {5, "\xff", 1},         /* refresh -1 */
    };
    uint8_t many[3 + 257];
    buf_init(&b);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
      ipc_compile_bad(&b, (uint32_t)i + 1, bad[i].param, bad[i].raw,
                      bad[i].len);
    /* arch of 64 bytes, kernel of 256 */
    {
      buf_t r;
      char a64[65], n256[257];
      memset(a64, 'x', 64);
      a64[64] = '\0';
      memset(n256, 'n', 256);
      n256[256] = '\0';
      buf_init(&r);
      pk_str(&r.pk, a64);
      ipc_compile_bad(&b, 20, 1, r.sb.data, r.sb.size);
      msgpack_sbuffer_destroy(&r.sb);
      buf_init(&r);
      pk_str(&r.pk, n256);
      ipc_compile_bad(&b, 21, 3, r.sb.data, r.sb.size);
      msgpack_sbuffer_destroy(&r.sb);
    }
    /* 257 options */
    many[0] = 0xdc;
    many[1] = 0x01;
    many[2] = 0x01;
    memset(many + 3, 0xa0, 257);
    ipc_compile_bad(&b, 22, 4, many, sizeof(many));
    /* an option of 4097 bytes */
    {
      buf_t r;
      char *o = malloc(4098);
      memset(o, 'o', 4097);
      o[4097] = '\0';
      buf_init(&r);
      msgpack_pack_array(&r.pk, 1);
      pk_str(&r.pk, o);
      ipc_compile_bad(&b, 23, 4, r.sb.data, r.sb.size);
      msgpack_sbuffer_destroy(&r.sb);
      free(o);
    }
    /* too few params, none, not an array of params */
    req(&b, 24, "compile", "ss", "cpu", IPC_HOST_ARCH);
    req(&b, 25, "compile", "");
    req(&b, 26, "compile", "sssssss", "cpu", IPC_HOST_ARCH, ipc_kernel, "k", "",
        "", "");
    req(&b, 27, "cache.stats", "");
    ipc_save("l-compile-bad-params", 0, &b);
  }

  /* cache.clear: for a stranger's worker, never (regression, workers.c:
   * uid 0 was let through from any worker); for the daemon's own uid's
   * worker, its own uid. Malformed params. */
  buf_init(&b);
  req(&b, 1, "cache.clear", "u", (uint64_t)0);
  req(&b, 2, "cache.clear", "u", (uint64_t)4242);
  req(&b, 3, "cache.clear", "");
  req(&b, 4, "cache.clear", "s", "0");
  req(&b, 5, "cache.clear", "u", (uint64_t)1 << 33);
  req(&b, 6, "cache.clear", "i", (int64_t)-1);
  req(&b, 7, "cache.stats", "");
  ipc_save("l-regress-clear-stranger", 0, &b);
  buf_init(&b);
  req(&b, 1, "cache.clear", "u", (uint64_t)0);
  req(&b, 2, "cache.clear", "u", (uint64_t)1000);
  req(&b, 3, "cache.stats", "");
  ipc_save("l-clear-own-uid", IPC_OWN_UID, &b);

  /* Each of these breaks the channel (after answering what came before). */
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  req(&b, 2, "compile2", "");
  req(&b, 3, "cache.stats", "");
  ipc_save("l-break-unknown-request", 0, &b);
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  ipc_notify(&b, "conn", "uuui", (uint64_t)1, (uint64_t)0, (uint64_t)0,
             (int64_t)1);
  ipc_save("l-break-unknown-notify", 0, &b);
  buf_init(&b);
  ipc_nil(&b, 1);
  ipc_save("l-break-response", 0, &b);
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  buf_raw(&b, "\xc1", 1);
  ipc_save("l-break-c1", 0, &b);
  buf_init(&b);
  buf_raw(&b, "\x94\x00\x01\x07\x90", 5); /* method is not a string */
  ipc_save("l-break-method-int", 0, &b);
  buf_init(&b);
  buf_raw(&b,
          "\x93\x00\x01\xa3"
          "abc",
          7); /* a request of 3 */
  ipc_save("l-break-arity", 0, &b);

  /* Past ipc_limits(): an array of 4097, a map of 65, nesting of 7, a
   * binary of 256 MiB + 1. */
  buf_init(&b);
  buf_raw(&b,
          "\x94\x00\x01\xab"
          "cache.stats"
          "\x91\xdd\x00\x00\x10\x01",
          21);
  ipc_save("l-break-array-4097", 0, &b);
  buf_init(&b);
  buf_raw(&b,
          "\x94\x00\x01\xab"
          "cache.stats"
          "\x91\xde\x00\x41",
          19);
  ipc_save("l-break-map-65", 0, &b);
  buf_init(&b);
  proto_pack_request(&b.pk, 1, "cache.stats", 1);
  for (int i = 0; i < 6; i++)
    msgpack_pack_array(&b.pk, 1);
  msgpack_pack_nil(&b.pk);
  ipc_save("l-break-depth-7", 0, &b);
  buf_init(&b);
  buf_raw(&b,
          "\x94\x00\x01\xa7"
          "compile"
          "\x96\xc6\x10\x00\x00\x01",
          17);
  ipc_save("l-break-bin-over-256MiB", 0, &b);
  /* Within them: a source of 256 MiB - 64 that never comes (the listener
   * waits), a truncated request. */
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  {
    static const uint8_t head[] = {0x94, 0x00, 0x02, 0xa7, 'c', 'o',
                                   'm',  'p',  'i',  'l',  'e', 0x96};
    buf_raw(&b, head, sizeof(head));
    pk_str(&b.pk, "cpu");
    pk_str(&b.pk, IPC_HOST_ARCH);
    buf_raw(&b,
            "\xc6\x0f\xff\xff\xc0"
            "abc",
            8);
  }
  ipc_save("l-incomplete-source-near-limit", 0, &b);
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  buf_raw(&b,
          "\x94\x00\x02\xab"
          "cache.st",
          12);
  ipc_save("l-incomplete-tail", 0, &b);

  /* Regression (ipc.c): a descriptor from a worker breaks its channel
   * (the listener would hold it until the worker ends). */
  buf_init(&b);
  req(&b, 1, "cache.stats", "");
  ipc_save("l-regress-descriptor", IPC_FD, &b);

  /* Many requests in 8-byte chunks. */
  buf_init(&b);
  for (uint32_t i = 0; i < 64; i++)
    req(&b, i, i % 3 ? "cache.stats" : "cache.clear", i % 3 ? "" : "u",
        (uint64_t)i);
  ipc_save("l-pipelined-chunked", IPC_CHUNK(2), &b);
  (void)big;

  /* Admin requests of a stranger and of the daemon's own uid (an admin):
   * each answered [status, message, result]; nothing gathered from an
   * adopted channel. Bad ops and params: EPARAMS, the channel lives. */
  buf_init(&b);
  ipc_admin(&b, 1, "session.list", NULL, -1);
  ipc_admin(&b, 2, "daemon.stats", NULL, -1);
  ipc_admin(&b, 3, "metrics", NULL, -1);
  ipc_admin(&b, 4, "log.level", NULL, -1);
  ipc_admin(&b, 5, "log.level", "debug", -1);
  ipc_admin(&b, 6, "session.kill", NULL, 42);
  ipc_admin(&b, 7, "cache.list", NULL, -1);
  ipc_save("l-admin-stranger", 0, &b);
  buf_init(&b);
  ipc_admin(&b, 1, "log.level", "warn", -1);
  ipc_admin(&b, 2, "session.kill", NULL, 1);
  ipc_admin(&b, 3, "metrics", NULL, -1);
  ipc_admin(&b, 4, "log.level", "loud", -1);
  ipc_save("l-admin-own-uid", IPC_OWN_UID, &b);
  buf_init(&b);
  ipc_admin(&b, 1, "mem.alloc", NULL, -1);
  ipc_admin(&b, 2, "session.kill", "x", -1);
  ipc_admin(&b, 3, "session.list", NULL, 7);
  req(&b, 4, "admin", "s", "session.list");
  req(&b, 5, "admin", "");
  req(&b, 6, "admin", "us", (uint64_t)1, "x");
  ipc_save("l-admin-bad", 0, &b);

  /* The adopted channel answers the listener's asks: a report for a
   * view, then a kill of the session it listed (the daemon's own uid is
   * an admin); a malformed report breaks the channel. */
  buf_init(&b);
  ipc_admin(&b, 7, "session.list", NULL, -1);
  ipc_report(&b, 1, 5, 4242, 0);
  ipc_admin(&b, 8, "metrics", NULL, -1); /* shares report 1 */
  ipc_save("l-admin-report-answered", 0, &b);
  buf_init(&b);
  ipc_admin(&b, 3, "session.kill", NULL, 5);
  ipc_report(&b, 1, 5, 0, 0);
  proto_pack_response(&b.pk, 2);
  msgpack_pack_true(&b.pk);
  ipc_admin(&b, 4, "daemon.stats", NULL, -1);
  ipc_save("l-admin-kill-answered", IPC_OWN_UID, &b);
  buf_init(&b);
  ipc_admin(&b, 3, "session.list", NULL, -1);
  ipc_report(&b, 1, 5, 4242, 1);
  req(&b, 4, "cache.stats", "");
  ipc_save("l-admin-report-malformed", 0, &b);
  /* Views of one tenant while its report is unanswered: one report
   * request for all of them, four in flight, the fifth and sixth EBUSY. */
  buf_init(&b);
  for (uint32_t i = 1; i <= 6; i++)
    ipc_admin(&b, i, i % 2 ? "session.list" : "metrics", NULL, -1);
  ipc_save("l-admin-views-busy", 0, &b);
  /* A report of another uid's session and counters (uid 7, the tenant
   * is 4242): the listener ignores them, no view shows them. */
  buf_init(&b);
  ipc_admin(&b, 7, "session.list", NULL, -1);
  ipc_report(&b, 1, 9, 7, 0);
  ipc_admin(&b, 8, "metrics", NULL, -1);
  ipc_save("l-admin-report-foreign-uid", 0, &b);
  buf_init(&b);
  ipc_admin(&b, 7, "metrics", NULL, -1);
  ipc_report(&b, 1, 9, 7, 0);
  ipc_admin(&b, 8, "session.list", NULL, -1);
  ipc_save("l-admin-report-foreign-uid-admin", IPC_OWN_UID, &b);
  buf_init(&b);
  ipc_nil(&b, 77);
  ipc_save("l-answer-to-nothing", 0, &b);
}

static void gen_ipc_worker(void)
{
  static const char elf[] = "\x7f"
                            "ELF not really a module";
  buf_t b;

  /* Valid answers to the three pending requests (1 compile, 2 stats, 3
   * clear). */
  buf_init(&b);
  ipc_compiled(&b, 1, 0, 0, "", elf, sizeof(elf) - 1);
  ipc_stats(&b, 2, 14, "/var/cache/hipd");
  ipc_nil(&b, 3);
  ipc_save("w-answers-valid", IPC_WORKER, &b);
  buf_init(&b);
  ipc_stats(&b, 2, 14, "");
  ipc_compiled(&b, 1, HIPD_ECOMPILE, 0, "k.cpp:1: error: expected ';'", NULL,
               0);
  ipc_nil(&b, 3);
  ipc_save("w-answers-failed-compile", IPC_WORKER | IPC_CHUNK(1), &b);

  /* Error answers, valid ones. */
  buf_init(&b);
  proto_pack_error_response(&b.pk, 1, HIPD_ENOTSUP, "no compiler targets it");
  proto_pack_error_response(&b.pk, 2, HIPD_EIO, "no");
  proto_pack_error_response(&b.pk, 3, HIPD_EPERM, "not yours");
  ipc_save("w-answers-errors", IPC_WORKER, &b);

  /* Regression (worker.c): an error whose code is not negative fails the
   * request (HIPD_EIO), never passes for a success. */
  buf_init(&b);
  ipc_bad_error(&b, 1, 1, 0, 1);
  ipc_bad_error(&b, 2, 1, 0, 0);
  ipc_bad_error(&b, 3, 1, 5, 1);
  ipc_save("w-regress-error-code-0", IPC_WORKER, &b);
  buf_init(&b);
  ipc_bad_error(&b, 1, 0, 0, 1);
  ipc_bad_error(&b, 2, 1, (int64_t)1 << 40, 1);
  msgpack_pack_array(&b.pk, 4);
  msgpack_pack_uint8(&b.pk, PROTO_RESPONSE);
  msgpack_pack_uint32(&b.pk, 3);
  pk_str(&b.pk, "an error that is a string");
  msgpack_pack_nil(&b.pk);
  ipc_save("w-errors-malformed", IPC_WORKER, &b);

  /* compile answers of bad shapes, one per input (the first answer
   * settles a request). */
  {
    buf_t r;
    buf_init(&b);
    proto_pack_response(&b.pk, 1);
    msgpack_pack_array(&b.pk, 4);
    for (int i = 0; i < 4; i++)
      msgpack_pack_uint8(&b.pk, 0);
    ipc_save("w-compile-array-4", IPC_WORKER, &b);
    buf_init(&b);
    ipc_compiled(&b, 1, 0, 0, "", NULL, 0);
    ipc_save("w-compile-ok-without-image", IPC_WORKER, &b);
    buf_init(&b);
    ipc_compiled(&b, 1, 0, 0, "", "", 0);
    ipc_save("w-compile-ok-empty-image", IPC_WORKER, &b);
    buf_init(&b);
    ipc_compiled(&b, 1, 3, 0, "", elf, 4);
    ipc_save("w-compile-status-positive", IPC_WORKER, &b);
    buf_init(&b);
    ipc_compiled(&b, 1, 0, 9, "", elf, 4);
    ipc_save("w-compile-source-9", IPC_WORKER, &b);
    buf_init(&b);
    ipc_compiled(&b, 1, -99999, 0, "", NULL, 0);
    ipc_save("w-compile-status-unknown", IPC_WORKER, &b);
    buf_init(&b);
    proto_pack_response(&b.pk, 1);
    msgpack_pack_array(&b.pk, 5);
    msgpack_pack_int8(&b.pk, 0);
    msgpack_pack_int8(&b.pk, 0);
    msgpack_pack_nil(&b.pk);
    msgpack_pack_uint8(&b.pk, 7); /* log not a string */
    pk_str(&b.pk, "image as a string");
    ipc_save("w-compile-log-int", IPC_WORKER, &b);
    buf_init(&b);
    proto_pack_response(&b.pk, 1);
    pk_str(&b.pk, "not an array");
    ipc_stats(&b, 2, 13, "");
    proto_pack_response(&b.pk, 3);
    msgpack_pack_map(&b.pk, 0);
    ipc_save("w-results-wrong-types", IPC_WORKER, &b);
    buf_init(&b);
    ipc_stats(&b, 2, 14, "");
    /* patch: a negative counter */
    buf_init(&r);
    proto_pack_response(&r.pk, 2);
    msgpack_pack_array(&r.pk, 14);
    msgpack_pack_int8(&r.pk, -1);
    for (int i = 1; i < 13; i++)
      msgpack_pack_uint8(&r.pk, 0);
    msgpack_pack_uint8(&r.pk, 0); /* dir not a string */
    msgpack_sbuffer_destroy(&b.sb);
    ipc_save("w-stats-negative-and-dir-int", IPC_WORKER, &r);
  }

  /* Answers nobody waits for: unknown msgid, a second answer. */
  buf_init(&b);
  ipc_nil(&b, 99);
  ipc_nil(&b, 3);
  ipc_nil(&b, 3);
  ipc_nil(&b, 0);
  ipc_save("w-answers-unexpected", IPC_WORKER, &b);

  /* Requests and unknown notifications from a listener: ignored. */
  buf_init(&b);
  req(&b, 1, "ping", "");
  ipc_notify(&b, "hello", "s", "there");
  ipc_nil(&b, 2);
  ipc_save("w-ignored", IPC_WORKER, &b);

  /* exit: the worker stops. */
  buf_init(&b);
  ipc_notify(&b, "exit", "");
  ipc_nil(&b, 3);
  ipc_save("w-exit", IPC_WORKER, &b);

  /* Regression (worker.c): conn without its connection, or with a
   * descriptor that is not a socket, is refused (the worker stops). */
  buf_init(&b);
  ipc_notify(&b, "conn", "uuui", (uint64_t)7, (uint64_t)4242, (uint64_t)4242,
             (int64_t)99);
  ipc_save("w-regress-conn-without-descriptor", IPC_WORKER, &b);
  buf_init(&b);
  ipc_notify(&b, "conn", "uuui", (uint64_t)7, (uint64_t)4242, (uint64_t)4242,
             (int64_t)99);
  ipc_save("w-regress-conn-with-memfd", IPC_WORKER | IPC_FD, &b);
  buf_init(&b);
  ipc_notify(&b, "conn", "s", "seven");
  ipc_save("w-conn-malformed", IPC_WORKER, &b);
  buf_init(&b);
  ipc_notify(&b, "conn", "uuui", (uint64_t)0, (uint64_t)0, (uint64_t)0,
             (int64_t)-1);
  ipc_save("w-conn-id-0", IPC_WORKER | IPC_CHUNK(2), &b);

  /* The channel breaks: garbage, a bad frame, past the limits, and a
   * descriptor with an answer. */
  buf_init(&b);
  ipc_nil(&b, 3);
  buf_raw(&b, "\xc1", 1);
  ipc_save("w-break-c1", IPC_WORKER, &b);
  buf_init(&b);
  buf_raw(&b, "\x94\x01\x01\xc0\xc6\x10\x00\x00\x01", 9);
  ipc_save("w-break-bin-over-256MiB", IPC_WORKER, &b);
  buf_init(&b);
  buf_raw(&b, "\x92\x01\x01", 3);
  ipc_save("w-break-arity", IPC_WORKER, &b);
  buf_init(&b);
  buf_raw(&b,
          "\x94\x01\x01\xc0\xc6\x0f\xff\xff\x00"
          "abc",
          12);
  ipc_save("w-incomplete-image-near-limit", IPC_WORKER, &b);
  buf_init(&b);
  ipc_nil(&b, 3);
  ipc_save("w-descriptor-with-answer", IPC_WORKER | IPC_FD, &b);
  /* Regression (of the target): a channel that broke stops reading; the
   * rest, in 1-byte chunks, fills the socket and must not hang the target. */
  buf_init(&b);
  ipc_stats(&b, 2, 14, "");
  buf_raw(&b, "\x92\x01\x01", 3);
  for (uint32_t i = 0; i < 40; i++)
    req(&b, i, "cache.stats", "");
  ipc_save("w-regress-break-then-small-chunks", IPC_WORKER | IPC_CHUNK(1), &b);

  /* The listener's admin requests (report, kill) and level; the answer
   * to the pending admin request (msgid 4): a result, a refusal, bad
   * shapes. */
  buf_init(&b);
  req(&b, 100, "report", "");
  req(&b, 101, "kill", "us", (uint64_t)7, "killed by uid 0 (root)");
  ipc_notify(&b, "log.level", "u", (uint64_t)2);
  proto_pack_response(&b.pk, 4);
  msgpack_pack_array(&b.pk, 3);
  msgpack_pack_int(&b.pk, 0);
  pk_str(&b.pk, "");
  pk_bin(&b.pk, "\x90", 1);
  ipc_save("w-admin-valid", IPC_WORKER, &b);
  buf_init(&b);
  proto_pack_response(&b.pk, 4);
  msgpack_pack_array(&b.pk, 3);
  msgpack_pack_int(&b.pk, HIPD_EPERM);
  pk_str(&b.pk, "setting the level needs root");
  msgpack_pack_nil(&b.pk);
  req(&b, 7, "report", "");
  req(&b, 8, "report", "");
  ipc_save("w-admin-refused", IPC_WORKER | IPC_CHUNK(1), &b);
  buf_init(&b);
  proto_pack_response(&b.pk, 4);
  msgpack_pack_array(&b.pk, 2);
  msgpack_pack_int(&b.pk, 0);
  pk_str(&b.pk, "");
  ipc_save("w-admin-answer-malformed", IPC_WORKER, &b);
  buf_init(&b);
  req(&b, 9, "kill", "s", "seven");
  ipc_save("w-kill-malformed", IPC_WORKER, &b);
  buf_init(&b);
  req(&b, 9, "report", "u", (uint64_t)1);
  ipc_save("w-report-malformed", IPC_WORKER, &b);
  buf_init(&b);
  ipc_notify(&b, "log.level", "u", (uint64_t)9);
  ipc_save("w-log-level-malformed", IPC_WORKER, &b);

  /* The uid's grants (privsep/wire.h WIRE_GRANTS): a table of two, then
   * one revoked by uid 0 (its sessions close, "access revoked: "); a
   * grant without a label, a serial 0, a table of the wrong shape. */
  buf_init(&b);
  proto_pack_notify(&b.pk, "grants", 3);
  pk_str(&b.pk, "");
  msgpack_pack_int64(&b.pk, -1);
  msgpack_pack_array(&b.pk, 2);
  msgpack_pack_array(&b.pk, 4);
  msgpack_pack_uint64(&b.pk, 1);
  pk_str(&b.pk, "job-1");
  msgpack_pack_uint64(&b.pk, 1);
  msgpack_pack_uint64(&b.pk, 65536);
  msgpack_pack_array(&b.pk, 4);
  msgpack_pack_uint64(&b.pk, 2);
  pk_str(&b.pk, "job-2");
  msgpack_pack_uint64(&b.pk, 3);
  msgpack_pack_uint64(&b.pk, 0);
  proto_pack_notify(&b.pk, "grants", 3);
  pk_str(&b.pk, " (revoked by uid 0 (root))");
  msgpack_pack_int64(&b.pk, 0);
  msgpack_pack_array(&b.pk, 1);
  msgpack_pack_array(&b.pk, 4);
  msgpack_pack_uint64(&b.pk, 2);
  pk_str(&b.pk, "job-2");
  msgpack_pack_uint64(&b.pk, 3);
  msgpack_pack_uint64(&b.pk, 0);
  ipc_save("w-grants-then-revoke", IPC_WORKER, &b);
  buf_init(&b);
  proto_pack_notify(&b.pk, "grants", 3);
  pk_str(&b.pk, "");
  msgpack_pack_int64(&b.pk, -1);
  msgpack_pack_array(&b.pk, 2);
  msgpack_pack_array(&b.pk, 4);
  msgpack_pack_uint64(&b.pk, 0);
  pk_str(&b.pk, "x");
  msgpack_pack_uint64(&b.pk, 1);
  msgpack_pack_uint64(&b.pk, 0);
  msgpack_pack_array(&b.pk, 3);
  msgpack_pack_uint64(&b.pk, 5);
  pk_str(&b.pk, "");
  msgpack_pack_uint64(&b.pk, 1);
  ipc_save("w-grants-malformed", IPC_WORKER, &b);
  buf_init(&b);
  ipc_notify(&b, "grants", "s", "no table");
  ipc_save("w-grants-wrong-shape", IPC_WORKER, &b);
}

/* What a metrics process sends its listener (privsep/metrics.c): mode
 * IPC_WORKER | IPC_OWN_UID. */
#define IPC_METRICS (IPC_WORKER | IPC_OWN_UID)
static void gen_ipc_metrics(void)
{
  buf_t b;

  buf_init(&b);
  ipc_notify(&b, "ready", "");
  req(&b, 1, "metrics", "");
  req(&b, UINT32_MAX, "metrics", "");
  ipc_save("m-ready-metrics", IPC_METRICS, &b);

  /* metrics takes no params: an error, and the channel goes on. */
  buf_init(&b);
  ipc_notify(&b, "ready", "");
  req(&b, 2, "metrics", "u", (uint64_t)1);
  req(&b, 3, "metrics", "s", "all");
  req(&b, 4, "metrics", "");
  ipc_save("m-metrics-bad-params", IPC_METRICS, &b);

  buf_init(&b);
  ipc_notify(&b, "ready", "");
  for (uint32_t i = 1; i <= 20; i++)
    req(&b, i, "metrics", "");
  ipc_save("m-many-in-flight", IPC_METRICS, &b);
  buf_init(&b);
  ipc_notify(&b, "ready", "");
  req(&b, 1, "metrics", "");
  req(&b, 2, "metrics", "u", (uint64_t)7);
  ipc_save("m-pipelined-chunked", IPC_METRICS | IPC_CHUNK(1), &b);

  /* What breaks the channel: another request, a response, ready with
   * params, a descriptor. */
  buf_init(&b);
  req(&b, 1, "metrics", "");
  req(&b, 2, "cache.stats", "");
  req(&b, 3, "metrics", "");
  ipc_save("m-break-unknown-request", IPC_METRICS, &b);
  buf_init(&b);
  req(&b, 1, "metrics", "");
  ipc_nil(&b, 5);
  ipc_save("m-break-response", IPC_METRICS, &b);
  buf_init(&b);
  ipc_notify(&b, "ready", "i", (int64_t)1);
  req(&b, 1, "metrics", "");
  ipc_save("m-break-ready-params", IPC_METRICS, &b);
  buf_init(&b);
  ipc_notify(&b, "ready", "");
  req(&b, 1, "metrics", "");
  ipc_save("m-break-descriptor", IPC_METRICS | IPC_FD, &b);
}

/* -------------------------------------------------------------- ring/ */

/* fuzz_ring's opcodes (fuzz_ring.c's OP_ enum) and config byte: entries
 * 8 << (c & 3), --max-inflight {2, 4, 16, 256}[(c >> 2) & 3], --busy-poll
 * 50 us with bit 4. */
enum {
  RO_REQ,
  RO_RAW,
  RO_AFTER,
  RO_PUBLISH,
  RO_HEAD,
  RO_REWRITE,
  RO_KICK,
  RO_SOCK,
  RO_RUN,
  RO_WAIT,
  RO_CQWAIT,
  RO_SCRIBBLE,
  RO_GARBAGE,
  RO_BURST
};
#define RING_CFG(entries_log, inflight, busy)                                  \
  ((uint8_t)((entries_log) | (inflight) << 2 | ((busy) ? 0x10 : 0)))

#define RB(b, ...)                                                             \
  do {                                                                         \
    const uint8_t rb_[] = {__VA_ARGS__};                                       \
    buf_raw(b, rb_, sizeof(rb_));                                              \
  } while (0)

/* A table request's operands as build_request() reads them: the method's
 * row (fuzz_ring.c's ring_methods), then a byte per param (handle 0 its
 * kind's own, 8 buffer B; offsets and lengths in units of 64). */
#define M_EVENT_QUERY 0, 0
#define M_EVENT_RECORD 1, 0
#define M_EVENT_RECORD_S 2, 0, 0
#define M_EVENT_SYNC 3, 0
#define M_LAUNCH 4, 0, 0, 0, 0
#define M_COPY 5, 0, 0, 8, 0, 16
#define M_COPY_ASYNC 6, 0, 0, 8, 0, 16, 0
#define M_MEMSET 7, 0, 0, 16, 7
#define M_MEMSET_ASYNC 8, 0, 0, 16, 7, 0
#define M_READ_SHM 9, 0, 0, 0, 0, 16
#define M_READ_SHM_ASYNC 10, 0, 0, 0, 0, 16, 0
#define M_WRITE_SHM 11, 0, 0, 0, 0, 16
#define M_WRITE_SHM_ASYNC 12, 0, 0, 0, 0, 16, 0
#define M_STREAM_QUERY 13, 0
#define M_STREAM_SYNC 14, 0
#define M_PING 16 /* markers: answered at dispatch */
#define M_RING_OPEN 17, 0
#define M_FREE 18, 0
#define M_NO_SUCH 19
/* A request into the next slot, `after` what was written; publish +1 and
 * kick if the daemon sleeps; read every completion (and kick if wanted). */
#define REQ(...) RO_REQ, 0, __VA_ARGS__, 0
#define PUB RO_PUBLISH, 0x80
#define PUB_ALL RO_PUBLISH, 0x84
#define READ RO_HEAD, 0x80
#define RUN RO_RUN, 7
#define SETTLE RO_RUN, 7, RO_WAIT, RO_WAIT, RO_RUN, 7
/* Socket requests (fuzz_ring.c's sock_op). */
#define S_PING RO_SOCK, 0
#define S_INFO RO_SOCK, 1
#define S_FREE_A RO_SOCK, 2
#define S_STREAM_DESTROY RO_SOCK, 3
#define S_EVENT_DESTROY RO_SOCK, 4
#define S_SHM_FREE RO_SOCK, 5
#define S_STREAM_SYNC RO_SOCK, 6
#define S_RING_OPEN RO_SOCK, 7
#define S_MEMSET RO_SOCK, 8, 16

static void ring_save(const char *name, uint8_t cfg, buf_t *b)
{
  buf_t f;

  buf_init(&f);
  buf_raw(&f, &cfg, 1);
  buf_raw(&f, b->sb.data, b->sb.size);
  save("ring", name, &f);
  msgpack_sbuffer_destroy(&b->sb);
}

/* A raw slot at the next index: its length, no flags, the bytes of @p m,
 * `after` what was written. */
static void ring_raw(buf_t *b, uint16_t len, buf_t *m)
{
  uint8_t op[5] = {RO_RAW, 0, (uint8_t)len, (uint8_t)(len >> 8), 0};

  buf_raw(b, op, sizeof(op));
  if (m != NULL) {
    buf_raw(b, m->sb.data, m->sb.size < len ? m->sb.size : len);
    for (size_t i = m->sb.size; i < len && i < 496; i++)
      buf_raw(b, "", 1);
    msgpack_sbuffer_destroy(&m->sb);
  } else {
    for (size_t i = 0; i < len && i < 496; i++)
      buf_raw(b, "\x5a", 1);
  }
  buf_raw(b, "", 1); /* after */
}

static void gen_ring(void)
{
  const uint8_t e8 = RING_CFG(0, 3, 0), e16 = RING_CFG(1, 3, 0);
  buf_t b, m;

  /* Every method a ring takes, and the markers, one at a time. */
  buf_init(&b);
  RB(&b, REQ(M_EVENT_QUERY), PUB, RUN, READ, REQ(M_EVENT_RECORD), PUB, SETTLE,
     READ, REQ(M_EVENT_RECORD_S), PUB, SETTLE, READ, REQ(M_EVENT_SYNC), PUB,
     SETTLE, READ, REQ(M_EVENT_QUERY), PUB, SETTLE, READ, REQ(M_LAUNCH), PUB,
     RUN, READ, REQ(M_COPY), PUB, SETTLE, READ, REQ(M_COPY_ASYNC), PUB, SETTLE,
     READ, REQ(M_MEMSET), PUB, SETTLE, READ, REQ(M_MEMSET_ASYNC), PUB, SETTLE,
     READ, REQ(M_READ_SHM), PUB, SETTLE, READ, REQ(M_READ_SHM_ASYNC), PUB,
     SETTLE, READ, REQ(M_WRITE_SHM), PUB, SETTLE, READ, REQ(M_WRITE_SHM_ASYNC),
     PUB, SETTLE, READ, REQ(M_STREAM_QUERY), PUB, SETTLE, READ,
     REQ(M_STREAM_SYNC), PUB, SETTLE, READ, REQ(M_PING), PUB, RUN, READ,
     REQ(M_RING_OPEN), PUB, RUN, READ, REQ(M_FREE), PUB, RUN, READ,
     REQ(M_NO_SUCH), PUB, RUN, READ);
  ring_save("methods", e16, &b);

  /* Params out of range, of the wrong kind, forged handles, a param too
   * many and one too few. */
  buf_init(&b);
  RB(&b, RO_REQ, 0, 7, 0, 0xc8, 0, 7, 0, PUB, RUN, READ, /* offset 4096+8 */
     RO_REQ, 0, 7, 5, 1, 2, 3, 4, 5, 6, 7, 8, 0, 16, 7, 0, PUB, RUN, READ,
     RO_REQ, 0, 7, 7, 0, 16, 0xff, 0, PUB, RUN, READ, /* value 511 */
     RO_REQ, 0, 0x47, 0, 0, 16, 0, PUB, RUN, READ,    /* 3 params */
     RO_REQ, 0, 0x8d, 0, 0, PUB, RUN, READ,           /* 2 params */
     RO_REQ, 0, 9, 0, 0, 0, 0xf0, 0, 0, 0, 0, 0, 0, 0, 1, 16, 0, PUB, RUN, READ,
     RO_REQ, 0, 13, 6, 0, PUB, RUN, READ, RO_REQ, 0, 14, 7, 0, PUB, RUN, READ,
     RO_REQ, 0, 4, 3, 0, 0, 0, 0, PUB, RUN, READ);
  ring_save("bad-params", e8, &b);

  /* Bursts: several published at once, one kick. */
  buf_init(&b);
  RB(&b, RO_BURST, 5, M_MEMSET_ASYNC, 0, M_COPY_ASYNC, 0, M_EVENT_RECORD_S, 0,
     M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_STREAM_SYNC, 0, SETTLE, READ,
     RO_BURST, 3, M_PING, 0, M_WRITE_SHM_ASYNC, 0, M_READ_SHM_ASYNC, 0,
     M_STREAM_SYNC, 0, SETTLE, READ, REQ(M_MEMSET), REQ(M_COPY),
     REQ(M_STREAM_QUERY), PUB_ALL, SETTLE, READ);
  ring_save("burst", RING_CFG(2, 3, 0), &b);

  /* The largest ring, nearly full. */
  buf_init(&b);
  RB(&b, RO_BURST, 47, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, M_STREAM_QUERY, 0, M_EVENT_QUERY, 0, M_PING, 0,
     M_MEMSET_ASYNC, 0, SETTLE, READ, RUN, READ);
  ring_save("entries-64", RING_CFG(3, 3, 0), &b);

  /* Completions left unread: once the ring owes a queue's worth, answers
   * take the socket; reading one gives the ring its room back. */
  buf_init(&b);
  RB(&b, RO_BURST, 7, M_PING, 0, M_PING, 0, M_PING, 0, M_PING, 0, M_PING, 0,
     M_PING, 0, M_PING, 0, M_PING, 0, RO_KICK, 1, RUN, RO_BURST, 7,
     M_STREAM_QUERY, 0, M_PING, 0, M_MEMSET_ASYNC, 0, M_PING, 0, M_EVENT_QUERY,
     0, M_STREAM_SYNC, 0, M_PING, 0, M_NO_SUCH, 0, RO_KICK, 1, SETTLE, S_PING,
     RUN, RO_HEAD, 3, REQ(M_PING), REQ(M_PING), PUB_ALL, SETTLE, READ,
     REQ(M_PING), PUB, RUN, READ);
  ring_save("cq-full", e8, &b);

  /* `after`: a submission that follows socket requests not yet written,
   * then those requests; one that names fewer than were written. */
  buf_init(&b);
  RB(&b, RO_REQ, 0, M_PING, 0xcb, PUB, RUN, S_PING, RUN, S_INFO, RUN, S_PING,
     SETTLE, READ, RO_REQ, 0, M_STREAM_QUERY, 0xc0, PUB, RUN, READ, RO_REQ, 0,
     M_MEMSET, 0, RO_AFTER, 2, 0xc9, PUB, RUN, S_PING, SETTLE, READ);
  ring_save("after", e8, &b);

  /* Both paths interleaved: the order of a marker and what follows it on
   * the socket. */
  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, S_PING, RUN, READ, REQ(M_NO_SUCH), RO_PUBLISH, 0,
     S_INFO, REQ(M_FREE), RO_PUBLISH, 0, S_PING, S_STREAM_SYNC, RUN, READ,
     REQ(M_MEMSET_ASYNC), REQ(M_PING), PUB_ALL, S_MEMSET, RUN, SETTLE, READ);
  ring_save("interleave", e8, &b);

  /* --max-inflight 4, the ring's calls waiting for it (no socket request
   * meanwhile). */
  buf_init(&b);
  RB(&b, RO_BURST, 5, M_MEMSET, 0, M_COPY, 0, M_MEMSET_ASYNC, 0, M_STREAM_SYNC,
     0, M_EVENT_SYNC, 0, M_PING, 0, SETTLE, SETTLE, READ, SETTLE, READ);
  ring_save("inflight-cap", RING_CFG(1, 1, 0), &b);

  /* A published submission rewritten before the daemon takes it, one
   * rewritten after (changes nothing), cq_head read one at a time. */
  buf_init(&b);
  RB(&b, REQ(M_STREAM_QUERY), RO_PUBLISH, 0, RO_REWRITE, 0, 0, M_EVENT_QUERY, 0,
     RO_KICK, 1, RUN, RO_REWRITE, 1, 0, M_PING, 0, RUN, RO_REWRITE, 3, 0, 4, 0,
     0xc1, 0, 0, 0, 0, RUN, RO_HEAD, 3, REQ(M_MEMSET), REQ(M_PING), PUB_ALL,
     RO_REWRITE, 0, 1, M_NO_SUCH, 0, SETTLE, RO_HEAD, 3, RO_HEAD, 3, RO_HEAD, 3,
     RUN);
  ring_save("rewrite", e8, &b);

  /* cq_wait: the client sleeps, the daemon wakes it. */
  buf_init(&b);
  RB(&b, RO_CQWAIT, 0, REQ(M_PING), PUB, RUN, READ, RO_CQWAIT, 0,
     REQ(M_MEMSET_ASYNC), PUB, SETTLE, READ, RO_CQWAIT, 0x80, REQ(M_PING), PUB,
     RUN, RO_CQWAIT, 0xf0, 7, 0, 0, 0, REQ(M_PING), PUB, RUN, READ);
  ring_save("cq-wait", e8, &b);

  /* The daemon's own fields overwritten: it never reads them back. */
  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, RO_SCRIBBLE, 0x0f, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
     10, 11, 12, 13, 14, 15, 16, REQ(M_STREAM_QUERY), PUB, RO_KICK, 0, RUN,
     READ, RO_SCRIBBLE, 3, RUN, REQ(M_PING), PUB, RUN, READ);
  ring_save("scribble", e8, &b);

  /* Handles freed on the socket under the ring's queued work. */
  buf_init(&b);
  RB(&b, REQ(M_MEMSET_ASYNC), REQ(M_COPY_ASYNC), PUB_ALL, S_FREE_A,
     S_STREAM_DESTROY, REQ(M_MEMSET_ASYNC), PUB, RUN, REQ(M_STREAM_SYNC), PUB,
     SETTLE, READ, REQ(M_READ_SHM_ASYNC), PUB, S_SHM_FREE, S_EVENT_DESTROY, RUN,
     REQ(M_WRITE_SHM), REQ(M_EVENT_RECORD), PUB_ALL, SETTLE, READ);
  ring_save("frees", e16, &b);

  /* --busy-poll: the daemon polls a while before it sleeps; a second
   * ring.open. */
  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, READ, REQ(M_STREAM_QUERY), RO_PUBLISH, 0, RUN,
     RO_WAIT, RUN, READ, S_RING_OPEN, SETTLE, REQ(M_MEMSET), PUB, SETTLE, READ);
  ring_save("busy-poll", RING_CFG(0, 3, 1), &b);

  /* A raw slot that is one request (flags set), at an index the input
   * names. */
  buf_init(&b);
  buf_init(&m);
  req(&m, 77777, "stream.query", "u", (uint64_t)42);
  RB(&b, RO_RAW, 0, (uint8_t)m.sb.size, 0, 0x80);
  buf_raw(&b, m.sb.data, m.sb.size);
  RB(&b, 1, 0, 0, 0, 0, PUB, RUN, READ); /* flags 1, after */
  msgpack_sbuffer_destroy(&m.sb);
  ring_save("raw-request", e8, &b);

  /* Each way of breaking the ring: the session closes. */
  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, READ);
  ring_raw(&b, 0, NULL);
  RB(&b, PUB, RUN);
  ring_save("break-len-0", e8, &b);

  buf_init(&b);
  ring_raw(&b, 497, NULL);
  RB(&b, PUB, RUN);
  ring_save("break-len-497", e8, &b);

  buf_init(&b);
  buf_init(&m);
  buf_raw(&m, "\xc1", 1);
  ring_raw(&b, 1, &m);
  RB(&b, PUB, RUN);
  ring_save("break-bytes", e8, &b);

  buf_init(&b);
  buf_init(&m);
  req(&m, 50, "ping", "");
  req(&m, 51, "ping", "");
  ring_raw(&b, (uint16_t)m.sb.size, &m);
  RB(&b, PUB, RUN);
  ring_save("break-two-messages", e8, &b);

  buf_init(&b);
  buf_init(&m);
  req(&m, 52, "stream.query", "u", (uint64_t)1);
  ring_raw(&b, (uint16_t)(m.sb.size - 1), &m);
  RB(&b, PUB, RUN);
  ring_save("break-truncated", e8, &b);

  buf_init(&b);
  buf_init(&m);
  proto_pack_notify(&m.pk, "ring.kick", 0);
  ring_raw(&b, (uint16_t)m.sb.size, &m);
  RB(&b, PUB, RUN);
  ring_save("break-notification", e8, &b);

  buf_init(&b);
  buf_init(&m);
  proto_pack_response(&m.pk, 53);
  msgpack_pack_nil(&m.pk);
  ring_raw(&b, (uint16_t)m.sb.size, &m);
  RB(&b, PUB, RUN);
  ring_save("break-response", e8, &b);

  /* A bad submission that waits for socket requests first. */
  buf_init(&b);
  buf_init(&m);
  buf_raw(&m, "\x93\x00", 2);
  RB(&b, RO_RAW, 0, 2, 0, 0, 0x93, 0, 0xc2, PUB, RUN, S_PING, S_PING, RUN);
  msgpack_sbuffer_destroy(&m.sb);
  ring_save("break-bytes-after", e8, &b);

  buf_init(&b);
  RB(&b, REQ(M_PING), RO_PUBLISH, 5, 9, RO_KICK, 0, RUN);
  ring_save("break-tail-ahead", e8, &b);

  buf_init(&b);
  RB(&b, REQ(M_PING), REQ(M_PING), PUB_ALL, RUN, READ, RO_PUBLISH, 7, 2,
     RO_KICK, 0, RUN);
  ring_save("break-tail-back", e8, &b);

  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, RO_HEAD, 6, 2, REQ(M_PING), PUB, RUN);
  ring_save("break-head-ahead", e8, &b);

  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, READ, RO_HEAD, 4, 0, 0, 0, 0x80, RUN);
  ring_save("break-head-lost", e16, &b);

  buf_init(&b);
  RB(&b, REQ(M_PING), PUB, RUN, READ, RO_GARBAGE, RUN);
  ring_save("socket-garbage", e8, &b);
  /* Found by libFuzzer (fixed in daemon/transport.c): two mem.memset and a
   * refused ping on the ring, published without a kick, then a socket
   * request; with --max-inflight 2 the ring stopped at the cap and the
   * socket request ran anyway: before the submission published ahead of
   * it (order) and past the cap (inflight). */
  {
    static const uint8_t inflight[] = {
        0x00, 0x00, 0x07, 0x00, 0x00, 0x10, 0x07, 0x00, 0x00, 0x00, 0x07, 0x00,
        0x00, 0x10, 0x07, 0x00, 0x00, 0x00, 0x10, 0x00, 0x03, 0x04, 0x07, 0x08,
        0x10, 0x08, 0x07, 0x09, 0x08, 0x07, 0x04, 0x80, 0x08, 0x07};
    static const uint8_t order[] = {
        0x00, 0x00, 0x07, 0x00, 0x00, 0x10, 0x07, 0x00, 0x00, 0x00, 0x07,
        0x00, 0x00, 0x10, 0x07, 0x00, 0x00, 0x00, 0x10, 0x00, 0x03, 0x04,
        0x07, 0x00, 0x08, 0x07, 0x09, 0x08, 0x07, 0x04, 0x80, 0x08, 0x07};

    buf_init(&b);
    buf_raw(&b, inflight, sizeof(inflight));
    ring_save("inflight-cap-socket", 0, &b);
    buf_init(&b);
    buf_raw(&b, order, sizeof(order));
    ring_save("inflight-order", 0, &b);
  }
}

int main(int argc, char **argv)
{
  if (argc != 3)
    die("usage: fuzz_corpus_gen FIXTURES_DIR CORPUS_DIR");
  out_dir = argv[2];
  mkdir(out_dir, 0755);
  gen_frame();
  gen_ir(argv[1]);
  gen_dispatch(argv[1]);
  gen_ipc_listener();
  gen_ipc_worker();
  gen_ipc_metrics();
  gen_ring();
  return failed;
}
