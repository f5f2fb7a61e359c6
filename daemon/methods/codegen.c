/* SPDX-License-Identifier: MIT */
/* daemon/methods/codegen.c: code generation from the Sarek IR:
 * kernel.generate_source, kernel.compile_ir, intrinsics.list,
 * intrinsics.register, intrinsics.find.
 *
 * Decoding and generating are CPU work proportional to the IR's size: a
 * small IR (most kernels are a few KiB) is handled on the loop thread, a
 * large one on libuv's pool, so that a 100 MiB document never stalls
 * other sessions. Compiling goes through kernel_build (the cache, keyed by
 * the generated source) and the kernel gets the generated parameter list
 * as its known signature: launches of it are checked (ESIGNATURE).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "codegen/gen_hip.h"
#include "codegen/intrinsics.h"
#include "codegen/ir.h"
#include "kernels/kernels.h"
#include "methods.h"

/* IR documents up to this size are decoded on the loop thread. */
#define INLINE_MAX ((size_t)64 << 10)

typedef struct cg_job {
  uv_work_t work;
  call_t *call; /* deferred, once the answer comes later */
  int compile;  /* kernel.compile_ir */
  char *ir;
  size_t ir_len;
  char *soa_names[MAX_SOA];
  const char *soa[MAX_SOA];
  gen_options_t opts;
  intr_set_t *intrinsics; /* a reference to the session's set */
  /* compile_ir */
  device_t *dev;
  char arch[64];
  char *options[MAX_OPTIONS];
  size_t noptions;
  /* results */
  int rc;
  ir_error_t err;
  gen_result_t res;
  drv_sig_t sig;
} cg_job_t;

static void job_free(cg_job_t *j)
{
  free(j->ir);
  for (uint32_t i = 0; i < j->opts.nsoa; i++)
    free(j->soa_names[i]);
  for (size_t i = 0; i < j->noptions; i++)
    free(j->options[i]);
  intr_set_unref(j->intrinsics);
  gen_result_free(&j->res);
  free(j);
}

/* ---------------------------------------------------------- parameters */

/* The platform of target param @p t (dispatch gave the device, the current
 * one if absent, or an architecture name). Sets either j->dev or j->arch. */
static int arg_target(call_t *c, const arg_t *t, cg_job_t *j)
{
  unsigned i = meth_arg_pos(c, t);

  if (t->dev == NULL) {
    if (t->len >= sizeof(j->arch)) /* the row bounds it */
      return call_fail(c, HIPD_EINTERNAL, "param %u (target) too long", i);
    memcpy(j->arch, t->s, t->len + 1);
    j->opts.arch = j->arch;
    if (cg_platform_from_arch(j->arch, &j->opts.platform) != 0)
      return call_fail(c, HIPD_EPARAMS,
                       "param %u (target): unknown architecture '%s' (gfx..., "
                       "sm_..., compute_... or host-...)",
                       i, j->arch);
    return 0;
  }
  j->dev = t->dev;
  j->opts.arch = j->dev->caps.arch;
  j->opts.has_device = 1;
  j->opts.device = j->dev->id;
  if (cg_platform_from_name(j->dev->drv->platform, &j->opts.platform) != 0)
    return call_fail(c, HIPD_ENOTSUP,
                     "device %d's platform '%s' has no code "
                     "generator",
                     j->dev->id, j->dev->drv->platform);
  return 0;
}

/* The block param @p b (dispatch checked it) into the job. */
static void arg_block(const arg_t *b, cg_job_t *j)
{
  if (!b->present)
    return;
  memcpy(j->opts.block, b->dims, sizeof(j->opts.block));
  j->opts.has_block = 1;
}

/* Copy the soa_params @p a (dispatch checked them) into the job, which
 * outlives the request. */
static int arg_soa(call_t *c, const arg_t *a, cg_job_t *j)
{
  for (uint32_t k = 0; k < a->n && k < MAX_SOA; k++) {
    j->soa_names[k] = strdup(a->strv[k]);
    if (j->soa_names[k] == NULL)
      return call_fail(c, HIPD_ENOMEM, "out of memory");
    j->soa[k] = j->soa_names[k];
    j->opts.nsoa = k + 1;
  }
  if (a->present)
    j->opts.soa = j->soa;
  return 0;
}

/* Copy the compiler options @p a into the job. */
static int arg_options(call_t *c, const arg_t *a, cg_job_t *j)
{
  for (uint32_t k = 0; k < a->n && k < MAX_OPTIONS; k++) {
    j->options[k] = strdup(a->strv[k]);
    if (j->options[k] == NULL)
      return call_fail(c, HIPD_ENOMEM, "out of memory");
    j->noptions = k + 1;
  }
  return 0;
}

