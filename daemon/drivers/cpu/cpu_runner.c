/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_runner.c: hipd-cpu-runner, the helper process that
 * runs kernels of hipd's CPU device.
 *
 *   hipd-cpu-runner --fd=N [--workers=N] [--reserve=ADDR:SIZE]
 *
 * Client kernels run natively, so a bad one can crash the process that runs
 * it; this process is that one, so that the daemon survives. The daemon
 * starts it with posix_spawn and talks to it over the SOCK_SEQPACKET socket
 * at fd N, one request and one response at a time; the protocol is in
 * cpu_proto.h. Device buffers are ranges of the daemon's buffer chunks
 * (memfds passed here once each with SCM_RIGHTS, and kept), and zero-copy
 * buffers the client's memfds; each is mapped at the address it has in the
 * daemon, so device pointers mean the same in both processes, and the
 * guard gaps between a chunk's buffers stay PROT_NONE here as there. Kernel
 * modules are shared objects built by cpu_compile.c; they are called through
 * libffi with the signature each module reports (hipd_sig_<name>). Launches run
 * on the worker pool of cpu_sched.c.
 *
 * --reserve: the daemon allocates CPU device buffers inside ADDR..ADDR+SIZE
 * and asks for that range to be reserved here (PROT_NONE) first thing, so
 * that nothing of this process can land where a buffer must be mapped.
 * Without it, a buffer is mapped with MAP_FIXED_NOREPLACE and the request
 * fails if the range is taken here.
 *
 * The process exits when the daemon closes the socket (or hangs up during
 * a launch). It dumps no core: a crashing kernel is reported by the daemon.
 *
 * Sandbox (runner_sandbox below): after its own start-up (the reservation)
 * and before it serves a request, so before any client code (a module's
 * constructors included) can run, the runner confines itself for good:
 * --uid=U --gid=G (given only when the daemon starts it as root) change
 * its identity, then no capabilities, NO_NEW_PRIVS, not dumpable, no core,
 * few descriptors, the RUNNER seccomp profile (no sockets, processes,
 * execve, ptrace; daemon/sandbox/sandbox_seccomp.c), and Landlock: read
 * only, and only the system library directories (for the libraries a
 * module links). It opens no file of the daemon's: LOAD brings the
 * module's file as a descriptor, whose bytes the runner copies into a
 * memfd of its own and dlopens through /proc/self/fd/N (memfds live on an
 * internal mount, which Landlock does not restrict). So a runner reads no
 * module directory, and the runner of one tenant cannot reach another
 * tenant's modules. A sandbox that cannot be entered is reported by HELLO,
 * and the runner then serves nothing.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ffi.h>
#include <inttypes.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_proto.h"
#include "cpu_sched.h"
#include "hipd.h"
#include "sandbox/sandbox.h"
#include "sanitize.h"
#include "util/array.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#if defined(HIPD_ASAN) || defined(HIPD_TSAN)
/* In a sanitizer build, a crashing kernel must still end this process with
 * its signal: the daemon names the signal in the launch's error, and tests
 * check for it. The sanitizer's handlers would report the client's fault
 * as ours and exit with status 1 (ASan) or 66 (TSan) instead. The runner's
 * own memory errors and races are still caught by the instrumentation;
 * ASAN_OPTIONS and TSAN_OPTIONS, read after these, can override them. */
/* leak_check_at_exit=0: a kernel that calls exit() would start LSan's
 * leak check, whose tracer needs clone and ptrace, which the sandbox
 * refuses; the runner leaves with _exit() otherwise, unchecked anyway. */
#define RUNNER_SANITIZER_OPTIONS                                               \
  "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0:"             \
  "handle_abort=0:leak_check_at_exit=0"
#endif
#ifdef HIPD_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
  return RUNNER_SANITIZER_OPTIONS;
}
#endif
#ifdef HIPD_TSAN
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
  return RUNNER_SANITIZER_OPTIONS;
}
#endif

typedef struct {
  uint64_t addr, size;
} mapping_t;

/* A chunk of the daemon's buffer arena: its file (kept open) and range. */
typedef struct {
  uint32_t id;
  int fd;
  uint64_t addr, size;
} chunk_t;

typedef struct {
  uint32_t id;
  void *handle;
  int fd; /* the module's memfd, open while it is loaded (see do_load) */
  hipd_cpu_ctx_t **(*tls_slot)(void);
} module_t;

typedef struct {
  uint32_t id;
  uint32_t module;
  const hipd_kernel_sig_t *sig;
  ffi_type **atypes;
  ffi_cif cif;
} kernel_t;

/* What one request produces: a status, and a payload or a message. */
typedef struct {
  int32_t status;
  uint8_t *payload; /* points into out_buf */
  uint32_t len;
} reply_t;

static struct {
  int fd;
  int out_fd; /* what kernels print: a memfd on fds 1 and 2 */
  unsigned workers;
  uint64_t reserve_addr, reserve_size;
  char reserve_error[256]; /* reported by HELLO */
  char sandbox_error[320]; /* reported by HELLO: then nothing is served */
  int drop_ids;            /* --uid/--gid given */
  uid_t uid;
  gid_t gid;
  sched_t *sched;
  mapping_t *maps;
  size_t nmaps, capmaps;
  chunk_t chunks[CPU_MAX_CHUNKS];
  size_t nchunks;
  module_t *mods;
  size_t nmods, capmods;
  kernel_t *kerns;
  size_t nkerns, capkerns;
  uint8_t in_buf[CPU_PROTO_MAX_MSG + 1];
  uint8_t out_buf[CPU_PROTO_MAX_MSG];
} runner_state = {.fd = -1, .out_fd = -1};

