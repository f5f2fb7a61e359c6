/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox.h: confine the calling process, irreversibly.
 *
 * The primitives every untrusted or semi-trusted process of hipd uses (the
 * CPU runner, its launcher, the compile helpers, the device workers):
 * identity (uid/gid, supplementary groups), capabilities, NO_NEW_PRIVS,
 * dumpability, rlimits, Landlock (file system) and a seccomp allow-list
 * (libseccomp) chosen by profile. Utility layer: no libuv, no sessions.
 *
 * Typical use, in the process to confine, after its own initialisation and
 * before it touches anything untrusted:
 *
 *   sandbox_spec_t spec;
 *   sandbox_spec_init(&spec);                 // everything off / kept
 *   spec.profile = SANDBOX_PROFILE_RUNNER;
 *   spec.landlock = true;
 *   spec.paths = paths; spec.npaths = n;      // the only files it may open
 *   spec.rlim.core = 0; spec.rlim.nofile = 256;
 *   spec.require = SANDBOX_REQUIRE_SECCOMP;   // no seccomp -> error
 *   if (sandbox_enter(&spec, &err) < 0) exit(...);
 *   if (err.msg[0]) log("sandbox: %s", err.msg);   // what was not applied
 *
 * Threads: capabilities, NO_NEW_PRIVS and Landlock are per thread (the
 * kernel applies Landlock to the calling thread only, before ABI 8's
 * TSYNC), so sandbox_enter() must run while the process has one thread; it
 * fails with HIPD_EINVAL otherwise (unless spec.allow_threads). seccomp is
 * installed with TSYNC anyway.
 * uid/gid changes go through glibc, which applies them to every thread.
 *
 * All functions are thread-safe in the sense that they keep no state; they
 * change the whole process, so call them from one place.
 */
#ifndef HIPD_SANDBOX_H
#define HIPD_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "util/err.h"

/* What this kernel and process offer (sandbox_probe). */
typedef struct {
  bool root;         /* euid 0: sandbox_drop_ids() can change ids */
  bool caps;         /* holds any effective capability */
  bool no_new_privs; /* PR_SET_NO_NEW_PRIVS already set */
  bool seccomp;      /* seccomp filters can be installed */
  bool seccomp_on;   /* a seccomp filter is already installed on us */
  int landlock_abi;  /* Landlock ABI version, 0 if none (or disabled) */
  bool userns;       /* a child could unshare(CLONE_NEWUSER) */
  bool mountns;      /* a child could unshare(CLONE_NEWNS) (as root, or
                      * inside a new user namespace) */
} sandbox_support_t;

/* Fill @p out. Side-effect free: the namespace probes run in a forked
 * child that leaves with _exit() (no atexit handlers, no stdio flush).
 * Cheap: one fork. Call it before sandbox_enter() (a sandboxed process may
 * not be allowed to fork; userns/mountns are then false). */
void sandbox_probe(sandbox_support_t *out);

/* One line for the log, e.g. "root, seccomp, landlock abi 7, userns,
 * mountns". @return the length snprintf would write (truncated to @p n). */
int sandbox_support_format(const sandbox_support_t *s, char *buf, size_t n);

/* The oom_score_adj of a tenant's processes (workers, their launchers and
 * runners, compile helpers and compilers): the kernel's OOM killer picks
 * them before the listener (0) and before the host's other processes
 * (0 by default), as they hold what tenants allocate. */
#define SANDBOX_TENANT_OOM_ADJ 500
/* Raise this process's oom_score_adj to @p adj (children inherit it; no
 * privilege is needed to raise it). @return 0 or HIPD_EIO with @p err. */
int sandbox_oom_adj(int adj, hipd_err_t *err);

/* Look up account @p name with getpwnam_r: its uid and primary gid.
 * @return 0, or HIPD_ENOENT with "no account 'NAME'" (HIPD_EIO on a lookup
 * error, naming the account and the errno). */
int sandbox_user_lookup(const char *name, uid_t *uid, gid_t *gid,
                        hipd_err_t *err);

