/* SPDX-License-Identifier: MIT */
/* tests/check_codegen.c: the IR decoder and the HIP generator, in
 * process (daemon/codegen, no daemon).
 *
 *  - golden: every fixture tests/codegen/NAME.ir.json (the JSON form of an
 *    IR document) generates exactly tests/codegen/NAME.hip (for AMD). A
 *    fixture's annotations give the generator's options: "_soa_params",
 *    "_block", "_register" ([name, code, convergence, arity?]...). On a
 *    mismatch the generated text is left in NAME.hip.actual in the build
 *    directory; HIPD_CODEGEN_UPDATE=1 rewrites the expected files instead
 *    (review the diff before committing it).
 *  - coverage: the fixtures together use every tag of every IR type, as
 *    the decoder's own tag tables list them.
 *  - malformed: documents broken in one way each, with the error code, the
 *    path and the message the decoder or the generator must give.
 *  - truncation and corruption: every prefix of a valid document, and
 *    documents with flipped bytes, are refused (or accepted) without
 *    crashing.
 *  - the JSON reader of the tools, the intrinsic registry.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_hip.h"
#include "codegen/intrinsics.h"
#include "codegen/ir.h"
#include "hipd.h"
#include "ir_json.h"
#include "run.h"

#ifndef FIXTURES_DIR
#error "FIXTURES_DIR must name tests/codegen"
#endif
#ifndef IR_MD
#error "IR_MD must name proto/IR.md"
#endif

/* ------------------------------------------------------------ fixtures */

static int name_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The fixture names (without .ir.json), sorted; NULL-terminated. */
static char **fixture_names(size_t *count)
{
  DIR *dir = opendir(FIXTURES_DIR);
  struct dirent *e;
  char **names = NULL;
  size_t n = 0;

  ck_assert_msg(dir != NULL, "%s: %s", FIXTURES_DIR, strerror(errno));
  while ((e = readdir(dir)) != NULL) {
    size_t len = strlen(e->d_name);
    if (len <= 8 || strcmp(e->d_name + len - 8, ".ir.json") != 0)
      continue;
    names = realloc(names, (n + 2) * sizeof(*names));
    ck_assert_ptr_nonnull(names);
    names[n] = strndup(e->d_name, len - 8);
    names[++n] = NULL;
  }
  closedir(dir);
  ck_assert_msg(n >= 10, "only %zu fixtures in %s", n, FIXTURES_DIR);
  qsort(names, n, sizeof(*names), name_cmp);
  *count = n;
  return names;
}

static void names_free(char **names)
{
  for (char **p = names; *p != NULL; p++)
    free(*p);
  free(names);
}

static char *read_fixture(const char *name, const char *ext, size_t *len)
{
  char path[512];
  char *text;

  snprintf(path, sizeof(path), "%s/%s%s", FIXTURES_DIR, name, ext);
  text = ir_json_read_file(path, len);
  ck_assert_msg(text != NULL, "%s: %s", path, strerror(errno));
  return text;
}

/* JSON text -> msgpack bytes (the test fails on bad JSON). */
static void pack_json(const char *text, msgpack_sbuffer *mp)
{
  char err[300];

  msgpack_sbuffer_init(mp);
  ck_assert_msg(ir_json_to_msgpack(text, strlen(text), mp, err, sizeof(err)) ==
                    0,
                "%s", err);
}

/* A fixture's generator options, from its annotations. */
typedef struct {
  gen_options_t o;
  const char *soa[16];
  char *soa_names[16];
  intr_set_t *set;
} fixture_opts_t;

static void opts_free(fixture_opts_t *f)
{
  for (uint32_t i = 0; i < f->o.nsoa; i++)
    free(f->soa_names[i]);
  intr_set_unref(f->set);
}

/* The annotation @p key as a msgpack object in @p zone (NULL if absent). */
static msgpack_object *annotation(const char *text, const char *key,
                                  msgpack_zone *zone, msgpack_sbuffer *buf)
{
  char err[300];
  msgpack_object *o;
  int rc;

  msgpack_sbuffer_init(buf);
  rc = ir_json_member(text, strlen(text), key, buf, err, sizeof(err));
  ck_assert_msg(rc >= 0, "%s", err);
  if (rc == 0)
    return NULL;
  o = msgpack_zone_malloc(zone, sizeof(*o));
  ck_assert_int_eq(msgpack_unpack(buf->data, buf->size, NULL, zone, o),
                   MSGPACK_UNPACK_SUCCESS);
  return o;
}

static void fixture_opts(const char *text, cg_platform_t p, fixture_opts_t *f)
{
  msgpack_zone zone;
  msgpack_sbuffer b1, b2, b3;
  msgpack_object *o;

  memset(f, 0, sizeof(*f));
  f->o.platform = p;
  msgpack_zone_init(&zone, 4096);
  if ((o = annotation(text, "_soa_params", &zone, &b1)) != NULL) {
    ck_assert_int_eq(o->type, MSGPACK_OBJECT_ARRAY);
    for (uint32_t i = 0; i < o->via.array.size && i < 16; i++) {
      f->soa_names[i] = strndup(o->via.array.ptr[i].via.str.ptr,
                                o->via.array.ptr[i].via.str.size);
      f->soa[i] = f->soa_names[i];
      f->o.nsoa = i + 1;
    }
    f->o.soa = f->soa;
  }
  if ((o = annotation(text, "_block", &zone, &b2)) != NULL) {
    ck_assert_int_eq(o->type, MSGPACK_OBJECT_ARRAY);
    f->o.has_block = 1;
    for (uint32_t i = 0; i < 3; i++)
      f->o.block[i] = (uint32_t)o->via.array.ptr[i].via.u64;
  }
  if ((o = annotation(text, "_register", &zone, &b3)) != NULL) {
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      msgpack_object *r = o->via.array.ptr[i].via.array.ptr;
      uint32_t n = o->via.array.ptr[i].via.array.size;
      char name[256], code[1100], conv[16], msg[300];
      intr_def_t def = {.name = name, .code = code, .arity = -1};
      intr_set_t *s;
      snprintf(name, sizeof(name), "%.*s", (int)r[0].via.str.size,
               r[0].via.str.ptr);
      snprintf(code, sizeof(code), "%.*s", (int)r[1].via.str.size,
               r[1].via.str.ptr);
      snprintf(conv, sizeof(conv), "%.*s", (int)r[2].via.str.size,
               r[2].via.str.ptr);
      ck_assert_int_eq(intr_conv_parse(conv, &def.conv), 0);
      if (n > 3)
        def.arity = (int)r[3].via.u64;
      ck_assert_msg(
          intr_check_registration(name, code, def.arity, msg, sizeof(msg)) == 0,
          "%s: %s", name, msg);
      ck_assert_int_eq(intr_set_add(f->set, &def, &s), 0);
      intr_set_unref(f->set);
      f->set = s;
    }
    f->o.intrinsics = f->set;
  }
  msgpack_sbuffer_destroy(&b1);
  msgpack_sbuffer_destroy(&b2);
  msgpack_sbuffer_destroy(&b3);
  msgpack_zone_destroy(&zone);
}

/* Decode and generate fixture @p name for platform @p p. */
static void fixture_generate(const char *name, cg_platform_t p, gen_result_t *r,
                             ir_doc_t **keep)
{
  size_t len;
  char *text = read_fixture(name, ".ir.json", &len);
  msgpack_sbuffer mp;
  fixture_opts_t f;
  ir_error_t err;
  ir_doc_t *doc;
  int rc;

  pack_json(text, &mp);
  rc = ir_decode(mp.data, mp.size, NULL, &doc, &err);
  ck_assert_msg(rc == 0, "%s: %s %s: %s", name, hipd_err_name(rc), err.path,
                err.msg);
  fixture_opts(text, p, &f);
  rc = gen_hip(doc, &f.o, r, &err);
  ck_assert_msg(rc == 0, "%s: %s %s: %s", name, hipd_err_name(rc), err.path,
                err.msg);
  opts_free(&f);
  if (keep != NULL)
    *keep = doc;
  else
    ir_doc_free(doc);
  msgpack_sbuffer_destroy(&mp);
  free(text);
}

/* --------------------------------------------------------------- golden */

START_TEST(test_golden)
{
  size_t n, failures = 0;
  char **names = fixture_names(&n);
  const char *update = getenv("HIPD_CODEGEN_UPDATE");
  char list[4096] = "";

  for (size_t i = 0; i < n; i++) {
    gen_result_t r;
    size_t elen = 0;
    char path[512], *expected;
    FILE *f;

    fixture_generate(names[i], CG_PLATFORM_AMD, &r, NULL);
    if (update != NULL && strcmp(update, "1") == 0) {
      snprintf(path, sizeof(path), "%s/%s.hip", FIXTURES_DIR, names[i]);
      f = fopen(path, "w");
      ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
      fwrite(r.source, 1, r.len, f);
      fclose(f);
    }
    snprintf(path, sizeof(path), "%s/%s.hip", FIXTURES_DIR, names[i]);
    expected = ir_json_read_file(path, &elen);
    if (expected == NULL || elen != r.len ||
        memcmp(expected, r.source, r.len) != 0) {
      snprintf(path, sizeof(path), "%s.hip.actual", names[i]);
      f = fopen(path, "w");
      if (f != NULL) {
        fwrite(r.source, 1, r.len, f);
        fclose(f);
      }
      failures++;
      snprintf(list + strlen(list), sizeof(list) - strlen(list), " %s",
               names[i]);
    }
    free(expected);
    gen_result_free(&r);
  }
  names_free(names);
  ck_assert_msg(failures == 0,
                "%zu fixtures generate other source than their .hip "
                "(see NAME.hip.actual in the build's tests directory):%s",
                failures, list);
}
END_TEST