static void reply_error(reply_t *rep, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_error(reply_t *rep, int code, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf((char *)runner_state.out_buf, 1024, fmt, ap);
  va_end(ap);
  rep->status = code;
  rep->payload = runner_state.out_buf;
  rep->len = n < 0 ? 0 : (n >= 1024 ? 1023 : (uint32_t)n);
}

/* The request's trailing string (path or name): NUL-terminated in place. */
static const char *tail_string(uint8_t *p, size_t len, size_t max)
{
  if (len == 0 || len > max)
    return NULL;
  p[len] = '\0'; /* in_buf has a spare byte at the end */
  if (strlen((char *)p) != len)
    return NULL; /* embedded NUL */
  return (const char *)p;
}

static module_t *module_find(uint32_t id)
{
  for (size_t i = 0; i < runner_state.nmods; i++)
    if (runner_state.mods[i].id == id)
      return &runner_state.mods[i];
  return NULL;
}

static kernel_t *kernel_find(uint32_t id)
{
  for (size_t i = 0; i < runner_state.nkerns; i++)
    if (runner_state.kerns[i].id == id)
      return &runner_state.kerns[i];
  return NULL;
}

static ffi_type *ffi_type_of(unsigned code)
{
  switch (code) {
  case HIPD_CPU_T_PTR:
    return &ffi_type_pointer;
  case HIPD_CPU_T_I8:
    return &ffi_type_sint8;
  case HIPD_CPU_T_U8:
  case HIPD_CPU_T_BOOL:
    return &ffi_type_uint8;
  case HIPD_CPU_T_I16:
    return &ffi_type_sint16;
  case HIPD_CPU_T_U16:
    return &ffi_type_uint16;
  case HIPD_CPU_T_I32:
    return &ffi_type_sint32;
  case HIPD_CPU_T_U32:
    return &ffi_type_uint32;
  case HIPD_CPU_T_I64:
    return &ffi_type_sint64;
  case HIPD_CPU_T_U64:
    return &ffi_type_uint64;
  case HIPD_CPU_T_F32:
    return &ffi_type_float;
  case HIPD_CPU_T_F64:
    return &ffi_type_double;
  default:
    return NULL;
  }
}

/* ------------------------------------------------------------ requests */

static void do_hello(const uint8_t *p, size_t len, reply_t *rep)
{
  cpu_hello_req_t req;
  cpu_hello_resp_t resp = {0};
  char err[256] = "";
  int rc;

  if (len != sizeof(req)) {
    reply_error(rep, HIPD_EPROTO, "HELLO: payload of %zu bytes", len);
    return;
  }
  memcpy(&req, p, sizeof(req));
  if (req.version != CPU_PROTO_VERSION) {
    reply_error(rep, HIPD_EVERSION,
                "the CPU device runner speaks protocol %d, the daemon %" PRIu32
                " (mismatched installation)",
                CPU_PROTO_VERSION, req.version);
    return;
  }
  if (runner_state.sandbox_error[0] != '\0') {
    reply_error(rep, HIPD_EPERM, "%s", runner_state.sandbox_error);
    return;
  }
  if (runner_state.reserve_error[0] != '\0') {
    reply_error(rep, HIPD_ENOMEM, "%s", runner_state.reserve_error);
    return;
  }
  if (runner_state.sched == NULL &&
      (rc = sched_create(runner_state.workers, &runner_state.sched, err,
                         sizeof(err))) != 0) {
    reply_error(rep, rc, "%s", err);
    return;
  }
  resp.version = CPU_PROTO_VERSION;
  resp.abi = HIPD_CPU_ABI_VERSION;
  resp.workers = sched_workers(runner_state.sched);
  memcpy(runner_state.out_buf, &resp, sizeof(resp));
  rep->payload = runner_state.out_buf;
  rep->len = sizeof(resp);
}

static int in_reserve(uint64_t addr, uint64_t size)
{
  return runner_state.reserve_size != 0 && addr >= runner_state.reserve_addr &&
         addr + size <= runner_state.reserve_addr + runner_state.reserve_size;
}

static void do_map(const uint8_t *p, size_t len, int fd, reply_t *rep)
{
  cpu_map_req_t req;
  struct stat st;
  long page = sysconf(_SC_PAGESIZE);
  void *want, *got;
  int flags = MAP_SHARED;

  if (len != sizeof(req) || fd < 0) {
    reply_error(rep, HIPD_EPROTO, "MAP: %s",
                fd < 0 ? "no file descriptor attached" : "bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  want = (void *)(uintptr_t)req.addr;
  if (req.size == 0 || req.addr % (uint64_t)page != 0 ||
      req.addr + req.size < req.addr) {
    reply_error(rep, HIPD_EINVAL,
                "cannot map %" PRIu64 " bytes at 0x%" PRIx64
                ": not a page-aligned, non-empty range",
                req.size, req.addr);
    return;
  }
  if (fstat(fd, &st) != 0) {
    reply_error(rep, HIPD_EINVAL, "MAP: fstat of the buffer's file: %s",
                strerror(errno));
    return;
  }
  if ((uint64_t)st.st_size < req.size) {
    reply_error(rep, HIPD_EINVAL,
                "cannot map %" PRIu64 " bytes at 0x%" PRIx64
                ": the buffer's file holds only %lld bytes",
                req.size, req.addr, (long long)st.st_size);
    return;
  }
  for (size_t i = 0; i < runner_state.nmaps; i++) {
    const mapping_t *m = &runner_state.maps[i];
    if (req.addr < m->addr + m->size && m->addr < req.addr + req.size) {
      reply_error(rep, HIPD_EEXIST,
                  "cannot map %" PRIu64 " bytes at 0x%" PRIx64
                  ": it overlaps the buffer mapped at 0x%" PRIx64,
                  req.size, req.addr, m->addr);
      return;
    }
  }
  for (size_t i = 0; i < runner_state.nchunks; i++) {
    const chunk_t *c = &runner_state.chunks[i];
    if (req.addr < c->addr + c->size && c->addr < req.addr + req.size) {
      reply_error(rep, HIPD_EEXIST,
                  "cannot map %" PRIu64 " bytes at 0x%" PRIx64
                  ": it overlaps buffer chunk %" PRIu32,
                  req.size, req.addr, c->id);
      return;
    }
  }
  if (ARRAY_GROW(runner_state.maps, runner_state.nmaps, runner_state.capmaps,
                 8) != 0) {
    reply_error(rep, HIPD_ENOMEM, "MAP: out of memory");
    return;
  }
  /* Inside our own reservation MAP_FIXED only replaces PROT_NONE pages
   * that nothing else uses (overlaps were refused above). */
  flags |= in_reserve(req.addr, req.size) ? MAP_FIXED : MAP_FIXED_NOREPLACE;
  got = mmap(want, req.size, PROT_READ | PROT_WRITE, flags, fd, 0);
  if (got == MAP_FAILED || got != want) {
    int e = errno;
    if (got != MAP_FAILED) /* a kernel older than 4.17 took it as a hint */
      munmap(got, req.size);
    if (got != MAP_FAILED || e == EEXIST)
      reply_error(rep, HIPD_EBUSY,
                  "cannot map the buffer of %" PRIu64 " bytes at 0x%" PRIx64
                  " in the CPU device runner: that address range is in use "
                  "there",
                  req.size, req.addr);
    else
      reply_error(rep, e == ENOMEM ? HIPD_ENOMEM : HIPD_EIO,
                  "cannot map the buffer of %" PRIu64 " bytes at 0x%" PRIx64
                  " in the CPU device runner: %s",
                  req.size, req.addr, strerror(e));
    return;
  }
  runner_state.maps[runner_state.nmaps++] = (mapping_t){req.addr, req.size};
}

static void do_unmap(const uint8_t *p, size_t len, reply_t *rep)
{
  cpu_map_req_t req;

  if (len != sizeof(req)) {
    reply_error(rep, HIPD_EPROTO, "UNMAP: bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  for (size_t i = 0; i < runner_state.nmaps; i++) {
    mapping_t *m = &runner_state.maps[i];
    if (m->addr != req.addr)
      continue;
    void *a = (void *)(uintptr_t)m->addr;
    if (in_reserve(m->addr, m->size))
      mmap(a, m->size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    else
      munmap(a, m->size);
    runner_state.maps[i] = runner_state.maps[--runner_state.nmaps];
    return;
  }
  reply_error(rep, HIPD_ENOENT,
              "no buffer is mapped at 0x%" PRIx64 " in the CPU device runner",
              req.addr);
}

static chunk_t *chunk_find(uint32_t id)
{
  for (size_t i = 0; i < runner_state.nchunks; i++)
    if (runner_state.chunks[i].id == id)
      return &runner_state.chunks[i];
  return NULL;
}

/* CHUNK: keep the chunk's file (*@p fd, set to -1 when kept) and hold its
 * range reserved, so that BMAP can map buffers of it there. */
static void do_chunk(const uint8_t *p, size_t len, int *fd, reply_t *rep)
{
  const int anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  long page = sysconf(_SC_PAGESIZE);
  cpu_chunk_req_t req;
  void *want, *got;

  if (len != sizeof(req) || fd == NULL || *fd < 0) {
    reply_error(rep, HIPD_EPROTO, "CHUNK: %s",
                fd == NULL || *fd < 0 ? "no file descriptor attached"
                                      : "bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  want = (void *)(uintptr_t)req.addr;
  if (req.size == 0 || req.addr % (uint64_t)page != 0 ||
      req.size % (uint64_t)page != 0 || req.addr + req.size < req.addr) {
    reply_error(rep, HIPD_EINVAL,
                "chunk %" PRIu32 ": %" PRIu64 " bytes at 0x%" PRIx64
                " is not a page-aligned, non-empty range",
                req.id, req.size, req.addr);
    return;
  }
  if (chunk_find(req.id) != NULL) {
    reply_error(rep, HIPD_EEXIST, "chunk %" PRIu32 " is known already", req.id);
    return;
  }
  if (runner_state.nchunks == CPU_MAX_CHUNKS) {
    reply_error(rep, HIPD_ELIMIT, "the runner holds %d chunks already",
                CPU_MAX_CHUNKS);
    return;
  }
  for (size_t i = 0; i < runner_state.nchunks; i++) {
    const chunk_t *c = &runner_state.chunks[i];
    if (req.addr < c->addr + c->size && c->addr < req.addr + req.size) {
      reply_error(rep, HIPD_EEXIST, "chunk %" PRIu32 " overlaps chunk %" PRIu32,
                  req.id, c->id);
      return;
    }
  }
  for (size_t i = 0; i < runner_state.nmaps; i++) {
    const mapping_t *m = &runner_state.maps[i];
    if (req.addr < m->addr + m->size && m->addr < req.addr + req.size) {
      reply_error(rep, HIPD_EEXIST,
                  "chunk %" PRIu32 " overlaps the buffer mapped at 0x%" PRIx64,
                  req.id, m->addr);
      return;
    }
  }
  /* Inside our reservation the range is PROT_NONE and ours already;
   * elsewhere it must be free. Either way it is PROT_NONE afterwards. */
  got = mmap(
      want, req.size, PROT_NONE,
      anon | (in_reserve(req.addr, req.size) ? MAP_FIXED : MAP_FIXED_NOREPLACE),
      -1, 0);
  if (got != want) {
    int e = errno;
    if (got != MAP_FAILED)
      munmap(got, req.size);
    reply_error(rep, HIPD_EBUSY,
                "cannot reserve chunk %" PRIu32 " (%" PRIu64
                " bytes at 0x%" PRIx64 ") in the CPU device runner: %s",
                req.id, req.size, req.addr,
                got != MAP_FAILED || e == EEXIST ? "that range is in use there"
                                                 : strerror(e));
    return;
  }
  runner_state.chunks[runner_state.nchunks++] =
      (chunk_t){req.id, *fd, req.addr, req.size};
  *fd = -1;
}

/* BMAP (@p map) and BUNMAP: buffers of a chunk, mapped at chunk address +
 * offset or made PROT_NONE again. */
static void do_bmap(const uint8_t *p, size_t len, int map, reply_t *rep)
{
  const char *op = map ? "BMAP" : "BUNMAP";
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  cpu_bmap_req_t req;
  struct stat st;
  chunk_t *c;

  if (len < sizeof(req)) {
    reply_error(rep, HIPD_EPROTO, "%s: bad payload", op);
    return;
  }
  memcpy(&req, p, sizeof(req));
  if (req.count > CPU_BMAP_MAX ||
      len != sizeof(req) + (size_t)req.count * sizeof(cpu_bmap_ent_t)) {
    reply_error(rep, HIPD_EPROTO, "%s: bad payload", op);
    return;
  }
  if ((c = chunk_find(req.chunk)) == NULL) {
    reply_error(rep, HIPD_ENOENT, "%s: no chunk %" PRIu32, op, req.chunk);
    return;
  }
  if (map && fstat(c->fd, &st) != 0) {
    reply_error(rep, HIPD_EIO, "%s: fstat of chunk %" PRIu32 ": %s", op,
                req.chunk, strerror(errno));
    return;
  }
  for (uint32_t i = 0; i < req.count; i++) {
    cpu_bmap_ent_t e;
    void *at, *got;
    memcpy(&e, p + sizeof(req) + i * sizeof(e), sizeof(e));
    at = (void *)(uintptr_t)(c->addr + e.offset);
    if (e.size == 0 || e.offset % page != 0 || e.size % page != 0 ||
        e.offset >= c->size || e.size > c->size - e.offset) {
      reply_error(rep, HIPD_EINVAL,
                  "%s: %" PRIu64 " bytes at offset %" PRIu64
                  " are not whole pages of chunk %" PRIu32 " (%" PRIu64
                  " bytes)",
                  op, e.size, e.offset, req.chunk, c->size);
      return;
    }
    if (!map) {
      if (mmap(at, e.size, PROT_NONE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
               0) == MAP_FAILED)
        mprotect(at, e.size, PROT_NONE);
      continue;
    }
    if ((uint64_t)st.st_size < e.offset + e.size) {
      reply_error(rep, HIPD_EINVAL,
                  "BMAP: chunk %" PRIu32 "'s file holds %lld bytes, not "
                  "offset %" PRIu64 " + %" PRIu64,
                  req.chunk, (long long)st.st_size, e.offset, e.size);
      return;
    }
    got = mmap(at, e.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
               c->fd, (off_t)e.offset);
    if (got == MAP_FAILED) {
      reply_error(rep, errno == ENOMEM ? HIPD_ENOMEM : HIPD_EIO,
                  "BMAP: cannot map %" PRIu64 " bytes of chunk %" PRIu32
                  " at 0x%" PRIx64 ": %s",
                  e.size, req.chunk, c->addr + e.offset, strerror(errno));
      return;
    }
  }
}

static void module_close(void *h, int mfd);

/* Copy the module file @p fd into a new memfd. @return the memfd, or -1
 * with errno. */
static int module_copy(int fd)
{
  char buf[65536];
  int mfd;
  ssize_t n;

#ifdef MFD_EXEC
  /* MFD_EXEC: mappable for execution even where vm.memfd_noexec says
   * otherwise by default; an older kernel does not know the flag. */
  mfd = memfd_create("hipd-module", MFD_CLOEXEC | MFD_EXEC);
  if (mfd < 0 && errno == EINVAL)
#endif
    mfd = memfd_create("hipd-module", MFD_CLOEXEC);
  if (mfd < 0)
    return -1;
  for (;;) {
    n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(mfd, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        int e = errno;
        close(mfd);
        errno = w < 0 ? e : EIO;
        return -1;
      }
      off += w;
    }
  }
  if (n < 0) {
    int e = errno;
    close(mfd);
    errno = e;
    return -1;
  }
  return mfd;
}

/*
 * LOAD: the daemon's descriptor of the module file is copied into a memfd
 * of ours and dlopened as /proc/self/fd/N. The memfd stays open while the
 * module is loaded, because glibc recognises a loaded object by its name
 * too: a later module at the same descriptor number would get the old one
 * back. For the same reason, a module that stays resident after dlclose
 * (glibc keeps objects with unique symbols) keeps its descriptor for good.
 */
static void do_load(uint8_t *p, size_t len, int fd, reply_t *rep)
{
  cpu_load_req_t req;
  const char *path;
  char fdpath[64];
  void *h;
  int mfd;
  int (*abi)(void);
  hipd_cpu_ctx_t **(*slot)(void);

  if (len < sizeof(req) || fd < 0 ||
      (path = tail_string(p + sizeof(req), len - sizeof(req), CPU_MAX_PATH)) ==
          NULL) {
    reply_error(rep, HIPD_EPROTO, "LOAD: %s",
                fd < 0 ? "no file descriptor attached" : "bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  if (module_find(req.module) != NULL) {
    reply_error(rep, HIPD_EEXIST, "module %" PRIu32 " is loaded already",
                req.module);
    return;
  }
  if (ARRAY_GROW(runner_state.mods, runner_state.nmods, runner_state.capmods,
                 8) != 0) {
    reply_error(rep, HIPD_ENOMEM, "LOAD: out of memory");
    return;
  }
  if ((mfd = module_copy(fd)) < 0) {
    reply_error(rep, HIPD_EIO, "cannot load kernel module %s: copying it: %s",
                path, strerror(errno));
    return;
  }
  snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", mfd);
  h = dlopen(fdpath, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    reply_error(rep, HIPD_EIO, "cannot load kernel module %s: %s", path,
                dlerror());
    close(mfd);
    return;
  }
  *(void **)&abi = dlsym(h, "hipd_cpu_abi_version");
  *(void **)&slot = dlsym(h, "hipd_cpu_tls_slot");
  if (abi == NULL || slot == NULL) {
    module_close(h, mfd);
    reply_error(rep, HIPD_EINVAL,
                "%s is not a kernel module of hipd's CPU device", path);
    return;
  }
  if (abi() != HIPD_CPU_ABI_VERSION) {
    int v = abi();
    module_close(h, mfd);
    reply_error(rep, HIPD_EVERSION,
                "kernel module %s was built for CPU device ABI %d, the "
                "runner has ABI %d",
                path, v, HIPD_CPU_ABI_VERSION);
    return;
  }
  runner_state.mods[runner_state.nmods++] =
      (module_t){req.module, h, mfd, slot};
}

/* dlclose @p h, and close its memfd unless the object stayed resident. */
static void module_close(void *h, int mfd)
{
  char fdpath[64];
  void *still;

  dlclose(h);
  snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", mfd);
  still = dlopen(fdpath, RTLD_NOW | RTLD_NOLOAD);
  if (still != NULL) {
    dlclose(still);
    return; /* resident: its name must stay unique */
  }
  close(mfd);
}

static void kernel_free(kernel_t *k)
{
  free(k->atypes);
}

static void do_unload(const uint8_t *p, size_t len, reply_t *rep)
{
  cpu_load_req_t req;
  module_t *m;

  if (len != sizeof(req)) {
    reply_error(rep, HIPD_EPROTO, "UNLOAD: bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  m = module_find(req.module);
  if (m == NULL) {
    reply_error(rep, HIPD_ENOENT, "no module %" PRIu32 " is loaded",
                req.module);
    return;
  }
  for (size_t i = 0; i < runner_state.nkerns;) {
    if (runner_state.kerns[i].module == req.module) {
      kernel_free(&runner_state.kerns[i]);
      runner_state.kerns[i] = runner_state.kerns[--runner_state.nkerns];
    } else {
      i++;
    }
  }
  module_close(m->handle, m->fd);
  *m = runner_state.mods[--runner_state.nmods];
}

static void do_kernel(uint8_t *p, size_t len, reply_t *rep)
{
  cpu_kernel_req_t req;
  cpu_kernel_resp_t resp = {0};
  const char *name;
  char sym[3 * CPU_MAX_NAME + 16];
  const hipd_kernel_sig_t *(*sigfn)(void);
  const hipd_kernel_sig_t *sig;
  module_t *m;
  kernel_t *k;

  if (len < sizeof(req) ||
      (name = tail_string(p + sizeof(req), len - sizeof(req), CPU_MAX_NAME)) ==
          NULL) {
    reply_error(rep, HIPD_EPROTO, "KERNEL: bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  if ((m = module_find(req.module)) == NULL) {
    reply_error(rep, HIPD_ENOENT, "no module %" PRIu32 " is loaded",
                req.module);
    return;
  }
  if (kernel_find(req.kernel) != NULL) {
    reply_error(rep, HIPD_EEXIST, "kernel id %" PRIu32 " is in use",
                req.kernel);
    return;
  }
  if (cpu_kernel_symbol(name, sym, sizeof(sym)) != 0) {
    reply_error(rep, HIPD_EINVAL, "kernel name too long");
    return;
  }
  *(void **)&sigfn = dlsym(m->handle, sym);
  if (sigfn == NULL) {
    reply_error(rep, HIPD_ENOKERNEL,
                "kernel '%s' is not in module %" PRIu32
                " (only kernels named when it was compiled can be launched)",
                name, req.module);
    return;
  }
  sig = sigfn();
  if (sig == NULL || sig->entry == NULL || sig->nargs > CPU_MAX_ARGS) {
    reply_error(rep, HIPD_EINVAL,
                "kernel '%s' has more than %d parameters, or a bad signature",
                name, CPU_MAX_ARGS);
    return;
  }
  for (uint32_t i = 0; i < sig->nargs; i++) {
    if (ffi_type_of(sig->types[i]) == NULL) {
      reply_error(rep, HIPD_EINVAL,
                  "kernel '%s': parameter %" PRIu32 " has unknown type code %u",
                  name, i, (unsigned)sig->types[i]);
      return;
    }
  }
  if (ARRAY_GROW(runner_state.kerns, runner_state.nkerns, runner_state.capkerns,
                 8) != 0) {
    reply_error(rep, HIPD_ENOMEM, "KERNEL: out of memory");
    return;
  }
  k = &runner_state.kerns[runner_state.nkerns];
  memset(k, 0, sizeof(*k));
  k->id = req.kernel;
  k->module = req.module;
  k->sig = sig;
  k->atypes = calloc(sig->nargs + 1, sizeof(*k->atypes));
  if (k->atypes == NULL) {
    reply_error(rep, HIPD_ENOMEM, "KERNEL: out of memory");
    return;
  }
  for (uint32_t i = 0; i < sig->nargs; i++)
    k->atypes[i] = ffi_type_of(sig->types[i]);
  if (ffi_prep_cif(&k->cif, FFI_DEFAULT_ABI, sig->nargs, &ffi_type_void,
                   k->atypes) != FFI_OK) {
    free(k->atypes);
    reply_error(rep, HIPD_EINTERNAL, "kernel '%s': ffi_prep_cif failed", name);
    return;
  }
  runner_state.nkerns++;
  resp.nargs = sig->nargs;
  memcpy(runner_state.out_buf, &resp, sizeof(resp));
  memcpy(runner_state.out_buf + sizeof(resp), sig->types, sig->nargs);
  rep->payload = runner_state.out_buf;
  rep->len = (uint32_t)(sizeof(resp) + sig->nargs);
}

/* Storage for one argument as libffi reads it: the declared type. */
typedef union {
  int8_t i8;
  uint8_t u8;
  int16_t i16;
  uint16_t u16;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
  void *ptr;
} slot_t;

static void arg_convert(unsigned type, const cpu_arg_t *a, slot_t *s)
{
  memset(s, 0, sizeof(*s));
  switch (type) {
  case HIPD_CPU_T_PTR:
    s->ptr = (void *)(uintptr_t)a->ptr;
    break;
  case HIPD_CPU_T_I8:
    s->i8 = (int8_t)a->i;
    break;
  case HIPD_CPU_T_U8:
    s->u8 = (uint8_t)a->u;
    break;
  case HIPD_CPU_T_BOOL:
    s->u8 = a->u != 0;
    break;
  case HIPD_CPU_T_I16:
    s->i16 = (int16_t)a->i;
    break;
  case HIPD_CPU_T_U16:
    s->u16 = (uint16_t)a->u;
    break;
  case HIPD_CPU_T_I32:
    s->i32 = (int32_t)a->i;
    break;
  case HIPD_CPU_T_U32:
    s->u32 = (uint32_t)a->u;
    break;
  case HIPD_CPU_T_I64:
    s->i64 = a->i;
    break;
  case HIPD_CPU_T_U64:
    s->u64 = a->u;
    break;
  case HIPD_CPU_T_F32:
    s->f32 = a->f32;
    break;
  case HIPD_CPU_T_F64:
    s->f64 = a->f64;
    break;
  }
}

/* The answer to a launch: what the kernel printed since the last one
 * (out_fd's contents, which are then emptied). */
static void launch_output(reply_t *rep)
{
  cpu_launch_resp_t h = {0};
  uint8_t *data = runner_state.out_buf + sizeof(h);
  struct stat st;

  fflush(stdout);
  fflush(stderr);
  if (runner_state.out_fd >= 0 && fstat(runner_state.out_fd, &st) == 0 &&
      st.st_size > 0) {
    size_t want = (uint64_t)st.st_size < CPU_LAUNCH_OUTPUT_MAX
                      ? (size_t)st.st_size
                      : CPU_LAUNCH_OUTPUT_MAX;
    ssize_t n = pread(runner_state.out_fd, data, want, 0);
    h.len = n > 0 ? (uint32_t)n : 0;
    h.dropped = (uint64_t)st.st_size - h.len;
    /* Emptied, and written from its start again (fds 1 and 2 share the
     * offset). */
    (void)!ftruncate(runner_state.out_fd, 0);
    (void)lseek(runner_state.out_fd, 0, SEEK_SET);
  }
  memcpy(runner_state.out_buf, &h, sizeof(h));
  rep->payload = runner_state.out_buf;
  rep->len = (uint32_t)(sizeof(h) + h.len);
}

static void do_launch(const uint8_t *p, size_t len, reply_t *rep)
{
  static slot_t slots[CPU_MAX_ARGS];
  static void *avalues[CPU_MAX_ARGS];
  cpu_launch_req_t req;
  sched_launch_t l;
  char msg[512];
  kernel_t *k;
  module_t *m;
  int rc;

  if (len < sizeof(req)) {
    reply_error(rep, HIPD_EPROTO, "LAUNCH: bad payload");
    return;
  }
  memcpy(&req, p, sizeof(req));
  if (req.nargs > CPU_MAX_ARGS ||
      len != sizeof(req) + (size_t)req.nargs * sizeof(cpu_arg_t)) {
    reply_error(rep, HIPD_EPROTO, "LAUNCH: bad payload");
    return;
  }
  if (runner_state.sched == NULL) {
    reply_error(rep, HIPD_EPROTO, "LAUNCH before HELLO");
    return;
  }
  if ((k = kernel_find(req.kernel)) == NULL ||
      (m = module_find(k->module)) == NULL) {
    reply_error(rep, HIPD_ENOKERNEL, "no kernel %" PRIu32 " is loaded",
                req.kernel);
    return;
  }
  if (req.nargs != k->sig->nargs) {
    reply_error(rep, HIPD_ESIGNATURE,
                "the kernel takes %" PRIu32 " arguments, the launch passed "
                "%" PRIu32,
                k->sig->nargs, req.nargs);
    return;
  }
  if ((rc = cpu_launch_check(req.grid, req.block, req.shared, msg,
                             sizeof(msg))) != 0) {
    reply_error(rep, rc, "%s", msg);
    return;
  }
  for (uint32_t i = 0; i < req.nargs; i++) {
    cpu_arg_t a;
    memcpy(&a, p + sizeof(req) + i * sizeof(cpu_arg_t), sizeof(a));
    arg_convert(k->sig->types[i], &a, &slots[i]);
    avalues[i] = &slots[i];
  }
  l.entry = k->sig->entry;
  l.cif = &k->cif;
  l.avalues = avalues;
  l.tls_slot = m->tls_slot;
  memcpy(l.grid, req.grid, sizeof(l.grid));
  memcpy(l.block, req.block, sizeof(l.block));
  l.shared = req.shared;
  rc = sched_run(runner_state.sched, &l, runner_state.fd, msg, sizeof(msg));
  if (rc != 0)
    reply_error(rep, rc, "%s", msg);
  else
    launch_output(rep);
}

/* --------------------------------------------------------------- main */

static int send_reply(uint32_t op, const reply_t *rep)
{
  cpu_resp_t h = {.op = op, .status = rep->status, .len = rep->len};
  struct iovec iov[2] = {{&h, sizeof(h)}, {rep->payload, rep->len}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = rep->len ? 2 : 1};

  for (;;) {
    if (sendmsg(runner_state.fd, &mh, MSG_NOSIGNAL) >= 0)
      return 0;
    if (errno != EINTR)
      return -1;
  }
}

static void serve(void)
{
  for (;;) {
    union {
      struct cmsghdr h;
      char buf[CMSG_SPACE(sizeof(int) * 4)];
    } cbuf;
    struct iovec iov = {runner_state.in_buf, CPU_PROTO_MAX_MSG};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cbuf.buf,
                        .msg_controllen = sizeof(cbuf.buf)};
    reply_t rep = {0};
    cpu_req_t h;
    int fds[4], nfds = 0;
    ssize_t n = recvmsg(runner_state.fd, &mh, MSG_CMSG_CLOEXEC);

    if (n == 0)
      return; /* the daemon closed the socket */
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
         c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && nfds < 4; i++)
          memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      }
    }
    if ((size_t)n < sizeof(h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
      h.op = 0;
      reply_error(&rep, HIPD_EPROTO, "malformed request (%zd bytes)", n);
    } else {
      memcpy(&h, runner_state.in_buf, sizeof(h));
      uint8_t *p = runner_state.in_buf + sizeof(h);
      size_t len = (size_t)n - sizeof(h);
      if (h.len != len)
        reply_error(&rep, HIPD_EPROTO, "request length %" PRIu32 " != %zu",
                    h.len, len);
      else if (runner_state.sandbox_error[0] != '\0' && h.op != CPU_OP_HELLO)
        reply_error(&rep, HIPD_EPERM, "%s", runner_state.sandbox_error);
      else if (h.op != CPU_OP_HELLO && runner_state.sched == NULL)
        reply_error(&rep, HIPD_EPROTO, "request before HELLO");
      else
        switch (h.op) {
        case CPU_OP_HELLO:
          do_hello(p, len, &rep);
          break;
        case CPU_OP_MAP:
          do_map(p, len, nfds == 1 ? fds[0] : -1, &rep);
          break;
        case CPU_OP_UNMAP:
          do_unmap(p, len, &rep);
          break;
        case CPU_OP_CHUNK:
          do_chunk(p, len, nfds == 1 ? &fds[0] : NULL, &rep);
          break;
        case CPU_OP_BMAP:
        case CPU_OP_BUNMAP:
          do_bmap(p, len, h.op == CPU_OP_BMAP, &rep);
          break;
        case CPU_OP_LOAD:
          do_load(p, len, nfds == 1 ? fds[0] : -1, &rep);
          break;
        case CPU_OP_UNLOAD:
          do_unload(p, len, &rep);
          break;
        case CPU_OP_KERNEL:
          do_kernel(p, len, &rep);
          break;
        case CPU_OP_LAUNCH:
          do_launch(p, len, &rep);
          break;
        default:
          reply_error(&rep, HIPD_EPROTO, "unknown request %" PRIu32, h.op);
        }
    }
    for (int i = 0; i < nfds; i++)
      if (fds[i] >= 0)
        close(fds[i]); /* a mapping keeps its file; a chunk kept its fd */
    if (send_reply(h.op, &rep) != 0)
      return;
  }
}

static void usage(void)
{
  fprintf(stderr, "usage: hipd-cpu-runner --fd=N [--workers=N] "
                  "[--reserve=ADDR:SIZE] [--uid=U --gid=G]\n"
                  "The CPU device kernel runner of hipd; hipd starts it.\n");
  exit(2);
}

static void reserve(void)
{
  void *want = (void *)(uintptr_t)runner_state.reserve_addr;
  void *got = mmap(
      want, runner_state.reserve_size, PROT_NONE,
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);

  if (got == want)
    return;
  if (got != MAP_FAILED)
    munmap(got, runner_state.reserve_size);
  snprintf(runner_state.reserve_error, sizeof(runner_state.reserve_error),
           "the CPU device runner cannot reserve the buffer address range "
           "0x%" PRIx64 "+%" PRIu64 ": %s",
           runner_state.reserve_addr, runner_state.reserve_size,
           got != MAP_FAILED ? "in use" : strerror(errno));
  runner_state.reserve_size = 0;
}

/* Collect the directory of every object loaded now (the runner's own
 * libraries), so that a module may link what the runner links even from a
 * non-standard prefix. */
typedef struct {
  sandbox_path_t *paths;
  size_t *n, max;
  char *buf;
  size_t used, size;
} libdirs_t;

static int libdir_cb(struct dl_phdr_info *info, size_t size, void *data)
{
  libdirs_t *d = data;
  const char *name = info->dlpi_name, *slash;
  size_t len;

  (void)size;
  if (name == NULL || name[0] != '/' || *d->n >= d->max)
    return 0;
  slash = strrchr(name, '/');
  len = (size_t)(slash - name);
  if (len == 0 || d->used + len + 1 > d->size)
    return 0;
  for (size_t i = 0; i < *d->n; i++)
    if (strlen(d->paths[i].path) == len &&
        strncmp(d->paths[i].path, name, len) == 0)
      return 0;
  memcpy(d->buf + d->used, name, len);
  d->buf[d->used + len] = '\0';
  d->paths[(*d->n)++] = (sandbox_path_t){d->buf + d->used, SANDBOX_FS_READ};
  d->used += len + 1;
  return 0;
}

/* Enter the sandbox (see the top of this file). On failure the reason is
 * kept for HELLO, which refuses to start. */
static void runner_sandbox(void)
{
  static const char *const sysdirs[] = {"/usr/lib",       "/usr/lib64",
                                        "/lib",           "/lib64",
                                        "/usr/local/lib", "/etc/ld.so.cache"};
  sandbox_path_t paths[48];
  char libbuf[4096], sanbuf[1024];
  size_t n = 0;
  libdirs_t ld = {paths, &n, 40, libbuf, 0, sizeof(libbuf)};
  sandbox_spec_t spec;
  hipd_err_t err;

  for (size_t i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++)
    paths[n++] = (sandbox_path_t){sysdirs[i], SANDBOX_FS_READ};
  dl_iterate_phdr(libdir_cb, &ld);
  sandbox_sanitizer_paths(paths, &n, sizeof(paths) / sizeof(paths[0]), sanbuf,
                          sizeof(sanbuf));
  sandbox_spec_init(&spec);
  spec.change_ids = runner_state.drop_ids == 3;
  spec.uid = runner_state.uid;
  spec.gid = runner_state.gid;
  spec.no_dumpable = true;
  spec.rlim.core = 0;
  /* Descriptors: the socket, stdio, one memfd per loaded module. No
   * RLIMIT_NPROC (it counts the uid's threads, the tenant's own processes
   * too; seccomp refuses new processes), no RLIMIT_AS (the reservation is
   * large) and no RLIMIT_CPU (the runner lives long; the launch timeout
   * bounds a kernel). */
  spec.rlim.nofile = 1024;
  spec.landlock = true;
  spec.landlock_scope = true;
  spec.paths = paths;
  spec.npaths = n;
  spec.profile = SANDBOX_PROFILE_RUNNER;
  spec.require = SANDBOX_REQUIRE_SECCOMP;
#ifdef HIPD_TSAN
  spec.allow_threads = true; /* TSan's background thread */
#endif
  if (sandbox_enter(&spec, &err) != 0) {
    snprintf(runner_state.sandbox_error, sizeof(runner_state.sandbox_error),
             "the CPU device runner cannot enter its sandbox: %s", err.msg);
    return;
  }
  if (err.msg[0] != '\0')
    fprintf(stderr, "hipd-cpu-runner: sandbox incomplete: %s\n", err.msg);
}

int main(int argc, char **argv)
{
  struct rlimit nocore = {0, 0};

  for (int i = 1; i < argc; i++) {
    char *end;
    if (strncmp(argv[i], "--fd=", 5) == 0) {
      long v = strtol(argv[i] + 5, &end, 10);
      if (*end != '\0' || v < 0 || v > 65535)
        usage();
      runner_state.fd = (int)v;
    } else if (strncmp(argv[i], "--workers=", 10) == 0) {
      unsigned long v = strtoul(argv[i] + 10, &end, 10);
      if (*end != '\0' || v > 4096)
        usage();
      runner_state.workers = (unsigned)v;
    } else if (strncmp(argv[i], "--uid=", 6) == 0) {
      unsigned long v = strtoul(argv[i] + 6, &end, 10);
      if (*end != '\0' || v == 0 || v >= UINT32_MAX)
        usage();
      runner_state.uid = (uid_t)v;
      runner_state.drop_ids |= 1;
    } else if (strncmp(argv[i], "--gid=", 6) == 0) {
      unsigned long v = strtoul(argv[i] + 6, &end, 10);
      if (*end != '\0' || v == 0 || v >= UINT32_MAX)
        usage();
      runner_state.gid = (gid_t)v;
      runner_state.drop_ids |= 2;
    } else if (strncmp(argv[i], "--reserve=", 10) == 0) {
      runner_state.reserve_addr = strtoull(argv[i] + 10, &end, 0);
      if (*end != ':')
        usage();
      runner_state.reserve_size = strtoull(end + 1, &end, 0);
      if (*end != '\0')
        usage();
    } else {
      usage();
    }
  }
  if (runner_state.fd < 0 ||
      (runner_state.drop_ids != 0 && runner_state.drop_ids != 3))
    usage();
  setrlimit(RLIMIT_CORE, &nocore); /* crashes are reported, not dumped */
  /* Started as /proc/self/fd/4 by the launcher: its name would be "4". */
  prctl(PR_SET_NAME, "hipd-cpu-runner", 0, 0, 0);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (runner_state.reserve_size != 0)
    reserve();
  /* Kernels' standard output and error: a file of its own, returned with
   * each launch's answer, never the daemon's log (SECURITY.md). */
  {
    int out = memfd_create("hipd-kernel-output", MFD_CLOEXEC);
    if (out < 0) /* then nowhere: still not the log */
      out = open("/dev/null", O_WRONLY | O_CLOEXEC);
    runner_sandbox();
    fflush(stdout);
    fflush(stderr);
    if (out < 0 || dup2(out, STDOUT_FILENO) < 0 ||
        dup2(out, STDERR_FILENO) < 0) {
      fprintf(stderr, "hipd-cpu-runner: cannot redirect kernels' output\n");
      _exit(1);
    }
    runner_state.out_fd = out;
  }
  serve();
  /* The daemon is gone or closed us: leave without unloading modules,
   * whose destructors are client code. */
  fflush(stdout);
  _exit(0);
}
