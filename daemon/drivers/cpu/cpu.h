/* daemon/drivers/cpu/cpu.h: settings of the CPU device driver. */
#ifndef HIPD_DRIVERS_CPU_H
#define HIPD_DRIVERS_CPU_H

/* How many CPU devices to serve (default 1); call before init. Several
 * CPU devices share the host; they exist to exercise multi-device code
 * without GPUs. */
void cpu_driver_set_count(int n);
/* A kernel launch on the CPU device that runs longer than @p ms (0: no
 * limit) is stopped by restarting the kernel runner: it fails with
 * HIPD_ETIMEDOUT and the device goes on. */
void cpu_driver_set_launch_timeout(unsigned ms);

#endif
