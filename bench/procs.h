/* SPDX-License-Identifier: MIT */
/* bench/procs.h: the child processes of hipd_bench.
 *
 * Every child (the daemon, direct_hip runs, forked clients, the socket
 * baseline's peer) is started here and recorded, so that nothing outlives
 * the bench: each child gets PR_SET_PDEATHSIG (it dies with the bench),
 * waits have deadlines after which the child is killed, and
 * procs_kill_all(), safe in a signal handler, kills whatever is left when
 * the bench is interrupted or its watchdog fires. A child started in its
 * own process group (the daemon, with its CPU runner) is killed as a group.
 */
#ifndef HIPD_BENCH_PROCS_H
#define HIPD_BENCH_PROCS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
  pid_t pid;      /* 0 once reaped */
  int own_group;  /* the child leads a process group of its own */
  int in_fd;      /* the parent writes the child's stdin here, or -1 */
  int out_fd;     /* the parent reads the child's stdout here, or -1 */
  int status;     /* wait status, once reaped */
  char buf[8192]; /* bytes read from out_fd, not yet returned as lines */
  size_t len;     /* bytes in buf */
} proc_t;

/* Start @p argv[0] (a path) with @p argv, the environment plus @p env_extra
 * (NULL-ended "NAME=value" strings, may be NULL). With @p log_path its
 * stdout and stderr go to that file (appended) and stdin is /dev/null;
 * otherwise its stdin and stdout are pipes (proc_write, proc_readline) and
 * its stderr is the bench's. @return 0 or -1 (errno set, nothing started).
 */
int proc_spawn(proc_t *p, const char *const *argv, const char *const *env_extra,
               const char *log_path, int own_group);

/* Fork a child that runs @p fn(@p arg, 0, 1) and exits with its return
 * value: its stdin (0) reads what the parent proc_write()s, its stdout (1)
 * writes what the parent proc_readline()s. Every other descriptor of the
 * bench is closed in it but stderr and @p keep_fd (-1: none). @return 0 or
 * -1. */
int proc_fork(proc_t *p, int (*fn)(void *arg, int in_fd, int out_fd), void *arg,
              int keep_fd);

/* Read one line of the child's stdout (without its newline) into @p line,
 * waiting until @p deadline (bu_now() seconds). @return 1 with a line, 0 at
 * end of file, -1 at the deadline or on an error. Longer lines are cut. */
int proc_readline(proc_t *p, char *line, size_t size, double deadline);

/* Write @p s to the child's stdin. @return 0 or -1. */
int proc_write(proc_t *p, const char *s);

/* Close the pipes to the child (it sees end of file on stdin). */
void proc_close_pipes(proc_t *p);

/* Wait up to @p timeout seconds for the child to exit; after that, kill it.
 * @return its exit code, 128 + the signal that ended it, or -1 if it had
 * to be killed. The pipes are closed. */
int proc_wait(proc_t *p, double timeout);

/* Has the child exited? Reaps it if so. @return 1 once reaped, else 0. */
int proc_poll(proc_t *p);

/* Send @p sig to the child (its group if it has one); no wait. */
void proc_signal(proc_t *p, int sig);

/* SIGKILL the child (its group) and reap it; closes the pipes. */
void proc_kill(proc_t *p);

/* SIGKILL every child still recorded. Async-signal-safe. */
void procs_kill_all(void);
/* Reap whatever children exit within @p ms milliseconds (after
 * procs_kill_all). Async-signal-safe. */
void procs_reap_killed(int ms);

/* Run @p argv (a path) with environment @p envp, @p input (or nothing) on
 * its stdin, and wait for it @p seconds at most, then kill it. For signal
 * handlers: async-signal-safe, and the child is not recorded. */
void procs_run_safely(char *const *argv, char *const *envp, const char *input,
                      int seconds);

/* A process of the system, as /proc/PID/stat says. */
typedef struct {
  long pid, ppid;
  char comm[20];
  uint64_t cpu_ns; /* user + system time so far (a zombie's too) */
  long threads;
} pinfo_t;

/* At most this many processes are surveyed. */
#define PROCS_MAX 65536

/* Every process of the system into @p ps (at most @p max). @return how
 * many. */
int procs_survey(pinfo_t *ps, int max);
/* Is @p pid @p root or one of its descendants in @p ps? */
int procs_under(const pinfo_t *ps, int n, long pid, long root);
/* The CPU time and the threads in @p ps of @p root and its descendants
 * (root > 0) and of the processes @p pids (either out may be NULL). */
void procs_total(const pinfo_t *ps, int n, long root, const pid_t *pids,
                 int npids, uint64_t *cpu_ns, long *threads);

/* CPU time and context switches of a group of threads: those of one name
 * ("PROCESS/THREAD", their comms; the root process is "listener"). */
typedef struct {
  char name[56];
  int threads;
  uint64_t cpu_ns; /* run time (schedstat, else utime + stime) */
  uint64_t vcsw;   /* voluntary context switches (it slept) */
  uint64_t ivcsw;  /* involuntary ones (it was preempted) */
} tprof_t;

/* Every thread of @p root's tree (root > 0) and of the processes @p pids,
 * summed by name into @p out (at most @p max names). @return how many. */
int procs_thread_profile(const pinfo_t *ps, int n, long root, const pid_t *pids,
                         int npids, tprof_t *out, int max);
/* The CPU time the threads of profile @p b (@p nb names) used since
 * profile @p a, matched by name (a name new in @p b counts whole): the
 * total, each name's in @p delta[i] (may be NULL), and the threads of @p b
 * in *@p threads (may be NULL). */
uint64_t procs_profile_between(const tprof_t *a, int na, const tprof_t *b,
                               int nb, uint64_t *delta, long *threads);
/* The profile of this process's own threads (named "PROCESS/THREAD", the
 * process as @p self_name), at most @p max names. @return how many. */
int procs_self_profile(const char *self_name, tprof_t *out, int max);

#endif