/* Does option @p o choose how floating-point contraction is done (the
 * client's choice, which the default below leaves alone)? */
static int option_sets_contraction(const char *o)
{
  return strcmp(o, "--fmad=true") == 0 || strcmp(o, "--fmad=false") == 0 ||
         strncmp(o, "-ffp-contract=", 14) == 0 ||
         strcmp(o, "-ffast-math") == 0 || strcmp(o, "--use_fast_math") == 0 ||
         strcmp(o, "-use_fast_math") == 0 ||
         strcmp(o, "--use-fast-math") == 0 || strcmp(o, "-Ofast") == 0;
}

/* Generated kernels are compiled without contraction (a*b+c is not fused
 * into an fma), as upstream Sarek compiles them: their results then agree
 * with the host's to the last bit. "--fmad=false" is spelled the same for
 * every compiler (AMD: -ffp-contract=off, NVIDIA: NVRTC's own, the CPU
 * device: -ffp-contract=off); a client that gives a contraction option of
 * its own ("--fmad=true", -ffp-contract=..., fast math) keeps it. The
 * option is one of the compile's options, so it is part of the cache
 * key. */
#define CONTRACT_OFF "--fmad=false"

static int contraction_default(const cg_job_t *j)
{
  for (size_t i = 0; i < j->noptions; i++)
    if (option_sets_contraction(j->options[i]))
      return 0;
  return 1;
}

/* --------------------------------------------------------------- work */

static void job_run(cg_job_t *j)
{
  ir_doc_t *doc = NULL;

  j->rc = ir_decode(j->ir, j->ir_len, NULL, &doc, &j->err);
  if (j->rc == 0)
    j->rc = gen_hip(doc, &j->opts, &j->res, &j->err);
  ir_doc_free(doc);
}

static void pack_arguments(msgpack_packer *pk, const gen_result_t *r)
{
  msgpack_pack_array(pk, r->nparams);
  for (uint32_t i = 0; i < r->nparams; i++) {
    const gen_param_t *p = &r->params[i];
    pack_map_t m;
    pack_map_begin(&m, pk);
    pack_kv_str(&m, "name", p->name);
    pack_kv_str(&m, "type", gen_ptype_name(p->type));
    pack_kv_str(&m, "role", gen_role_name(p->role));
    pack_kv_str(&m, "param", p->param);
    if (p->leaf)
      pack_kv_str(&m, "field", p->leaf);
    pack_map_end(&m);
  }
}

/* kernel.compile_ir's answer, once built. */
static void compiled_done(void *ctx, const kernel_result_t *r)
{
  cg_job_t *j = ctx;
  call_t *c = j->call;
  msgpack_packer *pk;
  pack_map_t m;

  if (meth_compile_answer(c, r, &m) != 0)
    goto out;
  pack_kv_str(&m, "name", j->res.name);
  pack_kv_str(&m, "platform", cg_platform_name(j->opts.platform));
  pk = pack_key(&m, "params");
  msgpack_pack_array(pk, j->res.nparams);
  for (uint32_t i = 0; i < j->res.nparams; i++)
    proto_pack_cstr(pk, gen_ptype_name(j->res.params[i].type));
  pack_arguments(pack_key(&m, "arguments"), &j->res);
  pack_map_end(&m);
out:
  call_finish(c);
  job_free(j);
}

/* Answer @p c with the job's result (generate_source), or start the
 * compile (compile_ir, which answers later). @p c is deferred unless the
 * job ran inline for generate_source. @return 1 if @p c was answered. */
