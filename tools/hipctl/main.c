/* SPDX-License-Identifier: MIT */
/* tools/hipctl/main.c: hipctl, the admin and user command line of hipd.
 *
 *   hipctl [--socket PATH] [--json] [--timeout MS] COMMAND [ARGS...]
 *
 * The global options may come anywhere before a `--`. Each command is a
 * function of the family's file (hipctl.h lists them); this file only
 * parses the global options and dispatches to the command. What the
 * commands share (connecting, exit statuses, error and usage messages) is
 * common.c's.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hipctl.h"

static const struct {
  const char *name;
  hipctl_cmd_fn fn;
  const char *summary;
} commands[] = {
    {"status", cmd_status, "the daemon, its devices and their activity"},
    {"devices", cmd_devices, "the devices, their memory and activity"},
    {"sessions", cmd_sessions, "the sessions you may see"},
    {"kill", cmd_kill, "close sessions: kill SESSION..."},
    {"grant", cmd_grant, "give a user devices: grant USER DEVICES"},
    {"revoke", cmd_revoke, "take a grant back: revoke LABEL"},
    {"grants", cmd_grants, "the grants and their usage"},
    {"cache", cmd_cache, "the kernel cache: stats|clear|list|prewarm"},
    {"metrics", cmd_metrics, "the Prometheus metrics text"},
    {"log-level", cmd_log_level, "read or set the log level"},
    {"run", cmd_run, "compile and run a kernel from a file"},
    {"ir", cmd_ir, "generate HIP from the IR's JSON form, and run it"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* parse_globals(): no exit status yet, run the command. */
#define GO_ON (-1)

static void usage_main(FILE *f)
{
  fprintf(f, "usage: hipctl [--socket PATH] [--json] [--timeout MS] "
             "COMMAND [ARGS...]\n"
             "       hipctl --version | --help\n\n"
             "commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f,
          "\noptions:\n"
          "  --socket PATH  the daemon's socket (default: $HIPD_SOCKET, else\n"
          "                 /run/hipd/hipd.sock for root, else\n"
          "                 $XDG_RUNTIME_DIR/hipd.sock, as libhipd does)\n"
          "  --json         one JSON document on stdout\n"
          "  --timeout MS   give up on a reply after MS milliseconds\n"
          "  --version      hipctl's and libhipd's version\n\n"
          "`hipctl COMMAND --help` describes a command; hipctl(1) the exit "
          "statuses.\n");
}

/* Take the global options out of argv (they may come anywhere before a
 * `--`); what is left is the command and its arguments.
 * @return GO_ON, or an exit status. */
static int parse_globals(hipctl_t *h, int *argc, char **argv)
{
  int n = 1, i, dashdash = 0;

  for (i = 1; i < *argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    if (!dashdash && strcmp(a, "--") == 0) {
      dashdash = 1;
      argv[n++] = argv[i];
      continue;
    }
    if (dashdash || a[0] != '-') {
      argv[n++] = argv[i];
      continue;
    }
    if (strcmp(a, "--json") == 0) {
      h->json = 1;
      continue;
    }
    if (strcmp(a, "--version") == 0 && n == 1) {
      printf("hipctl %s (libhipd %s, protocol %d)\n", HIPD_VERSION_STRING,
             hipd_version(), hipd_protocol_version());
      return HIPCTL_EXIT_OK;
    }
    if ((strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) && n == 1) {
      usage_main(stdout);
      return HIPCTL_EXIT_OK;
    }
    if (strncmp(a, "--socket=", 9) == 0 || strncmp(a, "--timeout=", 10) == 0)
      val = strchr(a, '=') + 1;
    else if (strcmp(a, "--socket") == 0 || strcmp(a, "--timeout") == 0) {
      if (i + 1 >= *argc) {
        fprintf(stderr, "hipctl: %s needs a value\n", a);
        return HIPCTL_EXIT_USAGE;
      }
      val = argv[++i];
    } else {
      argv[n++] = argv[i]; /* the command's own option */
      continue;
    }
    if (strncmp(a, "--socket", 8) == 0) {
      if (*val == '\0') {
        fprintf(stderr, "hipctl: --socket needs a path\n");
        return HIPCTL_EXIT_USAGE;
      }
      h->socket = val;
    } else {
      char *end;
      long ms = strtol(val, &end, 10);
      if (*val == '\0' || *end != '\0' || ms < 0 || ms > 86400000) {
        fprintf(stderr,
                "hipctl: --timeout takes milliseconds, 0 to 86400000, not "
                "'%s'\n",
                val);
        return HIPCTL_EXIT_USAGE;
      }
      h->timeout_ms = (int)ms;
    }
  }
  *argc = n;
  argv[n] = NULL;
  return GO_ON;
}

int main(int argc, char **argv)
{
  hipctl_t h = {0};
  int rc = parse_globals(&h, &argc, argv);

  if (rc != GO_ON)
    return rc;
  if (argc < 2) {
    usage_main(stderr);
    return HIPCTL_EXIT_USAGE;
  }
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (strcmp(argv[1], commands[i].name) != 0)
      continue;
    h.cmd = commands[i].name;
    rc = commands[i].fn(&h, argc - 1, argv + 1);
    if (fflush(stdout) != 0 && rc == HIPCTL_EXIT_OK)
      rc = HIPCTL_EXIT_ERROR;
    hipd_close(h.conn);
    return rc;
  }
  fprintf(stderr, "hipctl: unknown command '%s' (see hipctl --help)\n",
          argv[1]);
  return HIPCTL_EXIT_USAGE;
}
