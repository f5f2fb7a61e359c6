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
 *             protocol.
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

int main(int argc, char **argv)
{
  if (argc != 3)
    die("usage: fuzz_corpus_gen FIXTURES_DIR CORPUS_DIR");
  out_dir = argv[2];
  mkdir(out_dir, 0755);
  gen_frame();
  gen_ir(argv[1]);
  gen_dispatch(argv[1]);
  return failed;
}
