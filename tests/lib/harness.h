/* SPDX-License-Identifier: MIT */
/* tests/lib/harness.h: real hipd daemons for integration tests.
 *
 * A test starts the hipd built in the tree ($HIPD_BIN, else ./hipd) in a
 * private temporary directory (under $HIPD_TEST_TMP, else /tmp) on a socket
 * of its own, with whatever extra options it needs; the daemon's stdout and
 * stderr go to a log file there, which tests read for assertions and which
 * is printed when a start fails.
 *
 * Nothing is left running: a daemon dies with the process that started it
 * (PR_SET_PDEATHSIG: check's child for a test that fails, _exit()s or is
 * killed at its timeout), and an atexit handler kills whatever a process
 * leaves when it exits normally. Start daemons from a process's main
 * thread: the death signal follows the thread that forked.
 *
 * Files: a test program calls harness_init() first and harness_fini() last;
 * every daemon's directory lives in the one harness_init() makes, so that
 * harness_fini() prints the logs of the daemons failed tests left (their
 * processes could not clean up) and removes everything.
 */
#ifndef HIPD_TESTS_HARNESS_H
#define HIPD_TESTS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct harness_daemon {
  pid_t pid;                   /* 0 once reaped */
  pid_t owner;                 /* the process that started it (and kills it) */
  int status;                  /* wait status, once reaped */
  char dir[256];               /* private temporary directory */
  char socket[300];            /* the socket path it was told to use */
  char log[300];               /* its stdout and stderr */
  struct harness_daemon *next; /* in the list the atexit handler kills */
} harness_daemon_t;

/* Make the directory all of this program's daemons live in, named after
 * @p name, under $HIPD_TEST_TMP or /tmp. @return 0 or -1 (they then go
 * straight there). */
int harness_init(const char *name);
/* In the process that called harness_init(), at the end: kill what is
 * left, print the logs failed tests left behind, remove the directory. */
void harness_fini(void);

/* When non-zero, daemons started from now on find $JOURNAL_STREAM naming
 * their stderr (the log file), as under systemd with the journal. Other
 * environment variables a test sets (setenv) are inherited as they are. */
extern int harness_journal_stream;

/* Start a daemon on a fresh socket with the NULL-terminated extra options
 * (after "--socket PATH --no-config": the machine's hipd.conf is not read
 * unless a test gives --config FILE; and, unless the options name a
 * --cache-dir, "--cache-dir ''": no disk cache, never the machine's) and
 * wait until it accepts connections (20 s at most).
 * @return the daemon, or NULL (the reason and its log are printed). */
harness_daemon_t *harness_start(const char *arg, ...);
/* The same with an argv-style NULL-terminated array. */
harness_daemon_t *harness_startv(const char *const *args);

/* Start a daemon on @p socket_path (NULL: a fresh one in its directory)
 * without waiting for it. @return the daemon or NULL. */
harness_daemon_t *harness_spawn(const char *socket_path,
                                const char *const *args);
/* Wait until @p d accepts connections. @return 0; -1 if it exited (its
 * status is kept) or did not accept within @p timeout_ms. */
int harness_wait_ready(harness_daemon_t *d, int timeout_ms);
/* Wait up to @p timeout_ms for @p d to exit. @return its exit code, 128 +
 * the signal if one killed it, or -1 if it is still running. */
int harness_wait_exit(harness_daemon_t *d, int timeout_ms);

/* Stop @p d with SIGTERM and wait for it (15 s, then SIGKILL).
 * @return its exit code, 128 + signal, or -1 if it had to be killed. */
int harness_stop(harness_daemon_t *d);
/* SIGKILL and reap, if still running. */
void harness_kill(harness_daemon_t *d);
/* Kill if needed, remove its directory and free @p d. NULL is ignored. */
void harness_free(harness_daemon_t *d);

/* @return 1 if the daemon's log contains @p needle, else 0. */
int harness_log_contains(const harness_daemon_t *d, const char *needle);
/* How many times the daemon's log contains @p needle. */
int harness_log_count(const harness_daemon_t *d, const char *needle);
/* Wait up to @p timeout_ms for the log to contain @p needle. @return 1/0. */
int harness_log_wait(const harness_daemon_t *d, const char *needle,
                     int timeout_ms);
/* Print the daemon's log to stderr (for a failing test). */
void harness_log_dump(const harness_daemon_t *d);

/* A fresh unique path in a new private directory (for sockets a test makes
 * itself); the directory is removed at exit. */
const char *harness_temp_path(const char *name);

/* Connect a plain Unix socket to @p path (no handshake). @return the fd or
 * -1. */
int harness_raw_connect(const char *path);
/* Write all of @p buf (MSG_NOSIGNAL). @return 0 or -1 (errno kept). */
int harness_raw_send(int fd, const void *buf, size_t len);
/* Read and discard until the peer closes the connection (EOF or reset).
 * @return 1 once closed, 0 if still open after @p timeout_ms. */
int harness_raw_wait_closed(int fd, int timeout_ms);

/* Milliseconds of CLOCK_MONOTONIC, for bounded waits (never asserted on). */
long long harness_now_ms(void);
/* Sleep @p ms milliseconds (for polling loops). */
void harness_sleep_ms(int ms);

/* ---- other users (tests of the access policy and of tenants) ---- */
/* Let other uids reach @p d's socket: its directory and harness_init()'s
 * become search-only for others (0711: nobody can list them). Start the
 * daemon with --socket-mode 0666 as well. @return 0 or -1. */
int harness_share_socket(const harness_daemon_t *d);
/* Become user @p user for good (initgroups, then the real, effective and
 * saved gid and uid; as root only), in a child. A parent-death signal set
 * before is cleared by the change. @return 0 or -1 (errno set). */
int harness_become(const char *user);
/* Run @p fn(@p arg, msg, msglen) in a forked child that has become user
 * @p user (harness_become()), and hand back what
 * it returned and the message it wrote. @return fn's value (0: it passed),
 * or -1 with @p msg saying why the child could not run or died. */
int harness_run_as(const char *user,
                   int (*fn)(void *arg, char *msg, size_t msglen), void *arg,
                   char *msg, size_t msglen);

#endif
