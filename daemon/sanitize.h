/* SPDX-License-Identifier: MIT */
/* daemon/sanitize.h: which sanitizer instruments the file being compiled.
 *
 * HIPD_ASAN is defined under AddressSanitizer, HIPD_TSAN under
 * ThreadSanitizer. GCC says so with __SANITIZE_ADDRESS__ and
 * __SANITIZE_THREAD__, clang with __has_feature. Code that switches stacks
 * or otherwise hides things from a sanitizer tells it with these
 * (scripts/sanitize.sh builds with them).
 */
#ifndef HIPD_SANITIZE_H
#define HIPD_SANITIZE_H

#if defined(__SANITIZE_ADDRESS__)
#define HIPD_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define HIPD_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(HIPD_ASAN)
#define HIPD_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(HIPD_TSAN)
#define HIPD_TSAN 1
#endif
#endif

#endif
