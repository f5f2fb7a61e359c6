/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_compile.h: compile HIP kernel source for the CPU
 * device.
 *
 * The host C++ compiler builds the source as a shared object, C++17, -O2,
 * with hipd_cpu_device.h force-included, after a small source transform
 * (`extern __shared__ T name[];` bound to the worker's dynamic shared
 * memory; `#include <hip/hip_runtime.h>` and the like dropped) and with a
 * tail that exports the signature of every requested kernel
 * (hipd_sig_<name>, see hipd_cpu_device.h). The compiler runs as a child
 * process (posix_spawn, an argument vector, no shell), in its own process
 * group, with a time limit; its diagnostics come back in the log.
 *
 * Blocking: a compile takes from a fraction of a second to many seconds.
 * Call it from a worker thread, never from the event loop. Concurrent calls
 * are safe (each uses its own private temporary directory).
 */
#ifndef HIPD_KERNELS_CPU_COMPILE_H
#define HIPD_KERNELS_CPU_COMPILE_H

#include <stddef.h>

#include "util/err.h"

typedef struct {
  /* The C++ compiler: NULL for the one found once at first use
   * ($HIPD_CXX, else c++, g++, clang++ on $PATH). */
  const char *cxx;
  /* The device header: NULL for $HIPD_CPU_HEADER, else the installed
   * $(pkgdatadir)/hipd_cpu_device.h. */
  const char *header;
  /* Where the private directories go: NULL for $TMPDIR, else /tmp. */
  const char *tmpdir;
  /* The compiler is killed after this many seconds: 0 for 60. */
  unsigned timeout_s;
} cpu_compile_cfg_t;

/**
 * Compile @p source (@p len bytes, no NUL bytes) into a kernel module.
 *
 * @param cfg settings; NULL for the defaults.
 * @param kernel_names the kernels to export: names of __global__ functions
 *        as written in C++ (extern "C" or not; `ns::k` and template
 *        instances such as `scale<float>` work; an overloaded name is a
 *        compile error).
 * @param options compiler options from the client, checked against an
 *        allowlist: -D..., -U..., -O0..-O3, -Os, -Ofast, -ffast-math,
 *        -fno-fast-math, -fno-math-errno, -ffp-contract=..., --fmad=true|false
 *        (as -ffp-contract=fast|off), -funroll-loops,
 *        -std=c++17 or later (c++/gnu++ 17, 20, 23), -g, -g0, -w, -Wall,
 *        -Wextra, -Werror, -march=native, -mtune=native; NVRTC/hiprtc's
 *        --use_fast_math (as -ffast-math) and --std=...; GPU-only options
 *        (--gpu-architecture=, -arch=, --offload-arch=, -rdc=, -lineinfo,
 *        -fgpu-rdc, ...) are accepted and ignored. Anything else, -I
 *        included, is refused.
 * @param so_path_out on success, the module's path (malloc'ed), in a
 *        private directory; release both with cpu_compile_free().
 * @param log the compiler's diagnostics, NUL-terminated, with the private
 *        directory's name removed so that they read "kernel.hip:3:5:
 *        error: ..."; on success any warnings, else "". Truncated to
 *        @p logsz.
 * @return 0; HIPD_EINVAL (bad name, bad option, NUL in the source);
 *         HIPD_ECOMPILE (the compiler failed, timed out or made no
 *         progress: cpu_compile_set_idle_timeout(), an unsupported
 *         dynamic shared memory declaration: see @p log); HIPD_ENOTSUP (no
 *         C++ compiler: kernels cannot be compiled for the CPU device);
 *         HIPD_ENOENT (the device header is missing); HIPD_EIO, HIPD_ENOMEM.
 */
int cpu_compile(const cpu_compile_cfg_t *cfg, const char *source, size_t len,
                const char *const *kernel_names, size_t nkernels,
                const char *const *options, size_t nopts, char **so_path_out,
                char *log, size_t logsz);

/** Remove a module made by cpu_compile() (the file and its private
 *  directory) and free @p so_path. NULL is a no-op. */
void cpu_compile_free(char *so_path);

/** At shutdown: kill every compiler running now (its whole process group)
 *  and refuse to start more (HIPD_ESHUTDOWN). Any thread. @return how many
 *  were killed. */
unsigned cpu_compile_stop_all(void);

/**
 * End a compile whose compiler makes no progress: when the processes of
 * its group (the driver, cc1plus, as, ld) together use no CPU time for
 * @p idle_s seconds, they are killed and the compile fails (HIPD_ECOMPILE,
 * with a log that says so). Process-wide; 0 (the default) turns it off.
 * The processes are found through /proc, opened here and kept open: call
 * it before a sandbox hides /proc (Landlock checks only opens, not the
 * reading of a directory already open), and after a pid namespace's own
 * /proc is in place. Not thread-safe against compiles running.
 * @return 0, or HIPD_EIO with @p err when /proc cannot be opened (then
 *         no compile is ended for that reason).
 */
int cpu_compile_set_idle_timeout(unsigned idle_s, hipd_err_t *err);

/** The C++ compiler found at first use ($HIPD_CXX, else c++, g++, clang++
 *  on $PATH), or NULL if there is none; the daemon may log it at start. */
const char *cpu_compile_compiler(void);

#endif