/* Every tag of every IR type occurs in some fixture. */
START_TEST(test_coverage)
{
  size_t n;
  char **names = fixture_names(&n);
  uint64_t seen[IR_TS__N][32] = {{0}};
  char missing[2048] = "";

  for (size_t i = 0; i < n; i++) {
    size_t len;
    char *text = read_fixture(names[i], ".ir.json", &len);
    msgpack_sbuffer mp;
    ir_doc_t *doc;
    ir_error_t err;
    pack_json(text, &mp);
    ck_assert_msg(ir_decode(mp.data, mp.size, NULL, &doc, &err) == 0,
                  "%s: %s: %s", names[i], err.path, err.msg);
    for (int t = 0; t < IR_TS__N; t++)
      for (unsigned k = 0; k < ir_tagsets[t].n; k++)
        seen[t][k] += doc->stats.tags[t][k];
    ir_doc_free(doc);
    msgpack_sbuffer_destroy(&mp);
    free(text);
  }
  names_free(names);
  for (int t = 0; t < IR_TS__N; t++)
    for (unsigned k = 0; k < ir_tagsets[t].n; k++)
      if (seen[t][k] == 0)
        snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
                 " %s:%s", ir_tagsets[t].type, ir_tagsets[t].tags[k]);
  ck_assert_msg(missing[0] == '\0', "no fixture uses:%s", missing);
}
END_TEST

/* The warp barrier is lowered per platform; the rest of a source does not
 * depend on the platform. */
START_TEST(test_platforms)
{
  gen_result_t amd, nv, host;

  fixture_generate("control", CG_PLATFORM_AMD, &amd, NULL);
  fixture_generate("control", CG_PLATFORM_NVIDIA, &nv, NULL);
  fixture_generate("control", CG_PLATFORM_HOST, &host, NULL);
  ck_assert_ptr_nonnull(strstr(amd.source, "__builtin_amdgcn_wave_barrier()"));
  ck_assert_ptr_nonnull(strstr(amd.source,
                               "__builtin_amdgcn_fence(__ATOMIC_RELEASE, "
                               "\"wavefront\")"));
  ck_assert_ptr_null(strstr(amd.source, "__syncwarp"));
  ck_assert_ptr_nonnull(strstr(nv.source, "\n  __syncwarp();\n"));
  ck_assert_ptr_null(strstr(nv.source, "amdgcn"));
  ck_assert_ptr_nonnull(strstr(host.source, "\n  __syncwarp();\n"));
  ck_assert_ptr_nonnull(strstr(nv.source, "for nvidia"));
  ck_assert_ptr_nonnull(strstr(host.source, "for host"));
  gen_result_free(&amd);
  gen_result_free(&nv);
  gen_result_free(&host);
}
END_TEST

/* Generating twice (one document, or two decodings) gives the same text:
 * the cache keys on it. */
START_TEST(test_deterministic)
{
  size_t n;
  char **names = fixture_names(&n);

  for (size_t i = 0; i < n; i++) {
    gen_result_t a, b, c;
    ir_doc_t *doc;
    size_t len;
    char *text = read_fixture(names[i], ".ir.json", &len);
    fixture_opts_t f;
    ir_error_t err;

    fixture_generate(names[i], CG_PLATFORM_HOST, &a, &doc);
    fixture_opts(text, CG_PLATFORM_HOST, &f);
    ck_assert_int_eq(gen_hip(doc, &f.o, &b, &err), 0);
    fixture_generate(names[i], CG_PLATFORM_HOST, &c, NULL);
    ck_assert_msg(a.len == b.len && memcmp(a.source, b.source, a.len) == 0,
                  "%s: a second generation differs", names[i]);
    ck_assert_msg(a.len == c.len && memcmp(a.source, c.source, a.len) == 0,
                  "%s: a second decoding differs", names[i]);
    ck_assert_uint_eq(a.nparams, b.nparams);
    gen_result_free(&a);
    gen_result_free(&b);
    gen_result_free(&c);
    opts_free(&f);
    ir_doc_free(doc);
    free(text);
  }
  names_free(names);
}
END_TEST

/* The parameter list the generator reports is the one it emits. */
START_TEST(test_param_lists)
{
  gen_result_t r;
  static const char *const soa[] = {
      "pts_x", "pts_y",           "pts_w_a", "pts_w_b", "sarek_pts_length",
      "out",   "sarek_out_length"};
  static const gen_ptype_t soat[] = {GEN_P_PTR, GEN_P_PTR, GEN_P_PTR, GEN_P_PTR,
                                     GEN_P_I32, GEN_P_PTR, GEN_P_I32};

  fixture_generate("soa_points", CG_PLATFORM_AMD, &r, NULL);
  ck_assert_uint_eq(r.nparams, 7);
  for (uint32_t i = 0; i < r.nparams; i++) {
    ck_assert_str_eq(r.params[i].name, soa[i]);
    ck_assert_int_eq(r.params[i].type, soat[i]);
    ck_assert_ptr_nonnull(strstr(r.source, soa[i]));
  }
  ck_assert_str_eq(r.params[3].leaf, "w.b");
  ck_assert_int_eq(r.params[3].role, GEN_ROLE_LEAF);
  ck_assert_int_eq(r.params[4].role, GEN_ROLE_LENGTH);
  gen_result_free(&r);

  fixture_generate("ops", CG_PLATFORM_AMD, &r, NULL);
  ck_assert_uint_eq(r.nparams, 14);
  ck_assert_int_eq(r.params[0].type, GEN_P_I32); /* a */
  ck_assert_int_eq(r.params[2].type, GEN_P_F32); /* x */
  ck_assert_int_eq(r.params[3].type, GEN_P_F64); /* y */
  ck_assert_int_eq(r.params[4].type, GEN_P_I64); /* l */
  ck_assert_int_eq(r.params[5].type, GEN_P_I32); /* flag: bool is an int */
  ck_assert_int_eq(r.params[6].type, GEN_P_PTR); /* oi */
  ck_assert_int_eq(r.params[7].type, GEN_P_I32); /* sarek_oi_length */
  gen_result_free(&r);

  fixture_generate("arrays", CG_PLATFORM_AMD, &r, NULL);
  /* data has arrinfo, hence a length; raw has none */
  ck_assert_uint_eq(r.nparams, 5);
  ck_assert_str_eq(r.params[1].name, "sarek_data_length");
  ck_assert_str_eq(r.params[2].name, "raw");
  ck_assert_str_eq(r.params[3].name, "out");
  gen_result_free(&r);

  fixture_generate("reduce_shared", CG_PLATFORM_AMD, &r, NULL);
  ck_assert_uint_eq(r.max_threads, 256);
  ck_assert_ptr_nonnull(strstr(r.source, "__launch_bounds__(256) block_sum("));
  gen_result_free(&r);
}
END_TEST

/* ------------------------------------------------------------ malformed */

/* ' stands for " in these documents. */
static char *dq(const char *s)
{
  char *d = strdup(s);

  ck_assert_ptr_nonnull(d);
  for (char *p = d; *p != '\0'; p++)
    if (*p == '\'')
      *p = '"';
  return d;
}

#define PARAMS                                                                 \
  "'params':[['param',{'name':'a','id':0,'type':['vec',['f32']]},null],"       \
  "['param',{'name':'n','id':1,'type':['i32']},null]]"
#define C1 "['const',['i32',1]]"
#define V2(body) "{'ir':2,'kernel':{'name':'k'," PARAMS ",'body':" body "}}"

/* The case tables leave the last field (soa) out where it is NULL. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct {
  const char *extra; /* more kernel members ("'records':[...]") or NULL */
  const char *body;  /* the kernel body, or NULL with whole */
  const char *whole; /* a whole document instead */
  int code;
  const char *path;
  const char *msg; /* a part of the message */
  const char *soa; /* one soa_params name, or NULL */
} bad_t;

