/* SPDX-License-Identifier: MIT */
/* daemon/sandbox/sandbox_landlock.c: the file-system (and TCP, and scope)
 * restriction of sandbox_enter(), with the Landlock system calls called
 * directly (no library; Debian 12's <linux/landlock.h> knows only ABI 2,
 * so the newer structures and flags are defined here).
 *
 * Every right that the running kernel's ABI knows is "handled", that is
 * denied unless a rule grants it beneath a path: ABI 1 the file rights,
 * 2 REFER, 3 TRUNCATE, 4 TCP bind/connect (no rule ever grants them), 5
 * IOCTL_DEV, 6 the scopes (abstract unix sockets, signals). ABI 7 adds
 * only logging flags, nothing to handle. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hipd.h"
#include "sandbox_internal.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* struct landlock_ruleset_attr as of ABI 6; an older kernel accepts it as
 * long as the fields it does not know are zero. */
typedef struct {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
} ll_ruleset_attr_t;

typedef struct {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed)) ll_path_beneath_t;

#define LL_CREATE_RULESET_VERSION (1u << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ull << 0)
#define LL_FS_WRITE_FILE (1ull << 1)
#define LL_FS_READ_FILE (1ull << 2)
#define LL_FS_READ_DIR (1ull << 3)
#define LL_FS_REMOVE_DIR (1ull << 4)
#define LL_FS_REMOVE_FILE (1ull << 5)
#define LL_FS_MAKE_CHAR (1ull << 6)
#define LL_FS_MAKE_DIR (1ull << 7)
#define LL_FS_MAKE_REG (1ull << 8)
#define LL_FS_MAKE_SOCK (1ull << 9)
#define LL_FS_MAKE_FIFO (1ull << 10)
#define LL_FS_MAKE_BLOCK (1ull << 11)
#define LL_FS_MAKE_SYM (1ull << 12)
#define LL_FS_REFER (1ull << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ull << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ull << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (1ull << 0)  /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ull << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ull << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ull << 1)

/* The rights that apply to a file that is not a directory. */
#define LL_FS_FILE_RIGHTS                                                      \
  (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE |       \
   LL_FS_IOCTL_DEV)

int sandbox_landlock_abi(void)
{
  long v =
      syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
  return v > 0 ? (int)v : 0;
}

/* The file rights the kernel's ABI @p abi knows. */
static uint64_t fs_handled(int abi)
{
  uint64_t a = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

  if (abi >= 2)
    a |= LL_FS_REFER;
  if (abi >= 3)
    a |= LL_FS_TRUNCATE;
  if (abi >= 5)
    a |= LL_FS_IOCTL_DEV;
  return a;
}

/* SANDBOX_FS_* to Landlock rights. */
static uint64_t fs_rights(unsigned access)
{
  uint64_t a = 0;

  if (access & SANDBOX_FS_READ)
    a |= LL_FS_READ_FILE | LL_FS_READ_DIR;
  if (access & SANDBOX_FS_EXEC)
    a |= LL_FS_EXECUTE;
  if (access & SANDBOX_FS_WRITE)
    a |= LL_FS_WRITE_FILE | LL_FS_TRUNCATE | LL_FS_REMOVE_DIR |
         LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_MAKE_SOCK |
         LL_FS_MAKE_FIFO | LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_IOCTL_DEV;
  return a;
}

int sandbox_landlock_apply(const sandbox_spec_t *spec, char *why, size_t whysz,
                           hipd_err_t *err)
{
  int abi = sandbox_landlock_abi();
  ll_ruleset_attr_t attr;
  int rs = -1, rc = 0;

  why[0] = '\0';
  if (abi <= 0) {
    snprintf(why, whysz, "landlock: not %s by the kernel",
             errno == EOPNOTSUPP ? "enabled" : "supported");
    return 1;
  }
  memset(&attr, 0, sizeof(attr));
  attr.handled_access_fs = fs_handled(abi);
  if (abi >= 4)
    attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP;
  if (abi >= 6 && spec->landlock_scope)
    attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL;
  rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
  if (rs < 0)
    return err_set(err, HIPD_EPERM, "landlock_create_ruleset (abi %d): %s", abi,
                   strerror(errno));
  for (size_t i = 0; i < spec->npaths; i++) {
    const sandbox_path_t *p = &spec->paths[i];
    ll_path_beneath_t pb;
    struct stat st;
    int fd = open(p->path, O_PATH | O_CLOEXEC);

    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR)
        continue; /* nothing there to grant */
      rc = err_set(err, HIPD_EIO, "landlock: cannot open %s: %s", p->path,
                   strerror(errno));
      goto fail;
    }
    pb.allowed_access = fs_rights(p->access) & attr.handled_access_fs;
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
      pb.allowed_access &= LL_FS_FILE_RIGHTS;
    pb.parent_fd = fd;
    if (pb.allowed_access != 0 &&
        syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &pb, 0) != 0) {
      rc = err_set(err, HIPD_EPERM, "landlock_add_rule %s: %s", p->path,
                   strerror(errno));
      close(fd);
      goto fail;
    }
    close(fd);
  }
  if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) {
    rc =
        err_set(err, HIPD_EPERM, "landlock_restrict_self: %s", strerror(errno));
    goto fail;
  }
  close(rs);
  return 0;

fail:
  close(rs);
  return rc;
}
