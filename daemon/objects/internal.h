/* SPDX-License-Identifier: MIT */
/* daemon/objects/internal.h: what the object layer's files share and
 * nobody else uses: event marks, made by event.c and placed by op.c. */
#ifndef HIPD_OBJECTS_INTERNAL_H
#define HIPD_OBJECTS_INTERNAL_H

#include "objects/objects.h"

/* A mark for a record of @p ev about to be queued: the event becomes
 * pending and the mark, holding a reference, completes it (if no later
 * record came) once passed. NULL when out of memory (nothing changed). */
obj_task_t *event_mark_new(event_t *ev);
/* A driver's stream_notify callback: the stream passed the mark @p arg
 * (an obj_task_t *) with @p status. Any thread. */
void event_mark_reached(void *arg, int status);
/* Record the driver's event of @p ev on driver stream @p drv_stream for
 * record @p seq, unless a later record of the event is there already
 * (another stream reached its mark first): an event follows its latest
 * record (PROTOCOL.md, Events). On the stream's worker. */
int event_record_drv(event_t *ev, void *drv_stream, uint32_t seq);

/* An op's task functions (op.c): run on the stream's executor, or on the
 * loop thread for a launch from the loop (submit.c); done on the loop
 * thread. */
void op_run_task(task_t *t);
void op_done_task(task_t *t);

#endif
