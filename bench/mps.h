/* SPDX-License-Identifier: MIT */
/* bench/mps.h: NVIDIA MPS for the sharing figure's third baseline.
 *
 * A control daemon of our own (nvidia-cuda-mps-control -d) on private
 * pipe and log directories: only processes given mps_env() use it, and it
 * is stopped with "quit" at the end, then waited for. The GPU's compute
 * mode and other settings are never touched.
 */
#ifndef HIPD_BENCH_MPS_H
#define HIPD_BENCH_MPS_H

#include <stddef.h>

/* Is nvidia-cuda-mps-control on PATH? @return 0 if so. */
int mps_find(void);
/* Start a control daemon with its directories under @p dir, and wait until
 * it answers. @return 0, or -1 with the reason in @p err (mps_stop() then
 * cleans up whatever started). */
int mps_start(const char *dir, char *err, size_t errsz);
/* The environment of its clients: NULL-ended "NAME=value" strings. */
const char *const *mps_env(void);
/* Does the control daemon name a server now (are clients on MPS)? */
int mps_has_server(void);
/* Is a control daemon of ours (maybe) running? */
int mps_active(void);
/* Quit it and wait until its processes are gone; kill what is left after
 * 30 s. */
void mps_stop(void);
/* The same in a signal handler: "quit", waited for 20 s at most.
 * Async-signal-safe. */
void mps_quit_now(void);

#endif
