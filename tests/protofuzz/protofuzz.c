/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz.c: an end-to-end protocol fuzzer for hipd.
 *
 * It starts a real hipd (tests/lib/harness.c: CPU devices, small limits) and
 * talks to it over several raw connections at once. For every method of the
 * daemon's own table (dispatch_methods(), linked from libhipdcore, so a new
 * method cannot be missed) it has a template that builds a valid request
 * from the live handles that connection created: buffers, streams, events,
 * kernels compiled from a small HIP source, shared buffers from memfds. It
 * sends those requests as they are, or mutated (arity, types, huge and
 * negative integers, floats, nil, strings and bins empty and oversized,
 * nested containers, stale, foreign, forged and wrong-kind handles, method
 * names), and breaks the protocol on purpose (bad msgids, wrong message
 * shapes, decode limits, truncated frames, garbage bytes). It passes
 * descriptors of many kinds over SCM_RIGHTS, with shm.create and with any
 * request, and closes connections at random, with requests in flight.
 *
 * Meanwhile a well-behaved session (libhipd, in a thread of its own)
 * allocates, writes, launches a kernel, reads back and compares, with
 * streams, events and shared buffers, the whole time.
 *
 * It fails (exit 1, with the seed and the last requests sent) when:
 * - the daemon dies, or does not exit 0 on SIGTERM at the end;
 * - a reply is malformed: not [1, msgid, error, result], a msgid that was
 *   not sent on that connection or was answered already, an error that is
 *   not {code: int, name: str, message: str}, with an unknown or
 *   client-only code, a name that is not the code's, an empty message, a
 *   message that does not begin with the method's name, a result with an
 *   error; or EINTERNAL;
 * - a connection that broke the protocol is not closed;
 * - the well-behaved session gets one wrong answer or error;
 * - a `session closed: REASON` line of the daemon's log has a REASON that
 *   starts with none of the first column of the table "Why a session is
 *   closed" of proto/PROTOCOL.md (read when it runs: --doc or
 *   $PROTOFUZZ_DOC), or the log reports a sanitizer error.
 *
 * Usage: protofuzz [--seconds N] [--seed S] [--requests N] [--doc PATH]
 *                  [--ir PATH] [--conns N] [--verbose]
 * $PROTOFUZZ_SECONDS and $PROTOFUZZ_SEED give the defaults. A seed makes
 * the requests the fuzzer generates the same; what the daemon answers when
 * depends on timing, so a run is reproducible in its inputs, not its
 * interleaving.
 */
#include "config.h"

#include "protofuzz.h"

/* ------------------------------------------------------------------ main */

static void usage(void)
{
  fprintf(stderr, "usage: protofuzz [--seconds N] [--seed S] [--requests N] "
                  "[--doc PROTOCOL.md] [--ir FILE.ir.json] [--conns N] "
                  "[--verbose]\n");
  exit(2);
}

static void parse_args(int argc, char **argv)
{
  const char *env;

  if ((env = getenv("PROTOFUZZ_SECONDS")) != NULL && env[0])
    opt.seconds = atoi(env);
  if ((env = getenv("PROTOFUZZ_SEED")) != NULL && env[0])
    opt.seed = strtoull(env, NULL, 0);
  else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    opt.seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
  }
  opt.doc = getenv("PROTOFUZZ_DOC");
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      opt.verbose++;
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--seconds") == 0)
      opt.seconds = atoi(v);
    else if (strcmp(a, "--seed") == 0)
      opt.seed = strtoull(v, NULL, 0);
    else if (strcmp(a, "--requests") == 0)
      opt.max_requests = strtoull(v, NULL, 0);
    else if (strcmp(a, "--doc") == 0)
      opt.doc = v;
    else if (strcmp(a, "--ir") == 0)
      opt.ir = v;
    else if (strcmp(a, "--conns") == 0)
      opt.conns = atoi(v);
    else
      usage();
  }
  if (opt.doc == NULL || opt.doc[0] == '\0')
    opt.doc = PROTOFUZZ_SRCDIR "/proto/PROTOCOL.md";
  if (opt.ir == NULL)
    opt.ir = PROTOFUZZ_SRCDIR "/tests/codegen/vec_add.ir.json";
  if (opt.conns < 1)
    opt.conns = 1;
  if (opt.conns > MAX_CONNS)
    opt.conns = MAX_CONNS;
  if (opt.seconds < 1)
    opt.seconds = 1;
}

