/* daemon/drivers/cpu.h: settings of the CPU device driver. */
#ifndef HIPD_DRIVERS_CPU_H
#define HIPD_DRIVERS_CPU_H

/* How many CPU devices to serve (default 1); call before init. Several
 * CPU devices share the host; they exist to exercise multi-device code
 * without GPUs. */
void cpu_driver_set_count(int n);

#endif
