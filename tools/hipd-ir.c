/* SPDX-License-Identifier: MIT */
/* tools/hipd-ir.c: the JSON form of the Sarek IR on the command line.
 *
 *   hipd-ir pack [FILE]    JSON IR -> the msgpack bytes kernel.generate_source
 *                          and kernel.compile_ir take (as a bin)
 *   hipd-ir check [FILE]   decode and validate, as the daemon does
 *   hipd-ir gen [OPTIONS] [FILE]
 *                          generate the HIP source with hipd's generator,
 *                          in-process (no daemon); the kernel's parameter
 *                          list goes to stderr
 *
 * FILE defaults to standard input. gen options:
 *   -p amd|nvidia|host   platform (default amd)
 *   -s NAME[,NAME...]    soa_params
 *   -b X[,Y[,Z]]         block dimensions (__launch_bounds__)
 *   -i NAME=CODE         register an intrinsic (convergence uniform, any
 *                        arity unless the code has %s); repeatable
 * Exit status: 0, 1 for an invalid document (the error on stderr, as
 * "CODE path: message"), 2 for usage or I/O errors.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/gen_hip.h"
#include "codegen/intrinsics.h"
#include "codegen/ir.h"
#include "hipd.h"
#include "ir_json.h"

static void usage(void)
{
  fprintf(stderr,
          "usage: hipd-ir pack [FILE]\n"
          "       hipd-ir check [FILE]\n"
          "       hipd-ir gen [-p amd|nvidia|host] [-s NAME,...] [-b X,Y,Z] "
          "[-i NAME=CODE]... [FILE]\n");
  exit(2);
}

static char *read_input(const char *path, size_t *len)
{
  char *text = ir_json_read_file(path ? path : "/dev/stdin", len);

  if (text == NULL) {
    fprintf(stderr, "hipd-ir: %s: %s\n", path ? path : "stdin",
            strerror(errno));
    exit(2);
  }
  return text;
}

/* The msgpack bytes of the JSON document in @p path. */
static void pack_file(const char *path, msgpack_sbuffer *out)
{
  size_t len;
  char *text = read_input(path, &len), err[300];

  msgpack_sbuffer_init(out);
  if (ir_json_to_msgpack(text, len, out, err, sizeof(err)) != 0) {
    fprintf(stderr, "hipd-ir: %s: %s\n", path ? path : "stdin", err);
    free(text);
    exit(1);
  }
  free(text);
}

static ir_doc_t *decode_file(const char *path)
{
  msgpack_sbuffer mp;
  ir_doc_t *doc;
  ir_error_t err;

  pack_file(path, &mp);
  if (ir_decode(mp.data, mp.size, NULL, &doc, &err) != 0) {
    fprintf(stderr, "%s %s: %s\n", hipd_err_name(err.code), err.path, err.msg);
    msgpack_sbuffer_destroy(&mp);
    exit(1);
  }
  msgpack_sbuffer_destroy(&mp);
  return doc;
}

static int cmd_gen(int argc, char **argv)
{
  gen_options_t o = {.platform = CG_PLATFORM_AMD};
  const char *soa[64];
  char *soa_buf = NULL;
  intr_set_t *set = NULL;
  gen_result_t r;
  ir_error_t err;
  ir_doc_t *doc;
  int c, rc;

  while ((c = getopt(argc, argv, "p:s:b:i:")) != -1) {
    switch (c) {
    case 'p':
      if (cg_platform_from_name(optarg, &o.platform) != 0)
        usage();
      break;
    case 's':
      free(soa_buf);
      soa_buf = strdup(optarg);
      o.nsoa = 0;
      for (char *t = strtok(soa_buf, ","); t && o.nsoa < 64;
           t = strtok(NULL, ","))
        soa[o.nsoa++] = t;
      o.soa = soa;
      break;
    case 'b':
      o.has_block = 1;
      o.block[0] = o.block[1] = o.block[2] = 1;
      if (sscanf(optarg, "%u,%u,%u", &o.block[0], &o.block[1], &o.block[2]) < 1)
        usage();
      break;
    case 'i': {
      char *eq = strchr(optarg, '=');
      intr_def_t def = {.conv = INTR_UNIFORM, .arity = -1};
      intr_set_t *n;
      char msg[300];
      if (eq == NULL)
        usage();
      *eq = '\0';
      def.name = optarg;
      def.code = eq + 1;
      if (intr_check_registration(def.name, def.code, -1, msg, sizeof(msg))) {
        fprintf(stderr, "hipd-ir: -i %s: %s\n", def.name, msg);
        return 2;
      }
      if (intr_set_add(set, &def, &n) != 0) {
        fprintf(stderr, "hipd-ir: out of memory\n");
        return 2;
      }
      intr_set_unref(set);
      set = n;
      break;
    }
    default:
      usage();
    }
  }
  if (argc - optind > 1)
    usage();
  o.intrinsics = set;
  doc = decode_file(optind < argc ? argv[optind] : NULL);
  rc = gen_hip(doc, &o, &r, &err);
  if (rc != 0) {
    fprintf(stderr, "%s %s: %s\n", hipd_err_name(err.code), err.path, err.msg);
  } else {
    fwrite(r.source, 1, r.len, stdout);
    for (uint32_t i = 0; i < r.nparams; i++)
      fprintf(stderr, "param %u: %s %s (%s of %s%s%s)\n", i, r.params[i].name,
              gen_ptype_name(r.params[i].type), gen_role_name(r.params[i].role),
              r.params[i].param, r.params[i].leaf ? ", field " : "",
              r.params[i].leaf ? r.params[i].leaf : "");
    gen_result_free(&r);
  }
  ir_doc_free(doc);
  intr_set_unref(set);
  free(soa_buf);
  return rc != 0;
}

int main(int argc, char **argv)
{
  if (argc < 2)
    usage();
  if (strcmp(argv[1], "pack") == 0 && argc <= 3) {
    msgpack_sbuffer mp;
    pack_file(argc == 3 ? argv[2] : NULL, &mp);
    if (fwrite(mp.data, 1, mp.size, stdout) != mp.size) {
      fprintf(stderr, "hipd-ir: write: %s\n", strerror(errno));
      return 2;
    }
    msgpack_sbuffer_destroy(&mp);
    return 0;
  }
  if (strcmp(argv[1], "check") == 0 && argc <= 3) {
    ir_doc_free(decode_file(argc == 3 ? argv[2] : NULL));
    return 0;
  }
  if (strcmp(argv[1], "gen") == 0)
    return cmd_gen(argc - 1, argv + 1);
  usage();
  return 2;
}