static const bad_t bads[] = {
    /* the document */
    {NULL, NULL, "[1]", HIPD_EIR, "document",
     "expected an IR document (a map), got array"},
    {NULL, NULL, "{'kernel':{}}", HIPD_EIR, "document", "missing key 'ir'"},
    {NULL, NULL, "{'ir':3,'kernel':{}}", HIPD_EIR, "ir",
     "ir version 3 not supported (supported: 1 to 2)"},
    {NULL, NULL, "{'ir':'1','kernel':{}}", HIPD_EIR, "ir",
     "expected an unsigned integer"},
    {NULL, NULL, "{'ir':1}", HIPD_EIR, "document", "missing key 'kernel'"},
    {NULL, NULL, "{'ir':1,'ir':1,'kernel':{}}", HIPD_EIR, "document",
     "duplicate key 'ir'"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k'," PARAMS ",'body':['empty'],"
     "'name':'k2'}}",
     HIPD_EIR, "kernel", "duplicate key 'name'"},
    {"'local':[]", "['empty']", NULL, HIPD_EIR, "kernel",
     "unknown key 'local'"},
    {NULL, NULL, "{'ir':1,'kernel':{'name':'k'," PARAMS "}}", HIPD_EIR,
     "kernel", "missing key 'body'"},
    /* node shapes, tags, arities */
    {NULL, "5", NULL, HIPD_EIR, "kernel.body",
     "expected a stmt node (an array), got int"},
    {NULL, "[]", NULL, HIPD_EIR, "kernel.body",
     "expected a stmt node, got an empty array"},
    {NULL, "[1]", NULL, HIPD_EIR, "kernel.body",
     "a stmt node begins with its tag (a string), not int"},
    {NULL, "['iff']", NULL, HIPD_EIR, "kernel.body", "unknown stmt tag 'iff'"},
    {NULL, "['seq',[['empty'],['barrier'],['iff',1]]]", NULL, HIPD_EIR,
     "kernel.body[2]", "unknown stmt tag 'iff'"},
    {NULL, "['seq',[['expr',['binop','add'," C1 "]]]]", NULL, HIPD_EIR,
     "kernel.body[0].value", "'binop' takes 3 fields, got 2"},
    {NULL, "['expr',['binop','pow'," C1 "," C1 "]]", NULL, HIPD_EIR,
     "kernel.body.value.op", "unknown binop 'pow'"},
    {NULL, "['expr',['sine'," C1 "]]", NULL, HIPD_EIR, "kernel.body.value",
     "unknown expr tag 'sine'"},
    {NULL, "['expr',['var','x','n']]", NULL, HIPD_EIR, "kernel.body.value.id",
     "expected an unsigned integer"},
    {NULL,
     "['let',{'name':'t','id':5,'type':['i32'],'mutable':1}," C1 ",['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.mutable", "expected true or false"},
    {NULL, "['expr',['const',['i32',4294967296]]]", NULL, HIPD_EIR,
     "kernel.body.value.c.value", "i32 constant 4294967296 out of range"},
    /* coopmat (version 2) */
    {NULL,
     "['coopmat',['decl','f',{'use':'a','m':16,'n':16,'k':16,"
     "'component':'f16'}]]",
     NULL, HIPD_EIR, "kernel.body", "unknown stmt tag 'coopmat'"},
    {NULL, NULL,
     V2("['coopmat',['decl','f',{'use':'x','m':16,'n':16,'k':16,"
        "'component':'f16'}]]"),
     HIPD_EIR, "kernel.body.op.frag.use",
     "unknown fragment use 'x' (a, b, accumulator)"},
    {NULL, NULL,
     V2("['coopmat',['decl','f',{'use':'a','m':16,'n':16,'k':16,"
        "'component':'f64'}]]"),
     HIPD_EIR, "kernel.body.op.frag.component",
     "unknown component type 'f64' (f16, f32, u8, s8, u32, s32)"},
    {NULL, NULL, V2("['coopmat',['decl','f',{'use':'a','m':16,'n':16}]]"),
     HIPD_EIR, "kernel.body.op.frag", "missing key 'k'"},
    {NULL, NULL,
     V2("['coopmat',['decl','f',{'use':'a','m':8,'n':32,'k':16,"
        "'component':'f16'}]]"),
     HIPD_EIR, "kernel.body",
     "coopmat: a fragment of use a, 8x32x16 f16 (subgroup scope), is not "
     "supported"},
    {NULL, NULL,
     V2("['coopmat',['load','f',{'use':'a','m':16,'n':16,'k':16,"
        "'component':'f16'},'nope'," C1 "," C1 "]]"),
     HIPD_EIR, "kernel.body.op.src", "no array named 'nope' in scope"},
    {NULL, NULL,
     V2("['coopmat',['load','f',{'use':'a','m':16,'n':16,'k':16,"
        "'component':'f16'},'a'," C1 "," C1 "]]"),
     HIPD_EIR, "kernel.body", "coopmat: no fragment named 'f' declared before"},
    {NULL, NULL,
     V2("['seq',[['coopmat',['decl','f',{'use':'a','m':16,'n':16,'k':16,"
        "'component':'f16'}]],['coopmat',['load','f',{'use':'a','m':16,"
        "'n':16,'k':16,'component':'f16'},'a'," C1 "," C1 "]]]]"),
     HIPD_EIR, "kernel.body[1]",
     "coopmat: 'a' must be an array of f16 (the fragment's component type)"},
    {NULL, NULL,
     V2("['coopmat',['muladd','d','a','b','c',{'m':16,'n':16,'k':16,"
        "'a':'f16','b':'f16','c':'f16','result':'f16'}]]"),
     HIPD_EIR, "kernel.body",
     "coopmat: the configuration 16x16x16 f16*f16+f16->f16 (subgroup "
     "scope) is not supported"},
    {NULL, NULL,
     "{'ir':2,'kernel':{'name':'k','params':[],'body':['empty'],"
     "'helpers':[{'name':'h','params':[],'ret':['unit'],'body':"
     "['coopmat',['decl','f',{'use':'a','m':16,'n':16,'k':16,"
     "'component':'f16'}]]}]}}",
     HIPD_EIR, "kernel.helpers[0].body",
     "coopmat operations are allowed in the kernel's body only"},
    /* version 2's tags are unknown to a version 1 document */
    {NULL, "['expr',['const',['u8',1]]]", NULL, HIPD_EIR, "kernel.body.value.c",
     "unknown const tag 'u8'"},
    {NULL, "['expr',['cast',['f16'],['const',['f32',1]]]]", NULL, HIPD_EIR,
     "kernel.body.value.type", "unknown elttype tag 'f16'"},
    {NULL, NULL, V2("['expr',['const',['u8',256]]]"), HIPD_EIR,
     "kernel.body.value.c.value", "u8 constant 256 out of range (0 to 255)"},
    {NULL, NULL, V2("['expr',['const',['u8',-1]]]"), HIPD_EIR,
     "kernel.body.value.c.value", "u8 constant -1 out of range (0 to 255)"},
    {NULL, NULL, V2("['expr',['const',['f16','pi']]]"), HIPD_EIR,
     "kernel.body.value.c.value", "a f16 constant given as a string"},
    {NULL, NULL,
     "{'ir':2,'kernel':{'name':'k','params':[['param',{'name':'h','id':0,"
     "'type':['f16']},null]],'body':['empty']}}",
     HIPD_EIR, "kernel.params[0].var.type",
     "kernel param 'h' is a f16 passed by value: no launch argument kind "
     "carries one (pass it in a vec, or as f32 and cast it)"},
    {NULL, "['expr',['const',['f32',9007199254740993]]]", NULL, HIPD_EIR,
     "kernel.body.value.c.value", "is an integer beyond 2^53"},
    {NULL, "['expr',['const',['i64','12a']]]", NULL, HIPD_EIR,
     "kernel.body.value.c.value", "'12a' is not an i64 constant"},
    {NULL, "['expr',['const',['f64','NaN']]]", NULL, HIPD_EIR,
     "kernel.body.value.c.value", "must be \"nan\", \"inf\" or \"-inf\""},
    /* names */
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k','params':[['param',{'name':'for','id':0,"
     "'type':['i32']},null]],'body':['empty']}}",
     HIPD_EIR, "kernel.params[0].var.name", "'for' is a C++ keyword"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'sarek_k','params':[],'body':['empty']}}",
     HIPD_EIR, "kernel.name", "reserved for generated names"},
    {NULL, NULL, "{'ir':1,'kernel':{'name':'2k','params':[],'body':['empty']}}",
     HIPD_EIR, "kernel.name", "'2k' is not an identifier"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'__k','params':[],'body':['empty']}}", HIPD_EIR,
     "kernel.name", "begins with '__'"},
    {"'records':[{'name':'a..b','fields':[['x',['i32']]]}]", "['empty']", NULL,
     HIPD_EIR, "kernel.records[0].name", "is not a type name"},
    /* placement */
    {NULL, "['expr',['acreate',['i32']," C1 ",'local']]", NULL, HIPD_EIR,
     "kernel.body.value", "acreate is only allowed as the initializer"},
    {NULL, "['expr',['binop','add',['tuple',[" C1 "," C1 "]]," C1 "]]", NULL,
     HIPD_EIR, "kernel.body.value.lhs", "a tuple is only allowed"},
    {NULL,
     "['let',{'name':'s','id':5,'type':['array',['i32'],'global']},"
     "['acreate',['i32']," C1 ",'global'],['empty']]",
     NULL, HIPD_EIR, "kernel.body.init.mem", "not global"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k','params':[['local',{'name':'v','id':0,"
     "'type':['i32']},null]],'body':['empty']}}",
     HIPD_EIR, "kernel.params[0]",
     "a 'local' decl is only allowed in kernel.locals"},
    {"'locals':[['param',{'name':'v','id':5,'type':['i32']},null]]",
     "['empty']", NULL, HIPD_EIR, "kernel.locals[0]",
     "a 'param' decl is only allowed in kernel.params"},
    /* types */
    {NULL,
     "['let',{'name':'p','id':5,'type':['record','pt']}," C1 ",['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.type", "unknown record type 'pt'"},
    {"'variants':[{'name':'v','ctors':[['A',[]]]}]",
     "['let',{'name':'p','id':5,'type':['record','v']}," C1 ",['empty']]", NULL,
     HIPD_EIR, "kernel.body.var.type", "'v' is a variant type, not a record"},
    {NULL, "['let',{'name':'p','id':5,'type':['unit']}," C1 ",['empty']]", NULL,
     HIPD_EIR, "kernel.body.var.type", "a variable cannot be of type unit"},
    {NULL,
     "['let',{'name':'p','id':5,'type':['array',['unit'],'local']}," C1
     ",['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.type.elt",
     "an array's elements cannot be of type unit"},
    {NULL,
     "['let',{'name':'p','id':5,'type':['vec',['i32']]}," C1 ",['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.type",
     "vec is the type of kernel and helper parameters only"},
    {NULL, "['expr',['cast',['record','r']," C1 "]]", NULL, HIPD_EIR,
     "kernel.body.value.type", "a cast is to i32, i64, f32, f64 or bool"},
    {"'records':[{'name':'a','fields':[['x',['record','b']]]},"
     "{'name':'b','fields':[['y',['record','a']]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.records[1].fields[0].type",
     "type 'a' contains itself by value (through 'b')"},
    {"'records':[{'name':'a','fields':[['x',['i32']],['x',['f32']]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.records[0].fields[1]",
     "field 'x' is defined twice"},
    {"'records':[{'name':'a.b','fields':[['x',['i32']]]},"
     "{'name':'a_b','fields':[['x',['i32']]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.records[1].name",
     "C name 'a_b' is used twice (first at kernel.records[0].name)"},
    {"'variants':[{'name':'v','ctors':[['A',[]]]}],"
     "'helpers':[{'name':'A','params':[],'ret':['unit'],'body':['empty']}]",
     "['empty']", NULL, HIPD_EIR, "kernel.helpers[0].name",
     "C name 'A' is used twice (first at kernel.variants[0].ctors[0].ctor)"},
    {"'variants':[{'name':'v','ctors':[['A',[]]]},{'name':'w','ctors':"
     "[['A',[['i32']]]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.variants[1].ctors[0].ctor",
     "constructor 'A' is defined twice"},
    {"'records':[{'name':'r','fields':[['x',['array',['i32'],'global']]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.records[0].fields[0].type",
     "scalars, records or variants, not array"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k','params':[['param',{'name':'p','id':0,"
     "'type':['record','r']},null]],'records':[{'name':'r','fields':[['x',"
     "['i32']]]}],'body':['empty']}}",
     HIPD_EIR, "kernel.params[0].var.type", "passed by value"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k','params':[['param',{'name':'a','id':0,"
     "'type':['vec',['f32']]},{'elt':['i32'],'mem':'global'}]],"
     "'body':['empty']}}",
     HIPD_EIR, "kernel.params[0].arrinfo", "the arrinfo of a vec of f32"},
    /* scopes and references */
    {NULL, "['assign',['aelem','a',['var',7,'j']],['const',['f32',1]]]", NULL,
     HIPD_EIR, "kernel.body.target.index",
     "var 7 ('j') is not declared in this function"},
    {NULL, "['expr',['var',1,'m']]", NULL, HIPD_EIR, "kernel.body.value",
     "var 1 is declared as 'n', not 'm'"},
    {NULL,
     "['seq',[['block',['let',{'name':'t','id':5,'type':['i32']}," C1
     ",['empty']]],['expr',['var',5,'t']]]]",
     NULL, HIPD_EIR, "kernel.body[1].value",
     "var 5 ('t') is not in scope here"},
    {NULL, NULL,
     "{'ir':1,'kernel':{'name':'k','params':[['param',{'name':'a','id':0,"
     "'type':['i32']},null],['param',{'name':'b','id':0,'type':['i32']},"
     "null]],'body':['empty']}}",
     HIPD_EIR, "kernel.params[1].var.id",
     "id 0 declared twice (first at kernel.params[0].var)"},
    {"'locals':[['shared','a',['f32'],null]]", "['empty']", NULL, HIPD_EIR,
     "kernel.locals[0].name",
     "'a' is already declared in the kernel's top scope (at "
     "kernel.params[0].var)"},
    {NULL, "['expr',['aread','b'," C1 "]]", NULL, HIPD_EIR,
     "kernel.body.value.array", "no array named 'b' in scope"},
    {NULL, "['expr',['alen','n']]", NULL, HIPD_EIR, "kernel.body.value.array",
     "'n' is not an array (it is of type i32)"},
    {NULL,
     "['let',{'name':'s','id':5,'type':['array',['i32'],'local']},"
     "['acreate',['i32']," C1 ",'local'],['expr',['alen','s']]]",
     NULL, HIPD_EIR, "kernel.body.body.value.array", "'s' has no length"},
    {NULL, "['assign',['var',1,'n']," C1 "]", NULL, HIPD_EIR,
     "kernel.body.target", "assign to immutable var 1 ('n')"},
    {NULL, "['letmut',{'name':'t','id':5,'type':['i32']}," C1 ",['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.mutable",
     "a letmut var is declared mutable: true"},
    {NULL,
     "['for',{'name':'i','id':5,'type':['f32']}," C1 "," C1 ",'upto',"
     "['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.type",
     "a for variable is of type i32 or i64, not f32"},
    {NULL,
     "['for',{'name':'i','id':5,'type':['i32'],'mutable':true}," C1 "," C1
     ",'upto',['empty']]",
     NULL, HIPD_EIR, "kernel.body.var.mutable",
     "a for variable cannot be mutable"},
    {NULL, "['return'," C1 "]", NULL, HIPD_EIR, "kernel.body.value",
     "the kernel returns nothing"},
    {"'helpers':[{'name':'f','params':[],'ret':['i32'],'body':['return',"
     "['const',['unit']]]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.helpers[0].body.value",
     "this helper returns i32, not unit"},
    {NULL, "['expr',['app','f',[]]]", NULL, HIPD_EIR, "kernel.body.value.fn",
     "no helper named 'f'"},
    {"'helpers':[{'name':'f','params':[{'name':'x','id':0,'type':['i32']}],"
     "'ret':['unit'],'body':['empty']}]",
     "['expr',['app','f',[]]]", NULL, HIPD_EIR, "kernel.body.value.args",
     "helper 'f' takes 1 args, got 0"},
    {"'helpers':[{'name':'f','params':[],'ret':['unit'],'body':"
     "['expr',['var',1,'n']]}]",
     "['empty']", NULL, HIPD_EIR, "kernel.helpers[0].body.value",
     "var 1 ('n') is not declared in this function"},
    {"'records':[{'name':'pt','fields':[['x',['f32']],['y',['f32']]]}]",
     "['expr',['record','pt',[['x'," C1 "],['z'," C1 "]]]]", NULL, HIPD_EIR,
     "kernel.body.value.fields[1].field", "record 'pt' has no field 'z'"},
    {"'records':[{'name':'pt','fields':[['x',['f32']],['y',['f32']]]}]",
     "['expr',['record','pt',[['x'," C1 "]]]]", NULL, HIPD_EIR,
     "kernel.body.value.fields", "field 'y' of record 'pt' is missing"},
    {"'records':[{'name':'pt','fields':[['x',['f32']],['y',['f32']]]}]",
     "['expr',['record','pt',[['x'," C1 "],['x'," C1 "]]]]", NULL, HIPD_EIR,
     "kernel.body.value.fields[1].field", "field 'x' is given twice"},
    {"'variants':[{'name':'v','ctors':[['A',[['i32']]]]}]",
     "['expr',['variant','v','A',[]]]", NULL, HIPD_EIR,
     "kernel.body.value.args", "'A' takes 1 arg, got 0"},
    {"'variants':[{'name':'v','ctors':[['A',[['i32']]]]}]",
     "['expr',['variant','v','B',[" C1 "]]]", NULL, HIPD_EIR,
     "kernel.body.value.ctor", "variant 'v' has no constructor 'B'"},
    /* patterns */
    {"'variants':[{'name':'v','ctors':[['A',[]]]}]",
     "['match'," C1 ",[[['ctor','B',[]],['empty']]]]", NULL, HIPD_EIR,
     "kernel.body.cases[0].pat.ctor", "unknown constructor 'B'"},
    {"'variants':[{'name':'v','ctors':[['A',[]]]},{'name':'w','ctors':"
     "[['B',[]]]}]",
     "['match'," C1 ",[[['ctor','A',[]],['empty']],[['ctor','B',[]],"
     "['empty']]]]",
     NULL, HIPD_EIR, "kernel.body.cases[1].pat.ctor",
     "'A' and 'B' belong to different variants ('v' and 'w')"},
    {"'variants':[{'name':'v','ctors':[['A',[]]]}]",
     "['match'," C1 ",[[['wild'],['empty']],[['ctor','A',[]],['empty']]]]",
     NULL, HIPD_EIR, "kernel.body.cases[0].pat",
     "a wildcard case must be the last case"},
    {"'variants':[{'name':'v','ctors':[['A',[]],['B',[]]]}]",
     "['match'," C1 ",[[['ctor','A',[]],['empty']],[['ctor','A',[]],"
     "['empty']]]]",
     NULL, HIPD_EIR, "kernel.body.cases[1].pat.ctor",
     "constructor 'A' is matched twice (first at kernel.body.cases[0].pat)"},
    {"'variants':[{'name':'v','ctors':[['A',[]],['B',[]]]}]",
     "['expr',['match'," C1 ",[[['ctor','A',[]]," C1 "]]]]", NULL, HIPD_EIR,
     "kernel.body.value", "does not cover constructor 'B'"},
    {"'variants':[{'name':'v','ctors':[['A',[['i32']]]]}]",
     "['match'," C1 ",[[['ctor','A',[null,null]],['empty']]]]", NULL, HIPD_EIR,
     "kernel.body.cases[0].pat.binders",
     "'A' has 1 payload; the pattern binds 2"},
    {NULL, "['match'," C1 ",[]]", NULL, HIPD_EIR, "kernel.body.cases",
     "a match has at least one case"},
    /* statements */
    {NULL, "['pragma',['unroll \\\\'],['empty']]", NULL, HIPD_EIR,
     "kernel.body.hints[0]", "a pragma hint is made of"},
    {NULL, "['native',{}]", NULL, HIPD_EIR, "kernel.body.code",
     "at least one framework"},
    {NULL, "['native',{'HIP':'x;'}]", NULL, HIPD_EIR, "kernel.body.code",
     "framework names are lowercase"},
    /* generation */
    {NULL, "['native',{'cuda':'x;'}]", NULL, HIPD_EIR, "kernel.body",
     "native block has no 'hip' code"},
    {NULL, "['expr',['intrinsic',['Foo'],'bar',[]]]", NULL, HIPD_EINTRINSIC,
     "kernel.body.value",
     "unknown intrinsic 'Foo.bar' (neither built in nor registered as "
     "'Foo.bar' or 'bar')"},
    {NULL, "['expr',['intrinsic',[],'sin',[" C1 "," C1 "]]]", NULL,
     HIPD_EINTRINSIC, "kernel.body.value",
     "intrinsic 'sin' takes 1 args, got 2"},
    {NULL, "['expr',['intrinsic',[],'atomic_add',[" C1 "]]]", NULL,
     HIPD_EINTRINSIC, "kernel.body.value",
     "intrinsic 'atomic_add' takes 2 or 3 args, got 1"},
    {NULL, "['empty']", NULL, HIPD_EIR, "soa_params[0]",
     "the kernel has no param named 'zz'", "zz"},
    {NULL, "['empty']", NULL, HIPD_EIR, "soa_params[0]",
     "'a' is of type vec of f32: the SoA lowering applies to a vec of records",
     "a"},
};

