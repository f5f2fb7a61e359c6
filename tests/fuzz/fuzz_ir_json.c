/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_ir_json.c: the JSON reader of hipd-ir (tools/ir_json.c),
 * JSON text -> msgpack.
 *
 * Properties: the answer is deterministic; on success the output is exactly
 * one complete msgpack object (the frame scanner and msgpack-c agree on its
 * size, with nothing after it); on failure the message is a non-empty
 * string.
 */
#include "config.h"

#include <string.h>

#include "fuzz.h"
#include "ir_json.h"
#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  msgpack_sbuffer a, b;
  char ea[300] = "", eb[300] = "";
  char *text = malloc(size + 1);
  int ra, rb;

  FUZZ_CHECK(text != NULL, "out of memory");
  memcpy(text, data, size);
  text[size] = '\0';
  msgpack_sbuffer_init(&a);
  msgpack_sbuffer_init(&b);
  ra = ir_json_to_msgpack(text, size, &a, ea, sizeof(ea));
  rb = ir_json_to_msgpack(text, size, &b, eb, sizeof(eb));
  FUZZ_CHECK(ra == rb, "converted %d then %d", ra, rb);
  if (ra != 0) {
    FUZZ_CHECK(ea[0] != '\0' && strcmp(ea, eb) == 0, "errors '%s' '%s'", ea,
               eb);
  } else {
    proto_limits_t lim = {.max_message = a.size,
                          .max_depth = PROTO_DEPTH_CAP,
                          .max_array = UINT32_MAX,
                          .max_map = UINT32_MAX,
                          .max_objects = UINT32_MAX};
    const char *reason = NULL;
    size_t need = 0, off = 0;
    long long r;

    FUZZ_CHECK(a.size == b.size && memcmp(a.data, b.data, a.size) == 0,
               "the same text converted differently");
    r = proto_frame_scan(&lim, (const uint8_t *)a.data, a.size, &need, &reason);
    /* JSON may nest up to 1000 deep (ir_json.c); the scanner, like
     * msgpack-c, reads PROTO_DEPTH_CAP levels: deeper output is checked
     * only that far (the IR decoder refuses it on its own limits). */
    if (r == HIPD_EPROTO && reason != NULL && strstr(reason, "deeper") != NULL)
      goto done;
    FUZZ_CHECK(r == (long long)a.size,
               "the output (%zu bytes) scans as %lld (%s)", a.size, r,
               reason ? reason : "");
    msgpack_zone zone;
    msgpack_object o;
    FUZZ_CHECK(msgpack_zone_init(&zone, 1024), "out of memory");
    FUZZ_CHECK(msgpack_unpack(a.data, a.size, &off, &zone, &o) ==
                       MSGPACK_UNPACK_SUCCESS &&
                   off == a.size,
               "msgpack-c cannot read the output");
    msgpack_zone_destroy(&zone);
  }
done:
  msgpack_sbuffer_destroy(&a);
  msgpack_sbuffer_destroy(&b);
  free(text);
  return 0;
}
