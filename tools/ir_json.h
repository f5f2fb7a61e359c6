/* SPDX-License-Identifier: MIT */
/* tools/ir_json.h: JSON text -> msgpack, for the JSON form of the IR
 * (proto/IR.md) in tools and test fixtures.
 *
 * The conversion is structural, as IR.md's "JSON equivalence" states it:
 * object -> map, array -> array, string -> str, null -> nil, true/false ->
 * bool, a number without fraction or exponent -> int (exactly, all 64
 * bits), any other number -> float 64. It knows nothing of the IR: the
 * daemon's decoder checks the result. Strict RFC 8259 JSON: one value,
 * whitespace around it, no comments, no trailing commas.
 */
#ifndef HIPD_TOOLS_IR_JSON_H
#define HIPD_TOOLS_IR_JSON_H

#include <msgpack.h>
#include <stddef.h>

/* Append the msgpack form of JSON text @p text[0, len) to @p out.
 * @return 0, or -1 with a message naming the line and column in @p err. */
int ir_json_to_msgpack(const char *text, size_t len, msgpack_sbuffer *out,
                       char *err, size_t errsz);

/* Append the msgpack form of the value of member @p key of the top-level
 * object of JSON text @p text[0, len) to @p out (fixture annotations such
 * as "_soa_params"). @return 1 if found, 0 if there is no such member, or
 * -1 (the text is not JSON, or not an object) with @p err set. */
int ir_json_member(const char *text, size_t len, const char *key,
                   msgpack_sbuffer *out, char *err, size_t errsz);

/* Read the whole file @p path (malloc'd, NUL-terminated; *len its size).
 * @return NULL with errno set on failure. */
char *ir_json_read_file(const char *path, size_t *len);

#endif