#define SOA_DOC(other, records, body)                                          \
  "{'ir':1,'kernel':{'name':'k','params':[['param',{'name':'p','id':0,"        \
  "'type':['vec',['record','r']]},null],['param',{'name':'" other "','id':1,"  \
  "'type':['i32']},null]],'variants':[{'name':'v','ctors':[['A',[]]]}],"       \
  "'records':[" records "],'body':" body "}}"

static const bad_t soa_bads[] = {
    {NULL, NULL,
     SOA_DOC("q", "{'name':'r','fields':[['x',['variant','v']]]}", "['empty']"),
     HIPD_EIR, "soa_params[0]", "field 'x' of 'p' is a variant", "p"},
    {NULL, NULL,
     SOA_DOC("p_a_b",
             "{'name':'r','fields':[['a',['record','s']]]},{'name':'s',"
             "'fields':[['b',['i32']]]}",
             "['empty']"),
     HIPD_EIR, "soa_params[0]",
     "field 'a.b' of 'p' would become parameter 'p_a_b', which is already a "
     "kernel param",
     "p"},
    {NULL, NULL,
     SOA_DOC("q",
             "{'name':'r','fields':[['a_b',['i32']],['a',['record','s']]]},"
             "{'name':'s','fields':[['b',['i32']]]}",
             "['empty']"),
     HIPD_EIR, "soa_params[0]", "which is already another leaf", "p"},
    {NULL, NULL,
     SOA_DOC("q", "{'name':'r','fields':[['x',['i32']]]}",
             "['expr',['intrinsic',[],'atomic_add',[['var',0,'p'],"
             "['const',['i32',1]]]]]"),
     HIPD_EIR, "kernel.body.value.args[0]", "'p' is lowered as SoA", "p"},
    {NULL, NULL,
     SOA_DOC("q", "{'name':'r','fields':[['x',['i32']]]}",
             "['expr',['field',['aread','p',['const',['i32',0]]],'z']]"),
     HIPD_EIR, "kernel.body.value", "record 'r' has no field 'z'", "p"},
    {NULL, NULL,
     SOA_DOC("q", "{'name':'r','fields':[['x',['i32']]]}", "['empty']"),
     HIPD_EIR, "soa_params[1]", "'p' is named twice", "p,p"},
};