static int job_finish(call_t *c, cg_job_t *j)
{
  static const uint8_t drv_types[] = {DRV_T_PTR, DRV_T_I32, DRV_T_I64,
                                      DRV_T_F32, DRV_T_F64};
  kernel_request_t req = {0};
  const char *opts[MAX_OPTIONS + 1];
  pack_map_t m;

  if (j->rc != 0) {
    call_fail(c, j->rc, "%s: %s", j->err.path, j->err.msg);
    return 1;
  }
  if (!j->compile) {
    pack_map_begin(&m, call_result(c));
    pack_kv_strn(&m, "source", j->res.source, j->res.len);
    pack_kv_str(&m, "name", j->res.name);
    pack_kv_str(&m, "platform", cg_platform_name(j->opts.platform));
    pack_arguments(pack_key(&m, "arguments"), &j->res);
    if (j->res.max_threads)
      pack_kv_u64(&m, "max_threads", j->res.max_threads);
    pack_map_end(&m);
    return 1;
  }
  j->sig.known = 1;
  j->sig.nargs = j->res.nparams;
  for (uint32_t i = 0; i < j->res.nparams; i++)
    j->sig.types[i] = drv_types[j->res.params[i].type];
  for (size_t i = 0; i < j->noptions; i++)
    opts[i] = j->options[i];
  req.source = j->res.source;
  req.source_len = j->res.len;
  req.name = j->res.name;
  req.opts = opts;
  req.nopts = j->noptions;
  if (contraction_default(j))
    opts[req.nopts++] = CONTRACT_OFF;
  req.dev = j->dev;
  req.arch = j->dev ? NULL : j->arch;
  req.sig = &j->sig;
  req.max_threads = j->res.max_threads;
  j->call = c;
  req.tenant = (uint32_t)c->s->peer_uid;
  kernel_build(&req, compiled_done, j);
  return 0;
}

static void work_cb(uv_work_t *w)
{
  job_run(w->data);
}

static void after_work_cb(uv_work_t *w, int status)
{
  cg_job_t *j = w->data;
  call_t *c = j->call;

  if (c->s->closing || status != 0) {
    call_fail(c, HIPD_ECANCELED, "the session closed");
  } else if (!job_finish(c, j)) {
    return; /* compiling: compiled_done answers */
  }
  call_finish(c);
  job_free(j);
}

/* kernel.generate_source [ir, block?, soa_params?, target?]
 * kernel.compile_ir [ir, block?, soa_params?, options?, target?]: the
 * params of either (@p options NULL: generate_source, which does not
 * compile). */
static int codegen_request(call_t *c, const arg_t *ir, const arg_t *block,
                           const arg_t *soa, const arg_t *options,
                           const arg_t *target)
{
  cg_job_t *j = calloc(1, sizeof(*j));
  int compile = options != NULL;
  call_t *d;
  int rc;

  if (j == NULL)
    return call_fail(c, HIPD_ENOMEM, "out of memory");
  j->compile = compile;
  arg_block(block, j);
  if ((rc = arg_soa(c, soa, j)) != 0 ||
      (compile && (rc = arg_options(c, options, j)) != 0) ||
      (rc = arg_target(c, target, j)) != 0)
    goto fail;
  if (j->dev != NULL && j->opts.has_block &&
      (uint64_t)j->opts.block[0] * j->opts.block[1] * j->opts.block[2] >
          (uint64_t)j->dev->caps.max_threads_per_block) {
    rc = call_fail(c, HIPD_ELIMIT,
                   "a block of %u threads exceeds device %d's maximum of %d",
                   j->opts.block[0] * j->opts.block[1] * j->opts.block[2],
                   j->dev->id, j->dev->caps.max_threads_per_block);
    goto fail;
  }
  j->ir_len = ir->len;
  j->ir = malloc(j->ir_len ? j->ir_len : 1);
  if (j->ir == NULL) {
    rc = call_fail(c, HIPD_ENOMEM, "out of memory");
    goto fail;
  }
  memcpy(j->ir, ir->s, j->ir_len);
  j->intrinsics = c->s->intrinsics;
  intr_set_ref(j->intrinsics);
  j->opts.intrinsics = j->intrinsics;

  if (j->ir_len <= INLINE_MAX) {
    job_run(j);
    if (!compile || j->rc != 0) {
      job_finish(c, j);
      job_free(j);
      return 0;
    }
    if ((d = call_defer(c)) == NULL) {
      job_free(j);
      return HIPD_ENOMEM;
    }
    job_finish(d, j);
    return 0;
  }
  if ((d = call_defer(c)) == NULL) {
    job_free(j);
    return HIPD_ENOMEM;
  }
  j->call = d;
  j->work.data = j;
  rc = uv_queue_work(c->s->d->loop, &j->work, work_cb, after_work_cb);
  if (rc != 0) {
    call_fail(d, HIPD_EINTERNAL, "cannot queue the work: %s", uv_strerror(rc));
    call_finish(d);
    job_free(j);
  }
  return 0;
fail:
  job_free(j);
  return rc;
}

int m_kernel_generate_source(call_t *c, const kernel_generate_source_args_t *a)
{
  return codegen_request(c, &a->ir, &a->block, &a->soa_params, NULL,
                         &a->target);
}

