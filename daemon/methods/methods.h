/* daemon/methods/methods.h: the handlers, one file per method family. The
 * table that names them is in dispatch.c. */
#ifndef HIPD_METHODS_H
#define HIPD_METHODS_H

#include "dispatch.h"

/* core.c: handshake and daemon/session introspection */
int m_hello(call_t *c);
int m_ping(call_t *c);
int m_daemon_info(call_t *c);
int m_session_info(call_t *c);

#endif