/* Decode and generate (for AMD) the case's document: the first error. */
static int run_case(const bad_t *b, ir_error_t *err, const char **json_out)
{
  char *doc, *json;
  msgpack_sbuffer mp;
  ir_doc_t *d = NULL;
  gen_options_t o = {.platform = CG_PLATFORM_AMD};
  gen_result_t r;
  const char *soa[2];
  int rc;

  if (b->whole != NULL) {
    json = dq(b->whole);
  } else {
    size_t n = strlen(b->body) + (b->extra ? strlen(b->extra) : 0) + 512;
    doc = malloc(n);
    ck_assert_ptr_nonnull(doc);
    snprintf(doc, n, "{'ir':1,'kernel':{'name':'k'," PARAMS "%s%s,'body':%s}}",
             b->extra ? "," : "", b->extra ? b->extra : "", b->body);
    json = dq(doc);
    free(doc);
  }
  pack_json(json, &mp);
  rc = ir_decode(mp.data, mp.size, NULL, &d, err);
  if (rc == 0) {
    if (b->soa != NULL) {
      soa[0] = b->soa;
      o.nsoa = 1;
      if (strcmp(b->soa, "p,p") == 0) {
        soa[0] = soa[1] = "p";
        o.nsoa = 2;
      }
      o.soa = soa;
    }
    rc = gen_hip(d, &o, &r, err);
    if (rc == 0)
      gen_result_free(&r);
    ir_doc_free(d);
  } else {
    ck_assert_ptr_null(d);
  }
  msgpack_sbuffer_destroy(&mp);
  *json_out = json;
  return rc;
}

static void check_cases(const bad_t *cases, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    ir_error_t err;
    const char *json;
    int rc = run_case(&cases[i], &err, &json);

    ck_assert_msg(rc == cases[i].code && err.code == cases[i].code &&
                      strcmp(err.path, cases[i].path) == 0 &&
                      strstr(err.msg, cases[i].msg) != NULL,
                  "case %zu (%s): got %s '%s: %s', expected %s '%s: ...%s...'",
                  i, json, rc ? hipd_err_name(rc) : "success", err.path,
                  err.msg, hipd_err_name(cases[i].code), cases[i].path,
                  cases[i].msg);
    free((char *)json);
  }
}

START_TEST(test_malformed)
{
  check_cases(bads, sizeof(bads) / sizeof(bads[0]));
}
END_TEST

START_TEST(test_soa_errors)
{
  check_cases(soa_bads, sizeof(soa_bads) / sizeof(soa_bads[0]));
}
END_TEST

/* msgpack-level problems that JSON cannot express. */
START_TEST(test_malformed_msgpack)
{
  msgpack_sbuffer b;
  msgpack_packer pk;
  ir_doc_t *d = (ir_doc_t *)1;
  ir_error_t err;
  size_t len;
  char *text = read_fixture("vec_add", ".ir.json", &len);
  msgpack_sbuffer good;

  pack_json(text, &good);
  free(text);

  /* bytes after the document */
  msgpack_sbuffer_init(&b);
  msgpack_sbuffer_write(&b, good.data, good.size);
  msgpack_sbuffer_write(&b, "\xc0", 1);
  ck_assert_int_eq(ir_decode(b.data, b.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_ptr_null(d);
  ck_assert_str_eq(err.path, "document");
  ck_assert_str_eq(err.msg, "1 bytes follow the document");
  msgpack_sbuffer_destroy(&b);

  /* an ext value, a bin string, a non-string key, invalid UTF-8 */
  msgpack_sbuffer_init(&b);
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "ir", 2);
  msgpack_pack_ext_with_body(&pk, "x", 1, 5);
  msgpack_pack_str_with_body(&pk, "kernel", 6);
  msgpack_pack_map(&pk, 0);
  ck_assert_int_eq(ir_decode(b.data, b.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.path, "ir");
  ck_assert_ptr_nonnull(strstr(err.msg, "got ext"));
  msgpack_sbuffer_destroy(&b);

  msgpack_sbuffer_init(&b);
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "ir", 2);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_str_with_body(&pk, "kernel", 6);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_int(&pk, 7);
  msgpack_pack_nil(&pk);
  ck_assert_int_eq(ir_decode(b.data, b.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.path, "kernel");
  ck_assert_str_eq(err.msg, "map keys are strings, not int");
  msgpack_sbuffer_destroy(&b);

  msgpack_sbuffer_init(&b);
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "ir", 2);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_str_with_body(&pk, "kernel", 6);
  msgpack_pack_map(&pk, 3);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_str_with_body(&pk, "k", 1);
  msgpack_pack_str_with_body(&pk, "params", 6);
  msgpack_pack_array(&pk, 0);
  msgpack_pack_str_with_body(&pk, "body", 4);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_str_with_body(&pk, "native", 6);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "hip", 3);
  msgpack_pack_str_with_body(&pk, "x = \xff;", 6);
  ck_assert_int_eq(ir_decode(b.data, b.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.path, "kernel.body.code.hip");
  ck_assert_str_eq(err.msg, "the string is not valid UTF-8 or contains a NUL");
  msgpack_sbuffer_destroy(&b);

  /* the same with a bin where a str belongs */
  msgpack_sbuffer_init(&b);
  msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "ir", 2);
  msgpack_pack_int(&pk, 1);
  msgpack_pack_str_with_body(&pk, "kernel", 6);
  msgpack_pack_map(&pk, 1);
  msgpack_pack_str_with_body(&pk, "name", 4);
  msgpack_pack_bin_with_body(&pk, "k", 1);
  ck_assert_int_eq(ir_decode(b.data, b.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.path, "kernel.name");
  ck_assert_str_eq(err.msg, "expected a identifier (a string), got bin");
  msgpack_sbuffer_destroy(&b);

  /* an array header that promises more elements than bytes are left:
   * refused before anything is allocated for them */
  ck_assert_int_eq(ir_decode("\x82\xa2ir\x01\xa6kernel\xdd\x7f\xff\xff\xff", 17,
                             NULL, &d, &err),
                   HIPD_EIR);
  ck_assert_ptr_nonnull(strstr(err.msg, "an array of 2147483647 elements"));
  ck_assert_int_eq(
      ir_decode("\x82\xa2ir\x01\xa6kernel\xdc\x00\x10\x90", 16, NULL, &d, &err),
      HIPD_EIR);
  ck_assert_str_eq(err.msg, "truncated: the document ends inside a value");
  /* a byte that starts no msgpack value */
  ck_assert_int_eq(ir_decode("\xc1", 1, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.msg, "not msgpack: byte 0xc1 starts no value");
  ck_assert_int_eq(ir_decode("", 0, NULL, &d, &err), HIPD_EIR);
  msgpack_sbuffer_destroy(&good);
}
END_TEST

/* Every prefix of a valid document is refused with EIR, and never read
 * past its end (valgrind/ASan builds see that too). */
START_TEST(test_truncated)
{
  size_t len;
  char *text = read_fixture("variant_shapes", ".ir.json", &len);
  msgpack_sbuffer mp;
  ir_doc_t *d;
  ir_error_t err;

  pack_json(text, &mp);
  free(text);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &d, &err), 0);
  ir_doc_free(d);
  for (size_t n = 0; n < mp.size; n++) {
    char *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, mp.data, n);
    d = (ir_doc_t *)1;
    ck_assert_msg(ir_decode(copy, n, NULL, &d, &err) == HIPD_EIR,
                  "prefix of %zu of %zu bytes accepted", n, mp.size);
    ck_assert_ptr_null(d);
    ck_assert_msg(err.msg[0] != '\0' && err.path[0] != '\0',
                  "prefix of %zu bytes: no message", n);
    free(copy);
  }
  msgpack_sbuffer_destroy(&mp);
}
END_TEST

