/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_arena.c: the CPU device's buffer arena (one
 * reserved range, one sparse memfd, guard gaps); the contract is in
 * cpu_arena.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_arena.h"
#include "hipd.h"
#include "sanitize.h"
#include "util/array.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* A run of pages of the arena: a buffer's (its mapping, then its guard
 * gap) or free. The table is sorted by offset and covers the arena from
 * the leading gap to its end without holes. */
typedef struct {
  uint64_t off; /* pages from the base */
  uint64_t len; /* pages */
  size_t size;  /* a buffer's: the bytes asked for; 0: free */
  uint64_t map; /* a buffer's: pages mapped (len - the guard gap) */
} extent_t;

struct cpu_arena {
  char *base;
  size_t span;    /* bytes, whole pages */
  size_t page;    /* bytes */
  uint64_t guard; /* pages of each gap */
  int fd;         /* the memfd behind the whole range */
  extent_t *ext;
  size_t n, cap;
  size_t nbufs;
};

/* Where to try to put an arena before letting the system choose: between
 * the executable's heap (0x55.., 0x56..) and the shared libraries and
 * thread stacks (below 0x7f..) of x86-64 and arm64 (48-bit) processes,
 * which are where another process of the same build (the runner) has its
 * own mappings; 0x600000000000 (4 TiB) is AddressSanitizer's heap. */
#ifdef HIPD_TSAN
/* ThreadSanitizer allows application memory only in its app ranges (x86-64:
 * 0x1000-0x8000000000, 0x550000000000-0x568000000000, 0x7e8000000000-up)
 * and kills a process whose mapping lands elsewhere ("mmap at bad
 * address"): its low range, empty in both processes, and the high one. */
static const uint64_t hints[] = {UINT64_C(0x001000000000),
                                 UINT64_C(0x7e8000000000)};
#else
static const uint64_t hints[] = {UINT64_C(0x680000000000),
                                 UINT64_C(0x300000000000)};
#endif

