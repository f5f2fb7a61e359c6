/* SPDX-License-Identifier: MIT */
/* tests/protofuzz/protofuzz_fds.c: descriptors of every kind (memfds sealed or
 * not, pipes, sockets, eventfds, timerfds, directories...) to send with
 * requests (tests/protofuzz/protofuzz.h). */
#include "config.h"

#include "protofuzz.h"

/* ---------------------------------------------------------- descriptors */

const char *const fd_names[FD_NKINDS] = {
    "memfd-sealed",  "memfd-small", "memfd-empty", "memfd-unsealed",
    "memfd-wsealed", "pipe-read",   "pipe-write",  "socketpair",
    "dgram-socket",  "eventfd",     "timerfd",     "/dev/null",
    "regular-file",  "directory",   "O_PATH",      "epoll",
    "pidfd",         "signalfd",    "inotify",     "hipd-connection"};

char regular_path[512];

static int memfd(size_t size, unsigned seals)
{
  int fd = memfd_create("protofuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);

  if (fd < 0)
    return -1;
  if (size && ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return -1;
  }
  if (seals)
    fcntl(fd, F_ADD_SEALS, seals);
  return fd;
}

/* A new descriptor of @p kind (the caller closes it), or -1. */

int fd_make(int kind, size_t shm_size)
{
  int p[2], fd = -1;

  switch (kind) {
  case FD_MEMFD_GOOD:
    return memfd(shm_size,
                 F_SEAL_SHRINK | (chance(2) ? F_SEAL_GROW | F_SEAL_SEAL : 0));
  case FD_MEMFD_SMALL:
    return memfd(4096, F_SEAL_SHRINK);
  case FD_MEMFD_EMPTY:
    return memfd(0, F_SEAL_SHRINK | F_SEAL_GROW);
  case FD_MEMFD_UNSEALED:
    return memfd(shm_size, 0);
  case FD_MEMFD_WSEAL:
    return memfd(shm_size, F_SEAL_SHRINK | F_SEAL_WRITE);
  case FD_PIPE_R:
  case FD_PIPE_W:
    if (pipe2(p, O_CLOEXEC) != 0)
      return -1;
    close(p[kind == FD_PIPE_R ? 1 : 0]);
    return p[kind == FD_PIPE_R ? 0 : 1];
  case FD_SOCKETPAIR:
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0)
      return -1;
    close(p[1]);
    return p[0];
  case FD_DGRAM:
    return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  case FD_EVENTFD:
    return eventfd(0, EFD_CLOEXEC);
  case FD_TIMERFD:
    return timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  case FD_DEVNULL:
    return open("/dev/null", O_RDWR | O_CLOEXEC);
  case FD_REGULAR:
    return open(regular_path, O_RDWR | O_CLOEXEC);
  case FD_DIRECTORY:
    return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  case FD_OPATH:
    return open(regular_path, O_PATH | O_CLOEXEC);
  case FD_EPOLL:
    return epoll_create1(EPOLL_CLOEXEC);
  case FD_PIDFD:
#ifdef SYS_pidfd_open
    fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
#endif
    return fd;
  case FD_SIGNALFD: {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    return signalfd(-1, &set, SFD_CLOEXEC);
  }
  case FD_INOTIFY:
    return inotify_init1(IN_CLOEXEC);
  case FD_HIPD_CONN:
    return harness_raw_connect(daemon_->socket);
  }
  return -1;
}