/* Corrupted documents: each answers 0 or EIR/EINTRINSIC, never crashes;
 * what decodes also generates. */
START_TEST(test_corrupted)
{
  size_t n;
  char **names = fixture_names(&n);
  unsigned seed = 12345;

  for (size_t f = 0; f < n; f++) {
    size_t len;
    char *text = read_fixture(names[f], ".ir.json", &len);
    msgpack_sbuffer mp;
    pack_json(text, &mp);
    free(text);
    for (int round = 0; round < 200; round++) {
      char *copy = malloc(mp.size);
      ir_doc_t *d;
      ir_error_t err;
      gen_result_t r;
      gen_options_t o = {.platform = CG_PLATFORM_HOST};
      int rc;
      memcpy(copy, mp.data, mp.size);
      for (int k = 0; k < 1 + round % 3; k++) {
        seed = seed * 1103515245u + 12345u;
        copy[(seed >> 8) % mp.size] = (char)(seed >> 20);
      }
      rc = ir_decode(copy, mp.size, NULL, &d, &err);
      ck_assert_msg(rc == 0 || rc == HIPD_EIR, "%s: %s", names[f],
                    hipd_err_name(rc));
      if (rc == 0) {
        rc = gen_hip(d, &o, &r, &err);
        ck_assert_msg(rc == 0 || rc == HIPD_EIR || rc == HIPD_EINTRINSIC,
                      "%s: %s", names[f], hipd_err_name(rc));
        if (rc == 0)
          gen_result_free(&r);
        ir_doc_free(d);
      }
      free(copy);
    }
    msgpack_sbuffer_destroy(&mp);
  }
  names_free(names);
}
END_TEST

START_TEST(test_limits)
{
  /* 300 blocks nested: deeper than 256 containers */
  size_t cap = 300 * 16 + 256, o = 0;
  char *json = malloc(cap);
  msgpack_sbuffer mp;
  ir_doc_t *d;
  ir_error_t err;
  ir_limits_t lim;

  o += (size_t)snprintf(json + o, cap - o,
                        "{\"ir\":1,\"kernel\":{\"name\":\"k\",\"params\":[],"
                        "\"body\":");
  for (int i = 0; i < 300; i++)
    o += (size_t)snprintf(json + o, cap - o, "[\"block\",");
  o += (size_t)snprintf(json + o, cap - o, "[\"empty\"]");
  for (int i = 0; i < 300; i++)
    json[o++] = ']';
  o += (size_t)snprintf(json + o, cap - o, "}}");
  pack_json(json, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.msg, "nesting deeper than 256");
  ck_assert_ptr_nonnull(strstr(err.path, "..."));
  ck_assert_uint_le(strlen(err.path), 1010);
  msgpack_sbuffer_destroy(&mp);
  free(json);

  /* 200 blocks nest fine */
  json = malloc(cap);
  o = (size_t)snprintf(json, cap,
                       "{\"ir\":1,\"kernel\":{\"name\":\"k\",\"params\":[],"
                       "\"body\":");
  for (int i = 0; i < 200; i++)
    o += (size_t)snprintf(json + o, cap - o, "[\"block\",");
  o += (size_t)snprintf(json + o, cap - o, "[\"barrier\"]");
  for (int i = 0; i < 200; i++)
    json[o++] = ']';
  snprintf(json + o, cap - o, "}}");
  pack_json(json, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &d, &err), 0);
  {
    gen_options_t opt = {.platform = CG_PLATFORM_AMD};
    gen_result_t r;
    ck_assert_int_eq(gen_hip(d, &opt, &r, &err), 0);
    ck_assert_ptr_nonnull(strstr(r.source, "__syncthreads();"));
    gen_result_free(&r);
    /* the output limit */
    opt.max_source = 200;
    ck_assert_int_eq(gen_hip(d, &opt, &r, &err), HIPD_EIR);
    ck_assert_str_eq(err.path, "kernel");
    ck_assert_ptr_nonnull(strstr(err.msg, "would exceed"));
  }
  ir_doc_free(d);
  /* the value limit */
  ir_limits_default(&lim);
  lim.max_values = 100;
  ck_assert_int_eq(ir_decode(mp.data, mp.size, &lim, &d, &err), HIPD_EIR);
  ck_assert_str_eq(err.msg, "more than 100 values in the document");
  /* the memory limit */
  ir_limits_default(&lim);
  lim.max_memory = 8 << 10;
  ck_assert_int_eq(ir_decode(mp.data, mp.size, &lim, &d, &err), HIPD_EIR);
  ck_assert_ptr_nonnull(strstr(err.msg, "needs more than"));
  msgpack_sbuffer_destroy(&mp);
  free(json);

  /* 300 params once expanded: more than a launch takes */
  cap = 300 * 80 + 256;
  json = malloc(cap);
  o = (size_t)snprintf(json, cap,
                       "{\"ir\":1,\"kernel\":{\"name\":\"k\","
                       "\"body\":[\"empty\"],\"params\":[");
  for (int i = 0; i < 150; i++)
    o += (size_t)snprintf(json + o, cap - o,
                          "%s[\"param\",{\"name\":\"v%d\",\"id\":%d,"
                          "\"type\":[\"vec\",[\"i32\"]]},null]",
                          i ? "," : "", i, i);
  snprintf(json + o, cap - o, "]}}");
  pack_json(json, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &d, &err), 0);
  {
    gen_options_t opt = {.platform = CG_PLATFORM_AMD};
    gen_result_t r;
    ck_assert_int_eq(gen_hip(d, &opt, &r, &err), HIPD_EIR);
    ck_assert_str_eq(err.path, "kernel");
    ck_assert_ptr_nonnull(strstr(err.msg, "300 parameters once lowered"));
  }
  ir_doc_free(d);
  msgpack_sbuffer_destroy(&mp);
  free(json);
}
END_TEST

/* The JSON-specific spellings: large i64 as strings, NaN and infinities,
 * integers where floats are due; the unit argument dropped. */
START_TEST(test_json_forms)
{
  gen_result_t r;
  ir_doc_t *d;
  ir_error_t err;
  msgpack_sbuffer mp;
  gen_options_t o = {.platform = CG_PLATFORM_NVIDIA};
  char *json =
      dq("{'ir':1,'_x':[1,{'y':null}],'kernel':{'_loc':'a.ml:1','name':'k',"
         "'params':[['param',{'name':'o','id':0,'type':['vec',['i64']],"
         "'_t':1},null]],'body':['seq',[['assign',['aelem','o',['const',"
         "['i32',0]]],['const',['i64','-42']]],['expr',['intrinsic',['Gpu'],"
         "'block_barrier',[['const',['unit']]]]],['assign',['aelem','o',"
         "['const',['i32',1]]],['cast',['i64'],['const',['f64',3]]]]]]}}");

  pack_json(json, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &d, &err), 0);
  ck_assert_int_eq(gen_hip(d, &o, &r, &err), 0);
  ck_assert_ptr_nonnull(strstr(r.source, "o[0] = (-42LL);"));
  ck_assert_ptr_nonnull(strstr(r.source, "  __syncthreads();\n"));
  ck_assert_ptr_nonnull(strstr(r.source, "o[1] = ((long long)3.0);"));
  gen_result_free(&r);
  ir_doc_free(d);
  msgpack_sbuffer_destroy(&mp);
  free(json);
}
END_TEST

/* ----------------------------------------------------------- JSON reader */