static void *reserve_range(size_t span)
{
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void *p;

  if (sizeof(void *) == 8) {
    for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
      void *want = (void *)(uintptr_t)hints[i];
      p = mmap(want, span, PROT_NONE, flags | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == want)
        return p;
      /* Taken, beyond the address space, or (before Linux 4.17, or under
       * a sanitizer's interceptor) placed elsewhere as a mere hint. */
      if (p != MAP_FAILED)
        munmap(p, span);
    }
  }
  p = mmap(NULL, span, PROT_NONE, flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int cpu_arena_create(size_t span, cpu_arena_t **out, hipd_err_t *err)
{
  long ps = sysconf(_SC_PAGESIZE);
  cpu_arena_t *a = calloc(1, sizeof(*a));

  err_clear(err);
  if (a == NULL)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  a->fd = -1;
  a->page = ps > 0 ? (size_t)ps : 4096;
  a->guard = (CPU_ARENA_GUARD + a->page - 1) / a->page;
  if (a->guard == 0)
    a->guard = 1;
  a->span = (span + a->page - 1) / a->page * a->page;
  if (a->span / a->page <= 2 * a->guard) {
    free(a);
    return err_set(err, HIPD_EINVAL, "an arena of %zu bytes is too small",
                   span);
  }
  a->base = reserve_range(a->span);
  if (a->base == NULL) {
    err_set(err, HIPD_ENOMEM,
            "cannot reserve %zu bytes of address space for the CPU device's "
            "buffers: %s",
            a->span, strerror(errno));
    goto fail;
  }
  a->fd = memfd_create("hipd-cpu-buffers", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (a->fd < 0) {
    err_set(err, HIPD_ENOMEM, "memfd_create: %s", strerror(errno));
    goto fail;
  }
  /* Its whole size at once (sparse: pages come with fallocate), sealed so
   * that no holder, the runner's kernels included, can shrink it under a
   * mapping: a SIGBUS in whoever touches a buffer next. */
  if (ftruncate(a->fd, (off_t)a->span) != 0 ||
      fcntl(a->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
          0) {
    err_set(err, HIPD_ENOMEM,
            "cannot size and seal the CPU device's %zu "
            "bytes of buffers: %s",
            a->span, strerror(errno));
    goto fail;
  }
  a->cap = 64;
  a->ext = malloc(a->cap * sizeof(*a->ext));
  if (a->ext == NULL) {
    err_set(err, HIPD_ENOMEM, "out of memory");
    goto fail;
  }
  a->ext[0] = (extent_t){a->guard, a->span / a->page - a->guard, 0, 0};
  a->n = 1;
  *out = a;
  return 0;

fail:
  if (a->base != NULL)
    munmap(a->base, a->span);
  if (a->fd >= 0)
    close(a->fd);
  free(a);
  return err->code;
}

void cpu_arena_destroy(cpu_arena_t *a)
{
  if (a == NULL)
    return;
  munmap(a->base, a->span);
  close(a->fd);
  free(a->ext);
  free(a);
}

/* The buffer view of used extent @p e. */
static void buf_of(const cpu_arena_t *a, const extent_t *e, cpu_arena_buf_t *b)
{
  size_t rsize = (e->size + CPU_ARENA_ALIGN - 1) & ~(CPU_ARENA_ALIGN - 1);

  b->offset = e->off * a->page;
  b->map_size = (size_t)e->map * a->page;
  b->size = e->size;
  b->ptr = a->base + b->offset + b->map_size - rsize;
}

/* Give the pages of [off, off + len) back; the range reads as zeros then.
 * A file system that cannot punch holes gets the bytes zeroed instead. */
static void release_pages(cpu_arena_t *a, uint64_t off, size_t len)
{
  if (fallocate(a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                (off_t)len) != 0) {
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, (off_t)off);
    if (p != MAP_FAILED) {
      memset(p, 0, len);
      munmap(p, len);
    }
  }
}

/* Make [base + off, + len) PROT_NONE again, still reserved. */
static void unmap_range(cpu_arena_t *a, uint64_t off, size_t len)
{
  void *at = a->base + off;

  if (mmap(at, len, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED)
    mprotect(at, len, PROT_NONE); /* out of mappings: at least no access */
}

int cpu_arena_alloc(cpu_arena_t *a, size_t size, cpu_arena_buf_t *out,
                    hipd_err_t *err)
{
  uint64_t map, need;
  size_t i, rsize;
  extent_t *e;
  void *p;

  err_clear(err);
  if (size == 0)
    return err_set(err, HIPD_EINVAL, "cannot allocate 0 bytes");
  if (size > a->span)
    return err_set(err, HIPD_ENOMEM,
                   "%zu bytes exceed the CPU device's buffer address range "
                   "(%zu bytes)",
                   size, a->span);
  rsize = (size + CPU_ARENA_ALIGN - 1) & ~(CPU_ARENA_ALIGN - 1);
  map = (rsize + a->page - 1) / a->page;
  need = map + a->guard;
  for (i = 0; i < a->n; i++)
    if (a->ext[i].size == 0 && a->ext[i].len >= need)
      break;
  if (i == a->n)
    return err_set(err, HIPD_ENOMEM,
                   "no room for %zu bytes in the CPU device's buffer address "
                   "range (%zu bytes, %zu buffers)",
                   size, a->span, a->nbufs);
  if (ARRAY_GROW(a->ext, a->n, a->cap, 64) != 0)
    return err_set(err, HIPD_ENOMEM, "out of memory");
  e = &a->ext[i];
  /* Commit the pages now, as a GPU commits device memory at allocation.
   * The file grows to cover them. */
  if (fallocate(a->fd, 0, (off_t)(e->off * a->page), (off_t)(map * a->page)) !=
      0) {
    int errnum = errno;
    release_pages(a, e->off * a->page, map * a->page);
    return err_set(err, HIPD_ENOMEM, "cannot commit %zu bytes: %s", size,
                   strerror(errnum));
  }
  p = mmap(a->base + e->off * a->page, map * a->page, PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_FIXED, a->fd, (off_t)(e->off * a->page));
  if (p == MAP_FAILED) {
    int errnum = errno;
    release_pages(a, e->off * a->page, map * a->page);
    unmap_range(a, e->off * a->page, map * a->page);
    return err_set(err, HIPD_ENOMEM, "mmap of %zu bytes: %s", size,
                   strerror(errnum));
  }
  if (e->len > need) {
    memmove(&a->ext[i + 2], &a->ext[i + 1], (a->n - i - 1) * sizeof(*e));
    a->ext[i + 1] = (extent_t){e->off + need, e->len - need, 0, 0};
    a->n++;
  }
  e->len = need;
  e->size = size;
  e->map = map;
  a->nbufs++;
  buf_of(a, e, out);
  return 0;
}

/* The index of the extent that holds byte @p at of the range, or a->n. */
static size_t extent_at(const cpu_arena_t *a, const void *at)
{
  uintptr_t p = (uintptr_t)at, b = (uintptr_t)a->base;
  uint64_t pg;
  size_t lo = 0, hi;

  if (p < b || p >= b + a->span)
    return a->n;
  pg = (p - b) / a->page;
  hi = a->n;
  while (hi - lo > 1) { /* the last extent with off <= pg */
    size_t mid = lo + (hi - lo) / 2;
    if (a->ext[mid].off <= pg)
      lo = mid;
    else
      hi = mid;
  }
  return a->ext[lo].off <= pg && pg < a->ext[lo].off + a->ext[lo].len ? lo
                                                                      : a->n;
}

int cpu_arena_find(const cpu_arena_t *a, const void *ptr, cpu_arena_buf_t *out)
{
  size_t i = extent_at(a, ptr);
  cpu_arena_buf_t b;

  if (i == a->n || a->ext[i].size == 0)
    return HIPD_ENOENT;
  buf_of(a, &a->ext[i], &b);
  if (b.ptr != ptr)
    return HIPD_ENOENT;
  *out = b;
  return 0;
}

int cpu_arena_free(cpu_arena_t *a, void *ptr)
{
  cpu_arena_buf_t b;
  size_t i;

  if (cpu_arena_find(a, ptr, &b) != 0)
    return HIPD_ENOENT;
  i = extent_at(a, ptr);
  release_pages(a, b.offset, b.map_size);
  unmap_range(a, b.offset, b.map_size);
  a->ext[i].size = 0;
  a->ext[i].map = 0;
  a->nbufs--;
  /* Merge with a free successor, then with a free predecessor. */
  if (i + 1 < a->n && a->ext[i + 1].size == 0) {
    a->ext[i].len += a->ext[i + 1].len;
    memmove(&a->ext[i + 1], &a->ext[i + 2], (a->n - i - 2) * sizeof(*a->ext));
    a->n--;
  }
  if (i > 0 && a->ext[i - 1].size == 0) {
    a->ext[i - 1].len += a->ext[i].len;
    memmove(&a->ext[i], &a->ext[i + 1], (a->n - i - 1) * sizeof(*a->ext));
    a->n--;
  }
  return 0;
}

void cpu_arena_foreach(const cpu_arena_t *a,
                       void (*fn)(void *arg, const cpu_arena_buf_t *b),
                       void *arg)
{
  for (size_t i = 0; i < a->n; i++) {
    if (a->ext[i].size != 0) {
      cpu_arena_buf_t b;
      buf_of(a, &a->ext[i], &b);
      fn(arg, &b);
    }
  }
}

int cpu_arena_fd(const cpu_arena_t *a)
{
  return a->fd;
}

void *cpu_arena_base(const cpu_arena_t *a)
{
  return a->base;
}

size_t cpu_arena_span(const cpu_arena_t *a)
{
  return a->span;
}

size_t cpu_arena_count(const cpu_arena_t *a)
{
  return a->nbufs;
}
