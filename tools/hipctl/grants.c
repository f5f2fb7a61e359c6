/* SPDX-License-Identifier: MIT */
/* tools/hipctl/grants.c: `grant`, `revoke` and `grants` (PROTOCOL.md,
 * "Grants"): access to devices given to a user at run time, as a batch
 * scheduler's prolog does for a job (contrib/slurm/), taken back at its
 * end, and what the job's sessions did meanwhile. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipctl.h"

/* "0,1,3" into @p ids (at most 64). @return how many, or -1. */
static int parse_devices(const char *s, int *ids)
{
  int n = 0;

  while (*s != '\0') {
    char *end;
    long v;
    if (*s < '0' || *s > '9')
      return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || v > 63 || n >= 64)
      return -1;
    ids[n++] = (int)v;
    if (*end == ',')
      end++;
    else if (*end != '\0')
      return -1;
    s = end;
  }
  return n > 0 ? n : -1;
}

/* "512", "64K", "1.5G" (binary units: K, M, G, T, with or without "iB").
 * @return 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
  char *end;
  double v;
  uint64_t mult = 1;

  errno = 0;
  v = strtod(s, &end);
  if (end == s || errno || v < 0)
    return -1;
  switch (*end) {
  case 'K':
  case 'k':
    mult = 1ull << 10;
    break;
  case 'M':
    mult = 1ull << 20;
    break;
  case 'G':
    mult = 1ull << 30;
    break;
  case 'T':
    mult = 1ull << 40;
    break;
  case '\0':
    break;
  default:
    return -1;
  }
  if (*end != '\0') {
    end++;
    if (strcmp(end, "iB") != 0 && strcmp(end, "B") != 0 && *end != '\0')
      return -1;
  }
  if (v * (double)mult >= 18446744073709551615.0)
    return -1;
  *out = (uint64_t)(v * (double)mult);
  return 0;
}

static void devices_text(const hipd_info_t *g, const char *fmt, int i,
                         char *buf, size_t cap)
{
  char path[64];
  size_t off = 0;
  int n;

  snprintf(path, sizeof(path), fmt, i);
  n = info_n(g, "%s", path);
  buf[0] = '\0';
  for (int k = 0; k < n && off + 8 < cap; k++)
    off += (size_t)snprintf(buf + off, cap - off, "%s%" PRIu64, k ? "," : "",
                            info_u64(g, "%s.%d", path, k));
}

/* The grants of @p list (an array of grant records) as a table, each
 * with its usage. */
static void grants_table(const hipd_info_t *list, FILE *f)
{
  static const char *const head[] = {"LABEL",   "USER", "UID",  "DEVICES",
                                     "QUOTA",   "SESS", "HELD", "PEAK",
                                     "KERNELS", "BUSY", NULL};
  out_table_t *t = out_table_new(head, "llrlrrrrrr");
  int n = info_n(list, "%s", "");
  char a[32], devs[256];

  for (int i = 0; i < n; i++) {
    out_table_cell(t, "%s", info_s(list, "%d.label", i));
    out_table_cell(t, "%s",
                   info_s(list, "%d.user", i)[0] ? info_s(list, "%d.user", i)
                                                 : "-");
    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.uid", i));
    devices_text(list, "%d.devices", i, devs, sizeof(devs));
    out_table_cell(t, "%s", devs);
    out_size(a, sizeof(a), info_u64(list, "%d.quota", i));
    out_table_cell(t, "%s", info_u64(list, "%d.quota", i) ? a : "-");
    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.sessions", i));
    out_size(a, sizeof(a), info_u64(list, "%d.mem_held", i));
    out_table_cell(t, "%s", a);
    out_size(a, sizeof(a), info_u64(list, "%d.mem_peak", i));
    out_table_cell(t, "%s", a);
    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.kernels_launched", i));
    out_duration_ms(a, sizeof(a),
                    (double)info_u64(list, "%d.busy_ns", i) / 1e6);
    out_table_cell(t, "%s", a);
  }
  out_table_print(t, f);
  out_table_free(t);
}

void grants_print_status(hipctl_t *h)
{
  hipd_info_t *list = NULL;
  int err = hipd_grant_list(h->conn, &list);

  if (err < 0) {
    /* A daemon without grants: nothing to say. */
    if (err != HIPD_ENOMETHOD)
      printf("\ngrants: %s\n", hipd_last_error(h->conn));
    return;
  }
  if (info_n(list, "%s", "") > 0) {
    putchar('\n');
    grants_table(list, stdout);
  }
  hipd_info_free(list);
}

static const char grant_help[] =
    "usage: hipctl grant USER DEVICES [--quota SIZE] [--label LABEL]\n\n"
    "Give USER (a name or a uid) the devices DEVICES (global ids, a comma\n"
    "list: 0,1) on top of the daemon's access rules, until `hipctl revoke`.\n"
    "--quota SIZE bounds the device memory of the sessions under the grant\n"
    "(512M, 2G; binary units); --label names it (a batch job's id; 1 to 63\n"
    "letters, digits or ._:@+-; default grant-N). Admins only.\n"
    "--json: the grant's record.\n";

