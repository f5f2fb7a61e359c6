/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_proto.h: the wire format between hipd and its CPU
 * kernel runner (hipd-cpu-runner), and the rules both sides check.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET socketpair; the runner's end is the
 * fd named by its --fd=N argument. One request, then one response, strictly
 * alternating; each is one datagram: a fixed header followed by `len` bytes
 * of payload. Both ends are the same build on the same host, so the structs
 * below travel in native byte order and layout (all fields are fixed-width
 * and naturally aligned, with explicit padding).
 *
 *   request:   cpu_req_t  { op, len }          + payload
 *   response:  cpu_resp_t { op, status, len }  + payload
 *
 * A response echoes the op. status is 0 or a negative HIPD_E* code; on
 * failure the payload is a message (UTF-8, not NUL-terminated) naming the
 * problem. The payloads of successful requests and responses:
 *
 *   HELLO   req  cpu_hello_req_t                 resp cpu_hello_resp_t
 *   MAP     req  cpu_map_req_t, and the buffer's memfd attached with
 *                SCM_RIGHTS                      resp (empty)
 *   UNMAP   req  cpu_map_req_t                   resp (empty)
 *   CHUNK   req  cpu_chunk_req_t, and the chunk's memfd attached with
 *                SCM_RIGHTS                      resp (empty)
 *   BMAP    req  cpu_bmap_req_t + count x cpu_bmap_ent_t
 *                                                resp (empty)
 *   BUNMAP  req  cpu_bmap_req_t + count x cpu_bmap_ent_t
 *                                                resp (empty)
 *   LOAD    req  cpu_load_req_t + path bytes, and the module file's
 *                descriptor attached with SCM_RIGHTS (the runner opens
 *                no file; the path is for messages)   resp (empty)
 *   UNLOAD  req  cpu_load_req_t                  resp (empty)
 *   KERNEL  req  cpu_kernel_req_t + name bytes   resp cpu_kernel_resp_t +
 *                                                     nargs type codes
 *   LAUNCH  req  cpu_launch_req_t + nargs x 8-byte cpu_arg_t
 *                                                resp cpu_launch_resp_t +
 *                                                     len bytes printed
 *
 * MAP gives the runner one buffer with a descriptor of its own (host
 * memory a client shares, zero-copy). The CPU device's own buffers live in
 * chunks (drivers/cpu/cpu_arena.h): CHUNK gives the runner a chunk's file
 * once, which it keeps, with the address range the chunk spans (reserved
 * PROT_NONE there, inside --reserve or else taken with
 * MAP_FIXED_NOREPLACE); BMAP then maps buffers of it, each entry the byte
 * range [offset, offset + size) of the file at chunk address + offset
 * (page-aligned), and BUNMAP makes such ranges PROT_NONE again. The daemon
 * keeps buffers apart (guard gaps) and never overlapping; the runner only
 * checks that each range lies in the chunk. A failed entry fails the
 * request; the entries before it stay mapped.
 *
 * Module, kernel and chunk ids are chosen by the daemon (so that they
 * survive a restart of the runner, when the daemon replays CHUNK, BMAP,
 * MAP, LOAD and KERNEL).
 * If the runner dies, the socket reads end-of-file; the daemon learns why
 * from waitpid().
 */
#ifndef HIPD_KERNELS_CPU_PROTO_H
#define HIPD_KERNELS_CPU_PROTO_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIPD_CPU_ABI_ONLY
#include "hipd.h"
#include "hipd_cpu_device.h"

#define CPU_PROTO_VERSION 2
/* Largest datagram either side sends or accepts. */
#define CPU_PROTO_MAX_MSG 65536
/* Most parameters a kernel may declare (CUDA's 4 KiB of parameters hold at
 * most 512 pointers; 256 is plenty in practice). */
#define CPU_MAX_ARGS 256
/* Longest kernel name and module path. */
#define CPU_MAX_NAME 1024
#define CPU_MAX_PATH 4096
/* Most chunks a runner holds (descriptors it keeps). */
#define CPU_MAX_CHUNKS 64

