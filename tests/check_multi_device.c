/* SPDX-License-Identifier: MIT */
/* tests/check_multi_device.c: two devices shared by tenants, each tenant a
 * real uid served by its own worker:
 * - every tenant's worker lists both devices as the daemon does (but for
 *   a GPU's SM count, which is the tenant's MPS share);
 * - --device-allow gives one uid one device and another uid both;
 * - two tenants work on different devices at the same time;
 * - a copy between the two devices inside one worker arrives byte for
 *   byte, both ways, at unaligned offsets;
 * - a tenant's kernel that crashes (CPU device) or faults (GPU) on device 0
 *   costs the tenant working on device 1 nothing: not a failed round, not
 *   its buffer (with and without MPS on GPUs).
 *
 * HIPD_TEST_DEVICES picks the two devices: cpu (the default: two CPU
 * devices, CI and every machine), hip (the first two GPUs) or mixed (the
 * first GPU and a CPU device); scripts/gpu-check.sh runs mixed where
 * nvidia-smi lists a GPU, and hip where two or more. Too few devices of
 * the kind asked is a skip, said so. The MPS case needs HIPD_TEST_MPS
 * too. */
#include "config.h"

#include <check.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hipd.h"
#include "run.h"
#include "testutil.h"
#include "users.h"

#define USER_A "hipd_md_a"
#define USER_B "hipd_md_b"

static const char *kind = "cpu"; /* "hip", "mixed": HIPD_TEST_DEVICES */

/* A daemon on the two devices under test that the test users can reach,
 * with the options of the NULL-terminated array @p extra (may be NULL). */
static harness_daemon_t *start(const char *const *extra)
{
  const char *args[32] = {"--cache-dir", ""};
  int n = 2;

  if (strcmp(kind, "cpu") == 0) {
    args[n++] = "--cpu-devices";
    args[n++] = "2";
  }
  for (; extra != NULL && *extra != NULL && n < 31; extra++)
    args[n++] = *extra;
  args[n] = NULL;
  /* The first two GPUs, whatever the host has. */
  return users_start_sharedv(strcmp(kind, "cpu") == 0   ? "cpu"
                             : strcmp(kind, "hip") == 0 ? "hip:0,hip:1"
                                                        : "hip:0,cpu:0",
                             args);
}

/* The name of device @p i under test ("cpu:1", "hip:0"); in the mixed
 * pair the GPU is device 0 and the CPU device 1 (GPUs come first). */
static const char *dev_name(int i)
{
  static char names[2][16];

  if (strcmp(kind, "mixed") == 0)
    return i == 0 ? "hip:0" : "cpu:0";
  snprintf(names[i], sizeof(names[i]), "%s:%d", kind, i);
  return names[i];
}

/* ------------------------------------------------- work, as a test user */

/* Is there something to read on @p fd (data, or its end)? */
static int readable(int fd)
{
  struct pollfd pfd = {.fd = fd, .events = POLLIN};

  return poll(&pfd, 1, 0) > 0;
}

/* Launches of fill on @p dev, each read back and checked: @p rounds of
 * them; or, with @p stop_fd not -1, as many as it takes until @p stop_fd
 * is readable, then @p rounds more. The rounds made go to *@p total
 * (unless NULL), the first failure into @p msg. @return 0 or -1. */
static int fill_rounds(hipd_conn_t *c, int dev, int rounds, int stop_fd,
                       int *total, char *msg, size_t msglen)
{
  enum { N = 4096 };
  static int out[N];
  hipd_buffer_t b = HIPD_BUFFER_NULL;
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  hipd_args_t *a = hipd_args_new();
  uint32_t grid[3] = {N / 256, 1, 1}, block[3] = {256, 1, 1};
  int rc = 0, r = 0;

  if ((rc = hipd_mem_alloc(c, dev, N, "int32", &b)) != 0 ||
      (rc = hipd_kernel_compile_cached(c, dev, TESTUTIL_FILL_SRC, "fill", NULL,
                                       &k, NULL)) != 0)
    goto fail;
  for (int after = stop_fd < 0 ? 0 : -1; after < 0 || r < after + rounds; r++) {
    if (after < 0 && readable(stop_fd))
      after = r;
    hipd_args_clear(a);
    hipd_args_buffer(a, b, 0);
    hipd_args_i32(a, 1000 * r + dev);
    hipd_args_i32(a, N);
    if ((rc = hipd_kernel_run(c, k, grid, block, 0, HIPD_STREAM_NULL, a)) !=
            0 ||
        (rc = hipd_mem_read(c, b, 0, out, sizeof(out))) != 0)
      goto fail;
    for (int i = 0; i < N; i++)
      if (out[i] != 1000 * r + dev + i) {
        snprintf(msg, msglen, "device %d, round %d: element %d is %d, not %d",
                 dev, r, i, out[i], 1000 * r + dev + i);
        hipd_args_free(a);
        return -1;
      }
  }
  hipd_args_free(a);
  hipd_mem_free(c, b);
  hipd_kernel_destroy(c, k);
  if (total != NULL)
    *total = r;
  return 0;
fail:
  snprintf(msg, msglen, "device %d, round %d: %s: %s", dev, r,
           hipd_err_name(rc), hipd_last_error(c));
  hipd_args_free(a);
  return -1;
}

