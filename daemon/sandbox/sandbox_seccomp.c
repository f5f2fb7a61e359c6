/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox_seccomp.c: the seccomp allow-lists of sandbox.h's
 * profiles, as data, and their installation through libseccomp.
 *
 * Actions, the same in every profile:
 * - a system call that no row allows fails with EPERM. A refusal, not a
 *   kill, because ordinary libraries probe (nss tries nscd's socket, stdio
 *   asks whether stdout is a terminal) and must degrade, and because a
 *   kernel that tries fork() or socket() then sees an error it can report;
 * - the calls of the kill list below end the process with SIGSYS: nothing
 *   hipd runs has a use for them, so a call is an attack (ptrace,
 *   process_vm_*, bpf, perf_event_open, module loading, kexec, keyrings,
 *   userfaultfd, mount and namespaces, pidfd_getfd, ...). The daemon then
 *   reports "SIGSYS (bad system call)" for the launch;
 * - clone3 and io_uring answer ENOSYS: glibc then falls back to clone,
 *   whose flags a filter can read (clone3 passes them in memory), and
 *   libuv to its thread pool.
 * A profile is a list of groups (plain names: any arguments) and of
 * argument rules (a call allowed only with the arguments given). Names
 * that this architecture does not have are skipped. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "hipd.h"
#include "sandbox_internal.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_GET_SPECULATION_CTRL
#define PR_GET_SPECULATION_CTRL 52
#define PR_SET_SPECULATION_CTRL 53
#endif

/* The tables read best as lists, hence: */
/* clang-format off */
/* ------------------------------------------------------- name groups */

/* Every profile: leaving, and who am I. */
static const char *const g_base[] = {
    "exit", "exit_group", "restart_syscall", "getpid", "gettid", "getppid",
    "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
    "getgroups", "getpgrp", "getpgid", "getsid", "uname", "getrandom",
    "sysinfo", "getcpu", "getrusage", "times", "getrlimit", "setrlimit",
    "umask", "personality", /* ASan/TSan ask at start (query only) */
    "arch_prctl",           /* x86-64 TLS set-up by the dynamic loader */
    "capget",               /* libraries ask what they hold: nothing */
    NULL};

/* Memory management; PROT_EXEC too, since dlopen maps code. */
static const char *const g_memory[] = {
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync",
    "mincore", "membarrier", "memfd_create", NULL};

/* Threads and their synchronisation. clone itself is an argument rule
 * (CLONE_THREAD only) except where a profile may create processes. */