/* Launch limits: those the CPU device reports (drivers/cpu/cpu_driver.c). */
#define CPU_MAX_THREADS_PER_BLOCK 1024u
#define CPU_MAX_BLOCK_X 1024u
#define CPU_MAX_BLOCK_Y 1024u
#define CPU_MAX_BLOCK_Z 64u
#define CPU_MAX_GRID_X 2147483647u
#define CPU_MAX_GRID_Y 65535u
#define CPU_MAX_GRID_Z 65535u
#define CPU_MAX_SHARED_BYTES 65536u

enum {
  CPU_OP_HELLO = 1,
  CPU_OP_MAP,
  CPU_OP_UNMAP,
  CPU_OP_LOAD,
  CPU_OP_UNLOAD,
  CPU_OP_KERNEL,
  CPU_OP_LAUNCH,
  CPU_OP_CHUNK,
  CPU_OP_BMAP,
  CPU_OP_BUNMAP,
};

typedef struct {
  uint32_t op;
  uint32_t len; /* payload bytes after this header */
} cpu_req_t;

typedef struct {
  uint32_t op;
  int32_t status;
  uint32_t len;
  uint32_t pad_;
} cpu_resp_t;

typedef struct {
  uint32_t version; /* CPU_PROTO_VERSION */
  uint32_t pad_;
} cpu_hello_req_t;

typedef struct {
  uint32_t version; /* CPU_PROTO_VERSION */
  uint32_t abi;     /* HIPD_CPU_ABI_VERSION */
  uint32_t workers; /* worker threads it runs blocks on */
  uint32_t pad_;
} cpu_hello_resp_t;

typedef struct {
  uint64_t addr; /* the buffer's address in the daemon */
  uint64_t size; /* bytes */
} cpu_map_req_t;

typedef struct {
  uint32_t id; /* chosen by the daemon */
  uint32_t pad_;
  uint64_t addr; /* the chunk's range in the daemon (page-aligned) */
  uint64_t size; /* bytes (whole pages) */
} cpu_chunk_req_t;

typedef struct {
  uint32_t chunk;
  uint32_t count; /* entries that follow */
} cpu_bmap_req_t;

typedef struct {
  uint64_t offset; /* in the chunk's file and from its address: pages */
  uint64_t size;   /* bytes: whole pages */
} cpu_bmap_ent_t;

/* Most entries one BMAP or BUNMAP datagram carries. */
#define CPU_BMAP_MAX                                                           \
  ((CPU_PROTO_MAX_MSG - sizeof(cpu_req_t) - sizeof(cpu_bmap_req_t)) /          \
   sizeof(cpu_bmap_ent_t))

typedef struct {
  uint32_t module;
  uint32_t pad_;
  /* LOAD: followed by the path of the shared object (for messages) */
} cpu_load_req_t;

typedef struct {
  uint32_t module;
  uint32_t kernel; /* id to give it */
  /* followed by the kernel's name */
} cpu_kernel_req_t;

typedef struct {
  uint32_t nargs;
  uint32_t pad_;
  /* followed by nargs HIPD_CPU_T_* codes */
} cpu_kernel_resp_t;

typedef struct {
  uint32_t kernel;
  uint32_t nargs;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared; /* dynamic shared memory, bytes */
  uint32_t pad_;
  /* followed by nargs cpu_arg_t */
} cpu_launch_req_t;

/* LAUNCH's answer: what the kernel wrote to its standard output and
 * error (a file of the runner's, never the daemon's), at most
 * CPU_LAUNCH_OUTPUT_MAX bytes; what did not fit is counted in dropped. */
typedef struct {
  uint64_t dropped;
  uint32_t len; /* bytes after this header */
  uint32_t pad_;
} cpu_launch_resp_t;
#define CPU_LAUNCH_OUTPUT_MAX 32768u