START_TEST(test_json_reader)
{
  static const struct {
    const char *text;
    const char *err;
  } bad[] = {
      {"[1,]", "line 1, column 4"},
      {"{\"a\" 1}", "expected ':'"},
      {"18446744073709551616", "out of the 64-bit range"},
      {"-9223372036854775809", "out of the 64-bit range"},
      {"\"\\ud800\"", "high surrogate"},
      {"\"\\udc00\"", "lone low surrogate"},
      {"\"abc", "unterminated"},
      {"\"a\nb\"", "control character"},
      {"1 2", "text after the value"},
      {"01", "text after the value"},
      {"[1.]", "digits must follow '.'"},
      {"tru", "unexpected character"},
      {"{\"a\":1,}", "expected a key"},
      {"\n\n  @", "line 3, column 3"},
      {"", "unexpected end"},
  };
  msgpack_sbuffer b;
  msgpack_zone zone;
  msgpack_object o;
  char err[300];
  const char *good = " [1, -2, 18446744073709551615, -9223372036854775808, "
                     "1.5, 1e3, \"\\u00e9\\ud83d\\ude00\\n\\/\", true, false, "
                     "null, {\"k\": []}] ";

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    msgpack_sbuffer_init(&b);
    ck_assert_msg(ir_json_to_msgpack(bad[i].text, strlen(bad[i].text), &b, err,
                                     sizeof(err)) == -1,
                  "'%s' accepted", bad[i].text);
    ck_assert_msg(strstr(err, bad[i].err) != NULL, "'%s': %s", bad[i].text,
                  err);
    msgpack_sbuffer_destroy(&b);
  }
  msgpack_sbuffer_init(&b);
  ck_assert_int_eq(ir_json_to_msgpack(good, strlen(good), &b, err, sizeof(err)),
                   0);
  msgpack_zone_init(&zone, 1024);
  ck_assert_int_eq(msgpack_unpack(b.data, b.size, NULL, &zone, &o),
                   MSGPACK_UNPACK_SUCCESS);
  ck_assert_int_eq(o.type, MSGPACK_OBJECT_ARRAY);
  ck_assert_uint_eq(o.via.array.size, 11);
  ck_assert_uint_eq(o.via.array.ptr[0].via.u64, 1);
  ck_assert_int_eq(o.via.array.ptr[1].via.i64, -2);
  ck_assert_uint_eq(o.via.array.ptr[2].via.u64, UINT64_MAX);
  ck_assert_int_eq(o.via.array.ptr[3].via.i64, INT64_MIN);
  ck_assert_int_eq(o.via.array.ptr[4].type, MSGPACK_OBJECT_FLOAT64);
  ck_assert_double_eq(o.via.array.ptr[4].via.f64, 1.5);
  ck_assert_int_eq(o.via.array.ptr[5].type, MSGPACK_OBJECT_FLOAT64);
  ck_assert_double_eq(o.via.array.ptr[5].via.f64, 1000.0);
  ck_assert_uint_eq(o.via.array.ptr[6].via.str.size, 8);
  ck_assert_int_eq(
      memcmp(o.via.array.ptr[6].via.str.ptr, "\xc3\xa9\xf0\x9f\x98\x80\n/", 8),
      0);
  ck_assert_int_eq(o.via.array.ptr[7].via.boolean, 1);
  ck_assert_int_eq(o.via.array.ptr[8].via.boolean, 0);
  ck_assert_int_eq(o.via.array.ptr[9].type, MSGPACK_OBJECT_NIL);
  ck_assert_int_eq(o.via.array.ptr[10].type, MSGPACK_OBJECT_MAP);
  msgpack_zone_destroy(&zone);
  msgpack_sbuffer_destroy(&b);

  msgpack_sbuffer_init(&b);
  ck_assert_int_eq(
      ir_json_member("{\"a\":1,\"b\":[2]}", 15, "b", &b, err, sizeof(err)), 1);
  ck_assert_uint_eq(b.size, 2);
  ck_assert_int_eq(ir_json_member("{\"a\":1}", 7, "c", &b, err, sizeof(err)),
                   0);
  ck_assert_int_eq(ir_json_member("[1]", 3, "c", &b, err, sizeof(err)), -1);
  msgpack_sbuffer_destroy(&b);
}
END_TEST

/* ------------------------------------------------------------ intrinsics */

START_TEST(test_registry)
{
  static const struct {
    const char *name, *code;
    int arity, rc;
    const char *msg;
  } regs[] = {
      {"Gpu.float", "(float)", -1, 0, NULL},
      {"f", "g(%s, %s)", 2, 0, NULL},
      {"f", "g(%s, %s)", 3, HIPD_EPARAMS, "2 placeholders"},
      {"Float32.sin", "sinf", -1, HIPD_EEXIST, "'sin' is a built-in"},
      {"global_thread_id", "x", -1, HIPD_EEXIST, "built-in"},
      {"a..b", "x", -1, HIPD_EPARAMS, "not an intrinsic name"},
      {"1a", "x", -1, HIPD_EPARAMS, "not an intrinsic name"},
      {"f", "x; y", -1, HIPD_EPARAMS, "one C expression"},
      {"f", "x /* y */", -1, HIPD_EPARAMS, "one C expression"},
      {"f", "#define", -1, HIPD_EPARAMS, "one C expression"},
      {"f", "(x", -1, HIPD_EPARAMS, "do not balance"},
      {"f", "x)(", -1, HIPD_EPARAMS, "do not balance"},
      {"f", "%d", -1, HIPD_EPARAMS, "%s stands for an argument"},
      {"f", "", -1, HIPD_EPARAMS, "1 to 1024 bytes"},
      {"f", "x", 65, HIPD_EPARAMS, "0 to 64"},
  };
  intr_set_t *s = NULL, *n;
  intr_def_t def = {.conv = INTR_DIVERGENT, .arity = -1}, use;
  char msg[300];
  const char *args[] = {"a", "b"};
  sbuf_t b;

  for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
    int rc = intr_check_registration(regs[i].name, regs[i].code, regs[i].arity,
                                     msg, sizeof(msg));
    ck_assert_msg(rc == regs[i].rc, "%s = %s: %s", regs[i].name, regs[i].code,
                  rc ? msg : "accepted");
    if (rc != 0)
      ck_assert_msg(strstr(msg, regs[i].msg) != NULL, "%s", msg);
  }
  /* sets are sorted, replace by name, and do not change once made */
  def.name = "zeta";
  def.code = "z";
  ck_assert_int_eq(intr_set_add(NULL, &def, &s), 0);
  def.name = "alpha";
  def.code = "max(%s, %s)";
  ck_assert_int_eq(intr_set_add(s, &def, &n), 0);
  ck_assert_uint_eq(intr_set_count(s), 1);
  ck_assert_uint_eq(intr_set_count(n), 2);
  ck_assert_str_eq(intr_set_at(n, 0)->name, "alpha");
  ck_assert_int_eq(intr_set_at(n, 0)->arity, 2);
  intr_set_unref(s);
  s = n;
  def.name = "zeta";
  def.code = "zz";
  ck_assert_int_eq(intr_set_add(s, &def, &n), 0);
  ck_assert_uint_eq(intr_set_count(n), 2);
  ck_assert_str_eq(intr_set_find(n, "zeta")->code, "zz");
  ck_assert_str_eq(intr_set_find(s, "zeta")->code, "z");
  intr_set_unref(s);
  s = n;
  /* resolution: built-in by name whatever the path; registered by full
   * name then by name; arities */
  ck_assert_int_eq(intr_resolve(s, CG_PLATFORM_AMD, "Float32.sqrt", "sqrt", 1,
                                &use, msg, sizeof(msg)),
                   0);
  ck_assert_int_eq(use.builtin, 1);
  ck_assert_int_eq(intr_resolve(s, CG_PLATFORM_AMD, "M.alpha", "alpha", 2, &use,
                                msg, sizeof(msg)),
                   0);
  sb_init(&b, 0);
  intr_expand(&b, &use, args, 2);
  ck_assert_str_eq(b.p, "(max(a, b))");
  sb_free(&b);
  ck_assert_int_eq(intr_resolve(s, CG_PLATFORM_AMD, "alpha", "alpha", 1, &use,
                                msg, sizeof(msg)),
                   HIPD_EINTRINSIC);
  ck_assert_str_eq(msg, "intrinsic 'alpha' takes 2 args, got 1");
  ck_assert_int_eq(intr_resolve(s, CG_PLATFORM_AMD, "zeta", "zeta", 2, &use,
                                msg, sizeof(msg)),
                   0);
  sb_init(&b, 0);
  intr_expand(&b, &use, args, 2);
  ck_assert_str_eq(b.p, "(zz(a, b))");
  sb_free(&b);
  ck_assert_int_eq(intr_resolve(NULL, CG_PLATFORM_AMD, "zeta", "zeta", 0, &use,
                                msg, sizeof(msg)),
                   HIPD_EINTRINSIC);
  ck_assert_str_eq(
      msg, "unknown intrinsic 'zeta' (neither built in nor registered)");
  /* the warp barrier per platform */
  ck_assert_int_eq(intr_resolve(NULL, CG_PLATFORM_NVIDIA, "warp_barrier",
                                "warp_barrier", 0, &use, msg, sizeof(msg)),
                   0);
  ck_assert_str_eq(use.code, "__syncwarp()");
  ck_assert_int_eq(use.conv, INTR_SYNC);
  ck_assert_int_eq(intr_resolve(NULL, CG_PLATFORM_AMD, "warp_barrier",
                                "warp_barrier", 0, &use, msg, sizeof(msg)),
                   0);
  ck_assert_ptr_nonnull(strstr(use.code, "__builtin_amdgcn_wave_barrier()"));
  intr_set_unref(s);

  /* a session registers at most INTR_SET_MAX */
  s = NULL;
  for (int i = 0; i < INTR_SET_MAX; i++) {
    char name[32];
    snprintf(name, sizeof(name), "f%04d", i);
    def.name = name;
    def.code = "x";
    ck_assert_int_eq(intr_set_add(s, &def, &n), 0);
    intr_set_unref(s);
    s = n;
  }
  def.name = "one_more";
  ck_assert_int_eq(intr_set_add(s, &def, &n), HIPD_ETOOMANY);
  def.name = "f0007"; /* a replacement still fits */
  ck_assert_int_eq(intr_set_add(s, &def, &n), 0);
  intr_set_unref(n);
  intr_set_unref(s);
}
END_TEST

/* ------------------------------------------------------------- IR.md */

/* IR.md "Where upstream's generated source differs": upstream's
 * variant_kernel with its type in a module (Geo.opt): every constructor,
 * constant ones too, is a call of the mangled make_ function, where
 * upstream emits the bare enum constant and make_Geo.opt_OptSome. */
/* Replace every @p from of @p text by @p to (malloc'd). */
static char *replace_all(const char *text, const char *from, const char *to)
{
  size_t nf = strlen(from), nt = strlen(to), n = 0;
  const char *p;
  char *out, *q;

  for (p = text; (p = strstr(p, from)) != NULL; p += nf)
    n++;
  out = malloc(strlen(text) + n * (nt > nf ? nt - nf : 0) + 1);
  ck_assert_ptr_nonnull(out);
  for (q = out, p = text; *p != '\0';) {
    if (strncmp(p, from, nf) == 0) {
      memcpy(q, to, nt);
      q += nt;
      p += nf;
    } else {
      *q++ = *p++;
    }
  }
  *q = '\0';
  return out;
}

