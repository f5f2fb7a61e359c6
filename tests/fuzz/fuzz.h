/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz.h: what the fuzz targets share.
 *
 * Each target defines LLVMFuzzerTestOneInput() (and may define
 * LLVMFuzzerInitialize()). Built with --enable-fuzzing it links libFuzzer;
 * otherwise with replay.c, whose main() runs every file of the target's
 * seed corpus through the same entry point (FUZZ_REPLAY is then 1).
 *
 * A property that does not hold is reported on stderr and abort()s: libFuzzer
 * then saves the input as a crash file, and a replay test fails.
 */
#ifndef HIPD_TESTS_FUZZ_H
#define HIPD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_REPLAY
#define FUZZ_REPLAY 0
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__,      \
              #cond);                                                          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#endif