int m_kernel_compile_ir(call_t *c, const kernel_compile_ir_args_t *a)
{
  return codegen_request(c, &a->ir, &a->block, &a->soa_params, &a->options,
                         &a->target);
}

/* ------------------------------------------------------------ intrinsics */

static void pack_def(msgpack_packer *pk, const intr_def_t *d)
{
  pack_map_t m;

  pack_map_begin(&m, pk);
  pack_kv_str(&m, "name", d->name);
  pack_kv_str(&m, "code", d->code);
  if (d->arity >= 0)
    pack_kv_i64(&m, "arity", d->arity);
  else
    pack_kv_nil(&m, "arity");
  pack_kv_str(&m, "convergence", intr_conv_name(d->conv));
  pack_kv_bool(&m, "builtin", d->builtin);
  pack_map_end(&m);
}

/* The platform of target param @p t, for the built-ins' code. */
static int arg_platform(call_t *c, const arg_t *t, cg_platform_t *p)
{
  cg_job_t j = {0};
  int rc = arg_target(c, t, &j);

  *p = j.opts.platform;
  return rc;
}

/* intrinsics.list [target?] -> [{name, code, arity, convergence,
 * builtin}], the built-ins (for the target's platform) then the
 * session's registrations, each part sorted by name. */
int m_intrinsics_list(call_t *c, const target_args_t *a)
{
  const intr_def_t *b;
  cg_platform_t p;
  size_t nb, nr = intr_set_count(c->s->intrinsics);
  msgpack_packer *pk;
  int rc;

  if ((rc = arg_platform(c, &a->target, &p)) != 0)
    return rc;
  nb = intr_builtins(p, &b);
  pk = call_result(c);
  msgpack_pack_array(pk, (uint32_t)(nb + nr));
  for (size_t i = 0; i < nb; i++)
    pack_def(pk, &b[i]);
  for (size_t i = 0; i < nr; i++)
    pack_def(pk, intr_set_at(c->s->intrinsics, i));
  return 0;
}

/* intrinsics.find [name, target?] -> the forms a call of @p name uses
 * (intr_forms: the registration of the full name, the standard library's
 * path-qualified forms, the core table's forms of the last component, the
 * registration of the last component, the standard library's forms of
 * it). */
int m_intrinsics_find(call_t *c, const intrinsics_find_args_t *a)
{
  const char *name = a->name.s;
  const char *last;
  const intr_def_t *f[8];
  cg_platform_t p;
  size_t n;
  msgpack_packer *pk;
  int rc;

  if ((rc = arg_platform(c, &a->target, &p)) != 0)
    return rc;
  last = strrchr(name, '.') ? strrchr(name, '.') + 1 : name;
  n = intr_forms(c->s->intrinsics, p, name, last, f, 8);
  if (n == 0)
    return call_fail(c, HIPD_ENOENT,
                     "no intrinsic '%s' (neither built in nor registered)",
                     name);
  pk = call_result(c);
  msgpack_pack_array(pk, (uint32_t)n);
  for (size_t i = 0; i < n; i++)
    pack_def(pk, f[i]);
  return 0;
}

/* intrinsics.register [name, code, convergence, arity?]: for this session
 * only (a registration of the same name replaces the previous one). */
int m_intrinsics_register(call_t *c, const intrinsics_register_args_t *a)
{
  const char *name = a->name.s, *code = a->code.s;
  const char *conv = a->convergence.s;
  int64_t arity = a->arity.present ? a->arity.i : -1; /* any */
  intr_def_t def = {0};
  intr_set_t *n;
  char msg[400];
  int rc;

  if (intr_conv_parse(conv, &def.conv) != 0)
    return call_fail(c, HIPD_EPARAMS,
                     "param 2 (convergence) must be \"uniform\", \"divergent\" "
                     "or \"sync\", not '%s'",
                     conv);
  rc = intr_check_registration(name, code, (int)arity, msg, sizeof(msg));
  if (rc != 0)
    return call_fail(c, rc, "%s", msg);
  def.name = name;
  def.code = code;
  def.arity = (int)arity;
  rc = intr_set_add(c->s->intrinsics, &def, &n);
  if (rc == HIPD_ETOOMANY)
    return call_fail(c, rc, "a session registers at most %d intrinsics",
                     INTR_SET_MAX);
  if (rc != 0)
    return call_fail(c, rc, "out of memory");
  intr_set_unref(c->s->intrinsics);
  c->s->intrinsics = n;
  msgpack_pack_nil(call_result(c));
  return 0;
}
