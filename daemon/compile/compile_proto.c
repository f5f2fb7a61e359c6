/* SPDX-License-Identifier: MIT */
/* daemon/compile/compile_proto.c: the daemon-helper wire (compile_proto.h),
 * linked by both sides. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compile/compile_proto.h"
#include "hipd.h"
#include "util/clock.h"

const char *cp_fsview_name(uint32_t v)
{
  switch (v) {
  case CP_FSVIEW_MOUNTNS:
    return "mount namespace";
  case CP_FSVIEW_LANDLOCK:
    return "landlock";
  default:
    return "none";
  }
}

/* ------------------------------------------------------------ building */

uint32_t cp_us(uint64_t ns)
{
  return ns / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(ns / 1000);
}

void cp_put_u32(strbuf_t *b, uint32_t v)
{
  strbuf_addn(b, (const char *)&v, sizeof(v));
}

void cp_put_blob(strbuf_t *b, const void *data, size_t len)
{
  if (len > UINT32_MAX) {
    b->over = 1;
    return;
  }
  cp_put_u32(b, (uint32_t)len);
  if (len > 0)
    strbuf_addn(b, data, len);
}

void cp_put_str(strbuf_t *b, const char *s)
{
  cp_put_blob(b, s ? s : "", s ? strlen(s) : 0);
}

/* ------------------------------------------------------------- reading */

int cp_get_u32(cp_rd_t *r, uint32_t *v)
{
  if (r->bad || r->len - r->off < sizeof(*v)) {
    r->bad = 1;
    return HIPD_EPROTO;
  }
  memcpy(v, r->p + r->off, sizeof(*v));
  r->off += sizeof(*v);
  return 0;
}

int cp_get_blob(cp_rd_t *r, uint32_t max, const void **p, uint32_t *n)
{
  uint32_t len;

  if (cp_get_u32(r, &len) != 0)
    return HIPD_EPROTO;
  if (len > max || r->len - r->off < len) {
    r->bad = 1;
    return HIPD_EPROTO;
  }
  *p = r->p + r->off;
  *n = len;
  r->off += len;
  return 0;
}

int cp_get_str(cp_rd_t *r, uint32_t max, const char **s, uint32_t *n)
{
  const void *p;

  if (cp_get_blob(r, max, &p, n) != 0)
    return HIPD_EPROTO;
  if (memchr(p, '\0', *n) != NULL) {
    r->bad = 1;
    return HIPD_EPROTO;
  }
  *s = p;
  return 0;
}

int cp_get_strdup(cp_rd_t *r, uint32_t max, char **out)
{
  const char *s;
  uint32_t n;

  *out = NULL;
  if (cp_get_str(r, max, &s, &n) != 0)
    return HIPD_EPROTO;
  if ((*out = malloc((size_t)n + 1)) == NULL) {
    r->bad = 1;
    return HIPD_ENOMEM;
  }
  memcpy(*out, s, n);
  (*out)[n] = '\0';
  return 0;
}

int cp_rd_end(const cp_rd_t *r)
{
  return !r->bad && r->off == r->len ? 0 : HIPD_EPROTO;
}

/* ------------------------------------------------------------ messages */

static int send_all(int fd, const void *data, size_t len)
{
  const unsigned char *p = data;

  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int cp_send(int fd, uint32_t op, int32_t status, const void *payload,
            size_t len)
{
  cp_hdr_t h = {.magic = CP_MAGIC, .op = op, .status = status};

  if (len > cp_max_payload(op)) {
    errno = EMSGSIZE;
    return -1;
  }
  h.len = (uint32_t)len;
  if (send_all(fd, &h, sizeof(h)) != 0)
    return -1;
  return len ? send_all(fd, payload, len) : 0;
}

/* Read exactly @p len bytes before @p deadline_ms (0: none). */
static int recv_all(int fd, void *data, size_t len, uint64_t deadline_ms)
{
  unsigned char *p = data;

  while (len > 0) {
    ssize_t n;

    if (deadline_ms != 0) {
      struct pollfd pfd = {.fd = fd, .events = POLLIN};
      uint64_t now = util_now_ms();
      int pr;

      if (now >= deadline_ms) {
        errno = ETIMEDOUT;
        return -1;
      }
      pr = poll(&pfd, 1,
                deadline_ms - now > 60000 ? 60000 : (int)(deadline_ms - now));
      if (pr < 0 && errno == EINTR)
        continue;
      if (pr < 0)
        return -1;
      if (pr == 0)
        continue;
    }
    n = recv(fd, p, len, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    if (n == 0) {
      errno = ECONNRESET;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int cp_recv(int fd, cp_hdr_t *hdr, unsigned char **payload,
            uint64_t deadline_ms)
{
  unsigned char *buf = NULL;

  *payload = NULL;
  if (recv_all(fd, hdr, sizeof(*hdr), deadline_ms) != 0)
    return -1;
  if (hdr->magic != CP_MAGIC || cp_max_payload(hdr->op) == 0 ||
      hdr->len > cp_max_payload(hdr->op)) {
    errno = EPROTO;
    return -1;
  }
  if (hdr->len > 0) {
    buf = malloc(hdr->len);
    if (buf == NULL) {
      errno = ENOMEM;
      return -1;
    }
    if (recv_all(fd, buf, hdr->len, deadline_ms) != 0) {
      int e = errno;
      free(buf);
      errno = e;
      return -1;
    }
  }
  *payload = buf;
  return 0;
}
