/* SPDX-License-Identifier: MIT */
/* examples/hello.c: a tour of libhipd.
 *
 * Connects to hipd, shows who answered, checks that ping echoes, measures the
 * round trip, pipelines a batch of pings and prints what the daemon and this
 * session look like.
 *
 *   examples/hello [SOCKET]
 *
 * Without SOCKET, the default path is used ($HIPD_SOCKET, else
 * /run/hipd/hipd.sock for root, else $XDG_RUNTIME_DIR/hipd.sock).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hipd.h"

#define ROUND_TRIPS 1000
#define PIPELINED 100

static hipd_conn_t *conn;

/* Report a failed call the way every hipd client should: the code's name
 * and the daemon's message. */
static void die(const char *what, int err)
{
  fprintf(stderr, "hello: %s failed: %s: %s\n", what, hipd_err_name(err),
          hipd_last_error(conn));
  hipd_close(conn);
  exit(EXIT_FAILURE);
}

static double now_us(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Print a record as one line of JSON-like text, however long it is. */
static void print_info(const char *label, const hipd_info_t *info)
{
  char small[512], *text = small;
  int n = hipd_info_format(info, small, sizeof(small));

  if (n >= (int)sizeof(small)) {
    text = malloc((size_t)n + 1);
    if (text == NULL) {
      fprintf(stderr, "hello: out of memory\n");
      exit(EXIT_FAILURE);
    }
    hipd_info_format(info, text, (size_t)n + 1);
  }
  printf("%-14s %s\n", label, text);
  if (text != small)
    free(text);
}

static void show_identity(void)
{
  hipd_info_t *id;
  const char *version = "?";
  int64_t protocol = 0, session = 0, pid = 0;
  int err = hipd_hello(conn, &id);

  if (err < 0)
    die("hello", err);
  hipd_info_str(id, "version", &version, NULL);
  hipd_info_int(id, "protocol", &protocol);
  hipd_info_int(id, "session", &session);
  hipd_info_int(id, "pid", &pid);
  printf("connected to hipd %s (protocol %lld, session %lld, daemon pid "
         "%lld)\n",
         version, (long long)protocol, (long long)session, (long long)pid);
  print_info("identity:", id);
  hipd_info_free(id);
}

static void check_echo(void)
{
  char payload[64], echo[64];
  size_t len;
  int err;

  snprintf(payload, sizeof(payload), "hello from libhipd %s", hipd_version());
  err = hipd_ping(conn, payload, strlen(payload), echo, sizeof(echo), &len);
  if (err < 0)
    die("ping", err);
  if (len != strlen(payload) || memcmp(echo, payload, len) != 0) {
    fprintf(stderr,
            "hello: ping echoed %zu bytes that differ from the %zu "
            "sent\n",
            len, strlen(payload));
    hipd_close(conn);
    exit(EXIT_FAILURE);
  }
  printf("%-14s echoed \"%.*s\"\n", "ping:", (int)len, echo);
}

static void measure_round_trip(void)
{
  char echo[8];
  size_t len;
  double start = now_us();

  for (int i = 0; i < ROUND_TRIPS; i++) {
    int err = hipd_ping(conn, "rtt", 3, echo, sizeof(echo), &len);
    if (err < 0)
      die("ping", err);
  }
  printf("%-14s %.1f us average over %d pings\n",
         "round trip:", (now_us() - start) / ROUND_TRIPS, ROUND_TRIPS);
}

/* Send a batch of pings before reading any reply, then collect the replies
 * last to first: each async call fills its own buffer whenever its reply is
 * read, whichever call is being waited for. */
static void pipeline(int corked)
{
  static char sent[PIPELINED][16], echo[PIPELINED][16];
  static size_t len[PIPELINED];
  hipd_call_t *calls[PIPELINED];
  int err;
  double start = now_us(), elapsed;

  /* Corked, the requests leave in one write instead of one each. */
  if (corked)
    hipd_cork(conn);
  for (int i = 0; i < PIPELINED; i++) {
    snprintf(sent[i], sizeof(sent[i]), "ping #%d", i);
    err = hipd_ping_begin(conn, sent[i], strlen(sent[i]), echo[i],
                          sizeof(echo[i]), &len[i], &calls[i]);
    if (err < 0)
      die("ping (async)", err);
  }
  if (corked && (err = hipd_uncork(conn)) < 0)
    die("uncork", err);
  for (int i = PIPELINED - 1; i >= 0; i--) {
    err = hipd_wait(calls[i]);
    if (err < 0)
      die("waiting for a ping", err);
    if (len[i] != strlen(sent[i]) || memcmp(echo[i], sent[i], len[i]) != 0) {
      fprintf(stderr, "hello: pipelined ping #%d echoed the wrong bytes\n", i);
      hipd_close(conn);
      exit(EXIT_FAILURE);
    }
  }
  elapsed = now_us() - start;
  printf("%-14s %d pings in flight, waited for last to first: %.0f us "
         "(%.1f us per ping)\n",
         corked ? "corked:" : "pipelining:", PIPELINED, elapsed,
         elapsed / PIPELINED);
}

static void show_infos(void)
{
  hipd_info_t *info;
  int err;

  err = hipd_daemon_info(conn, &info);
  if (err < 0)
    die("daemon.info", err);
  print_info("daemon.info:", info);
  hipd_info_free(info);

  err = hipd_session_info(conn, &info);
  if (err < 0)
    die("session.info", err);
  print_info("session.info:", info);
  hipd_info_free(info);
}

int main(int argc, char **argv)
{
  const char *path = argc > 1 ? argv[1] : NULL;
  int err;

  if (argc > 2 || (path && (!strcmp(path, "-h") || !strcmp(path, "--help")))) {
    fprintf(stderr, "usage: %s [SOCKET]\n", argv[0]);
    return argc > 2 ? EXIT_FAILURE : EXIT_SUCCESS;
  }
  printf("libhipd %s (protocol %d)\n", hipd_version(), hipd_protocol_version());
  /* A connect failure has no connection yet: its message is
   * hipd_last_error(NULL). */
  err = hipd_connect(path, &conn);
  if (err < 0)
    die("connect", err);

  show_identity();
  check_echo();
  measure_round_trip();
  pipeline(0);
  pipeline(1);
  show_infos();

  hipd_close(conn);
  printf("bye\n");
  return EXIT_SUCCESS;
}