static const char *const g_threads[] = {
    "futex", "futex_waitv", "set_robust_list", "set_tid_address", "rseq",
    "sched_yield", "sched_getaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "sched_getattr", NULL};

/* Signal handling of the process itself (sending is an argument rule). */
static const char *const g_signals[] = {
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
    "rt_sigtimedwait", "rt_sigsuspend", "sigaltstack", "pause", NULL};

/* Clocks, sleeps and timers of its own. */
static const char *const g_time[] = {
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
    "gettimeofday", "time", "alarm", "getitimer", "setitimer",
    "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
    "timer_delete", "timerfd_create", "timerfd_settime", "timerfd_gettime",
    NULL};

/* I/O on descriptors it already has (sockets included: the runner's
 * socket to the daemon, stdout). socket(), socketpair(), accept() and
 * connect() are not here. */
static const char *const g_fdio[] = {
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
    "pwritev", "preadv2", "pwritev2", "lseek", "close", "close_range", "dup",
    "dup2", "dup3", "fcntl", "fstat", "fstatfs", "ftruncate", "fallocate",
    "fsync", "fdatasync", "flock", "poll", "ppoll", "select", "pselect6",
    "recvmsg", "sendmsg", "recvfrom", "sendto", "recvmmsg", "sendmmsg",
    "shutdown", "pipe", "pipe2", "eventfd", "eventfd2", NULL};

/* Opening and inspecting files by name. Which files: Landlock's part.
 * (stat and readlink reveal metadata of paths Landlock hides; not data.) */
static const char *const g_files_read[] = {
    "open", "openat", "openat2", "stat", "lstat", "newfstatat", "statx",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    "getdents", "getdents64", "getcwd", "statfs", "fadvise64", NULL};

/* Changing the file system (compile helpers write objects and temps; the
 * worker's GPU runtime keeps a JIT cache). Where: Landlock's part. */
static const char *const g_files_write[] = {
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod",
    "fchmodat", "utimensat", "utimes", "futimesat", "truncate", "chdir",
    "fchdir", "copy_file_range", "sendfile", "splice", "tee", NULL};

/* Creating processes and waiting for them (compile helpers run the
 * compiler's tools; the launcher runs the CPU runner). */
static const char *const g_spawn[] = {
    "clone", "fork", "vfork", "execve", "execveat", "wait4", "waitid",
    "setpgid", "setsid", NULL};

/* Signals to any process: its children (the compiler's tools, the
 * runners). Landlock's signal scope (sandbox_spec_t.landlock_scope) keeps
 * them inside the caller's own domain, i.e. to its descendants. */
static const char *const g_signal_any[] = {
    "kill", "tgkill", "tkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", NULL};

/* posix_spawn's chdir for the child. */
static const char *const g_chdir[] = {"chdir", "fchdir", NULL};

/* An event loop (libuv) and its helpers, and sockets on descriptors the
 * worker was given. */
static const char *const g_loop[] = {
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "signalfd", "signalfd4", "getsockopt",
    "setsockopt", "getsockname", "getpeername", "connect", "wait4", "waitid",
    "inotify_init1", "inotify_add_watch", "inotify_rm_watch", NULL};

/* An HTTP server on a listening socket it was given (the metrics
 * process): accepting, its loop and libmicrohttpd's polls, socket options
 * of the connections. Not socket, bind, listen or connect. */
static const char *const g_accept[] = {
    "accept", "accept4", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "getsockopt", "setsockopt",
    "getsockname", "getpeername", NULL};

/* A GPU runtime: driver ioctls, pinned memory, NUMA placement, thread
 * placement and priorities; the CUDA driver binds a unix socket at cuInit
 * (measured on the H200: without bind, cuInit fails with 304), and
 * socket() is AF_UNIX only, so bind and listen reach no network. */
static const char *const g_gpu[] = {
    "bind", "listen",
    "ioctl", "mlock", "mlock2", "munlock", "mlockall", "munlockall", "mbind",
    "get_mempolicy", "set_mempolicy", "getpriority",
    /* any thread of the uid (all workers share it): a nuisance at worst */
    "sched_setaffinity", NULL};

/* Setting up a sandbox of its own after exec (the runner under the
 * launcher's filter: the filter is inherited, so this has to pass).
 * Landlock and seccomp only ever restrict further; capset can only drop;
 * prctl is an argument rule. */
static const char *const g_confine[] = {
    "seccomp", "landlock_create_ruleset", "landlock_add_rule",
    "landlock_restrict_self", "capset", NULL};

/* Killed in every profile: only an attack calls these here. */
static const char *const g_kill[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
    "pidfd_getfd", "bpf", "perf_event_open", "kexec_load",
    "kexec_file_load", "init_module", "finit_module", "delete_module",
    "keyctl", "add_key", "request_key", "userfaultfd", "mount", "umount",
    "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen",
    "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr", "open_by_handle_at", "name_to_handle_at", "swapon",
    "swapoff", "reboot", "acct", "iopl", "ioperm", "settimeofday",
    "clock_settime", "clock_adjtime", "adjtimex", "quotactl", "quotactl_fd",
    "lookup_dcookie", "vhangup", "syslog", "uselib", "nfsservctl",
    "kcmp", "fanotify_init", "sethostname", "setdomainname", NULL};

/* ENOSYS in every profile: the caller falls back to something checkable. */
static const char *const g_enosys[] = {
    "clone3", "io_uring_setup", "io_uring_enter", "io_uring_register", NULL};

/* ---------------------------------------------------- argument rules */

enum { ARG_EQ, ARG_MASKED_EQ, ARG_SELF_PID };

typedef struct {
  unsigned arg; /* index */
  int how;      /* ARG_* (ARG_SELF_PID: equal to getpid()) */
  uint64_t mask, value;
} arg_cmp_t;

/* One rule: the call is allowed when every comparison holds (up to two);
 * several rows of the same call are alternatives. */
typedef struct {
  const char *name;
  unsigned ncmp;
  arg_cmp_t cmp[2];
} arg_rule_t;

#define EQ(a, v) {(a), ARG_EQ, 0, (uint64_t)(v)}
#define MASKED(a, m, v) {(a), ARG_MASKED_EQ, (uint64_t)(m), (uint64_t)(v)}
#define SELF(a) {(a), ARG_SELF_PID, 0, 0}
#define END {NULL, 0, {{0, 0, 0, 0}}}

/* Threads, never processes: clone must carry CLONE_THREAD (x86-64 and
 * arm64 pass the flags first). */
static const arg_rule_t r_clone_thread[] = {
    {"clone", 1, {MASKED(0, CLONE_THREAD, CLONE_THREAD)}}, END};

/* Signals to itself only (raise, pthread_kill, abort). */
static const arg_rule_t r_signal_self[] = {
    {"kill", 1, {SELF(0)}},
    {"tgkill", 1, {SELF(0)}},
    {"rt_sigqueueinfo", 1, {SELF(0)}},
    {"rt_tgsigqueueinfo", 1, {SELF(0)}},
    END};

/* Limits and priorities of itself only (pid 0): not of the other
 * processes of its uid, which may be other tenants' workers or helpers. */
static const arg_rule_t r_self_only[] = {
    {"prlimit64", 1, {EQ(0, 0)}},
    {"setpriority", 1, {EQ(1, 0)}},
    {"sched_setparam", 1, {EQ(0, 0)}},
    {"sched_setscheduler", 1, {EQ(0, 0)}},
    {"sched_setattr", 1, {EQ(0, 0)}},
    END};

/* Terminal and descriptor ioctls that stdio and libraries use; TIOCSTI
 * (type into the terminal) and every device's ioctl are not among them. */
static const arg_rule_t r_ioctl_tty[] = {
    {"ioctl", 1, {MASKED(1, 0xffffffffu, TCGETS)}},
    {"ioctl", 1, {MASKED(1, 0xffffffffu, TIOCGWINSZ)}},
    {"ioctl", 1, {MASKED(1, 0xffffffffu, FIONREAD)}},
    {"ioctl", 1, {MASKED(1, 0xffffffffu, FIONBIO)}},
    {"ioctl", 1, {MASKED(1, 0xffffffffu, FIOCLEX)}},
    {"ioctl", 1, {MASKED(1, 0xffffffffu, FIONCLEX)}},
    END};

/* prctl options that only name, query or restrict. Not PR_SET_DUMPABLE
 * back to 1, not PR_SET_PTRACER, not PR_SET_MM. */
static const arg_rule_t r_prctl[] = {
    {"prctl", 1, {EQ(0, PR_SET_NAME)}},
    {"prctl", 1, {EQ(0, PR_GET_NAME)}},
    {"prctl", 1, {EQ(0, PR_SET_VMA)}},
    {"prctl", 1, {EQ(0, PR_GET_DUMPABLE)}},
    {"prctl", 2, {EQ(0, PR_SET_DUMPABLE), EQ(1, 0)}},
    {"prctl", 1, {EQ(0, PR_GET_NO_NEW_PRIVS)}},
    {"prctl", 1, {EQ(0, PR_SET_NO_NEW_PRIVS)}},
    {"prctl", 1, {EQ(0, PR_GET_SECCOMP)}},
    {"prctl", 1, {EQ(0, PR_SET_SECCOMP)}},
    {"prctl", 1, {EQ(0, PR_CAPBSET_READ)}},
    {"prctl", 1, {EQ(0, PR_CAPBSET_DROP)}},
    {"prctl", 1, {EQ(0, PR_CAP_AMBIENT)}},
    {"prctl", 1, {EQ(0, PR_GET_KEEPCAPS)}},
    {"prctl", 1, {EQ(0, PR_GET_TIMERSLACK)}},
    {"prctl", 1, {EQ(0, PR_SET_TIMERSLACK)}},
    {"prctl", 1, {EQ(0, PR_GET_THP_DISABLE)}},
    {"prctl", 1, {EQ(0, PR_SET_THP_DISABLE)}},
    {"prctl", 1, {EQ(0, PR_GET_SPECULATION_CTRL)}},
    {"prctl", 1, {EQ(0, PR_SET_SPECULATION_CTRL)}},
    {"prctl", 1, {EQ(0, PR_GET_PDEATHSIG)}},
    {"prctl", 1, {EQ(0, PR_SET_PDEATHSIG)}},
    {"prctl", 1, {EQ(0, PR_GET_TID_ADDRESS)}},
    END};

/* Unix-domain sockets only: no network. */
static const arg_rule_t r_socket_unix[] = {
    {"socket", 1, {MASKED(0, 0xffffffffu, AF_UNIX)}},
    {"socketpair", 1, {MASKED(0, 0xffffffffu, AF_UNIX)}},
    END};
static const arg_rule_t r_socketpair_unix[] = {
    {"socketpair", 1, {MASKED(0, 0xffffffffu, AF_UNIX)}}, END};

/* ------------------------------------------------------------ profiles */

typedef struct {
  const char *name;
  const char *const *groups[16]; /* NULL-terminated */
  const arg_rule_t *rules[8];     /* NULL-terminated */
} profile_t;

static const profile_t profiles[] = {
    [SANDBOX_PROFILE_NONE] = {"none", {NULL}, {NULL}},
    /* Client kernels: compute, threads, its own socket and stdout, dlopen
     * of the module (a memfd) and its system libraries. */
    [SANDBOX_PROFILE_RUNNER] = {"runner",
                                {g_base, g_memory, g_threads, g_signals,
                                 g_time, g_fdio, g_files_read, NULL},
                                {r_clone_thread, r_signal_self, r_ioctl_tty,
                                 r_prctl, r_self_only, NULL}},
    /* The compiler and its tools: processes, files (Landlock says
     * which), no sockets but pairs. */
    [SANDBOX_PROFILE_COMPILER] = {"compiler",
                                  {g_base, g_memory, g_threads, g_signals,
                                   g_time, g_fdio, g_files_read,
                                   g_files_write, g_spawn, g_signal_any,
                                   NULL},
                                  {r_ioctl_tty, r_prctl, r_socketpair_unix,
                                   r_self_only, NULL}},
    /* The same with the GPU driver: NVRTC reaches the CUDA compute
     * cache only through it (bench/RESULTS.md: 16 ms a cold compile). */
    [SANDBOX_PROFILE_COMPILER_GPU] = {"compiler-gpu",
                                      {g_base, g_memory, g_threads, g_signals,
                                       g_time, g_fdio, g_files_read,
                                       g_files_write, g_spawn, g_signal_any,
                                       g_gpu, NULL},
                                      {r_prctl, r_socket_unix, r_self_only,
                                       NULL}},
    /* A device worker: libuv, the GPU runtime, unix sockets; no
     * processes, no execve. Threads only. */
    [SANDBOX_PROFILE_WORKER] = {"worker",
                                {g_base, g_memory, g_threads, g_signals,
                                 g_time, g_fdio, g_files_read, g_files_write,
                                 g_loop, g_gpu, NULL},
                                {r_clone_thread, r_signal_self, r_prctl,
                                 r_socket_unix, r_self_only, NULL}},
    /* The launcher: spawns runners (its children; Landlock's signal scope
     * keeps its kill() to them) and lets each confine itself. */
    [SANDBOX_PROFILE_LAUNCHER] = {"launcher",
                                  {g_base, g_memory, g_threads, g_signals,
                                   g_time, g_fdio, g_files_read, g_spawn,
                                   g_signal_any, g_chdir, g_confine, NULL},
                                  {r_ioctl_tty, r_prctl, r_socketpair_unix,
                                   r_self_only, NULL}},
    /* The metrics process: threads, its loop, accept and I/O on the
     * connections of the socket it was given; nothing else. */
    [SANDBOX_PROFILE_METRICS] = {"metrics",
                                 {g_base, g_memory, g_threads, g_signals,
                                  g_time, g_fdio, g_accept, NULL},
                                 {r_clone_thread, r_signal_self, r_ioctl_tty,
                                  r_prctl, r_self_only, NULL}},
};

/* clang-format on */

const char *sandbox_profile_name(sandbox_profile_t p)
{
  if ((unsigned)p >= sizeof(profiles) / sizeof(profiles[0]))
    return "?";
  return profiles[p].name;
}

bool sandbox_seccomp_available(void)
{
  /* The action check needs seccomp(2) with filter support. */
  return seccomp_api_get() >= 1 && prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

/* Add @p action for every name of @p names known on this architecture. */
static int add_names(scmp_filter_ctx ctx, uint32_t action,
                     const char *const *names, hipd_err_t *err)
{
  for (size_t i = 0; names[i] != NULL; i++) {
    int nr = seccomp_syscall_resolve_name(names[i]);
    int rc;
    if (nr == __NR_SCMP_ERROR)
      continue;
    rc = seccomp_rule_add(ctx, action, nr, 0);
    /* -EEXIST: an earlier group allowed it already. */
    if (rc != 0 && rc != -EEXIST)
      return err_set(err, HIPD_EINTERNAL, "seccomp: rule for %s: %s", names[i],
                     strerror(-rc));
  }
  return 0;
}

static int add_rules(scmp_filter_ctx ctx, const arg_rule_t *rules,
                     hipd_err_t *err)
{
  for (size_t i = 0; rules[i].name != NULL; i++) {
    const arg_rule_t *r = &rules[i];
    struct scmp_arg_cmp c[2];
    int nr = seccomp_syscall_resolve_name(r->name);
    int rc;
    if (nr == __NR_SCMP_ERROR)
      continue;
    for (unsigned k = 0; k < r->ncmp; k++) {
      const arg_cmp_t *a = &r->cmp[k];
      if (a->how == ARG_MASKED_EQ)
        c[k] = (struct scmp_arg_cmp){a->arg, SCMP_CMP_MASKED_EQ, a->mask,
                                     a->value};
      else if (a->how == ARG_SELF_PID)
        c[k] =
            (struct scmp_arg_cmp){a->arg, SCMP_CMP_EQ, (uint64_t)getpid(), 0};
      else
        c[k] = (struct scmp_arg_cmp){a->arg, SCMP_CMP_EQ, a->value, 0};
    }
    rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, r->ncmp, c);
    if (rc != 0 && rc != -EEXIST)
      return err_set(err, HIPD_EINTERNAL, "seccomp: rule for %s: %s", r->name,
                     strerror(-rc));
  }
  return 0;
}

int sandbox_seccomp_apply(sandbox_profile_t profile, hipd_err_t *err)
{
  return sandbox_seccomp_apply_default(profile, SCMP_ACT_ERRNO(EPERM), err);
}

int sandbox_seccomp_apply_default(sandbox_profile_t profile,
                                  uint32_t default_action, hipd_err_t *err)
{
  const profile_t *p;
  scmp_filter_ctx ctx;
  int rc;

  if ((unsigned)profile >= sizeof(profiles) / sizeof(profiles[0]) ||
      profile == SANDBOX_PROFILE_NONE)
    return err_set(err, HIPD_EINVAL, "seccomp: no profile %d", (int)profile);
  p = &profiles[profile];
  ctx = seccomp_init(default_action);
  if (ctx == NULL)
    return err_set(err, HIPD_ENOMEM, "seccomp_init failed");
  /* All threads, or none: a thread started before this call must not run
   * unfiltered. */
  if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) != 0) {
    rc = err_set(err, HIPD_ENOTSUP, "seccomp: TSYNC: %s", strerror(-rc));
    goto fail;
  }
  if ((rc = add_names(ctx, SCMP_ACT_KILL_PROCESS, g_kill, err)) != 0 ||
      (rc = add_names(ctx, SCMP_ACT_ERRNO(ENOSYS), g_enosys, err)) != 0)
    goto fail;
  for (size_t i = 0; p->groups[i] != NULL; i++)
    if ((rc = add_names(ctx, SCMP_ACT_ALLOW, p->groups[i], err)) != 0)
      goto fail;
  for (size_t i = 0; p->rules[i] != NULL; i++)
    if ((rc = add_rules(ctx, p->rules[i], err)) != 0)
      goto fail;
  if ((rc = seccomp_load(ctx)) != 0) {
    rc = err_set(err, HIPD_EPERM, "seccomp: loading the %s filter: %s", p->name,
                 strerror(-rc));
    goto fail;
  }
  seccomp_release(ctx);
  return 0;

fail:
  seccomp_release(ctx);
  return rc;
}