static char *gen_of(const char *json)
{
  msgpack_sbuffer mp;
  ir_doc_t *doc;
  ir_error_t err;
  gen_options_t o = {.platform = CG_PLATFORM_AMD};
  gen_result_t r;
  char *src;

  pack_json(json, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &doc, &err), 0);
  ck_assert_int_eq(gen_hip(doc, &o, &r, &err), 0);
  src = strdup(r.source);
  gen_result_free(&r);
  ir_doc_free(doc);
  msgpack_sbuffer_destroy(&mp);
  return src;
}

/* The standard library's C names are reserved only in a kernel that calls
 * the intrinsic: a version-1 kernel with a variable named fmodf generates
 * as before the library was built in; one that calls Float32.fmod renames
 * the variable, so that the call reaches the function. */
START_TEST(test_stdlib_names_reserved_when_called)
{
  size_t len;
  char *text = read_fixture("vec_add", ".ir.json", &len);
  char *named = replace_all(text, "\"i\"", "\"fmodf\"");
  char *calls =
      replace_all(named, "[\"aread\", \"b\", [\"var\", 4, \"fmodf\"]]",
                  "[\"intrinsic\", [\"Float32\"], \"fmod\", "
                  "[[\"aread\", \"b\", [\"var\", 4, \"fmodf\"]], "
                  "[\"aread\", \"a\", [\"var\", 4, \"fmodf\"]]]]");
  char *src;

  ck_assert_ptr_nonnull(strstr(calls, "\"fmod\""));
  src = gen_of(named);
  ck_assert_msg(strstr(src, "int fmodf") != NULL &&
                    strstr(src, "sarek_4_fmodf") == NULL,
                "a kernel that calls no fmod renamed fmodf:\n%s", src);
  free(src);
  src = gen_of(calls);
  ck_assert_msg(
      strstr(src, "sarek_4_fmodf") != NULL && strstr(src, "fmodf(") != NULL,
      "a kernel that calls Float32.fmod kept a variable fmodf:\n%s", src);
  free(src);
  free(calls);
  free(named);
  free(text);
}
END_TEST

START_TEST(test_upstream_differences)
{
  size_t len;
  char *text = read_fixture("variant_kernel", ".ir.json", &len), *p;
  msgpack_sbuffer mp;
  ir_doc_t *doc;
  ir_error_t err;
  gen_options_t o = {.platform = CG_PLATFORM_AMD};
  gen_result_t r;
  int renamed = 0;
  char *dotted = malloc(len * 2 + 1), *q = dotted;

  ck_assert_ptr_nonnull(dotted);
  for (p = text; *p != '\0'; p++) {
    if (strncmp(p, "\"Opt\"", 5) == 0) {
      q += sprintf(q, "\"Geo.opt\"");
      p += 4;
      renamed++;
      continue;
    }
    *q++ = *p;
  }
  *q = '\0';
  ck_assert_int_eq(renamed, 4); /* the param, the table, two variant exprs */
  pack_json(dotted, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &doc, &err), 0);
  ck_assert_int_eq(gen_hip(doc, &o, &r, &err), 0);
  ck_assert_ptr_nonnull(strstr(r.source, "} Geo_opt;\n"));
  ck_assert_ptr_nonnull(
      strstr(r.source, "out[idx] = make_Geo_opt_OptSome(1.0f);"));
  ck_assert_ptr_nonnull(strstr(r.source, "out[idx] = make_Geo_opt_OptNone();"));
  ck_assert_ptr_null(strstr(r.source, "out[idx] = OptNone;"));
  ck_assert_ptr_null(strstr(r.source, "make_Geo.opt"));
  gen_result_free(&r);
  ir_doc_free(doc);
  msgpack_sbuffer_destroy(&mp);
  free(dotted);
  free(text);
}
END_TEST

/* The JSON examples of proto/IR.md decode and generate, and the vector
 * add's generated source is the one the document shows. */
START_TEST(test_doc_examples)
{
  size_t len, n = 0;
  char *doc = ir_json_read_file(IR_MD, &len);
  const char *p;

  ck_assert_msg(doc != NULL, "%s: %s", IR_MD, strerror(errno));
  for (p = strstr(doc, "```json\n"); p != NULL; p = strstr(p, "```json\n")) {
    const char *start = p + 8, *end = strstr(start, "```");
    char *json = strndup(start, (size_t)(end - start));
    msgpack_sbuffer mp;
    ir_doc_t *d;
    ir_error_t err;
    gen_options_t o = {.platform = CG_PLATFORM_AMD};
    gen_result_t r;

    pack_json(json, &mp);
    ck_assert_msg(ir_decode(mp.data, mp.size, NULL, &d, &err) == 0,
                  "IR.md example %zu: %s: %s", n, err.path, err.msg);
    ck_assert_msg(gen_hip(d, &o, &r, &err) == 0, "IR.md example %zu: %s: %s", n,
                  err.path, err.msg);
    if (n == 0) {
      ck_assert_uint_eq(mp.size, 396); /* as the document says */
      ck_assert_msg(strstr(doc, r.source) != NULL,
                    "IR.md does not show the vector add as generated:\n%s",
                    r.source);
    }
    gen_result_free(&r);
    ir_doc_free(d);
    msgpack_sbuffer_destroy(&mp);
    free(json);
    n++;
    p = end + 3;
  }
  ck_assert_uint_eq(n, 3);
  free(doc);
}
END_TEST

/* ---------------------------------------------------------------- suite */

/* Version 2: coopmat lowered where the target has matrix units, refused
 * with a message naming the target (and the device) elsewhere; f16's
 * preamble per platform. */
static int coopmat_gen(cg_platform_t p, const char *arch, int dev,
                       gen_result_t *r, ir_error_t *err)
{
  size_t len;
  char *text = read_fixture("coopmat", ".ir.json", &len);
  msgpack_sbuffer mp;
  ir_doc_t *doc;
  gen_options_t o = {.platform = p, .arch = arch};
  int rc;

  if (dev >= 0) {
    o.has_device = 1;
    o.device = dev;
  }
  pack_json(text, &mp);
  ck_assert_int_eq(ir_decode(mp.data, mp.size, NULL, &doc, err), 0);
  rc = gen_hip(doc, &o, r, err);
  ir_doc_free(doc);
  msgpack_sbuffer_destroy(&mp);
  free(text);
  return rc;
}

START_TEST(test_version2_platforms)
{
  gen_result_t r;
  ir_error_t err;

  ck_assert_int_eq(coopmat_gen(CG_PLATFORM_NVIDIA, "sm_90", -1, &r, &err), 0);
  ck_assert_ptr_nonnull(strstr(r.source, "#include <mma.h>\n"));
  ck_assert_ptr_nonnull(strstr(r.source, "#include <cuda_fp16.h>\n"));
  ck_assert_ptr_nonnull(strstr(r.source, "nvcuda::wmma::mma_sync(sarek_cm_fc, "
                                         "sarek_cm_fa, sarek_cm_fb, "
                                         "sarek_cm_fc);"));
  ck_assert_ptr_null(strstr(r.source, "asm volatile"));
  gen_result_free(&r);
  ck_assert_int_eq(coopmat_gen(CG_PLATFORM_AMD, "gfx942", -1, &r, &err), 0);
  ck_assert_ptr_nonnull(
      strstr(r.source, "__builtin_amdgcn_mfma_f32_16x16x16f16"));
  ck_assert_ptr_nonnull(strstr(r.source, "asm volatile(\"\" : \"+v\"(x));"));
  gen_result_free(&r);
  ck_assert_int_eq(coopmat_gen(CG_PLATFORM_HOST, "host-x86_64", 2, &r, &err),
                   0);
  ck_assert_ptr_null(strstr(r.source, "nvcuda"));
  ck_assert_ptr_null(strstr(r.source, "mfma"));
  gen_result_free(&r);
  ck_assert_int_eq(coopmat_gen(CG_PLATFORM_AMD, "gfx1030", -1, &r, &err),
                   HIPD_EIR);
  ck_assert_str_eq(err.path, "kernel.body[0]");
  ck_assert_str_eq(err.msg,
                   "coopmat: gfx1030 has no matrix cores hipd drives (MFMA: "
                   "gfx908, gfx90a, gfx940 to gfx942): cooperative-matrix "
                   "operations are not available there");
  ck_assert_int_eq(coopmat_gen(CG_PLATFORM_NVIDIA, "sm_61", 1, &r, &err),
                   HIPD_EIR);
  ck_assert_str_eq(err.msg,
                   "coopmat: device 1 (sm_61 has no tensor cores WMMA can use "
                   "(sm_70 and later have)): cooperative-matrix operations "
                   "are not available there");
}
END_TEST

static Suite *codegen_suite(void)
{
  Suite *s = suite_create("codegen");
  TCase *tc;

  tc = tcase_create("golden");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_golden);
  tcase_add_test(tc, test_coverage);
  tcase_add_test(tc, test_platforms);
  tcase_add_test(tc, test_version2_platforms);
  tcase_add_test(tc, test_deterministic);
  tcase_add_test(tc, test_param_lists);
  tcase_add_test(tc, test_doc_examples);
  tcase_add_test(tc, test_upstream_differences);
  tcase_add_test(tc, test_stdlib_names_reserved_when_called);
  suite_add_tcase(s, tc);

  tc = tcase_create("malformed");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_malformed);
  tcase_add_test(tc, test_soa_errors);
  tcase_add_test(tc, test_malformed_msgpack);
  tcase_add_test(tc, test_truncated);
  tcase_add_test(tc, test_corrupted);
  tcase_add_test(tc, test_limits);
  tcase_add_test(tc, test_json_forms);
  suite_add_tcase(s, tc);

  tc = tcase_create("support");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_json_reader);
  tcase_add_test(tc, test_registry);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return test_main(codegen_suite());
}
