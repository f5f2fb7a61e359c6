/* SPDX-License-Identifier: MIT */
/* daemon/server.c: the listening socket: stale-file handling, permissions,
 * accepting connections into sessions. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hipd.h"
#include "log.h"
#include "server.h"
#include "transport.h"

struct server {
  uv_pipe_t pipe; /* pipe.data = daemon */
  int closed;
  int own_file; /* we created the socket file and remove it at exit */
  dev_t dev;    /* identity of the file we created */
  ino_t ino;
};

char *server_default_path(void)
{
  const char *env = getenv("HIPD_SOCKET");
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  char buf[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];

  if (env != NULL && env[0] != '\0')
    return strdup(env);
  if (geteuid() == 0)
    return strdup("/run/hipd/hipd.sock");
  if (xdg != NULL && xdg[0] != '\0')
    snprintf(buf, sizeof(buf), "%s/hipd.sock", xdg);
  else
    snprintf(buf, sizeof(buf), "/run/user/%u/hipd.sock", (unsigned)geteuid());
  return strdup(buf);
}

static void connection_cb(uv_stream_t *stream, int status)
{
  daemon_t *d = stream->data;

  if (status < 0) {
    log_warn(0, "listen error: %s", uv_strerror(status));
    return;
  }
  d->accept(d, stream);
}

/* Is a daemon answering on @p path? 1 yes, 0 no (refused), <0 error. */
static int socket_alive(const char *path)
{
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd, rc;

  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
  rc = rc == 0 ? 1 : (errno == ECONNREFUSED ? 0 : -errno);
  close(fd);
  return rc;
}

/* Make way for our socket at @p path: 0 when the path is free. */
static int clear_stale(const char *path)
{
  struct stat st;
  int alive;

  if (lstat(path, &st) != 0)
    return errno == ENOENT ? 0 : HIPD_EIO;
  if (!S_ISSOCK(st.st_mode)) {
    log_error(0, "%s exists and is not a socket; not removing it", path);
    return HIPD_EEXIST;
  }
  alive = socket_alive(path);
  if (alive == 1) {
    log_error(0, "another daemon is listening on %s", path);
    return HIPD_EEXIST;
  }
  if (alive < 0) {
    log_error(0, "cannot probe %s: %s", path, strerror(-alive));
    return HIPD_EIO;
  }
  log_info(0, "removing stale socket %s", path);
  if (unlink(path) != 0 && errno != ENOENT) {
    log_error(0, "cannot remove stale socket %s: %s", path, strerror(errno));
    return HIPD_EIO;
  }
  return 0;
}

int server_start(daemon_t *d)
{
  server_t *srv = calloc(1, sizeof(*srv));
  const char *path = d->cfg.socket_path;
  struct stat st;
  mode_t old_umask;
  int rc;

  if (srv == NULL)
    return HIPD_ENOMEM;
  d->server = srv;
  uv_pipe_init(d->loop, &srv->pipe, 0);
  srv->pipe.data = d;

  if (d->cfg.listen_fd >= 0) {
    rc = uv_pipe_open(&srv->pipe, d->cfg.listen_fd);
    if (rc < 0) {
      log_error(0, "cannot use inherited socket fd %d: %s", d->cfg.listen_fd,
                uv_strerror(rc));
      return HIPD_EIO;
    }
    char name[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
    size_t nlen = sizeof(name);
    if (uv_pipe_getsockname(&srv->pipe, name, &nlen) == 0 && nlen > 0) {
      free(d->cfg.socket_path);
      d->cfg.socket_path = strdup(name);
    }
    log_info(0, "listening on inherited socket %s (fd %d)", d->cfg.socket_path,
             d->cfg.listen_fd);
    /* After an in-place restart the socket file is still ours. */
    if (getenv("HIPD_OWNS_SOCKET") != NULL &&
        stat(d->cfg.socket_path, &st) == 0) {
      srv->own_file = 1;
      srv->dev = st.st_dev;
      srv->ino = st.st_ino;
    }
    unsetenv("HIPD_OWNS_SOCKET");
    goto listen;
  }

  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
    log_error(0, "socket path is too long (%zu bytes): %s", strlen(path), path);
    return HIPD_EINVAL;
  }
  if ((rc = clear_stale(path)) != 0)
    return rc;
  /* Bind with owner-only permissions, then widen to the configured mode:
   * no moment where the socket is open to more than it should be. The
   * socket is made here rather than by uv_pipe_bind() so that libuv does
   * not unlink the file when the handle closes: the file's life is ours
   * (an in-place restart keeps it). */
  {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    old_umask = umask(0177);
    rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old_umask);
    if (rc != 0) {
      log_error(0, "cannot bind %s: %s", path, strerror(errno));
      if (fd >= 0)
        close(fd);
      return HIPD_EIO;
    }
    rc = uv_pipe_open(&srv->pipe, fd);
    if (rc < 0) {
      log_error(0, "cannot use the socket of %s: %s", path, uv_strerror(rc));
      close(fd);
      unlink(path);
      return HIPD_EIO;
    }
  }
  if (chmod(path, d->cfg.socket_mode) != 0) {
    log_error(0, "cannot set mode %04o on %s: %s", d->cfg.socket_mode, path,
              strerror(errno));
    unlink(path);
    return HIPD_EIO;
  }
  if (stat(path, &st) == 0) {
    srv->own_file = 1;
    srv->dev = st.st_dev;
    srv->ino = st.st_ino;
  }
  log_info(0, "listening on %s (mode %04o)", path, d->cfg.socket_mode);

listen:
  rc = uv_listen((uv_stream_t *)&srv->pipe, 128, connection_cb);
  if (rc < 0) {
    log_error(0, "cannot listen: %s", uv_strerror(rc));
    return HIPD_EIO;
  }
  return 0;
}

static void free_cb(uv_handle_t *h)
{
  free(list_entry(h, server_t, pipe));
}

int server_dup_listener(daemon_t *d)
{
  uv_os_fd_t fd;

  if (d->server == NULL || uv_fileno((uv_handle_t *)&d->server->pipe, &fd))
    return -1;
  return dup(fd); /* dup() leaves close-on-exec off */
}

void server_stop(daemon_t *d, int keep_file)
{
  server_t *srv = d->server;
  struct stat st;

  if (srv == NULL || srv->closed)
    return;
  srv->closed = 1;
  /* Remove the file only if it is still the socket we created. */
  if (!keep_file && srv->own_file && stat(d->cfg.socket_path, &st) == 0 &&
      st.st_dev == srv->dev && st.st_ino == srv->ino)
    unlink(d->cfg.socket_path);
  uv_close((uv_handle_t *)&srv->pipe, free_cb);
  d->server = NULL;
}
