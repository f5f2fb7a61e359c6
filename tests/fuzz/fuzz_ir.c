/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_ir.c: the Sarek IR decoder (ir_decode) and the HIP code
 * generator (gen_hip) of daemon/codegen.
 *
 * Input: one msgpack IR document (proto/IR.md), optionally followed by a
 * msgpack array of generator options: [soa params (array of str), block
 * (array of 3 uint, or nil)] (what kernel.compile_ir's params carry).
 * Properties:
 *  - decoding is deterministic: the same bytes give the same answer, the
 *    same error (code, path, message) or documents that generate the same
 *    source;
 *  - a refusal is EIR or ENOMEM, with the error's code the same, and no
 *    document;
 *  - for every accepted document, the generator, for each platform,
 *    succeeds with a NUL-terminated source and a kernel name, or fails with
 *    one of its documented codes (EIR, EINTRINSIC, ENOMEM: gen_hip.h);
 *  - in replay mode only (slow): the host-platform source of every accepted
 *    document without native code compiles with the host C++ compiler the
 *    way the CPU device compiles kernels: through cpu_compile() (its
 *    options, source transform and force-included hipd_cpu_device.h), with
 *    -fsyntax-only added by tests/fuzz/cxx-syntax-only.
 */
#include "config.h"

#include <string.h>

#include "codegen/gen_hip.h"
#include "codegen/ir.h"
#include "fuzz.h"
#include "drivers/cpu/cpu_compile.h"
#include "rpc.h"

#define MAX_SOA 8

typedef struct {
  gen_options_t o;
  const char *soa[MAX_SOA];
  char names[MAX_SOA][64];
} opts_t;

/* Options from the bytes after the document; absent or malformed: none. */
static void opts_parse(const uint8_t *p, size_t len, opts_t *op)
{
  msgpack_zone zone;
  msgpack_object o;
  size_t off = 0;

  /* Framed first, as the daemon frames what it decodes: msgpack-c
   * allocates what a container header claims before it reads it. */
  proto_limits_t lim = {.max_message = len,
                        .max_depth = 4,
                        .max_array = 256,
                        .max_map = 16,
                        .max_objects = 1024};
  const char *reason;
  size_t need;

  memset(op, 0, sizeof(*op));
  if (len == 0 || len > 4096 ||
      proto_frame_scan(&lim, p, len, &need, &reason) <= 0 ||
      !msgpack_zone_init(&zone, 1024))
    return;
  if (msgpack_unpack((const char *)p, len, &off, &zone, &o) ==
          MSGPACK_UNPACK_SUCCESS &&
      o.type == MSGPACK_OBJECT_ARRAY && o.via.array.size == 2) {
    const msgpack_object *soa = &o.via.array.ptr[0];
    const msgpack_object *blk = &o.via.array.ptr[1];
    if (soa->type == MSGPACK_OBJECT_ARRAY) {
      for (uint32_t i = 0; i < soa->via.array.size && i < MAX_SOA; i++) {
        const msgpack_object *s = &soa->via.array.ptr[i];
        if (s->type != MSGPACK_OBJECT_STR || s->via.str.size >= 64)
          continue;
        memcpy(op->names[op->o.nsoa], s->via.str.ptr, s->via.str.size);
        op->names[op->o.nsoa][s->via.str.size] = '\0';
        op->soa[op->o.nsoa] = op->names[op->o.nsoa];
        op->o.nsoa++;
      }
      op->o.soa = op->soa;
    }
    if (blk->type == MSGPACK_OBJECT_ARRAY && blk->via.array.size == 3) {
      op->o.has_block = 1;
      for (int i = 0; i < 3; i++)
        op->o.block[i] =
            blk->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER
                ? (uint32_t)blk->via.array.ptr[i].via.u64
                : 0;
    }
  }
  msgpack_zone_destroy(&zone);
}

/* Compile @p src, the source of kernel @p name, as the CPU device does:
 * through cpu_compile() itself, with tests/fuzz/cxx-syntax-only as the
 * compiler (syntax only; the real compiler is $HIPD_FUZZ_REAL_CXX, else
 * c++). @return 0 when it compiles, 1 when there is no compiler to run it
 * with, else -1 with the compiler's log on stderr. */
static int compile_host(const char *src, size_t len, const char *name)
{
  cpu_compile_cfg_t cfg = {.cxx = FUZZ_SYNTAX_CXX, .header = NULL};
  const char *header = getenv("HIPD_CPU_HEADER");
  static char log[16384];
  char *so = NULL;
  int rc;

  cfg.header = header != NULL && header[0] != '\0' ? header : FUZZ_CPU_HEADER;
  rc = cpu_compile(&cfg, src, len, &name, 1, NULL, 0, &so, log, sizeof(log));
  cpu_compile_free(so);
  if (rc == 0)
    return 0;
  if (rc == HIPD_ENOTSUP ||
      strstr(log, "cxx-syntax-only: no C++ compiler") != NULL)
    return 1;
  fprintf(stderr, "fuzz_ir: cpu_compile: %s:\n%s\n", hipd_err_name(rc), log);
  return -1;
}

static void check_generate(ir_doc_t *d1, ir_doc_t *d2, const opts_t *op)
{
  static const cg_platform_t platforms[] = {CG_PLATFORM_AMD, CG_PLATFORM_NVIDIA,
                                            CG_PLATFORM_HOST};

  for (size_t i = 0; i < sizeof(platforms) / sizeof(platforms[0]); i++) {
    gen_options_t o = op->o;
    gen_result_t r1, r2;
    ir_error_t e1, e2;
    int rc1, rc2;

    o.platform = platforms[i];
    memset(&e1, 0, sizeof(e1));
    memset(&e2, 0, sizeof(e2));
    rc1 = gen_hip(d1, &o, &r1, &e1);
    rc2 = gen_hip(d2, &o, &r2, &e2);
    FUZZ_CHECK(rc1 == rc2, "%s: generated %d then %d",
               cg_platform_name(o.platform), rc1, rc2);
    if (rc1 != 0) {
      FUZZ_CHECK(rc1 == HIPD_EIR || rc1 == HIPD_EINTRINSIC ||
                     rc1 == HIPD_ENOMEM,
                 "%s: gen_hip returned %d (%s) for an accepted document",
                 cg_platform_name(o.platform), rc1, hipd_err_name(rc1));
      FUZZ_CHECK(e1.code == rc1 && e1.msg[0] != '\0', "error %d '%s' for %d",
                 e1.code, e1.msg, rc1);
      FUZZ_CHECK(strcmp(e1.msg, e2.msg) == 0 && strcmp(e1.path, e2.path) == 0,
                 "different errors: '%s' '%s'", e1.msg, e2.msg);
      continue;
    }
    FUZZ_CHECK(r1.source != NULL && strlen(r1.source) == r1.len,
               "source not NUL-terminated at its length");
    FUZZ_CHECK(r1.name != NULL && r1.name[0] != '\0', "no kernel name");
    FUZZ_CHECK(r1.len == r2.len && memcmp(r1.source, r2.source, r1.len) == 0,
               "%s: the same document generated different sources",
               cg_platform_name(o.platform));
    FUZZ_CHECK(r1.nparams == r2.nparams && r1.nparams <= GEN_MAX_PARAMS,
               "params %u %u", r1.nparams, r2.nparams);
    if (FUZZ_REPLAY && o.platform == CG_PLATFORM_HOST &&
        d1->stats.tags[IR_TS_STMT][IR_S_NATIVE] == 0) {
      int c = compile_host(r1.source, r1.len, r1.name);
      if (c > 0)
        fprintf(stderr, "fuzz_ir: no host compiler: compile check skipped\n");
      FUZZ_CHECK(c >= 0, "the generated source does not compile:\n%s",
                 r1.source);
    }
    gen_result_free(&r1);
    gen_result_free(&r2);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  proto_limits_t lim;
  size_t need, doc_len = size;
  const char *reason;
  ir_doc_t *d1 = NULL, *d2 = NULL;
  ir_error_t e1, e2;
  opts_t op;
  long long r;
  int rc1, rc2;

  /* Options follow the document when it is one complete object. */
  proto_limits_default(&lim);
  lim.max_depth = PROTO_DEPTH_CAP;
  r = proto_frame_scan(&lim, data, size, &need, &reason);
  if (r > 0 && (size_t)r < size)
    doc_len = (size_t)r;
  opts_parse(data + doc_len, size - doc_len, &op);

  memset(&e1, 0, sizeof(e1));
  memset(&e2, 0, sizeof(e2));
  rc1 = ir_decode(data, doc_len, NULL, &d1, &e1);
  rc2 = ir_decode(data, doc_len, NULL, &d2, &e2);
  FUZZ_CHECK(rc1 == rc2, "decoded %d then %d", rc1, rc2);
  if (rc1 != 0) {
    FUZZ_CHECK(rc1 == HIPD_EIR || rc1 == HIPD_ENOMEM, "ir_decode returned %d",
               rc1);
    FUZZ_CHECK(d1 == NULL && d2 == NULL, "a document with an error");
    FUZZ_CHECK(e1.code == rc1 && e1.msg[0] != '\0', "error %d '%s'", e1.code,
               e1.msg);
    FUZZ_CHECK(strcmp(e1.path, e2.path) == 0 && strcmp(e1.msg, e2.msg) == 0,
               "different errors: %s: %s / %s: %s", e1.path, e1.msg, e2.path,
               e2.msg);
    return 0;
  }
  FUZZ_CHECK(d1 != NULL && d2 != NULL && d1->kernel != NULL, "no document");
  check_generate(d1, d2, &op);
  ir_doc_free(d1);
  ir_doc_free(d2);
  return 0;
}