/* ------------------------------------------------------- enumeration */

typedef struct {
  const char *socket;
  char list[8192]; /* the daemon's device.list, as root sees it */
} enum_ctx_t;

/* A worker that is an MPS client sees its share of a GPU's SMs
 * (--mps-active-threads, 50 % by default; under --mps-tenants auto one uid
 * at a time is a client): on the H100, 66 of 132 in root's worker and 132
 * in a tenant's beside it. So a GPU's multiprocessor_count is the
 * tenant's own, and the lists are compared without it: "#" in its place
 * (a CPU device's count stays). */
static void mask_gpu_sms(char *text)
{
  static const char key[] = "\"multiprocessor_count\": ";
  static const char gpu[] = ", \"is_cpu\": false";

  for (char *p = strstr(text, key); p != NULL; p = strstr(p, key)) {
    char *num = p + sizeof(key) - 1, *end = num;

    while (*end >= '0' && *end <= '9')
      end++;
    if (end > num && strncmp(end, gpu, sizeof(gpu) - 1) == 0) {
      *num = '#';
      memmove(num + 1, end, strlen(end) + 1);
    }
    p = num;
  }
}

/* The device list as text, a GPU's SM count masked (mask_gpu_sms), each
 * device's SM count checked to be one or more. */
static int list_text(hipd_conn_t *c, char *buf, size_t size)
{
  hipd_info_t *info = NULL;
  int rc = hipd_device_list(c, &info), n;

  if (rc != 0)
    return rc;
  n = hipd_info_len(info, "");
  for (int i = 0; i < n; i++) {
    char path[64];
    int64_t sms = 0;

    snprintf(path, sizeof(path), "%d.capabilities.multiprocessor_count", i);
    if (hipd_info_int(info, path, &sms) != 0 || sms < 1) {
      snprintf(buf, size, "device %d: multiprocessor_count %lld", i,
               (long long)sms);
      hipd_info_free(info);
      return HIPD_EPROTO;
    }
  }
  hipd_info_format(info, buf, size);
  hipd_info_free(info);
  mask_gpu_sms(buf);
  return 0;
}