int cmd_grant(hipctl_t *h, int argc, char **argv)
{
  const char *user = NULL, *devs = NULL, *label = NULL;
  uint64_t quota = 0;
  hipd_info_t *info = NULL;
  int ids[64], n, rc, err;

  if (argc > 1 && hipctl_help(argv[1], grant_help))
    return HIPCTL_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quota") == 0 || strcmp(argv[i], "--label") == 0) {
      if (i + 1 >= argc)
        return hipctl_usage(h, "%s needs a value", argv[i]);
      if (strcmp(argv[i], "--label") == 0)
        label = argv[++i];
      else if (parse_size(argv[++i], &quota) != 0)
        return hipctl_usage(h, "--quota: '%s' is not a size (512M, 2G)",
                            argv[i]);
    } else if (user == NULL) {
      user = argv[i];
    } else if (devs == NULL) {
      devs = argv[i];
    } else {
      return hipctl_usage(h, "unexpected argument '%s'", argv[i]);
    }
  }
  if (user == NULL || devs == NULL)
    return hipctl_usage(h, "grant USER DEVICES: which user, which devices?");
  if ((n = parse_devices(devs, ids)) < 0)
    return hipctl_usage(h, "'%s' is not a list of device ids (0,1)", devs);
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_grant_add(h->conn, user, ids, (size_t)n, quota, label,
                            &info)) < 0)
    return hipctl_fail(h, NULL, err);
  if (h->json) {
    js_info(info);
    js_end();
  } else {
    char q[32] = "no quota";
    if (info_u64(info, "quota"))
      out_size(q, sizeof(q), info_u64(info, "quota"));
    printf("granted '%s': uid %" PRIu64 " (%s), devices %s, quota %s\n",
           info_s(info, "label"), info_u64(info, "uid"), info_s(info, "user"),
           devs, q);
  }
  hipd_info_free(info);
  return HIPCTL_EXIT_OK;
}

static const char revoke_help[] =
    "usage: hipctl revoke LABEL | --user USER [LABEL]\n\n"
    "Take back the grant LABEL, or every grant of USER. The sessions under\n"
    "them are closed (close reason \"access revoked: \") and their memory\n"
    "freed. Prints each grant's usage: sessions closed, kernels launched,\n"
    "device busy time, bytes moved, peak memory. Admins only.\n"
    "--json: an array of the grants' records.\n";

int cmd_revoke(hipctl_t *h, int argc, char **argv)
{
  const char *user = NULL, *label = NULL;
  hipd_info_t *list = NULL;
  int rc, err, n;

  if (argc > 1 && hipctl_help(argv[1], revoke_help))
    return HIPCTL_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--user") == 0) {
      if (i + 1 >= argc)
        return hipctl_usage(h, "--user needs a value");
      user = argv[++i];
    } else if (label == NULL) {
      label = argv[i];
    } else {
      return hipctl_usage(h, "unexpected argument '%s'", argv[i]);
    }
  }
  if (user == NULL && label == NULL)
    return hipctl_usage(h, "revoke LABEL | --user USER: which grant?");
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_grant_revoke(h->conn, label, user, &list)) < 0)
    return hipctl_fail(h, NULL, err);
  if (h->json) {
    js_info(list);
    js_end();
    hipd_info_free(list);
    return HIPCTL_EXIT_OK;
  }
  n = info_n(list, "%s", "");
  for (int i = 0; i < n; i++) {
    char peak[32], busy[32], h2d[32], d2h[32];
    out_size(peak, sizeof(peak), info_u64(list, "%d.mem_peak", i));
    out_size(h2d, sizeof(h2d), info_u64(list, "%d.bytes_h2d", i));
    out_size(d2h, sizeof(d2h), info_u64(list, "%d.bytes_d2h", i));
    out_duration_ms(busy, sizeof(busy),
                    (double)info_u64(list, "%d.busy_ns", i) / 1e6);
    printf("revoked '%s' (uid %" PRIu64 "): %" PRIu64
           " sessions closed, %" PRIu64
           " kernels, busy %s, peak memory %s, %s to the device, %s back\n",
           info_s(list, "%d.label", i), info_u64(list, "%d.uid", i),
           info_u64(list, "%d.sessions", i),
           info_u64(list, "%d.kernels_launched", i), busy, peak, h2d, d2h);
  }
  hipd_info_free(list);
  return HIPCTL_EXIT_OK;
}

static const char grants_help[] =
    "usage: hipctl grants\n\n"
    "The grants you may see (an admin all, anyone else their own): label,\n"
    "user, devices, quota, and what the sessions under each did so far:\n"
    "sessions open, memory held now and at most, kernels, busy time.\n"
    "--json: an array of grant records.\n";

int cmd_grants(hipctl_t *h, int argc, char **argv)
{
  hipd_info_t *list = NULL;
  int rc, err;

  if (argc > 1 && hipctl_help(argv[1], grants_help))
    return HIPCTL_EXIT_OK;
  if (argc > 1)
    return hipctl_usage(h, "unexpected argument '%s'", argv[1]);
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_grant_list(h->conn, &list)) < 0)
    return hipctl_fail(h, NULL, err);
  if (h->json) {
    js_info(list);
    js_end();
  } else {
    grants_table(list, stdout);
  }
  hipd_info_free(list);
  return HIPCTL_EXIT_OK;
}