static int load_ir(void)
{
  size_t len = 0;
  char err[256];
  char *text = ir_json_read_file(opt.ir, &len);
  msgpack_sbuffer sb;

  if (text == NULL) {
    fprintf(stderr, "protofuzz: cannot read %s: %s\n", opt.ir, strerror(errno));
    return -1;
  }
  msgpack_sbuffer_init(&sb);
  if (ir_json_to_msgpack(text, len, &sb, err, sizeof(err)) != 0) {
    fprintf(stderr, "protofuzz: %s: %s\n", opt.ir, err);
    free(text);
    msgpack_sbuffer_destroy(&sb);
    return -1;
  }
  free(text);
  ir_doc = (uint8_t *)sb.data; /* kept to the end */
  ir_len = sb.size;
  return 0;
}

static void print_stats(double secs)
{
  fprintf(stderr,
          "protofuzz: %.1f s, %llu messages (%.0f/s): %llu valid, %llu "
          "mutated, %llu notifications, %llu violations, %llu garbage, %llu "
          "truncated and closed, %llu truncated and kept open; %llu "
          "connections silent\n",
          secs, (unsigned long long)st.requests, st.requests / secs,
          (unsigned long long)st.valid, (unsigned long long)st.mutated,
          (unsigned long long)st.notifications,
          (unsigned long long)st.violations, (unsigned long long)st.garbage,
          (unsigned long long)st.truncated, (unsigned long long)st.stalled,
          (unsigned long long)st.silent);
  fprintf(stderr, "protofuzz: %llu replies: %llu ok",
          (unsigned long long)st.replies, (unsigned long long)st.ok);
  for (int i = 1; i < 64; i++)
    if (st.by_code[i])
      fprintf(stderr, ", %llu %s", (unsigned long long)st.by_code[i],
              hipd_err_name(-i));
  fprintf(stderr, "\n");
  fprintf(stderr,
          "protofuzz: %llu connections; closed by us %llu (close %llu, reset "
          "%llu, mid-request %llu, shutdown %llu); by the daemon %llu (%llu "
          "with no violation sent)\n",
          (unsigned long long)st.conns,
          (unsigned long long)(st.closed_by_us[0] + st.closed_by_us[1] +
                               st.closed_by_us[2] + st.closed_by_us[3]),
          (unsigned long long)st.closed_by_us[0],
          (unsigned long long)st.closed_by_us[1],
          (unsigned long long)st.closed_by_us[2],
          (unsigned long long)st.closed_by_us[3],
          (unsigned long long)st.closed_by_daemon,
          (unsigned long long)st.closed_unexpected);
  fprintf(stderr,
          "protofuzz: %llu descriptors sent:", (unsigned long long)st.fds_sent);
  for (int k = 0; k < FD_NKINDS; k++)
    fprintf(stderr, " %s %llu", fd_names[k],
            (unsigned long long)st.fds_by_kind[k]);
  fprintf(stderr, "\n");
  fprintf(stderr, "protofuzz: well-behaved session: %llu rounds, %llu calls\n",
          (unsigned long long)good_rounds, (unsigned long long)good_ops);
}

