/* SPDX-License-Identifier: MIT */
/* tools/hipctl/cache.c: `cache stats|clear|list|prewarm`: the shared
 * compiled-kernel cache. Prewarm needs no method of its own: it compiles
 * each kernel of a file through the cache (`kernel.compile_cached`) on each
 * device asked for, and reports whether the binary was there already.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipctl.h"

static const char cache_help[] =
    "usage: hipctl cache stats\n"
    "       hipctl cache clear\n"
    "       hipctl cache list\n"
    "       hipctl cache prewarm FILE.hip [--lang L] [--device N|all]\n"
    "                                     [--options \"...\"] [--kernel "
    "NAME]...\n\n"
    "stats    the cache's counters (cache.stats)\n"
    "clear    empty it, in memory and on disk (root or the daemon's user)\n"
    "list     its entries: key, size, last use\n"
    "prewarm  compile the kernels of FILE through the cache for each device\n"
    "         (default 0; all: every device) and say which were there\n"
    "         (hit) and which were compiled (miss). The kernels: every\n"
    "         __global__ function of FILE, or those named by --kernel (as\n"
    "         written in C++: templates need --kernel 'f<float>').\n"
    "--json: stats and list give the daemon's record; clear {cleared: true};\n"
    "prewarm {file, results: [{device, kernel, cache, hit, key, bytes,\n"
    "compile_ms}]}.\n";

/* The names of the __global__ functions of @p src, up to @p max. */
static int find_kernels(const char *src, char **names, int max)
{
  int n = 0;

  for (const char *p = strstr(src, "__global__"); p != NULL && n < max;
       p = strstr(p + 1, "__global__")) {
    const char *q = p + 10;
    for (;;) {
      const char *paren = strchr(q, '('), *e, *b;
      if (paren == NULL || memchr(q, ';', (size_t)(paren - q)) != NULL ||
          memchr(q, '{', (size_t)(paren - q)) != NULL)
        break;
      e = paren;
      while (e > q && isspace((unsigned char)e[-1]))
        e--;
      b = e;
      while (b > q && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
        b--;
      if (b == e)
        break;
      if ((size_t)(e - b) == 17 && memcmp(b, "__launch_bounds__", 17) == 0) {
        const char *close = strchr(paren, ')');
        if (close == NULL)
          break;
        q = close + 1;
        continue;
      }
      names[n] = strndup(b, (size_t)(e - b));
      if (names[n] != NULL)
        n++;
      break;
    }
  }
  return n;
}

static int cache_prewarm(hipctl_t *h, int argc, char **argv)
{
  static const char *const head[] = {"DEV",  "KERNEL", "CACHE", "MS",
                                     "SIZE", "KEY",    NULL};
  const char *file = NULL, *lang = "hip", *dev_arg = "0";
  char *names[64] = {0}, *opt_text = NULL, *src = NULL;
  const char **opts = NULL;
  int nnames = 0, rc = HIPCTL_EXIT_OK, ndev = 0, *devs = NULL, err;
  hipd_info_t *list = NULL;
  out_table_t *t = NULL;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      if (file != NULL) {
        rc = hipctl_usage(h, "prewarm takes one FILE, got '%s' too", a);
        goto done;
      }
      file = a;
      continue;
    }
    if (strcmp(a, "--lang") != 0 && strcmp(a, "--device") != 0 &&
        strcmp(a, "--options") != 0 && strcmp(a, "--kernel") != 0) {
      rc = hipctl_usage(h, "unknown option '%s'", a);
      goto done;
    }
    if (v == NULL) {
      rc = hipctl_usage(h, "%s needs a value", a);
      goto done;
    }
    i++;
    if (strcmp(a, "--lang") == 0)
      lang = v;
    else if (strcmp(a, "--device") == 0)
      dev_arg = v;
    else if (strcmp(a, "--kernel") == 0) {
      if (nnames == 64 || (names[nnames] = strdup(v)) == NULL) {
        rc = hipctl_usage(h, "64 kernels at most");
        goto done;
      }
      nnames++;
    } else {
      size_t n = 0;
      char *save = NULL;
      free(opt_text);
      free(opts);
      opt_text = strdup(v);
      opts = calloc(strlen(v) / 2 + 2, sizeof(*opts));
      if (opt_text == NULL || opts == NULL) {
        rc = hipctl_fail(h, NULL, HIPD_ENOMEM);
        goto done;
      }
      for (char *w = strtok_r(opt_text, " \t", &save); w != NULL;
           w = strtok_r(NULL, " \t", &save))
        opts[n++] = w;
    }
  }
  if (file == NULL) {
    rc = hipctl_usage(h, "prewarm FILE.hip: which file?");
    goto done;
  }
  if (strcmp(dev_arg, "all") != 0) {
    char *end;
    long d;
    errno = 0;
    d = strtol(dev_arg, &end, 10);
    if (*dev_arg < '0' || *dev_arg > '9' || *end != '\0' || errno ||
        d > 0x7fffffff) {
      rc = hipctl_usage(h, "--device takes a device id or all, not '%s'",
                        dev_arg);
      goto done;
    }
    ndev = 1;
    if ((devs = calloc(1, sizeof(*devs))) == NULL) {
      rc = hipctl_fail(h, NULL, HIPD_ENOMEM);
      goto done;
    }
    devs[0] = (int)d;
  }
  if ((src = hipctl_read_file(h, file, NULL)) == NULL) {
    rc = HIPCTL_EXIT_USAGE;
    goto done;
  }
  if (nnames == 0 && (nnames = find_kernels(src, names, 64)) == 0) {
    rc = hipctl_usage(h,
                      "%s: no __global__ function found (name the "
                      "kernels with --kernel)",
                      file);
    goto done;
  }
  if ((rc = hipctl_connect(h)) != 0)
    goto done;
  if (devs == NULL) {
    if ((err = hipd_device_list(h->conn, &list)) < 0) {
      rc = hipctl_fail(h, "device.list", err);
      goto done;
    }
    ndev = info_n(list, "%s", "");
    if ((devs = calloc((size_t)ndev + 1, sizeof(*devs))) == NULL) {
      rc = hipctl_fail(h, NULL, HIPD_ENOMEM);
      goto done;
    }
    for (int i = 0; i < ndev; i++)
      devs[i] = (int)info_i64(list, "%d.id", i);
  }
  if (h->json) {
    js_obj_begin();
    js_key("file");
    js_str(file);
    js_key("results");
    js_arr_begin();
  } else {
    t = out_table_new(head, "rllrrl");
  }
  for (int d = 0; d < ndev && rc == 0; d++) {
    if ((rc = run_check_lang(h, devs[d], lang)) != 0)
      break;
    for (int k = 0; k < nnames; k++) {
      hipd_info_t *info = NULL;
      hipd_kernel_t kernel;
      const char *cache;
      char sz[32];
      int hit;

      err = hipd_kernel_compile_cached(h->conn, devs[d], src, names[k], opts,
                                       &kernel, &info);
      if (err < 0) {
        char what[300];
        snprintf(what, sizeof(what), "%s on device %d", names[k], devs[d]);
        rc = hipctl_fail(h, what, err);
        break;
      }
      hipd_kernel_destroy(h->conn, kernel);
      cache = info_s(info, "cache");
      hit = strcmp(cache, "miss") != 0;
      if (h->json) {
        js_obj_begin();
        js_key("device");
        js_int(devs[d]);
        js_key("kernel");
        js_str(names[k]);
        js_key("cache");
        js_str(cache);
        js_key("hit");
        js_bool(hit);
        js_key("key");
        js_str(info_s(info, "key"));
        js_key("bytes");
        js_uint(info_u64(info, "bytes"));
        js_key("compile_ms");
        js_double(info_dbl(info, "compile_ms"));
        js_obj_end();
      } else {
        out_size(sz, sizeof(sz), info_u64(info, "bytes"));
        out_table_cell(t, "%d", devs[d]);
        out_table_cell(t, "%s", names[k]);
        out_table_cell(t, "%s (%s)", hit ? "hit" : "miss", cache);
        out_table_cell(t, "%.1f", info_dbl(info, "compile_ms"));
        out_table_cell(t, "%s", sz);
        out_table_cell(t, "%.16s", info_s(info, "key"));
      }
      hipd_info_free(info);
    }
  }
  if (h->json) {
    js_arr_end();
    js_obj_end();
    js_end();
  } else if (rc == 0) {
    out_table_print(t, stdout);
  }