static int enum_as(void *arg, char *msg, size_t msglen)
{
  enum_ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  char mine[sizeof(x->list)];
  int n = -1;

  REQUIRE(hipd_connect(x->socket, &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  REQUIRE(hipd_device_count(c, &n) == 0 && n == 2, "device.count: %d", n);
  REQUIRE(list_text(c, mine, sizeof(mine)) == 0, "device.list: %s (%s)",
          hipd_last_error(c), mine);
  if (strcmp(mine, x->list) != 0) {
    size_t at = 0, from;

    while (mine[at] != '\0' && mine[at] == x->list[at])
      at++;
    from = at > 120 ? at - 120 : 0;
    REQUIRE(0,
            "this tenant's worker lists the devices otherwise than the "
            "daemon, from byte %zu:\n...%.200s\nagainst\n...%.200s",
            at, mine + from, x->list + from);
  }
  /* And each is usable from here. */
  for (int dev = 0; dev < 2; dev++)
    if (fill_rounds(c, dev, 2, -1, NULL, msg, msglen) != 0)
      return -1;
  hipd_close(c);
  return 0;
}

/* Both devices, with the same records and capabilities, in every
 * tenant's worker. */
START_TEST(test_enumerate_per_tenant)
{
  harness_daemon_t *d = start(NULL);
  enum_ctx_t x = {d->socket, ""};
  hipd_conn_t *c = NULL;

  ck_assert_int_eq(hipd_connect(d->socket, &c), 0);
  ck_assert_msg(list_text(c, x.list, sizeof(x.list)) == 0, "device.list: %s",
                x.list);
  hipd_close(c);
  ck_assert_msg(strstr(x.list, "capabilities") != NULL, "%s", x.list);
  users_as(USER_A, enum_as, &x);
  users_as(USER_B, enum_as, &x);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* ------------------------------------------------------ --device-allow */

typedef struct {
  const char *socket;
  int allowed[2]; /* device i is allowed to this user */
  const char *user;
} allow_ctx_t;

static int allow_as(void *arg, char *msg, size_t msglen)
{
  allow_ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  hipd_info_t *info = NULL;
  hipd_buffer_t b;
  int n = -1, want = x->allowed[0] + x->allowed[1], rc;
  int64_t id = -1;

  REQUIRE(hipd_connect(x->socket, &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  REQUIRE(hipd_device_count(c, &n) == 0 && n == want, "device.count %d, not %d",
          n, want);
  /* The list holds the allowed devices by their global ids. */
  REQUIRE(hipd_device_list(c, &info) == 0, "device.list: %s",
          hipd_last_error(c));
  for (int i = 0, at = 0; i < 2; i++) {
    char path[16];
    if (!x->allowed[i])
      continue;
    snprintf(path, sizeof(path), "%d.id", at++);
    REQUIRE(hipd_info_int(info, path, &id) == 0 && id == i,
            "device.list's %s is %lld, not %d", path, (long long)id, i);
  }
  hipd_info_free(info);
  for (int dev = 0; dev < 2; dev++) {
    if (x->allowed[dev]) {
      if (fill_rounds(c, dev, 2, -1, NULL, msg, msglen) != 0)
        return -1;
      continue;
    }
    rc = hipd_mem_alloc(c, dev, 64, "byte", &b);
    REQUIRE(rc == HIPD_EPERM && strstr(hipd_last_error(c), "not allowed"),
            "%s on %s: alloc gave %s (%s), not EPERM", x->user, dev_name(dev),
            hipd_err_name(rc), hipd_last_error(c));
    rc = hipd_kernel_compile_cached(c, dev, TESTUTIL_FILL_SRC, "fill", NULL,
                                    &(hipd_kernel_t){0}, NULL);
    REQUIRE(rc == HIPD_EPERM, "%s on %s: compile gave %s (%s), not EPERM",
            x->user, dev_name(dev), hipd_err_name(rc), hipd_last_error(c));
  }
  hipd_close(c);
  return 0;
}

/* A daemon with --device-allow DEV0=@p users0 and DEV1=@p users1, where A
 * may use the devices @p a says and B those @p b says. */
static void allow_case(const char *users0, const char *users1, int a0, int a1,
                       int b0, int b1)
{
  char r0[64], r1[64];
  harness_daemon_t *d;

  snprintf(r0, sizeof(r0), "%s=%s", dev_name(0), users0);
  snprintf(r1, sizeof(r1), "%s=%s", dev_name(1), users1);
  d = start((const char *[]){"--device-allow", r0, "--device-allow", r1, NULL});
  allow_ctx_t a = {d->socket, {a0, a1}, USER_A};
  allow_ctx_t b = {d->socket, {b0, b1}, USER_B};

  users_as(USER_A, allow_as, &a);
  users_as(USER_B, allow_as, &b);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

/* Device 0 for A alone, device 1 for A and B: A has both, B one, and B
 * does not reach the other; then each uid one device. */
START_TEST(test_device_allow_each)
{
  allow_case(USER_A, USER_A "," USER_B, 1, 1, 0, 1);
  allow_case(USER_B, USER_A, 0, 1, 1, 0);
}
END_TEST

/* ------------------------------------------------ tenants side by side */

/* Two children, each a test user, started together: each says it is
 * connected and waits for the word before it works, so that their work
 * overlaps. */
typedef struct {
  const char *socket;
  int dev;
  int rounds;     /* rounds of fill, or after the other's end (until_stop) */
  int fault;      /* launch the faulting kernel instead */
  int until_stop; /* work on until the other child has ended */
  int ready[2], go[2], stop[2];
  char result[1024]; /* written by the parent from the child's message */
} side_ctx_t;

static int side_as(void *arg, char *msg, size_t msglen)
{
  side_ctx_t *x = arg;
  hipd_conn_t *c = NULL;
  char byte = 1;
  int rc, n = 0;

  REQUIRE(hipd_connect(x->socket, &c) == 0, "connect: %s",
          hipd_last_error(NULL));
  hipd_set_timeout(c, 120000);
  /* Compiles first, so that what follows the word is device work. */
  if (!x->fault) {
    if (fill_rounds(c, x->dev, 1, -1, NULL, msg, msglen) != 0)
      return -1;
    REQUIRE(write(x->ready[1], &byte, 1) == 1, "cannot say ready");
    REQUIRE(read(x->go[0], &byte, 1) == 1, "no word to go");
    rc = fill_rounds(c, x->dev, x->rounds, x->until_stop ? x->stop[0] : -1, &n,
                     msg, msglen);
    if (rc == 0)
      snprintf(msg, msglen, "%d rounds", n);
    hipd_close(c);
    return rc;
  }
  {
    hipd_buffer_t b;
    hipd_kernel_t k;
    hipd_args_t *a = hipd_args_new();
    uint32_t one[3] = {1, 1, 1};

    REQUIRE(hipd_mem_alloc(c, x->dev, 16, "int32", &b) == 0 &&
                hipd_kernel_compile(c, x->dev, TESTUTIL_FAULT_SRC, "fault",
                                    NULL, &k, NULL) == 0,
            "set-up of the fault: %s", hipd_last_error(c));
    REQUIRE(write(x->ready[1], &byte, 1) == 1, "cannot say ready");
    REQUIRE(read(x->go[0], &byte, 1) == 1, "no word to go");
    hipd_args_buffer(a, b, 0);
    hipd_args_i32(a, 0);
    rc = hipd_kernel_run(c, k, one, one, 0, HIPD_STREAM_NULL, a);
    hipd_args_free(a);
    /* Told, whatever the code (the CPU device's runner died, the GPU's
     * context was lost). */
    REQUIRE(rc != 0, "the faulting kernel on %s succeeded", dev_name(x->dev));
    snprintf(msg, msglen, "%s", hipd_err_name(rc));
  }
  hipd_close(c);
  return 0;
}

/* Run @p x[0] as USER_A and @p x[1] as USER_B at the same time; fail the
 * test with a child's message unless both returned 0. A's end is B's stop
 * (until_stop). */
static void side_by_side(side_ctx_t x[2])
{
  const char *users[2] = {USER_A, USER_B};
  int pipes[3][2], msgp[2][2];
  pid_t pid[2];
  char byte = 1;

  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(pipe(pipes[i]), 0);
  for (int i = 0; i < 2; i++) {
    x[i].ready[0] = pipes[0][0];
    x[i].ready[1] = pipes[0][1];
    x[i].go[0] = pipes[1][0];
    x[i].go[1] = pipes[1][1];
    x[i].stop[0] = pipes[2][0];
    x[i].stop[1] = pipes[2][1];
    ck_assert_int_eq(pipe(msgp[i]), 0);
    pid[i] = fork();
    ck_assert(pid[i] >= 0);
    if (pid[i] == 0) {
      char msg[1024] = "";
      int rc;

      /* The parent's ends: a parent gone is the end of go and stop. */
      close(pipes[0][0]);
      close(pipes[1][1]);
      close(pipes[2][1]);
      close(msgp[i][0]);
      rc = harness_run_as(users[i], side_as, &x[i], msg, sizeof(msg));
      ssize_t w = write(msgp[i][1], msg, strlen(msg) + 1);
      (void)w;
      _exit(rc == 0 ? 0 : 1);
    }
    close(msgp[i][1]);
  }
  /* Both connected (and compiled): go. A child that failed before it
   * said so is not waited for long: the other goes anyway, and the failure
   * is reported below with its message. */
  close(pipes[0][1]);
  for (int ready = 0; ready < 2;) {
    struct pollfd pfd[3] = {{.fd = pipes[0][0], .events = POLLIN},
                            {.fd = msgp[0][0], .events = POLLIN},
                            {.fd = msgp[1][0], .events = POLLIN}};
    /* A child's message (or its end) before both are ready: it failed. */
    if (poll(pfd, 3, 120000) <= 0 || pfd[1].revents != 0 ||
        pfd[2].revents != 0 || read(pipes[0][0], &byte, 1) != 1)
      break;
    ready++;
  }
  ck_assert_int_eq(write(pipes[1][1], &byte, 1), 1);
  ck_assert_int_eq(write(pipes[1][1], &byte, 1), 1);
  int status[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    ssize_t n = read(msgp[i][0], x[i].result, sizeof(x[i].result) - 1);

    x[i].result[n > 0 ? n : 0] = '\0';
    close(msgp[i][0]);
    ck_assert(waitpid(pid[i], &status[i], 0) == pid[i]);
    if (i == 0) /* A has ended: B's stop */
      ck_assert_int_eq(write(pipes[2][1], &byte, 1), 1);
  }
  for (int i = 0; i < 2; i++)
    ck_assert_msg(WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0,
                  "%s on %s: %s", users[i], dev_name(x[i].dev), x[i].result);
  close(pipes[0][0]);
  for (int i = 1; i < 3; i++)
    close(pipes[i][0]), close(pipes[i][1]);
}

/* A on device 0 and B on device 1 at the same time, each checking every
 * round. */
START_TEST(test_tenants_side_by_side)
{
  harness_daemon_t *d = start(NULL);
  side_ctx_t x[2] = {{.socket = d->socket, .dev = 0, .rounds = 50},
                     {.socket = d->socket, .dev = 1, .rounds = 50}};

  side_by_side(x);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

/* A's kernel faults on device 0 while B works on device 1: B loses no
 * round; A is told; device 0 works again afterwards. With --mps @p mps
 * unless NULL (the CPU devices have no MPS). */
static void fault_beside(const char *mps)
{
  harness_daemon_t *d =
      mps != NULL ? start((const char *[]){"--mps", mps, NULL}) : start(NULL);
  /* A compiles its fault before the word; B works from the word until A
   * has ended, then 20 rounds more, each checked in B's child: a lost
   * round fails side_by_side with B's message. */
  side_ctx_t x[2] = {
      {.socket = d->socket, .dev = 0, .fault = 1},
      {.socket = d->socket, .dev = 1, .rounds = 20, .until_stop = 1}};
  hipd_conn_t *c = NULL;
  char msg[1024] = "";

  side_by_side(x);
  printf("check_multi_device: A's fault on %s%s%s: A was told %s; B's %s "
         "on %s all checked, before, during and after it\n",
         dev_name(0), mps != NULL ? ", --mps " : "", mps != NULL ? mps : "",
         x[0].result, x[1].result, dev_name(1));
  /* Device 0 works again, for a new session of root (in root's worker:
   * A's worker may have ended with its context). */
  ck_assert_int_eq(hipd_connect(d->socket, &c), 0);
  hipd_set_timeout(c, 120000);
  for (int tries = 0; tries < 100; tries++) {
    if (fill_rounds(c, 0, 1, -1, NULL, msg, sizeof(msg)) == 0) {
      msg[0] = '\0';
      break;
    }
    hipd_close(c);
    usleep(100 * 1000);
    ck_assert_int_eq(hipd_connect(d->socket, &c), 0);
  }
  ck_assert_msg(msg[0] == '\0', "device 0 after the fault: %s", msg);
  ck_assert_int_eq(fill_rounds(c, 1, 2, -1, NULL, msg, sizeof(msg)), 0);
  hipd_close(c);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}

START_TEST(test_fault_beside)
{
  fault_beside(strcmp(kind, "cpu") != 0 ? "off" : NULL);
}
END_TEST

/* On GPUs, the same under hipd's MPS (HIPD_TEST_MPS set, as for
 * check_faults), --mps-tenants auto: the first uid's worker is the MPS
 * server's client, the other's has a context of its own. */
START_TEST(test_fault_beside_mps)
{
  fault_beside("on");
}
END_TEST

/* ------------------------------------------- copies between the devices */

/* Copy @p n bytes from @p src at @p soff to @p dst at @p doff (on stream
 * @p st, or synchronously for HIPD_STREAM_NULL) and check that @p dst then
 * holds @p want there, read into @p back. @p how names the copy. */
static void copy_check(hipd_conn_t *c, hipd_buffer_t dst, uint64_t doff,
                       hipd_buffer_t src, uint64_t soff, size_t n,
                       hipd_stream_t st, const uint8_t *want, uint8_t *back,
                       const char *how)
{
  int dev = 0; /* for OK's messages */

  if (hipd_stream_id(st) == 0) {
    OK(c, hipd_mem_copy(c, dst, doff, src, soff, n));
  } else {
    OK(c, hipd_mem_copy_async(c, dst, doff, src, soff, n, st));
    OK(c, hipd_stream_synchronize(c, st));
  }
  memset(back, 0, n);
  OK(c, hipd_mem_read(c, dst, doff, back, n));
  ck_assert_msg(memcmp(back, want, n) == 0, "%zu bytes copied %s differ", n,
                how);
}

/* In one session (one worker): device 0 to device 1 and back, synchronous
 * and on a stream of either device, at unaligned offsets, checked byte for
 * byte. */
START_TEST(test_copy_between)
{
  harness_daemon_t *d = start(NULL);
  const size_t sizes[] = {1, 4097, (3u << 20) + 5};
  hipd_conn_t *c = NULL;
  int dev = 0; /* for OK's messages: the copies start on device 0 */

  ck_assert_int_eq(hipd_connect(d->socket, &c), 0);
  hipd_set_timeout(c, 120000);
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t n = sizes[s];
    uint8_t *src = xmalloc(n), *back = xmalloc(n);
    hipd_buffer_t b0, b1, b0b;
    hipd_stream_t st0, st1;

    testutil_fill_xorshift(src, n, (uint32_t)s * 2654435761u + 7, 0);
    OK(c, hipd_mem_alloc(c, 0, n + 3, "byte", &b0));
    OK(c, hipd_mem_alloc(c, 1, n + 8, "byte", &b1));
    OK(c, hipd_mem_alloc(c, 0, n + 1, "byte", &b0b));
    OK(c, hipd_mem_write(c, b0, 3, src, n));
    copy_check(c, b1, 5, b0, 3, n, HIPD_STREAM_NULL, src, back,
               "from device 0 to 1, synchronously");
    OK(c, hipd_stream_create(c, 1, &st1));
    OK(c, hipd_stream_create(c, 0, &st0));
    copy_check(c, b0b, 1, b1, 5, n, st1, src, back,
               "from device 1 to 0 on device 1's stream");
    OK(c, hipd_mem_memset(c, b1, 0, n + 8, 0));
    copy_check(c, b1, 2, b0b, 1, n, st0, src, back,
               "from device 0 to 1 on device 0's stream");
    OK(c, hipd_stream_destroy(c, st0));
    OK(c, hipd_stream_destroy(c, st1));
    OK(c, hipd_mem_free(c, b0));
    OK(c, hipd_mem_free(c, b1));
    OK(c, hipd_mem_free(c, b0b));
    free(src);
    free(back);
  }
  hipd_close(c);
  ck_assert_int_eq(harness_stop(d), 0);
  harness_free(d);
}
END_TEST

int main(void)
{
  const char *env = getenv("HIPD_TEST_DEVICES");
  Suite *s = suite_create("multi_device");
  TCase *tc = tcase_create("two");
  int failed;

  if (env != NULL && (strcmp(env, "hip") == 0 || strcmp(env, "mixed") == 0))
    kind = env;
  else if (env != NULL && *env != '\0' && strcmp(env, "cpu") != 0) {
    fprintf(stderr,
            "check_multi_device: HIPD_TEST_DEVICES=%s: cpu, hip or mixed\n",
            env);
    return 1;
  }
  if (geteuid() != 0) {
    printf(
        "check_multi_device: SKIP: needs root to create the test users " USER_A
        " and " USER_B "\n");
    return 77;
  }
  if (users_make(USER_A, NULL, NULL) != 0 ||
      users_make(USER_B, NULL, NULL) != 0) {
    printf("check_multi_device: SKIP: cannot create the test users\n");
    return 77;
  }
  harness_init("multi_device");
  if (strcmp(kind, "cpu") != 0) {
    /* A daemon with no GPU to serve does not start: none is a skip too. */
    const char *probe[] = {"--cache-dir", "", "--devices", "hip", NULL};
    harness_daemon_t *d = harness_startv(probe);
    hipd_conn_t *c = NULL;
    int n = 0;

    if (d == NULL || hipd_connect(d->socket, &c) != 0 ||
        hipd_device_count(c, &n) != 0)
      n = 0;
    hipd_close(c);
    if (d != NULL) {
      harness_stop(d);
      harness_free(d);
    }
    if (n < (strcmp(kind, "hip") == 0 ? 2 : 1)) {
      printf("check_multi_device: SKIP: HIPD_TEST_DEVICES=%s and %d GPU "
             "device(s)\n",
             kind, n);
      harness_fini();
      return 77;
    }
  }
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_enumerate_per_tenant);
  tcase_add_test(tc, test_device_allow_each);
  tcase_add_test(tc, test_tenants_side_by_side);
  tcase_add_test(tc, test_copy_between);
  tcase_add_test(tc, test_fault_beside);
  if (strcmp(kind, "cpu") != 0 && getenv("HIPD_TEST_MPS") != NULL)
    tcase_add_test(tc, test_fault_beside_mps);
  suite_add_tcase(s, tc);
  failed = test_run(s);
  harness_fini();
  return failed == 0 ? 0 : 1;
}
