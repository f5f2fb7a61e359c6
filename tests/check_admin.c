/* SPDX-License-Identifier: MIT */
/* tests/check_admin.c: the admin methods (proto/PROTOCOL.md,
 * "Administration") against real daemons, in the default worker mode and
 * in --isolation none, with clients of two real other uids.
 *
 * As root the test makes (or reuses) the users hipd_adm_a and hipd_adm_b
 * and the group hipd_adm_g. Each of them runs a client process (forked,
 * then initgroups/setgid/setuid) that the test drives over a pipe: open a
 * session, do work (a buffer allocated, written, read; a kernel compiled
 * and launched on the CPU device), ping, call an admin method with the
 * raw client. Checked: a uid sees only its own sessions and root sees all,
 * with pid, uid, client name, buffers per device, launches and bytes
 * moved; session.kill by root closes another uid's session, a uid cannot
 * kill another's (ENOENT) but can kill its own; --admin-group gives the
 * full view; log.level reads for all and sets for admins only, and the
 * new level shows in the logs of the listener and the worker;
 * daemon.stats; metrics parse line by line and their counters move, and
 * those of a worker that exited stay in the node-wide totals; cache.list
 * after a compile; bad params name the param. Without root: skipped
 * (exit 77). */
#include "config.h"

#include <check.h>
#include <ctype.h>
#include <grp.h>
#include <msgpack.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "rawclient.h"
#include "testutil.h"
#include "users.h"

#define USER_A "hipd_adm_a"
#define USER_B "hipd_adm_b"
#define GROUP "hipd_adm_g"

static uid_t uid_a, uid_b;

static const char *kernel_src =
    "extern \"C\" __global__ void inc(int *p) { p[threadIdx.x] += 1; }\n";

/* ------------------------------------------------------------ results */

/* One answer: a code and the result (or the error message as a str). */
typedef struct {
  int rc;
  msgpack_unpacked u;
  const msgpack_object *o;
  char *data; /* the bytes u's strings point into */
} res_t;

static void res_set(res_t *r, int rc, const char *data, size_t len)
{
  size_t off = 0;

  r->rc = rc;
  msgpack_unpacked_init(&r->u);
  r->o = NULL;
  r->data = malloc(len + 1);
  ck_assert_ptr_nonnull(r->data);
  memcpy(r->data, data, len);
  if (len > 0 &&
      msgpack_unpack_next(&r->u, r->data, len, &off) == MSGPACK_UNPACK_SUCCESS)
    r->o = &r->u.data;
}

static void res_free(res_t *r)
{
  msgpack_unpacked_destroy(&r->u);
  free(r->data);
}