/* Become @p uid / @p gid for good: setgroups({gid}), setresgid(gid x3),
 * setresuid(uid x3), then check that setresuid(0)/setresgid(0) fail and
 * that the ids are what was asked. As root only; when not root, @p uid and
 * @p gid must be the current real, effective and saved ids (a no-op),
 * otherwise HIPD_EPERM naming the ids. uid 0 as a target is refused
 * (HIPD_EINVAL): dropping to root is no drop.
 * Applies to every thread (glibc's setxid broadcast). */
int sandbox_drop_ids(uid_t uid, gid_t gid, hipd_err_t *err);

/* Drop every capability of the calling thread: the bounding set (needs
 * CAP_SETPCAP: done when held), the ambient set, then effective, permitted
 * and inheritable via capset(2). @return 0 or HIPD_EPERM. Part of
 * sandbox_enter(); exposed for a process that changes ids itself. */
int sandbox_drop_caps(hipd_err_t *err);

/* The seccomp allow-lists. Every profile's default action is EPERM (the
 * call fails, so that libraries that probe, e.g. nss connecting to nscd,
 * degrade gracefully); a short list of calls that only an attack makes
 * (ptrace, process_vm_readv/writev, bpf, perf_event_open, kexec, module
 * loading, keyctl, userfaultfd, io_uring, mount, pivot_root, unshare,
 * setns, ...) kills the process (SIGSYS) in every profile; clone3 answers
 * ENOSYS so that glibc falls back to clone, whose flags a filter can see.
 * The tables, with the reason for each group, are in sandbox_seccomp.c. */
typedef enum {
  SANDBOX_PROFILE_NONE = 0, /* no seccomp filter */
  /* hipd-cpu-runner running client kernels: memory, threads (clone with
   * CLONE_THREAD only), futex, signals to itself only, clocks, sleeps, I/O
   * on descriptors it has, openat (for dlopen; Landlock limits what),
   * memfd_create. No sockets, no new processes, no execve. */
  SANDBOX_PROFILE_RUNNER,
  /* a compile helper: may fork/exec the compiler tools, pipes, waits,
   * files (Landlock limits which); socket() only for AF_UNIX; no ptrace,
   * no mount (namespaces are set up before sandbox_enter). */
  SANDBOX_PROFILE_COMPILER,
  /* a compile helper that may open the GPU driver (--compile-gpu-driver):
   * the COMPILER profile plus the GPU runtime's calls of WORKER (ioctl,
   * pinned memory, an AF_UNIX socket it binds). */
  SANDBOX_PROFILE_COMPILER_GPU,
  /* a device worker: libuv, the HIP/CUDA runtime (ioctl on the driver's
   * devices), memfds, threads, AF_UNIX sockets and SCM_RIGHTS; no new
   * processes, no execve, no network sockets. */
  SANDBOX_PROFILE_WORKER,
  /* the CPU runner's launcher (cpu_launcher.c): what the runner needs up
   * to its own sandbox_enter() (the filter is inherited across execve, so
   * it bounds the runner too), plus fork/execve of the runner, waits,
   * kill, socketpair(AF_UNIX). */
  SANDBOX_PROFILE_LAUNCHER,
  /* the metrics process (daemon/metrics/http.c): libuv, libmicrohttpd's
   * threads, accept() on the listening socket it was given and I/O on the
   * connections; no socket() at all (no new socket, no bind, no listen,
   * no connect), no processes, no execve, no files. */
  SANDBOX_PROFILE_METRICS,
} sandbox_profile_t;

/* Name of a profile ("runner", ...), "none" for NONE. */
const char *sandbox_profile_name(sandbox_profile_t p);

/* Landlock rights of one path (a directory covers what is beneath it). */
enum {
  SANDBOX_FS_READ = 1u << 0,  /* open for reading, list directories */
  SANDBOX_FS_EXEC = 1u << 1,  /* execve (mmap PROT_EXEC needs only READ) */
  SANDBOX_FS_WRITE = 1u << 2, /* write, truncate, create, remove, rename,
                               * ioctl on devices */
};

typedef struct {
  const char *path; /* absolute; a missing path is skipped (no access) */
  unsigned access;  /* SANDBOX_FS_* */
} sandbox_path_t;

/* What sandbox_enter() must apply: a missing protection in @c require is
 * an error (HIPD_ENOTSUP); otherwise it is reported in err->msg with
 * code 0. */
