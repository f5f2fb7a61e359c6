/* SPDX-License-Identifier: MIT */
/* daemon/util/who_list.h: the one list of users and groups.
 *
 * The options that name people take a comma list of them: --allow-users
 * (users and uids), --allow-groups (groups and gids), --device-allow's
 * LIST and --mps-tenants (users, uids, and @groups and @gids). A list is
 * parsed once, its names resolved then through the account lookup
 * (account.h), and matched afterwards against a peer's uid and groups
 * without reading the user database again. Who calls it: policy.c for its
 * rules, privsep/mps.c for --mps-tenants. Not thread-safe on one list;
 * lists are independent. */
#ifndef HIPD_UTIL_WHO_LIST_H
#define HIPD_UTIL_WHO_LIST_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* What the words of a list name. */
typedef enum {
  WHO_USERS,  /* users and uids ("@" is part of a name) */
  WHO_GROUPS, /* groups and gids (a leading "@" is allowed) */
  WHO_MIXED,  /* users and uids; "@name" and "@gid" are groups */
} who_kind_t;

typedef struct {
  int group;   /* a gid, else a uid */
  uint32_t id; /* the uid or gid */
} who_entry_t;

/* Zero-initialised, a list is empty and matches nobody. */
typedef struct {
  who_entry_t *e;  /* the entries, in the order of the words */
  uint32_t n, cap; /* entries used and allocated */
  int groups;      /* an entry is a group: matching needs the groups */
} who_list_t;

/* Append the words of comma list @p text, of @p kind, to @p l: a word of
 * digits is a uid or gid as it is, a name is resolved now. Empty words are
 * skipped. @p opt names the option in messages ("--mps-tenants").
 * @return 0; HIPD_EINVAL with @p err saying "OPT: an empty list" (@p text
 * is ""), "OPT: no user 'NAME'" or "OPT: no group 'NAME'"; or HIPD_ENOMEM
 * with @p err untouched. On error the words before the bad one stay
 * appended: the caller drops the list. */
int who_list_parse(who_list_t *l, const char *opt, const char *text,
                   who_kind_t kind, hipd_err_t *err);

/* Does @p l name @p uid, or one of the @p ngids groups in @p gids?
 * @return 1 or 0. */
int who_list_match(const who_list_t *l, uid_t uid, const gid_t *gids,
                   int ngids);

/* Free @p l's entries and empty it (it may be parsed into again). */
void who_list_free(who_list_t *l);

#endif
