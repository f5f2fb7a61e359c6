/* SPDX-License-Identifier: MIT */
/* daemon/privsep/tenant_pages.h: the tenant pages of --isolation session,
 * the listener's side (the layout and the workers' side: tenants.h).
 *
 * With a worker per session, each worker sees one session; the per-uid
 * limits (--tenant-mem-quota, --tenant-max-handles, --tenant-max-streams)
 * need the uid's totals across all of its workers. The listener makes one
 * sealed memfd per uid that has session workers, gives each of them a
 * slot in it (TENANT_PAGE_FD, TENANT_SLOT_ENV), and when a worker is gone
 * takes the counts of its slot back off the totals: a worker that dies
 * holding memory leaves no count behind.
 *
 * Listener only, loop thread. Never reads anything but counts from the
 * page, which the workers can write. */
#ifndef HIPD_PRIVSEP_TENANT_PAGES_H
#define HIPD_PRIVSEP_TENANT_PAGES_H

#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* A slot for a new worker of uid @p uid, on a page of @p nslots slots
 * (made with the uid's first): *@p fd is the page's memfd (the listener
 * keeps it: pass it on, do not close it), *@p slot the worker's.
 * @return 0, HIPD_ETOOMANY when every slot is taken, or an error. */
int tenant_pages_take(uid_t uid, uint32_t nslots, int *fd, uint32_t *slot,
                      hipd_err_t *err);

/* Worker @p slot of uid @p uid is gone: its counts leave the totals, and
 * the page goes with the uid's last slot. */
void tenant_pages_give(uid_t uid, uint32_t slot);

/* Every page, at exit. */
void tenant_pages_free(void);

#endif
