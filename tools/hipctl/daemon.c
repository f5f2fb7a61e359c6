/* SPDX-License-Identifier: MIT */
/* tools/hipctl/daemon.c: `metrics` (the Prometheus text) and `log-level`
 * (read or set the daemon's log level).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "hipctl.h"

static const char metrics_help[] =
    "usage: hipctl metrics\n\n"
    "Print the daemon's metrics in the Prometheus text format (an admin:\n"
    "every series; others: the device series and their own tenant's).\n"
    "--json: {\"text\": \"...\"}.\n";

int cmd_metrics(hipctl_t *h, int argc, char **argv)
{
  char *text = NULL;
  size_t len = 0;
  int rc, err;

  if (argc > 1 && hipctl_help(argv[1], metrics_help))
    return HIPCTL_EXIT_OK;
  if (argc > 1)
    return hipctl_usage(h, "unexpected argument '%s'", argv[1]);
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_metrics(h->conn, &text, &len)) < 0)
    return hipctl_fail(h, NULL, err);
  if (h->json) {
    js_obj_begin();
    js_key("text");
    js_strn(text, len);
    js_obj_end();
    js_end();
  } else {
    fwrite(text, 1, len, stdout);
    if (len > 0 && text[len - 1] != '\n')
      putchar('\n');
  }
  free(text);
  return HIPCTL_EXIT_OK;
}

static const char log_level_help[] =
    "usage: hipctl log-level [error|warn|info|debug]\n\n"
    "Print the daemon's log level, or set it (root or the daemon's admin\n"
    "group only: others get EPERM, exit status 4). It applies to the\n"
    "listener and every worker. --json: {\"level\": \"info\"}.\n";

int cmd_log_level(hipctl_t *h, int argc, char **argv)
{
  static const char *const levels[] = {"error", "warn", "info", "debug"};
  const char *set = NULL;
  char level[32];
  int rc, err, ok = 0;

  if (argc > 1 && hipctl_help(argv[1], log_level_help))
    return HIPCTL_EXIT_OK;
  if (argc > 2)
    return hipctl_usage(h, "one level at most");
  if (argc == 2) {
    set = argv[1];
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
      ok |= strcmp(set, levels[i]) == 0;
    if (!ok)
      return hipctl_usage(h, "'%s' is not a level (error, warn, info, debug)",
                          set);
  }
  if ((rc = hipctl_connect(h)) != 0)
    return rc;
  if ((err = hipd_log_level(h->conn, set, level, sizeof(level))) < 0)
    return hipctl_fail(h, set, err);
  if (h->json) {
    js_obj_begin();
    js_key("level");
    js_str(level);
    js_obj_end();
    js_end();
  } else {
    printf("%s\n", level);
  }
  return HIPCTL_EXIT_OK;
}