enum {
  SANDBOX_REQUIRE_SECCOMP = 1u << 0,
  SANDBOX_REQUIRE_LANDLOCK = 1u << 1,
};

/* An rlimit value that leaves the current limit as it is. */
#define SANDBOX_RLIM_KEEP ((rlim_t)-2)

typedef struct {
  /* Identity: change to uid/gid first (sandbox_drop_ids) when set. */
  bool change_ids;
  uid_t uid;
  gid_t gid;
  /* PR_SET_DUMPABLE 0: no core, /proc/PID/ files root-owned, no ptrace by
   * the same uid. */
  bool no_dumpable;
  /* Resource limits (soft = hard), SANDBOX_RLIM_KEEP to leave one as it
   * is. core is applied as given (sandbox_spec_init sets 0). nproc counts
   * every process and thread of the real uid, the sandbox's threads too. */
  struct {
    rlim_t cpu_s;  /* RLIMIT_CPU, seconds */
    rlim_t as;     /* RLIMIT_AS, bytes */
    rlim_t data;   /* RLIMIT_DATA, bytes: writable private mappings */
    rlim_t fsize;  /* RLIMIT_FSIZE, bytes */
    rlim_t nofile; /* RLIMIT_NOFILE */
    rlim_t nproc;  /* RLIMIT_NPROC */
    rlim_t core;   /* RLIMIT_CORE, bytes */
  } rlim;
  /* Landlock: when set, the process may reach only @c paths (with their
   * rights); every right the kernel's ABI knows is handled (denied unless
   * granted), up to ABI 7. */
  bool landlock;
  const sandbox_path_t *paths;
  size_t npaths;
  /* With landlock (ABI >= 6): no connect to abstract unix sockets and no
   * signals to processes outside this Landlock domain. */
  bool landlock_scope;
  /* seccomp profile (NONE: no filter). */
  sandbox_profile_t profile;
  unsigned require; /* SANDBOX_REQUIRE_* */
  /* The caller vouches that its other threads run nothing untrusted (a
   * sanitizer's background thread): they get the seccomp filter (TSYNC)
   * but not Landlock nor the capability drop. Normally false. */
  bool allow_threads;
} sandbox_spec_t;

/* Everything off: no id change, dumpable kept, rlimits kept but core 0,
 * no Landlock (landlock_scope true for when it is turned on), no seccomp,
 * nothing required. */
void sandbox_spec_init(sandbox_spec_t *spec);

/* Confine the calling process according to @p spec, in this order:
 * the capability bounding set (while still privileged), the id change,
 * all capabilities (ambient, then effective/permitted/inheritable),
 * PR_SET_NO_NEW_PRIVS (always), PR_SET_DUMPABLE 0 (if asked), rlimits,
 * Landlock, seccomp (SECCOMP_FILTER_FLAG_TSYNC). Irreversible.
 * Must be called with one thread (HIPD_EINVAL otherwise, unless
 * spec->allow_threads).
 * @return 0 with err->code 0 and err->msg "" when everything was applied,
 * or naming what was not (e.g. "landlock: not supported by the kernel");
 * a negative code when a step failed or a required protection is
 * missing: the process is then partly confined and should exit. */
int sandbox_enter(const sandbox_spec_t *spec, hipd_err_t *err);

/* A minimal environment for execve: PATH=/usr/bin:/bin, LANG=C, and each
 * variable named in @p keep (NULL-terminated list of names, may be NULL)
 * that is set in the current environment, as NAME=value. A name given as
 * "NAME=value" is put as is. In a sanitizer build (scripts/sanitize.sh)
 * the sanitizers' ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS and
 * TSAN_OPTIONS are kept too. @return a NULL-terminated array owned by the
 * caller (sandbox_env_free), NULL when out of memory. */
char **sandbox_clean_env(const char *const *keep);
void sandbox_env_free(char **env);

/* In a sanitizer build: append to @p paths (at *@p n, up to @p max) the
 * directories of the sanitizers' log_path settings (read-write: a report
 * file is created at the first report, after the sandbox is on), with
 * their strings in @p buf. Nothing in a normal build. @return how many
 * were added. */
size_t sandbox_sanitizer_paths(sandbox_path_t *paths, size_t *n, size_t max,
                               char *buf, size_t bufsz);

#endif