/* One argument value. The member that holds it follows the declared type:
 * signed integers in .i, unsigned ones and bool (0 or 1) in .u, float in
 * .f32, double in .f64, pointers in .ptr. The runner narrows integers to the
 * declared width. */
typedef union {
  int64_t i;
  uint64_t u;
  float f32;
  double f64;
  uint64_t ptr; /* an address in the daemon (and the runner) */
} cpu_arg_t;

/* A readable name of a HIPD_CPU_T_* code ("int32", "pointer"...). */
static inline const char *cpu_arg_type_name(unsigned t)
{
  static const char *const names[] = {
      "?",      "pointer", "int8",   "uint8", "int16",  "uint16", "int32",
      "uint32", "int64",   "uint64", "float", "double", "bool"};
  return t <= HIPD_CPU_T_MAX_ ? names[t] : "?";
}

/*
 * The exported symbol of kernel @p name's signature function:
 * "hipd_sig_" + name with [A-Za-z0-9] kept, '_' as "__" and any other byte
 * as "_XX" (upper-case hex). Both the compile step (which defines it) and
 * the runner (which looks it up) use this.
 * @return 0, or -1 if @p out (of @p size bytes) is too small.
 */
static inline int cpu_kernel_symbol(const char *name, char *out, size_t size)
{
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  const char *prefix = "hipd_sig_";

  for (const char *p = prefix; *p != '\0'; p++) {
    if (o + 1 >= size)
      return -1;
    out[o++] = *p;
  }
  for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++) {
    unsigned c = *p;
    int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9');
    size_t need = alnum ? 1 : (c == '_' ? 2 : 3);

    if (o + need >= size)
      return -1;
    if (alnum) {
      out[o++] = (char)c;
    } else if (c == '_') {
      out[o++] = '_';
      out[o++] = '_';
    } else {
      out[o++] = '_';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = '\0';
  return 0;
}

/*
 * Check a launch's geometry against the CPU device's limits.
 * @return 0, or HIPD_ELIMIT with @p msg describing the violation.
 */
static inline int cpu_launch_check(const uint32_t grid[3],
                                   const uint32_t block[3], uint32_t shared,
                                   char *msg, size_t msgsz)
{
  static const uint32_t bmax[3] = {CPU_MAX_BLOCK_X, CPU_MAX_BLOCK_Y,
                                   CPU_MAX_BLOCK_Z};
  static const uint32_t gmax[3] = {CPU_MAX_GRID_X, CPU_MAX_GRID_Y,
                                   CPU_MAX_GRID_Z};
  static const char axis[3] = {'x', 'y', 'z'};
  uint64_t threads = (uint64_t)block[0] * block[1] * block[2];

  for (int i = 0; i < 3; i++) {
    if (block[i] == 0 || block[i] > bmax[i]) {
      snprintf(msg, msgsz,
               "block dimension %c is %" PRIu32
               "; the CPU device allows 1 to %" PRIu32,
               axis[i], block[i], bmax[i]);
      return HIPD_ELIMIT;
    }
    if (grid[i] == 0 || grid[i] > gmax[i]) {
      snprintf(msg, msgsz,
               "grid dimension %c is %" PRIu32
               "; the CPU device allows 1 to %" PRIu32,
               axis[i], grid[i], gmax[i]);
      return HIPD_ELIMIT;
    }
  }
  if (threads > CPU_MAX_THREADS_PER_BLOCK) {
    snprintf(msg, msgsz,
             "block (%" PRIu32 ", %" PRIu32 ", %" PRIu32 ") has %" PRIu64
             " threads; the CPU device allows at most %u per block",
             block[0], block[1], block[2], threads, CPU_MAX_THREADS_PER_BLOCK);
    return HIPD_ELIMIT;
  }
  if (shared > CPU_MAX_SHARED_BYTES) {
    snprintf(msg, msgsz,
             "%" PRIu32 " bytes of dynamic shared memory requested; the CPU "
             "device allows at most %u per block",
             shared, CPU_MAX_SHARED_BYTES);
    return HIPD_ELIMIT;
  }
  return 0;
}

#endif