static const msgpack_object *map_get(const msgpack_object *m, const char *k)
{
  if (m == NULL || m->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (uint32_t i = 0; i < m->via.map.size; i++) {
    const msgpack_object *key = &m->via.map.ptr[i].key;
    if (key->type == MSGPACK_OBJECT_STR && key->via.str.size == strlen(k) &&
        memcmp(key->via.str.ptr, k, key->via.str.size) == 0)
      return &m->via.map.ptr[i].val;
  }
  return NULL;
}

static uint64_t map_u64(const msgpack_object *m, const char *k)
{
  const msgpack_object *v = map_get(m, k);

  ck_assert_msg(v != NULL, "no key %s", k);
  if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return (uint64_t)v->via.i64;
  ck_assert_msg(v->type == MSGPACK_OBJECT_POSITIVE_INTEGER, "%s: not a uint",
                k);
  return v->via.u64;
}

static int map_str_is(const msgpack_object *m, const char *k, const char *want)
{
  const msgpack_object *v = map_get(m, k);

  return v != NULL && v->type == MSGPACK_OBJECT_STR &&
         v->via.str.size == strlen(want) &&
         memcmp(v->via.str.ptr, want, v->via.str.size) == 0;
}

/* The session of @p id in a session.list result, or NULL. */
static const msgpack_object *find_session(const msgpack_object *list,
                                          uint64_t id)
{
  ck_assert(list != NULL && list->type == MSGPACK_OBJECT_ARRAY);
  for (uint32_t i = 0; i < list->via.array.size; i++)
    if (map_u64(&list->via.array.ptr[i], "id") == id)
      return &list->via.array.ptr[i];
  return NULL;
}

/* ------------------------------------------------------ admin requests */

static uint32_t next_msgid = 1;

/* Call admin @p method on @p r with one param @p arg ("" none; "#N" the
 * uint N; else a str) into @p out. */
static void admin_raw(raw_t *r, const char *method, const char *arg, res_t *out)
{
  uint32_t id = next_msgid++;
  char msg[512];
  int rc;

  raw_request(r, id, method, arg[0] ? 1 : 0);
  if (arg[0] == '#')
    msgpack_pack_uint64(&r->pk, strtoull(arg + 1, NULL, 10));
  else if (arg[0])
    proto_pack_cstr(&r->pk, arg);
  ck_assert_int_eq(raw_flush(r), 0);
  rc = raw_response(r, id, msg, sizeof(msg));
  if (rc == 0) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, *r->msg.result);
    res_set(out, 0, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  } else {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_cstr(&pk, msg);
    res_set(out, rc, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
  }
}

static raw_t *raw_named(const char *sock, const char *name)
{
  raw_t *r = raw_open(sock);
  uint32_t id = next_msgid++;

  raw_request(r, id, "hello", 2);
  msgpack_pack_int(&r->pk, hipd_protocol_version());
  proto_pack_cstr(&r->pk, name);
  ck_assert_int_eq(raw_flush(r), 0);
  ck_assert_int_eq(raw_response(r, id, NULL, 0), 0);
  return r;
}

static int res_msg_has(const res_t *r, const char *needle)
{
  return r->o != NULL && r->o->type == MSGPACK_OBJECT_STR &&
         memmem(r->o->via.str.ptr, r->o->via.str.size, needle,
                strlen(needle)) != NULL;
}

/* ------------------------------------------- clients of another uid */

/* A client process running as another user, driven over two pipes. */
typedef struct {
  pid_t pid;
  int to, from;
} client_t;

static int write_all(int fd, const void *p, size_t n)
{
  const char *c = p;

  while (n > 0) {
    ssize_t k = write(fd, c, n);
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n)
{
  char *c = p;

  while (n > 0) {
    ssize_t k = read(fd, c, n);
    if (k <= 0)
      return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static void reply(int fd, int rc, const char *data, size_t len)
{
  int32_t r = rc;
  uint32_t l = (uint32_t)len;

  if (write_all(fd, &r, 4) || write_all(fd, &l, 4) || write_all(fd, data, len))
    _exit(3);
}

static void reply_u64(int fd, int rc, uint64_t v)
{
  msgpack_sbuffer sb;
  msgpack_packer pk;

  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_uint64(&pk, v);
  reply(fd, rc, sb.data, sb.size);
  msgpack_sbuffer_destroy(&sb);
}

/* A buffer written and read back, a kernel compiled and launched twice;
 * the buffer is kept. */
static int work(hipd_conn_t *c)
{
  static char in[4096], out[4096];
  hipd_buffer_t b;
  hipd_kernel_t k;
  hipd_args_t *args;
  const uint32_t grid[3] = {1, 1, 1}, block[3] = {64, 1, 1};
  int rc;

  memset(in, 0, sizeof(in));
  if ((rc = hipd_mem_alloc(c, 0, sizeof(in), "byte", &b)) != 0 ||
      (rc = hipd_mem_write(c, b, 0, in, sizeof(in))) != 0 ||
      (rc = hipd_mem_read(c, b, 0, out, sizeof(out))) != 0)
    return rc;
  if ((rc = hipd_kernel_compile_cached(c, 0, kernel_src, "inc", NULL, &k,
                                       NULL)) != 0)
    return rc;
  if ((args = hipd_args_new()) == NULL)
    return HIPD_ENOMEM;
  rc = hipd_args_buffer(args, b, 0);
  for (int i = 0; rc == 0 && i < 2; i++)
    rc = hipd_kernel_launch(c, k, grid, block, 0, HIPD_STREAM_NULL, args);
  hipd_args_free(args);
  return rc;
}

static void client_main(const char *sock, int in, int out)
{
  hipd_conn_t *conns[8] = {0};
  raw_t *raw = NULL;
  char line[256];

  for (;;) {
    size_t n = 0;
    char ch;
    while (n + 1 < sizeof(line) && read(in, &ch, 1) == 1 && ch != '\n')
      line[n++] = ch;
    line[n] = '\0';
    if (n == 0 || strcmp(line, "quit") == 0)
      _exit(0);
    if (strncmp(line, "open ", 5) == 0) {
      unsigned k = (unsigned)(line[5] - '0');
      hipd_info_t *info = NULL;
      uint64_t id = 0;
      int rc = hipd_connect2(sock, line + 7, &conns[k]);
      if (rc == 0 && (rc = hipd_session_info(conns[k], &info)) == 0) {
        hipd_info_uint(info, "id", &id);
        hipd_info_free(info);
      }
      reply_u64(out, rc, id);
    } else if (strncmp(line, "work ", 5) == 0) {
      int rc = work(conns[line[5] - '0']);
      if (rc != 0)
        fprintf(stderr, "check_admin: work: %s: %s\n", hipd_err_name(rc),
                hipd_last_error(conns[line[5] - '0']));
      reply_u64(out, rc, 0);
    } else if (strncmp(line, "ping ", 5) == 0) {
      char buf[8];
      size_t got;
      reply_u64(out,
                hipd_ping(conns[line[5] - '0'], "x", 1, buf, sizeof(buf), &got),
                0);
    } else if (strncmp(line, "close ", 6) == 0) {
      hipd_close(conns[line[6] - '0']);
      conns[line[6] - '0'] = NULL;
      reply_u64(out, 0, 0);
    } else if (strcmp(line, "rawreset") == 0) {
      /* The raw session was closed (killed): a fresh one next time. */
      if (raw != NULL)
        raw_close(raw);
      raw = NULL;
      reply_u64(out, 0, 0);
    } else if (strncmp(line, "admin ", 6) == 0) {
      /* admin METHOD [ARG] */
      char method[64], arg[64] = "";
      res_t r;
      msgpack_sbuffer sb;
      msgpack_packer pk;
      if (sscanf(line + 6, "%63s %63s", method, arg) < 1)
        _exit(4);
      if (raw == NULL)
        raw = raw_named(sock, "raw-admin");
      admin_raw(raw, method, arg, &r);
      msgpack_sbuffer_init(&sb);
      msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
      if (r.o != NULL)
        msgpack_pack_object(&pk, *r.o);
      reply(out, r.rc, sb.data, sb.size);
      msgpack_sbuffer_destroy(&sb);
      res_free(&r);
    } else {
      _exit(5);
    }
  }
}

static client_t client_start(const char *user, const char *sock)
{
  int p1[2], p2[2];
  client_t c;

  ck_assert_ptr_nonnull(getpwnam(user));
  ck_assert_int_eq(pipe(p1), 0);
  ck_assert_int_eq(pipe(p2), 0);
  c.pid = fork();
  ck_assert_int_ge(c.pid, 0);
  if (c.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(p1[1]);
    close(p2[0]);
    if (harness_become(user) != 0)
      _exit(2);
    client_main(sock, p1[0], p2[1]);
    _exit(0);
  }
  close(p1[0]);
  close(p2[1]);
  c.to = p1[1];
  c.from = p2[0];
  return c;
}

/* Send @p cmd to @p c and read its answer into @p out. */
static void client_do(client_t *c, res_t *out, const char *fmt, ...)
{
  char line[256];
  va_list ap;
  int32_t rc;
  uint32_t len;
  char *data;

  va_start(ap, fmt);
  vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  ck_assert_int_eq(write_all(c->to, line, strlen(line)), 0);
  ck_assert_msg(read_all(c->from, &rc, 4) == 0 &&
                    read_all(c->from, &len, 4) == 0,
                "the client of '%s' died", line);
  data = malloc(len + 1);
  ck_assert_int_eq(read_all(c->from, data, len), 0);
  res_set(out, rc, data, len);
  free(data);
}

/* A command whose answer is a code only. */
static int client_rc(client_t *c, const char *fmt, const char *arg)
{
  res_t r;
  int rc;

  client_do(c, &r, fmt, arg);
  rc = r.rc;
  res_free(&r);
  return rc;
}

static uint64_t client_open(client_t *c, const char *slot_name)
{
  res_t r;
  uint64_t id;

  client_do(c, &r, "open %s", slot_name);
  ck_assert_msg(r.rc == 0, "open %s: %s", slot_name, hipd_err_name(r.rc));
  ck_assert(r.o != NULL && r.o->type == MSGPACK_OBJECT_POSITIVE_INTEGER);
  id = r.o->via.u64;
  res_free(&r);
  return id;
}

static void client_stop(client_t *c)
{
  int st;

  if (write_all(c->to, "quit\n", 5) != 0)
    kill(c->pid, SIGKILL);
  close(c->to);
  close(c->from);
  waitpid(c->pid, &st, 0);
}

/* ------------------------------------------------------------- metrics */

static int name_ok(const char *p, size_t n)
{
  if (n == 0 || !(isalpha((unsigned char)p[0]) || p[0] == '_' || p[0] == ':'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == ':'))
      return 0;
  return 1;
}

/* Check the text exposition format 0.0.4 line by line: HELP and TYPE
 * lines, then the family's samples, each family once and together;
 * labels name="value" with escapes; a number. @return the problem or
 * NULL. */
static const char *metrics_check(const char *text, char *why, size_t size)
{
  char families[128][80];
  unsigned nfam = 0;
  char current[80] = "";
  const char *line = text;
  int lineno = 0;

  while (*line) {
    const char *end = strchr(line, '\n');
    size_t n;
    ck_assert_msg(end != NULL, "the text does not end with a newline");
    n = (size_t)(end - line);
    lineno++;
    if (n >= 7 && strncmp(line, "# HELP ", 7) == 0) {
      const char *nm = line + 7, *sp = memchr(nm, ' ', (size_t)(end - nm));
      size_t nl = sp ? (size_t)(sp - nm) : (size_t)(end - nm);
      if (!name_ok(nm, nl) || nl >= sizeof(current))
        goto bad;
      for (unsigned i = 0; i < nfam; i++)
        if (strlen(families[i]) == nl && memcmp(families[i], nm, nl) == 0) {
          snprintf(why, size, "line %d: family %.*s twice", lineno, (int)nl,
                   nm);
          return why;
        }
      memcpy(current, nm, nl);
      current[nl] = '\0';
      if (nfam < 128)
        snprintf(families[nfam++], sizeof(families[0]), "%s", current);
    } else if (n >= 7 && strncmp(line, "# TYPE ", 7) == 0) {
      size_t cl = strlen(current);
      const char *ty = line + 7 + cl + 1;
      if (cl == 0 || strncmp(line + 7, current, cl) != 0 || line[7 + cl] != ' ')
        goto bad;
      if (!((end - ty == 7 && strncmp(ty, "counter", 7) == 0) ||
            (end - ty == 5 && strncmp(ty, "gauge", 5) == 0)))
        goto bad;
    } else if (n > 0 && line[0] != '#') {
      const char *p = line, *q;
      char *num_end;
      while (p < end && *p != '{' && *p != ' ')
        p++;
      if (!name_ok(line, (size_t)(p - line)) ||
          (size_t)(p - line) != strlen(current) ||
          strncmp(line, current, strlen(current)) != 0) {
        snprintf(why, size, "line %d: a sample out of its family (%s): %.*s",
                 lineno, current, (int)n, line);
        return why;
      }
      if (*p == '{') {
        p++;
        while (*p != '}') {
          q = p;
          while (q < end && *q != '=')
            q++;
          if (!name_ok(p, (size_t)(q - p)) || q[1] != '"')
            goto bad;
          p = q + 2;
          while (p < end && *p != '"') {
            if (*p == '\\') {
              if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                goto bad;
              p++;
            }
            p++;
          }
          if (p >= end)
            goto bad;
          p++;
          if (*p == ',')
            p++;
          else if (*p != '}')
            goto bad;
        }
        p++;
      }
      if (*p != ' ')
        goto bad;
      strtod(p + 1, &num_end);
      if (num_end != end || num_end == p + 1)
        goto bad;
    } else if (n > 0) {
      goto bad;
    }
    line = end + 1;
  }
  return NULL;
bad:
  snprintf(why, size, "line %d: malformed: %.*s", lineno,
           (int)(strchr(line, '\n') - line), line);
  return why;
}

/* The value of the sample that starts with @p head ("name{labels}"), or
 * -1 when there is none. */
static double metric(const char *text, const char *head)
{
  size_t hl = strlen(head);

  for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
    if (strncmp(l, head, hl) == 0 && l[hl] == ' ')
      return strtod(l + hl + 1, NULL);
    if (strchr(l, '\n') == NULL)
      break;
  }
  return -1;
}

/* Where Prometheus's promtool is installed (Debian's prometheus package),
 * it checks the text too: the format and its lint rules. */
static void promtool_check(const char *text)
{
  char path[] = "/tmp/hipd-admin-metrics-XXXXXX", cmd[160];
  int fd, rc;

  if (system("command -v promtool >/dev/null 2>&1") != 0)
    return;
  fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write_all(fd, text, strlen(text)), 0);
  close(fd);
  snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 1>&2", path);
  rc = system(cmd);
  unlink(path);
  ck_assert_msg(rc == 0, "promtool check metrics failed (its output is above)");
}

static char *metrics_of(raw_t *r)
{
  res_t m;
  char why[512], *text;

  admin_raw(r, "metrics", "", &m);
  ck_assert_int_eq(m.rc, 0);
  ck_assert(m.o != NULL && m.o->type == MSGPACK_OBJECT_STR);
  text = strndup(m.o->via.str.ptr, m.o->via.str.size);
  res_free(&m);
  ck_assert_msg(metrics_check(text, why, sizeof(why)) == NULL, "%s", why);
  promtool_check(text);
  return text;
}

/* The metric @p head once it is at least @p min: the listener answers
 * views from reports up to 1 s old, so a change shows within about a
 * second (up to 5 s here), not at once. */
static double metric_at_least(raw_t *r, const char *head, double min)
{
  double v = 0;

  for (int i = 0; i < 50; i++) {
    char *text = metrics_of(r);
    v = metric(text, head);
    free(text);
    if (v >= min)
      break;
    usleep(100 * 1000);
  }
  return v;
}

/* --------------------------------------------------------------- tests */

static void views(int none)
{
  harness_daemon_t *d = none ? users_start_shared("--isolation", "none", NULL)
                             : users_start_shared(NULL);
  client_t a = client_start(USER_A, d->socket);
  client_t b = client_start(USER_B, d->socket);
  uint64_t a1 = client_open(&a, "0 client-a1");
  uint64_t a2 = client_open(&a, "1 client-a2");
  uint64_t b1 = client_open(&b, "0 client-b1");
  raw_t *root = raw_named(d->socket, "root-admin");
  const msgpack_object *s, *devs;
  res_t r;
  char arg[32], *text, head[160];
  double v1, v2;
  int64_t wpid = 0;

  ck_assert_int_eq(client_rc(&a, "work %s", "0"), 0);
  ck_assert_int_eq(client_rc(&b, "work %s", "0"), 0);

  /* A sees only its own sessions. */
  client_do(&a, &r, "admin session.list");
  ck_assert_int_eq(r.rc, 0);
  ck_assert_ptr_nonnull(find_session(r.o, a1));
  ck_assert_ptr_nonnull(find_session(r.o, a2));
  ck_assert_ptr_null(find_session(r.o, b1));
  for (uint32_t i = 0; i < r.o->via.array.size; i++)
    ck_assert_uint_eq(map_u64(&r.o->via.array.ptr[i], "uid"), uid_a);
  res_free(&r);

  /* Root sees both, with what they did. */
  admin_raw(root, "session.list", "", &r);
  ck_assert_int_eq(r.rc, 0);
  s = find_session(r.o, a1);
  ck_assert_ptr_nonnull(s);
  ck_assert_uint_eq(map_u64(s, "uid"), uid_a);
  ck_assert_int_eq((int64_t)map_u64(s, "pid"), a.pid);
  ck_assert(map_str_is(s, "client", "client-a1"));
  ck_assert(map_str_is(s, "user", USER_A));
  ck_assert_uint_ge(map_u64(s, "kernels_launched"), 2);
  ck_assert_uint_ge(map_u64(s, "kernels_loaded"), 1);
  ck_assert_uint_ge(map_u64(s, "bytes_h2d"), 4096);
  ck_assert_uint_ge(map_u64(s, "bytes_d2h"), 4096);
  ck_assert_uint_gt(map_u64(s, "busy_ns"), 0);
  ck_assert_uint_ge(map_u64(s, "requests"), 5);
  devs = map_get(s, "devices");
  ck_assert(devs != NULL && devs->type == MSGPACK_OBJECT_ARRAY &&
            devs->via.array.size == 1);
  ck_assert_uint_eq(map_u64(&devs->via.array.ptr[0], "device"), 0);
  ck_assert_uint_eq(map_u64(&devs->via.array.ptr[0], "buffers"), 1);
  ck_assert_uint_eq(map_u64(&devs->via.array.ptr[0], "bytes"), 4096);
  wpid = (int64_t)map_u64(s, "worker_pid");
  if (none) {
    ck_assert(map_str_is(s, "tenant", "none"));
    ck_assert_int_eq(wpid, 0);
  } else {
    snprintf(head, sizeof(head), "uid %u", (unsigned)uid_a);
    ck_assert(map_str_is(s, "tenant", head));
    ck_assert_int_gt(wpid, 0);
    ck_assert_int_ne(wpid, d->pid);
  }
  s = find_session(r.o, b1);
  ck_assert_ptr_nonnull(s);
  ck_assert_uint_eq(map_u64(s, "uid"), uid_b);
  ck_assert_int_eq((int64_t)map_u64(s, "pid"), b.pid);
  ck_assert(map_str_is(s, "client", "client-b1"));
  res_free(&r);

  /* daemon.stats */
  admin_raw(root, "daemon.stats", "", &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert(map_str_is(r.o, "isolation", none ? "none" : "uid"));
  ck_assert_uint_ge(map_u64(r.o, "sessions"), 4);
  ck_assert_uint_ge(map_u64(r.o, "sessions_total"), 4);
  if (none)
    ck_assert_uint_eq(map_u64(r.o, "tenants"), 0);
  else
    ck_assert_uint_ge(map_u64(r.o, "tenants"), 3);
  map_u64(r.o, "uptime_ms");
  devs = map_get(r.o, "devices");
  ck_assert(devs != NULL && devs->via.array.size == 1);
  ck_assert(map_str_is(&devs->via.array.ptr[0], "kind", "cpu"));
  ck_assert_uint_ge(map_u64(&devs->via.array.ptr[0], "mem_held"), 8192);
  ck_assert_uint_ge(map_u64(&devs->via.array.ptr[0], "buffers"), 2);
  ck_assert_uint_ge(map_u64(&devs->via.array.ptr[0], "sessions"), 2);
  ck_assert_uint_ge(map_u64(&devs->via.array.ptr[0], "kernels_launched"), 4);
  ck_assert_uint_ge(map_u64(&devs->via.array.ptr[0], "bytes_h2d"), 8192);
  ck_assert_uint_ge(map_u64(map_get(r.o, "cache"), "misses") +
                        map_u64(map_get(r.o, "cache"), "hits"),
                    2);
  map_u64(map_get(r.o, "compiles"), "done");
  res_free(&r);

  /* metrics: they parse, and they move. */
  text = metrics_of(root);
  v1 = metric(text, "hipd_device_kernels_launched_total{device=\"0\"}");
  ck_assert_msg(v1 >= 4, "launches %g", v1);
  ck_assert(metric(text, "hipd_requests_total{method=\"mem.alloc\","
                         "code=\"OK\"}") >= 2);
  snprintf(head, sizeof(head),
           "hipd_tenant_kernels_launched_total{uid=\"%u\",user=\"" USER_B
           "\",device=\"0\"}",
           (unsigned)uid_b);
  ck_assert(metric(text, head) >= 2);
  free(text);
  ck_assert_int_eq(client_rc(&a, "work %s", "0"), 0);
  v2 = metric_at_least(root, "hipd_device_kernels_launched_total{device=\"0\"}",
                       v1 + 2);
  ck_assert_msg(v2 >= v1 + 2, "launches %g then %g", v1, v2);
  /* A sees the devices and its own tenant only. */
  client_do(&a, &r, "admin metrics");
  ck_assert_int_eq(r.rc, 0);
  snprintf(head, sizeof(head), "uid=\"%u\"", (unsigned)uid_b);
  ck_assert(r.o != NULL && r.o->type == MSGPACK_OBJECT_STR);
  ck_assert(memmem(r.o->via.str.ptr, r.o->via.str.size, head, strlen(head)) ==
            NULL);
  ck_assert(memmem(r.o->via.str.ptr, r.o->via.str.size,
                   "hipd_device_kernels_launched_total{device=\"0\"}",
                   44) != NULL);
  res_free(&r);

  /* cache.list: admins only (its keys tell which sources were compiled);
   * root sees the kernel compiled above. */
  client_do(&a, &r, "admin cache.list");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  ck_assert(res_msg_has(&r, "listing the shared kernel cache needs root"));
  res_free(&r);
  admin_raw(root, "cache.list", "", &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert(r.o->type == MSGPACK_OBJECT_ARRAY && r.o->via.array.size >= 1);
  ck_assert_uint_eq(map_get(&r.o->via.array.ptr[0], "key")->via.str.size, 64);
  map_u64(&r.o->via.array.ptr[0], "bytes");
  res_free(&r);

  /* log.level: anyone reads, admins set; the new level is seen. */
  client_do(&a, &r, "admin log.level");
  ck_assert_int_eq(r.rc, 0);
  ck_assert(r.o->type == MSGPACK_OBJECT_STR &&
            strncmp(r.o->via.str.ptr, "info", 4) == 0);
  res_free(&r);
  client_do(&a, &r, "admin log.level debug");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  ck_assert(res_msg_has(&r, "log.level: setting the level needs root"));
  res_free(&r);
  admin_raw(root, "log.level", "loud", &r);
  ck_assert_int_eq(r.rc, HIPD_EPARAMS);
  ck_assert(res_msg_has(&r, "level"));
  res_free(&r);
  admin_raw(root, "log.level", "debug", &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert(r.o->type == MSGPACK_OBJECT_STR &&
            strncmp(r.o->via.str.ptr, "debug", 5) == 0);
  res_free(&r);
  ck_assert_int_eq(client_rc(&a, "ping %s", "0"), 0);
  client_do(&a, &r, "admin session.list");
  res_free(&r);
  snprintf(head, sizeof(head), "hipd[%d] debug admin: session.list",
           (int)d->pid);
  ck_assert_msg(harness_log_wait(d, head, 5000), "no '%s'", head);
  if (!none) {
    snprintf(head, sizeof(head), "hipd[%d] debug [s%llu] -> ping", (int)wpid,
             (unsigned long long)a1);
    ck_assert_msg(harness_log_wait(d, head, 5000), "no '%s'", head);
  }
  admin_raw(root, "log.level", "info", &r);
  res_free(&r);

  /* session.kill */
  admin_raw(root, "session.kill", "x", &r);
  ck_assert_int_eq(r.rc, HIPD_EPARAMS);
  ck_assert(res_msg_has(&r, "(id)"));
  res_free(&r);
  snprintf(arg, sizeof(arg), "#%llu", (unsigned long long)b1);
  client_do(&a, &r, "admin session.kill %s", arg);
  ck_assert_int_eq(r.rc, HIPD_ENOENT);
  ck_assert(res_msg_has(&r, "session.kill: no session"));
  res_free(&r);
  ck_assert_int_eq(client_rc(&b, "ping %s", "0"), 0);
  snprintf(arg, sizeof(arg), "#%llu", (unsigned long long)a2);
  client_do(&a, &r, "admin session.kill %s", arg);
  ck_assert_int_eq(r.rc, 0);
  res_free(&r);
  ck_assert_int_ne(client_rc(&a, "ping %s", "1"), 0);
  ck_assert_int_eq(client_rc(&a, "ping %s", "0"), 0);
  snprintf(arg, sizeof(arg), "#%llu", (unsigned long long)b1);
  admin_raw(root, "session.kill", arg, &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert(r.o->type == MSGPACK_OBJECT_BOOLEAN && r.o->via.boolean);
  res_free(&r);
  ck_assert_int_ne(client_rc(&b, "ping %s", "0"), 0);
  snprintf(head, sizeof(head), "[s%llu] session closed: killed by uid 0 (root)",
           (unsigned long long)b1);
  ck_assert_msg(harness_log_wait(d, head, 5000), "no '%s'", head);
  admin_raw(root, "session.list", "", &r);
  ck_assert_ptr_null(find_session(r.o, b1));
  ck_assert_ptr_null(find_session(r.o, a2));
  ck_assert_ptr_nonnull(find_session(r.o, a1));
  res_free(&r);
  /* A session may kill itself: the answer comes first. */
  {
    uint64_t self = 0;
    client_do(&a, &r, "admin session.list");
    for (uint32_t i = 0; i < r.o->via.array.size; i++)
      if (map_str_is(&r.o->via.array.ptr[i], "client", "raw-admin"))
        self = map_u64(&r.o->via.array.ptr[i], "id");
    res_free(&r);
    ck_assert_uint_ne(self, 0);
    snprintf(arg, sizeof(arg), "#%llu", (unsigned long long)self);
    client_do(&a, &r, "admin session.kill %s", arg);
    ck_assert_int_eq(r.rc, 0);
    res_free(&r);
    snprintf(head, sizeof(head), "[s%llu] session closed: killed by uid %u (",
             (unsigned long long)self, (unsigned)uid_a);
    ck_assert_msg(harness_log_wait(d, head, 5000), "no '%s'", head);
    ck_assert_int_eq(client_rc(&a, "rawreset%s", ""), 0);
  }

  client_stop(&a);
  client_stop(&b);
  raw_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_views_workers)
{
  views(0);
}
END_TEST

START_TEST(test_views_none)
{
  views(1);
}
END_TEST

/* --admin-group: a member gets the full view and may set the level. */
START_TEST(test_admin_group)
{
  harness_daemon_t *d = users_start_shared("--admin-group", GROUP, NULL);
  client_t a = client_start(USER_A, d->socket);
  client_t b = client_start(USER_B, d->socket);
  uint64_t b1 = client_open(&b, "0 client-b1");
  res_t r;
  char arg[32];

  client_do(&a, &r, "admin session.list");
  ck_assert_int_eq(r.rc, 0);
  ck_assert_ptr_nonnull(find_session(r.o, b1));
  res_free(&r);
  client_do(&b, &r, "admin log.level debug");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  ck_assert(res_msg_has(&r, "needs root or group " GROUP));
  res_free(&r);
  client_do(&a, &r, "admin log.level debug");
  ck_assert_int_eq(r.rc, 0);
  res_free(&r);
  snprintf(arg, sizeof(arg), "#%llu", (unsigned long long)b1);
  client_do(&a, &r, "admin session.kill %s", arg);
  ck_assert_int_eq(r.rc, 0);
  res_free(&r);
  ck_assert_int_ne(client_rc(&b, "ping %s", "0"), 0);
  ck_assert(harness_log_wait(d, "session closed: killed by uid", 5000));
  client_stop(&a);
  client_stop(&b);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* The counters of a worker that exited stay in the node-wide totals. */
START_TEST(test_exited_worker)
{
  harness_daemon_t *d = users_start_shared("--worker-linger", "300", NULL);
  client_t b = client_start(USER_B, d->socket);
  raw_t *root = raw_named(d->socket, "root-admin");
  char head[160], *text;
  double launches, allocs, h2d;

  client_open(&b, "0 client-b1");
  ck_assert_int_eq(client_rc(&b, "work %s", "0"), 0);
  text = metrics_of(root);
  launches = metric(text, "hipd_device_kernels_launched_total{device=\"0\"}");
  allocs =
      metric(text, "hipd_requests_total{method=\"mem.alloc\",code=\"OK\"}");
  h2d = metric(text, "hipd_device_transfer_bytes_total{device=\"0\","
                     "direction=\"h2d\"}");
  ck_assert(launches >= 2 && allocs >= 1 && h2d >= 4096);
  free(text);
  client_stop(&b);
  snprintf(head, sizeof(head), "worker of uid %u (pid", (unsigned)uid_b);
  ck_assert(harness_log_wait(d, head, 10000));
  for (int i = 0; i < 100; i++) {
    snprintf(head, sizeof(head), "worker of uid %u (pid", (unsigned)uid_b);
    if (harness_log_contains(d, ") exited"))
      break;
    harness_sleep_ms(100);
  }
  ck_assert(harness_log_contains(d, ") exited"));
  text = metrics_of(root);
  ck_assert(metric(text, "hipd_device_kernels_launched_total{device=\"0\"}") >=
            launches);
  ck_assert(metric(text, "hipd_requests_total{method=\"mem.alloc\","
                         "code=\"OK\"}") >= allocs);
  ck_assert(metric(text, "hipd_device_transfer_bytes_total{device=\"0\","
                         "direction=\"h2d\"}") >= h2d);
  snprintf(head, sizeof(head), "hipd_tenant_sessions{uid=\"%u\"",
           (unsigned)uid_b);
  ck_assert_msg(strstr(text, head) == NULL, "B's tenant series stayed");
  free(text);
  raw_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A reload sets the configured log level again, in workers started
 * after it too (not the level an admin set before it). */
START_TEST(test_level_reload)
{
  harness_daemon_t *d = users_start_shared(NULL);
  raw_t *root = raw_named(d->socket, "root-admin");
  client_t b;
  uint64_t b1;
  res_t r;
  char head[96];
  int64_t wpid = 0;

  admin_raw(root, "log.level", "debug", &r);
  ck_assert_int_eq(r.rc, 0);
  res_free(&r);
  ck_assert(harness_log_wait(d, "log level set to debug by uid 0", 5000));
  ck_assert_int_eq(kill(d->pid, SIGHUP), 0);
  snprintf(head, sizeof(head), "configuration reloaded: log level info");
  ck_assert_msg(harness_log_wait(d, head, 10000), "no '%s'", head);
  admin_raw(root, "log.level", "", &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert(r.o->type == MSGPACK_OBJECT_STR && r.o->via.str.size == 4 &&
            memcmp(r.o->via.str.ptr, "info", 4) == 0);
  res_free(&r);
  /* B's worker starts now: at info, as the configuration says. */
  b = client_start(USER_B, d->socket);
  b1 = client_open(&b, "0 client-b1");
  ck_assert_int_eq(client_rc(&b, "ping %s", "0"), 0);
  admin_raw(root, "session.list", "", &r);
  ck_assert_int_eq(r.rc, 0);
  ck_assert_ptr_nonnull(find_session(r.o, b1));
  wpid = (int64_t)map_u64(find_session(r.o, b1), "worker_pid");
  res_free(&r);
  ck_assert_int_gt(wpid, 0);
  ck_assert_int_eq(client_rc(&b, "ping %s", "0"), 0);
  snprintf(head, sizeof(head), "hipd[%d] debug", (int)wpid);
  ck_assert_msg(!harness_log_contains(d, head),
                "a worker started after the reload logs at debug");
  client_stop(&b);
  raw_close(root);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* An --admin-group that does not exist is said at start: root alone is
 * an admin. */
START_TEST(test_admin_group_missing)
{
  harness_daemon_t *d =
      users_start_shared("--admin-group", "hipd-no-such-group", NULL);
  client_t a = client_start(USER_A, d->socket);
  res_t r;

  ck_assert(harness_log_wait(
      d, "--admin-group hipd-no-such-group: no such group", 5000));
  client_open(&a, "0 client-a1");
  client_do(&a, &r, "admin log.level debug");
  ck_assert_int_eq(r.rc, HIPD_EPERM);
  res_free(&r);
  client_stop(&a);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("admin");
  TCase *tc;
  int failed;

  if (geteuid() != 0) {
    printf("check_admin: SKIP: needs root to create the test users " USER_A
           " and " USER_B " and to run clients as them\n");
    return 77;
  }
  setenv("HIPD_TEST_TMP", "/tmp", 1);
  harness_init("admin");
  /* The group GROUP with USER_A (and not USER_B) in it. */
  if (users_make(USER_A, &uid_a, NULL) != 0 ||
      users_make(USER_B, &uid_b, NULL) != 0 ||
      users_make_group(GROUP, USER_A, NULL) != 0 || getpwnam("hipd") == NULL) {
    printf("check_admin: SKIP: cannot create the test users and group\n");
    harness_fini();
    return 77;
  }
  tc = tcase_create("admin");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_views_workers);
  tcase_add_test(tc, test_views_none);
  tcase_add_test(tc, test_admin_group);
  tcase_add_test(tc, test_exited_worker);
  tcase_add_test(tc, test_level_reload);
  tcase_add_test(tc, test_admin_group_missing);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