int main(int argc, char **argv)
{
  pthread_t good;
  int good_started = 0, code, rc = 1;
  char quota_dir[512];
  long long t0, deadline;
  uint64_t opened = 0, closed = 0;

  parse_args(argc, argv);
  rng.s = opt.seed;
  signal(SIGPIPE, SIG_IGN);
  fprintf(stderr,
          "protofuzz: seed %llu, %d s, %d connections (rerun: "
          "protofuzz --seed %llu --seconds %d)\n",
          (unsigned long long)opt.seed, opt.seconds, opt.conns,
          (unsigned long long)opt.seed, opt.seconds);

  methods = dispatch_methods(&nmethods);
  if (check_coverage() != 0)
    return 1;
  if (load_reasons(opt.doc) != 0 || load_ir() != 0)
    return 1;
  fprintf(stderr, "protofuzz: %u methods, %d close reasons from %s\n", nmethods,
          nreasons, opt.doc);

  arena = malloc(ARENA_SIZE);
  bigbuf = malloc(BIG_LEN);
  for (size_t i = 0; i < BIG_LEN; i++)
    bigbuf[i] = (char)('a' + (i * 7 + i / 26) % 26);

  if (harness_init("protofuzz") != 0)
    return 1;
  snprintf(quota_dir, sizeof(quota_dir), "%s", harness_temp_path("regular"));
  snprintf(regular_path, sizeof(regular_path), "%s", quota_dir);
  {
    int fd = open(regular_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      (void)!write(fd, bigbuf, 65536);
      close(fd);
    }
  }
  /* The CPU devices only, on a GPU host too: a mutated launch can pass any
   * address as a `ptr` argument, and a GPU fault costs every session of the
   * device its context (until tenants are isolated in processes), which
   * would fail the well-behaved session for a reason this fuzzer does not
   * test. The fuzzer and the well-behaved session are one uid: the
   * per-uid bounds on silent connections and on log lines (each with a
   * test of its own in check_policy) are off, as they would refuse the
   * good session and drop the session lines this program counts. */
  daemon_ = harness_start(
      "--devices", "cpu", "--cpu-devices", "2", "--cache-dir", "",
      "--mem-quota", "64M", "--max-message", MAX_MESSAGE, "--max-inflight",
      "16", "--max-handles", "128", "--max-streams", "8", "--output-cap", "64M",
      "--write-timeout", "5000", "--cpu-kernel-timeout", "3000",
      "--shutdown-timeout", "3000", "--hello-timeout", "3000",
      "--request-timeout", "3000", "--log-tenant-rate", "0",
      "--tenant-max-connecting", "0", NULL);
  if (daemon_ == NULL)
    goto done;

  if (pthread_create(&good, NULL, good_main, NULL) == 0)
    good_started = 1;

  t0 = harness_now_ms();
  deadline = t0 + (long long)opt.seconds * 1000;
  while (!failed && harness_now_ms() < deadline &&
         st.requests < opt.max_requests) {
    struct pollfd pfd[MAX_CONNS];
    long long now = harness_now_ms();

    if (harness_wait_exit(daemon_, 0) != -1) {
      fail("the daemon exited (status %d)", daemon_->status);
      break;
    }
    if (good_fail[0]) {
      fail("the well-behaved session failed: %s", good_fail);
      break;
    }
    for (int i = 0; i < opt.conns; i++) {
      conn_t *c = conns[i];
      if (c == NULL) {
        conns[i] = conn_open();
        continue;
      }
      if (c->doomed && now - c->doomed_at > DOOMED_MS) {
        fail("conn %u (session %llu): not closed %d ms after it sent %s "
             "(%d requests in flight, %zu bytes not written)",
             c->serial, (unsigned long long)c->sid, DOOMED_MS, c->doom_what,
             c->npend, c->wq_bytes);
        break;
      }
      if (c->maybe && !c->doomed && now - c->doomed_at > MAYBE_MS) {
        st.closed_by_us[0]++;
        conn_free(c);
        conns[i] = NULL;
        continue;
      }
      if (!c->doomed && !c->maybe && now >= c->end_at) {
        uint32_t how = rnd(20);
        if (how < 7)
          send_violation(c);
        else if (how < 10)
          send_garbage(c);
        else if (how < 13)
          send_stall(c);
        else
          c->end_at = 0; /* closed just below */
      }
      if (!c->doomed && !c->maybe) {
        if (c->end_at == 0 || chance(20000)) {
          conn_close_ours(c);
          conn_free(c);
          conns[i] = NULL;
          continue;
        }
        for (int b = 0; b < 4 && c->npend < PEND_HIGH &&
                        c->wq_bytes < WQ_HIGH && !c->doomed && !c->maybe;
             b++)
          conn_generate(c);
      }
    }
    int n = 0;
    for (int i = 0; i < opt.conns; i++) {
      pfd[i].fd = conns[i] ? conns[i]->fd : -1;
      pfd[i].events = POLLIN | (conns[i] && conns[i]->wq ? POLLOUT : 0);
      pfd[i].revents = 0;
      n++;
    }
    if (poll(pfd, (nfds_t)n, 5) < 0 && errno != EINTR) {
      fail("poll: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < opt.conns && !failed; i++) {
      conn_t *c = conns[i];
      int dead = 0;
      if (c == NULL)
        continue;
      if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
        dead = conn_read(c) != 0;
      if (!dead && c->wq && conn_flush(c) != 0)
        dead = conn_read(c) != 0 || 1;
      if (dead) {
        conn_closed_by_daemon(c);
        conn_free(c);
        conns[i] = NULL;
      }
    }
  }
  double secs = (harness_now_ms() - t0) / 1000.0;

  /* Connections that broke the protocol must still be closed. */
  long long wait_until = harness_now_ms() + DOOMED_MS;
  for (int i = 0; i < opt.conns && !failed; i++) {
    conn_t *c = conns[i];
    if (c == NULL)
      continue;
    while (c->doomed && !failed) {
      struct pollfd p = {.fd = c->fd, .events = POLLIN};
      if (harness_now_ms() > wait_until) {
        fail("conn %u (session %llu): not closed %lld ms after it sent %s "
             "(%d requests in flight, %zu bytes not written)",
             c->serial, (unsigned long long)c->sid,
             harness_now_ms() - c->doomed_at, c->doom_what, c->npend,
             c->wq_bytes);
        break;
      }
      poll(&p, 1, 100);
      if (c->wq)
        conn_flush(c);
      if (conn_read(c) != 0)
        break;
    }
  }
  for (int i = 0; i < opt.conns; i++)
    if (conns[i]) {
      conn_free(conns[i]);
      conns[i] = NULL;
    }
  /* The well-behaved session compiles its kernel first, which may take a
   * while on a loaded machine: give it time for one round. */
  for (long long until = harness_now_ms() + 120000;
       good_started && good_rounds == 0 && !good_fail[0] &&
       harness_now_ms() < until;)
    harness_sleep_ms(50);
  good_stop = 1;
  if (good_started)
    pthread_join(good, NULL);
  if (good_fail[0])
    fail("the well-behaved session failed: %s", good_fail);
  if (!failed && good_rounds == 0)
    fail("the well-behaved session completed no round");

  code = harness_stop(daemon_);
  if (code != 0)
    fail("hipd exited with %d on SIGTERM", code);
  int bad = check_log(daemon_->log, &opened, &closed);
  if (bad)
    fail("%d problems in the daemon's log (above)", bad);
  if (closed < opened)
    fail("%llu sessions opened, %llu closed in the log",
         (unsigned long long)opened, (unsigned long long)closed);

  print_stats(secs);
  fprintf(stderr, "protofuzz: sessions in the log: %llu opened, %llu closed:",
          (unsigned long long)opened, (unsigned long long)closed);
  for (int j = 0; j < ncloses; j++)
    fprintf(stderr, "%s %llu '%s'", j ? "," : "",
            (unsigned long long)closes[j].n, closes[j].reason);
  fprintf(stderr, "\n");
  int never = 0;
  fprintf(stderr, "protofuzz: methods never answered with success:");
  for (unsigned i = 0; i < nmethods && i < 256; i++)
    if (st.m_ok[i] == 0) {
      fprintf(stderr, " %s (%llu sent)", methods[i].name,
              (unsigned long long)st.m_sent[i]);
      never++;
    }
  fprintf(stderr, "%s\n", never ? "" : " none");
  fprintf(stderr,
          "protofuzz: %llu requests sent as their template made them "
          "got EPARAMS\n",
          (unsigned long long)st.valid_eparams);
  if (failed) {
    ring_dump();
    harness_log_dump(daemon_);
    fprintf(stderr, "protofuzz: FAILED (seed %llu): %s\n",
            (unsigned long long)opt.seed, fail_text);
  } else {
    fprintf(stderr, "protofuzz: PASS (seed %llu)\n",
            (unsigned long long)opt.seed);
    rc = 0;
  }
  harness_free(daemon_);
done:
  harness_fini();
  free(arena);
  free(bigbuf);
  free(ir_doc);
  free(tmpl_of);
  return rc;
}
