/* SPDX-License-Identifier: MIT */
/* daemon/util/who_list.c: lists of users and groups (who_list.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "array.h"
#include "hipd.h"
#include "parse.h"
#include "who_list.h"

int who_list_parse(who_list_t *l, const char *opt, const char *text,
                   who_kind_t kind, hipd_err_t *err)
{
  char *copy = strdup(text), *save = NULL, *tok;
  int rc = 0;

  if (copy == NULL)
    return HIPD_ENOMEM;
  if (text[0] == '\0')
    rc = err_set(err, HIPD_EINVAL, "%s: an empty list", opt);
  for (tok = strtok_r(copy, ",", &save); rc == 0 && tok != NULL;
       tok = strtok_r(NULL, ",", &save)) {
    who_entry_t e = {.group = kind == WHO_GROUPS};
    if (kind != WHO_USERS && tok[0] == '@') {
      e.group = 1;
      tok++;
    }
    if (e.group) {
      gid_t g;
      if (!util_parse_id(tok, &e.id)) {
        if (account_group_by_name(tok, &g, NULL) != 0) {
          rc = err_set(err, HIPD_EINVAL, "%s: no group '%s'", opt, tok);
          break;
        }
        e.id = (uint32_t)g;
      }
    } else if (!util_parse_id(tok, &e.id)) {
      account_t a;
      if (account_by_name(tok, &a, NULL) != 0) {
        rc = err_set(err, HIPD_EINVAL, "%s: no user '%s'", opt, tok);
        break;
      }
      e.id = (uint32_t)a.uid;
    }
    if ((rc = ARRAY_GROW(l->e, l->n, l->cap, 4)) != 0)
      break;
    l->e[l->n++] = e;
    l->groups |= e.group;
  }
  free(copy);
  return rc;
}

int who_list_match(const who_list_t *l, uid_t uid, const gid_t *gids, int ngids)
{
  for (uint32_t i = 0; i < l->n; i++) {
    if (!l->e[i].group && l->e[i].id == (uint32_t)uid)
      return 1;
    for (int j = 0; l->e[i].group && j < ngids; j++)
      if (l->e[i].id == (uint32_t)gids[j])
        return 1;
  }
  return 0;
}

void who_list_free(who_list_t *l)
{
  free(l->e);
  *l = (who_list_t){0};
}
