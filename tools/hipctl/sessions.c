/* SPDX-License-Identifier: MIT */
/* tools/hipctl/sessions.c: `sessions` (session.list) and `kill`
 * (session.kill). What a caller sees is the daemon's rule: admins every
 * session, others their own uid's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hipctl.h"

static const char sessions_help[] =
    "usage: hipctl sessions\n\n"
    "The sessions you may see (an admin: all of them), by id: client pid,\n"
    "user (uid), client name, tenant, buffers and bytes per device\n"
    "(DEV:BUFFERS/BYTES), streams, kernels launched, device busy time and\n"
    "age. --json: the array session.list returns (PROTOCOL.md).\n";

int cmd_sessions(hipctl_t *h, int argc, char **argv)
{
  static const char *const head[] = {"ID",     "PID",     "USER",    "CLIENT",
                                     "TENANT", "STREAMS", "KERNELS", "BUSY",
                                     "AGE",    "MEMORY",  NULL};
  hipd_info_t *list = NULL;
  out_table_t *t;
  int rc, err, n;

  if (argc > 1 && hipctl_help(argv[1], sessions_help))
    return HIPCTL_EXIT_OK;
  if (argc > 1)
    return hipctl_usage(h, "unexpected argument '%s'", argv[1]);
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_session_list(h->conn, &list)) < 0)
    return hipctl_fail(h, NULL, err);
  if (h->json) {
    js_info(list);
    js_end();
    hipd_info_free(list);
    return HIPCTL_EXIT_OK;
  }
  n = info_n(list, "%s", "");
  t = out_table_new(head, "rrlllrrrrl");
  for (int i = 0; i < n; i++) {
    const char *user = info_s(list, "%d.user", i);
    char busy[32], age[32], mem[512] = "-", sz[32];
    size_t len = 0;

    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.id", i));
    out_table_cell(t, "%" PRId64, info_i64(list, "%d.pid", i));
    if (*user)
      out_table_cell(t, "%s(%" PRIu64 ")", user, info_u64(list, "%d.uid", i));
    else
      out_table_cell(t, "%" PRIu64, info_u64(list, "%d.uid", i));
    out_table_cell(t, "%s", info_s(list, "%d.client", i));
    out_table_cell(t, "%s", info_s(list, "%d.tenant", i));
    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.streams", i));
    out_table_cell(t, "%" PRIu64, info_u64(list, "%d.kernels_launched", i));
    out_duration_ms(busy, sizeof(busy),
                    (double)info_u64(list, "%d.busy_ns", i) / 1e6);
    out_duration_ms(age, sizeof(age), (double)info_u64(list, "%d.age_ms", i));
    out_table_cell(t, "%s", busy);
    out_table_cell(t, "%s", age);
    for (int k = 0; k < info_n(list, "%d.devices", i); k++) {
      out_size(sz, sizeof(sz), info_u64(list, "%d.devices.%d.bytes", i, k));
      int w =
          snprintf(mem + len, sizeof(mem) - len, "%s%" PRId64 ":%" PRIu64 "/%s",
                   len ? " " : "", info_i64(list, "%d.devices.%d.device", i, k),
                   info_u64(list, "%d.devices.%d.buffers", i, k), sz);
      if (w < 0 || (size_t)w >= sizeof(mem) - len)
        break;
      len += (size_t)w;
    }
    out_table_cell(t, "%s", mem);
  }
  out_table_print(t, stdout);
  out_table_free(t);
  hipd_info_free(list);
  return HIPCTL_EXIT_OK;
}

static const char kill_help[] =
    "usage: hipctl kill SESSION...\n\n"
    "Close each session (its close reason: killed). A session you may not\n"
    "see is ENOENT, like one that does not exist. The exit status is that\n"
    "of the first failure. --json: {killed: [ids], failed: [{session,\n"
    "code, message}]}.\n";

int cmd_kill(hipctl_t *h, int argc, char **argv)
{
  uint64_t *ids;
  int rc, first = HIPCTL_EXIT_OK, nfailed = 0;
  int *errs;
  char **msgs;

  if (argc > 1 && hipctl_help(argv[1], kill_help))
    return HIPCTL_EXIT_OK;
  if (argc < 2)
    return hipctl_usage(h, "which session? (kill SESSION...)");
  ids = calloc((size_t)argc, sizeof(*ids));
  errs = calloc((size_t)argc, sizeof(*errs));
  msgs = calloc((size_t)argc, sizeof(*msgs));
  if (ids == NULL || errs == NULL || msgs == NULL) {
    rc = hipctl_fail(h, NULL, HIPD_ENOMEM);
    goto done;
  }
  for (int i = 1; i < argc; i++) {
    char *end;
    errno = 0;
    ids[i] = strtoull(argv[i], &end, 10);
    if (argv[i][0] < '0' || argv[i][0] > '9' || *end != '\0' || errno) {
      rc = hipctl_usage(h, "'%s' is not a session id (a number)", argv[i]);
      goto done;
    }
  }
  if ((rc = hipctl_connect(h)) != 0)
    goto done;
  if (h->json) {
    js_obj_begin();
    js_key("killed");
    js_arr_begin();
  }
  for (int i = 1; i < argc; i++) {
    errs[i] = hipd_session_kill(h->conn, ids[i]);
    if (errs[i] == 0) {
      if (h->json)
        js_uint(ids[i]);
      else
        printf("killed session %" PRIu64 "\n", ids[i]);
      continue;
    }
    nfailed++;
    msgs[i] = strdup(hipd_last_error(h->conn));
    rc = hipctl_fail(h, argv[i], errs[i]);
    if (first == HIPCTL_EXIT_OK)
      first = rc;
    if (rc == HIPCTL_EXIT_CONNECT)
      break; /* the connection is gone: the rest would fail the same */
  }
  if (h->json) {
    js_arr_end();
    js_key("failed");
    js_arr_begin();
    for (int i = 1; i < argc && nfailed > 0; i++) {
      if (errs[i] == 0)
        continue;
      js_obj_begin();
      js_key("session");
      js_uint(ids[i]);
      js_key("code");
      js_str(hipd_err_name(errs[i]));
      js_key("message");
      js_str(msgs[i] ? msgs[i] : "");
      js_obj_end();
    }
    js_arr_end();
    js_obj_end();
    js_end();
  }
  rc = first;
done:
  for (int i = 0; msgs != NULL && i < argc; i++)
    free(msgs[i]);
  free(msgs);
  free(ids);
  free(errs);
  return rc;
}
