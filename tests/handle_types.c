/* SPDX-License-Identifier: MIT */
/* tests/handle_types.c: compiled by tests/check_handle_types.sh against
 * <hipd.h> as installed. As it stands it must compile (warning-free); with
 * -DHANDLE_TYPES_WRONG it passes a stream where a buffer is needed, which
 * must not compile: the handle types of <hipd.h> are distinct. Only
 * compiled (-fsyntax-only), never linked or run. */
#include <hipd.h>
#include <inttypes.h>
#include <stdio.h>

int handle_types_use(hipd_conn_t *conn);

int handle_types_use(hipd_conn_t *conn)
{
  hipd_stream_t stream = HIPD_STREAM_NULL;
  hipd_buffer_t buf = HIPD_BUFFER_NULL;
  hipd_event_t ev = {0};
  hipd_kernel_t k = HIPD_KERNEL_NULL;
  int rc;

  rc = hipd_stream_create(conn, 0, &stream);
  if (rc == 0)
    rc = hipd_mem_alloc(conn, 0, 16, "byte", &buf);
  printf("stream %" PRIu64 " buffer %" PRIu64 " event %" PRIu64
         " kernel %" PRIu64 "\n",
         hipd_stream_id(stream), hipd_buffer_id(buf), hipd_event_id(ev),
         hipd_kernel_id(k));
  if (rc == 0)
#ifdef HANDLE_TYPES_WRONG
    rc = hipd_mem_free(conn, stream); /* HANDLE_TYPES_WRONG_LINE */
#else
    rc = hipd_mem_free(conn, buf);
#endif
  if (hipd_buffer_id(hipd_buffer_from_id(7)) != 7)
    rc = HIPD_EINVAL;
  return rc;
}
