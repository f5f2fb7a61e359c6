/* SPDX-License-Identifier: MIT */
/* tests/sandbox_worker_cuda.c: the device worker's seccomp profile
 * against the CUDA driver (not built by make; for a GPU machine):
 * enter the WORKER profile (mode 1; mode 2 also as uid 65534; mode 0 no
 * filter), then init CUDA, pin host memory, allocate, copy, JIT a PTX
 * kernel, launch and check. Calls the profile denies trap: they are
 * counted and printed, and fail with EPERM as under the real profile.
 * Build (in a configured _build):
 *   gcc -O1 -I../daemon -I../client ../tests/sandbox_worker_cuda.c \
 *     .libs/libhipdsandbox.a .libs/libhipdutil.a \
 *     -Wl,-Bstatic -lseccomp -Wl,-Bdynamic -ldl -o worker_cuda
 *   ./worker_cuda 0; ./worker_cuda 1; ./worker_cuda 2 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_internal.h"

static volatile int denied[1024];
static void on_sys(int sig, siginfo_t *si, void *uc_)
{
  ucontext_t *uc = uc_;
  (void)sig;
  if (si->si_syscall >= 0 && si->si_syscall < 1024) denied[si->si_syscall]++;
  uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

typedef int CUresult; typedef int CUdevice; typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;
static const char ptx[] =
".version 7.0\n.target sm_52\n.address_size 64\n"
".visible .entry add1(.param .u64 p, .param .u32 n){\n"
" .reg .u32 %r<6>; .reg .u64 %rd<5>; .reg .f32 %f<3>; .reg .pred %p;\n"
" ld.param.u64 %rd1,[p]; ld.param.u32 %r1,[n];\n"
" mov.u32 %r2,%ctaid.x; mov.u32 %r3,%ntid.x; mov.u32 %r4,%tid.x; mad.lo.u32 %r5,%r2,%r3,%r4;\n"
" setp.ge.u32 %p,%r5,%r1; @%p bra DONE;\n"
" cvta.to.global.u64 %rd2,%rd1; mul.wide.u32 %rd3,%r5,4; add.u64 %rd4,%rd2,%rd3;\n"
" ld.global.f32 %f1,[%rd4]; add.f32 %f2,%f1,0f3F800000; st.global.f32 [%rd4],%f2;\n"
"DONE: ret; }\n";

#define CK(x) do { CUresult r_ = (x); if (r_) { printf("%s -> %d\n", #x, r_); goto report; } } while (0)
int main(int argc, char **argv)
{
  int mode = argc > 1 ? atoi(argv[1]) : 1; /* 0: no filter, 1: worker, 2: worker as nobody */
  struct sigaction sa = {0};
  sa.sa_sigaction = on_sys; sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSYS, &sa, NULL);
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) { printf("no libcuda: %s\n", dlerror()); return 2; }
  CUresult (*cuInit)(unsigned) = dlsym(lib, "cuInit");
  CUresult (*cuDeviceGet)(CUdevice *, int) = dlsym(lib, "cuDeviceGet");
  CUresult (*cuCtxCreate)(CUcontext *, unsigned, CUdevice) = dlsym(lib, "cuCtxCreate_v2");
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = dlsym(lib, "cuMemAlloc_v2");
  CUresult (*cuMemAllocHost)(void **, size_t) = dlsym(lib, "cuMemAllocHost_v2");
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t) = dlsym(lib, "cuMemcpyHtoD_v2");
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t) = dlsym(lib, "cuMemcpyDtoH_v2");
  CUresult (*cuModuleLoadData)(CUmodule *, const void *) = dlsym(lib, "cuModuleLoadData");
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) = dlsym(lib, "cuModuleGetFunction");
  CUresult (*cuStreamCreate)(CUstream *, unsigned) = dlsym(lib, "cuStreamCreate");
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **) = dlsym(lib, "cuLaunchKernel");
  CUresult (*cuStreamSynchronize)(CUstream) = dlsym(lib, "cuStreamSynchronize");
  if (mode > 0) {
    sandbox_spec_t s; hipd_err_t e;
    sandbox_spec_init(&s);
    if (mode == 2) { s.change_ids = 1; s.uid = 65534; s.gid = 65534; }
    s.no_dumpable = 1;
    if (sandbox_enter(&s, &e)) { printf("enter: %s\n", e.msg); return 1; }
    if (sandbox_seccomp_apply_default(SANDBOX_PROFILE_WORKER, SCMP_ACT_TRAP, &e)) { printf("seccomp: %s\n", e.msg); return 1; }
  }
  enum { N = 1 << 20 };
  CUdevice dev; CUcontext ctx; CUdeviceptr d; float *h; CUmodule m; CUfunction f; CUstream st;
  CK(cuInit(0)); CK(cuDeviceGet(&dev, 0)); CK(cuCtxCreate(&ctx, 0, dev));
  CK(cuMemAllocHost((void **)&h, N * 4));
  for (int i = 0; i < N; i++) h[i] = i;
  CK(cuMemAlloc(&d, N * 4)); CK(cuMemcpyHtoD(d, h, N * 4));
  CK(cuModuleLoadData(&m, ptx)); CK(cuModuleGetFunction(&f, m, "add1"));
  CK(cuStreamCreate(&st, 0));
  { unsigned n = N; void *args[] = {&d, &n};
    CK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, st, args, NULL)); }
  CK(cuStreamSynchronize(st)); CK(cuMemcpyDtoH(h, d, N * 4));
  { int bad = 0; for (int i = 0; i < N; i++) bad += h[i] != i + 1; printf("mode %d: result %s (%d wrong)\n", mode, bad ? "WRONG" : "ok", bad); }
report:
  for (int i = 0; i < 1024; i++) if (denied[i]) { char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, i); printf("  denied %s (%d) x%d\n", n ? n : "?", i, denied[i]); free(n); }
  return 0;
}
