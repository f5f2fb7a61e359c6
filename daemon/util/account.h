/* SPDX-License-Identifier: MIT */
/* daemon/util/account.h: the one account lookup.
 *
 * Users and groups come from NSS (getpwnam_r and friends), whose records
 * have no size bound: a group with many members does not fit a fixed
 * buffer. Every lookup here grows its buffer on ERANGE (up to 16 MiB) and
 * copies what the caller needs out of it, so callers hold no NSS buffer.
 * An account that does not exist is HIPD_ENOENT, a failed lookup HIPD_EIO
 * (both with a message naming the account), out of memory HIPD_ENOMEM.
 * @p err may be NULL where the code is enough. Thread-safe. */
#ifndef HIPD_UTIL_ACCOUNT_H
#define HIPD_UTIL_ACCOUNT_H

#include <sys/types.h>

#include "err.h"

#define ACCOUNT_NAME_MAX 256

typedef struct account {
  uid_t uid;
  gid_t gid;                   /* primary group */
  char name[ACCOUNT_NAME_MAX]; /* user name, NUL-terminated */
} account_t;

/* The user @p name (a name, not a number). */
int account_by_name(const char *name, account_t *a, hipd_err_t *err);
/* The user @p uid. */
int account_by_uid(uid_t uid, account_t *a, hipd_err_t *err);
/* The group @p name: its gid in *@p gid. */
int account_group_by_name(const char *name, gid_t *gid, hipd_err_t *err);
/* The group @p gid's name, copied into @p name (@p size bytes). */
int account_group_name(gid_t gid, char *name, size_t size, hipd_err_t *err);
/* Every group of user @p a, its primary group first: a malloc'd array of
 * *@p n gids in *@p gids (the caller frees it). */
int account_groups(const account_t *a, gid_t **gids, int *n, hipd_err_t *err);

#endif
