/* SPDX-License-Identifier: MIT */
/* daemon/admin/who.h: who a uid is (who.c): its user name, cached with
 * with its admin bit. admin.h includes it. */
#ifndef HIPD_ADMIN_WHO_H
#define HIPD_ADMIN_WHO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon.h"

/* Resolve --admin-group (a warning if it does not exist) and forget the
 * cached names and admin bits: at start and after each reload. */
void admin_configure(daemon_t *d);

/* Is @p uid an admin (root, or a member of --admin-group)? The answer,
 * and the user names views show, are cached per uid for 60 s. */
int admin_is_admin(daemon_t *d, uid_t uid);

/* The user name of @p uid ("" when unknown), cached. */
void admin_user_name(daemon_t *d, uint64_t uid, char *out, size_t size);
/* "uid 0 (root)", or "uid 1234" when the name is unknown, cached. */
void admin_uid_who(daemon_t *d, uid_t uid, char *out, size_t size);

#endif