done:
  out_table_free(t);
  hipd_info_free(list);
  for (int i = 0; i < nnames; i++)
    free(names[i]);
  free(opt_text);
  free(opts);
  free(src);
  free(devs);
  return rc;
}

int cmd_cache(hipctl_t *h, int argc, char **argv)
{
  hipd_info_t *info = NULL;
  const char *sub = argc > 1 ? argv[1] : NULL;
  int rc, err;

  if (sub == NULL)
    return hipctl_usage(h, "stats, clear, list or prewarm?");
  if (hipctl_help(sub, cache_help) ||
      (argc > 2 && hipctl_help(argv[2], cache_help)))
    return HIPCTL_EXIT_OK;
  if (strcmp(sub, "prewarm") == 0)
    return cache_prewarm(h, argc - 1, argv + 1);
  if (strcmp(sub, "stats") != 0 && strcmp(sub, "clear") != 0 &&
      strcmp(sub, "list") != 0)
    return hipctl_usage(h, "unknown cache command '%s'", sub);
  if (argc > 2)
    return hipctl_usage(h, "unexpected argument '%s'", argv[2]);
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if (strcmp(sub, "clear") == 0) {
    if ((err = hipd_cache_clear(h->conn)) < 0)
      return hipctl_fail(h, "clear", err);
    if (h->json) {
      js_obj_begin();
      js_key("cleared");
      js_bool(1);
      js_obj_end();
      js_end();
    } else {
      printf("cache cleared\n");
    }
    return HIPCTL_EXIT_OK;
  }
  if (strcmp(sub, "stats") == 0) {
    static const char *const keys[] = {
        "entries",          "bytes",     "disk_entries",
        "disk_bytes",       "hits",      "hits_memory",
        "hits_disk",        "waits",     "misses",
        "compile_failures", "evictions", "corrupt",
        "auth_failures",    "warmed",    "preloaded",
        "hits_loaded"};
    if ((err = hipd_cache_stats(h->conn, &info)) < 0)
      return hipctl_fail(h, "stats", err);
    if (h->json) {
      js_info(info);
      js_end();
    } else {
      for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char sz[32];
        uint64_t v = info_u64(info, "%s", keys[i]);
        out_size(sz, sizeof(sz), v);
        if (strstr(keys[i], "bytes") != NULL)
          printf("%-17s %s\n", keys[i], sz);
        else
          printf("%-17s %" PRIu64 "\n", keys[i], v);
      }
    }
    hipd_info_free(info);
    return HIPCTL_EXIT_OK;
  }
  /* list */
  if ((err = hipd_cache_list(h->conn, &info)) < 0)
    return hipctl_fail(h, "list", err);
  if (h->json) {
    js_info(info);
    js_end();
  } else {
    static const char *const head[] = {"KEY", "SIZE", "LAST USED", NULL};
    out_table_t *t = out_table_new(head, "lrr");
    time_t now = time(NULL);
    for (int i = 0; i < info_n(info, "%s", ""); i++) {
      char sz[32], ago[32];
      uint64_t at = info_u64(info, "%d.atime", i);
      out_size(sz, sizeof(sz), info_u64(info, "%d.bytes", i));
      out_duration_ms(
          ago, sizeof(ago),
          at && (uint64_t)now > at ? (double)(now - (time_t)at) * 1e3 : 0);
      out_table_cell(t, "%s", info_s(info, "%d.key", i));
      out_table_cell(t, "%s", sz);
      if (at == 0)
        out_table_cell(t, "%s", "- (in memory)");
      else
        out_table_cell(t, "%s ago", ago);
    }
    out_table_print(t, stdout);
    out_table_free(t);
  }
  hipd_info_free(info);
  return HIPCTL_EXIT_OK;
}
