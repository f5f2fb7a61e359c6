/* SPDX-License-Identifier: MIT */
/* daemon/drivers/cpu/cpu_source.c: the CPU compile step's source
 * transform (cpu_source.h): HIP kernel source made host C++, before
 * cpu_compile.c runs the compiler on it. Pure text work: no processes, no
 * files. */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_proto.h"
#include "cpu_source.h"
#include "hipd.h"

/* ----------------------------------------------------- source transform */

void cpu_log_set(char *log, size_t logsz, const char *fmt, ...)
{
  va_list ap;

  if (log == NULL || logsz == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(log, logsz, fmt, ap);
  va_end(ap);
}

int cpu_ident_ok(const char *s, size_t n)
{
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
      return 0;
  return 1;
}

static int is_ident(char c)
{
  return isalnum((unsigned char)c) || c == '_';
}

/* End of the comment or whitespace run starting at @p i. */
static size_t skip_space(const char *s, size_t len, size_t i)
{
  for (;;) {
    if (i < len && isspace((unsigned char)s[i])) {
      i++;
    } else if (i + 1 < len && s[i] == '/' && s[i + 1] == '*') {
      const char *e = NULL;
      for (size_t k = i + 2; k + 1 < len; k++)
        if (s[k] == '*' && s[k + 1] == '/') {
          e = s + k;
          break;
        }
      if (e == NULL)
        return len;
      i = (size_t)(e - s) + 2;
    } else if (i + 1 < len && s[i] == '/' && s[i + 1] == '/') {
      while (i < len && s[i] != '\n')
        i++;
    } else {
      return i;
    }
  }
}

static size_t ident_end(const char *s, size_t len, size_t i)
{
  while (i < len && is_ident(s[i]))
    i++;
  return i;
}

static int word_at(const char *s, size_t len, size_t i, const char *w)
{
  size_t n = strlen(w);
  return i + n <= len && memcmp(s + i, w, n) == 0 &&
         (i + n == len || !is_ident(s[i + n]));
}

/* Copy @p d[0, n) to @p out as one line with comments turned into spaces
 * and the attribute forms that do not apply to a reference removed:
 * __align__(..), alignas(..), __attribute__((..)), __declspec(..),
 * HIP_DYNAMIC_SHARED_ATTRIBUTE. @return 0, or -1 on unbalanced parens. */
static int decl_clean(const char *d, size_t n, strbuf_t *out)
{
  static const char *const attrs[] = {"__align__", "alignas", "__attribute__",
                                      "__declspec"};
  size_t i = 0;

  while (i < n) {
    size_t j = skip_space(d, n, i);
    if (j != i) {
      strbuf_addn(out, " ", 1);
      i = j;
      continue;
    }
    if (is_ident(d[i]) && (i == 0 || !is_ident(d[i - 1]))) {
      size_t e = ident_end(d, n, i);
      int drop = 0;
      if (e - i == strlen("HIP_DYNAMIC_SHARED_ATTRIBUTE") &&
          memcmp(d + i, "HIP_DYNAMIC_SHARED_ATTRIBUTE", e - i) == 0) {
        i = e;
        continue;
      }
      for (size_t a = 0; a < sizeof(attrs) / sizeof(attrs[0]); a++)
        if (e - i == strlen(attrs[a]) && memcmp(d + i, attrs[a], e - i) == 0)
          drop = 1;
      if (drop) {
        size_t k = skip_space(d, n, e);
        int depth = 0;
        if (k >= n || d[k] != '(')
          return -1;
        for (; k < n; k++) {
          if (d[k] == '(')
            depth++;
          else if (d[k] == ')' && --depth == 0)
            break;
        }
        if (k >= n)
          return -1;
        i = k + 1;
        continue;
      }
      strbuf_addn(out, d + i, e - i);
      i = e;
      continue;
    }
    strbuf_addn(out, d + i, 1);
    i++;
  }
  return 0;
}

/*
 * Rewrite the declaration @p d[0, n) that followed `extern __shared__`
 * (up to, not including, its ';'), @p quals being qualifiers written
 * between the two words, into a reference bound to the worker's dynamic
 * shared buffer. @return 0, or -1 if it is not of the form
 * `T name[]` or `T name[][N]...`.
 */
static int dyn_shared_rewrite(const char *quals, const char *d, size_t n,
                              strbuf_t *out)
{
  strbuf_t c = {0};
  size_t lb, ne, ns, te, k;
  const char *s;
  int rc = -1;

  if (decl_clean(d, n, &c) != 0 || c.oom || c.p == NULL)
    goto done;
  s = c.p;
  if (strpbrk(s, ",=;{}") != NULL)
    goto done; /* several declarators, an initializer... */
  lb = strcspn(s, "[");
  if (s[lb] != '[')
    goto done;
  ne = lb;
  while (ne > 0 && isspace((unsigned char)s[ne - 1]))
    ne--;
  ns = ne;
  while (ns > 0 && is_ident(s[ns - 1]))
    ns--;
  if (!cpu_ident_ok(s + ns, ne - ns))
    goto done;
  te = ns;
  while (te > 0 && isspace((unsigned char)s[te - 1]))
    te--;
  k = 0;
  while (k < te && isspace((unsigned char)s[k]))
    k++;
  if (k == te)
    goto done; /* no type */
  /* "[" then "]" then only further bounds */
  size_t r = lb + 1;
  while (isspace((unsigned char)s[r]))
    r++;
  if (s[r] != ']')
    goto done;
  r++;
  const char *rest = s + r;
  for (const char *q = rest; *q != '\0'; q++)
    if (!(isspace((unsigned char)*q) || *q == '[' || *q == ']' ||
          is_ident(*q) || strchr("+-*/()<>:", *q) != NULL))
      goto done;
  strbuf_printf(
      out,
      "static thread_local %s%.*s (&%.*s)[]%s = "
      "*reinterpret_cast<%s%.*s (*)[]%s>(::hipd_cpu_dyn_shared_base());",
      quals, (int)(te - k), s + k, (int)(ne - ns), s + ns, rest, quals,
      (int)(te - k), s + k, rest);
  rc = 0;
done:
  free(c.p);
  return rc;
}

/* Headers of the GPU toolchains: everything they declare for kernels comes
 * from hipd_cpu_device.h, so their #include lines are dropped. */
static int gpu_header(const char *s, size_t n)
{
  static const char *const hs[] = {"hip/hip_runtime.h",
                                   "hip/hip_runtime_api.h",
                                   "cuda_runtime.h",
                                   "cuda_runtime_api.h",
                                   "cuda.h",
                                   "device_launch_parameters.h",
                                   "hip/device_functions.h",
                                   "device_functions.h",
                                   "hip/math_functions.h",
                                   "math_constants.h"};
  for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
    if (n == strlen(hs[i]) && memcmp(s, hs[i], n) == 0)
      return 1;
  return 0;
}

/* If a preprocessor directive starts at @p i (at the start of a line):
 * whether it includes a GPU header. */
static int drop_directive(const char *s, size_t len, size_t i, size_t *end)
{
  size_t k = i + 1, e;

  while (k < len && (s[k] == ' ' || s[k] == '\t'))
    k++;
  if (!word_at(s, len, k, "include"))
    return 0;
  k += strlen("include");
  while (k < len && (s[k] == ' ' || s[k] == '\t'))
    k++;
  if (k >= len || (s[k] != '<' && s[k] != '"'))
    return 0;
  char close = s[k] == '<' ? '>' : '"';
  for (e = k + 1; e < len && s[e] != close && s[e] != '\n'; e++)
    ;
  if (e >= len || s[e] != close || !gpu_header(s + k + 1, e - k - 1))
    return 0;
  while (e < len && s[e] != '\n')
    e++;
  *end = e; /* keep the newline: line numbers stay */
  return 1;
}

static size_t count_lines(const char *s, size_t n)
{
  size_t c = 0;
  for (size_t i = 0; i < n; i++)
    c += s[i] == '\n';
  return c;
}

/* The end of the string or character literal opening at @p i. */
static size_t literal_end(const char *s, size_t len, size_t i)
{
  char q = s[i];
  for (i++; i < len; i++) {
    if (s[i] == '\\')
      i++;
    else if (s[i] == q || s[i] == '\n')
      return i + 1;
  }
  return len;
}

/* The end of the raw string literal whose '"' is at @p i. */
static size_t raw_end(const char *s, size_t len, size_t i)
{
  size_t d = i + 1, p = d;
  while (p < len && s[p] != '(' && p - d <= 16)
    p++;
  if (p >= len || s[p] != '(')
    return i + 1;
  size_t dl = p - d;
  for (size_t k = p + 1; k + dl + 1 < len; k++)
    if (s[k] == ')' && memcmp(s + k + 1, s + d, dl) == 0 &&
        s[k + 1 + dl] == '"')
      return k + dl + 2;
  return len;
}

/*
 * Copy @p src to @p out, rewriting dynamic shared memory declarations and
 * dropping GPU header includes; line numbers are kept. @return 0, or
 * HIPD_ECOMPILE with @p log naming the line of a declaration it cannot
 * rewrite.
 */
int cpu_source_transform(const char *src, size_t len, strbuf_t *out, char *log,
                         size_t logsz)
{
  size_t i = 0, line = 1;
  int bol = 1; /* only whitespace so far on this line */

  while (i < len) {
    char c = src[i];
    size_t e;

    if (c == '/' && i + 1 < len && (src[i + 1] == '/' || src[i + 1] == '*')) {
      e = skip_space(src, len, i);
      if (e == i)
        e = i + 1;
      line += count_lines(src + i, e - i);
      if (memchr(src + i, '\n', e - i) != NULL)
        bol = 1;
      strbuf_addn(out, src + i, e - i);
      i = e;
      continue;
    }
    if (c == '"' || c == '\'') {
      e = literal_end(src, len, i);
      line += count_lines(src + i, e - i);
      strbuf_addn(out, src + i, e - i);
      i = e;
      bol = 0;
      continue;
    }
    if (c == '#' && bol) {
      if (drop_directive(src, len, i, &e)) {
        strbuf_add(out, "/* GPU runtime header: provided by hipd */");
        i = e;
        continue;
      }
      /* Copy the directive, with its continuation lines. */
      for (e = i; e < len && src[e] != '\n'; e++)
        if (src[e] == '\\' && e + 1 < len && src[e + 1] == '\n')
          e++;
      line += count_lines(src + i, e - i);
      strbuf_addn(out, src + i, e - i);
      i = e;
      continue;
    }
    if (is_ident(c) && (i == 0 || !is_ident(src[i - 1]))) {
      e = ident_end(src, len, i);
      size_t n = e - i;
      bol = 0;
      /* raw strings: R"x(...)x", u8R, uR, UR, LR */
      if (e < len && src[e] == '"' && src[e - 1] == 'R' &&
          (n == 1 || (n == 2 && strchr("uUL", src[i]) != NULL) ||
           (n == 3 && src[i] == 'u' && src[i + 1] == '8'))) {
        size_t re = raw_end(src, len, e);
        line += count_lines(src + i, re - i);
        strbuf_addn(out, src + i, re - i);
        i = re;
        continue;
      }
      if (word_at(src, len, i, "static")) {
        size_t k = skip_space(src, len, e);
        if (word_at(src, len, k, "__shared__")) {
          /* `static __shared__`: __shared__ is static already */
          strbuf_addn(out, "      ", n);
          i = e;
          continue;
        }
      }
      if (word_at(src, len, i, "extern")) {
        char quals[64] = "";
        size_t k = skip_space(src, len, e);
        while (word_at(src, len, k, "volatile") ||
               word_at(src, len, k, "const")) {
          size_t qe = ident_end(src, len, k);
          size_t ql = strlen(quals);
          snprintf(quals + ql, sizeof(quals) - ql, "%.*s ", (int)(qe - k),
                   src + k);
          k = skip_space(src, len, qe);
        }
        if (word_at(src, len, k, "__shared__")) {
          size_t d = k + strlen("__shared__"), semi = d;
          while (semi < len && src[semi] != ';' && src[semi] != '{' &&
                 src[semi] != '}')
            semi++;
          if (semi >= len || src[semi] != ';' ||
              dyn_shared_rewrite(quals, src + d, semi - d, out) != 0) {
            cpu_log_set(log, logsz,
                        SRC_NAME
                        ":%zu: error: unsupported dynamic shared memory "
                        "declaration; the CPU device accepts `extern "
                        "__shared__ T name[];`",
                        line);
            return HIPD_ECOMPILE;
          }
          size_t nl = count_lines(src + i, semi + 1 - i);
          for (size_t q = 0; q < nl; q++)
            strbuf_addn(out, "\n", 1);
          line += nl;
          i = semi + 1;
          continue;
        }
      }
      strbuf_addn(out, src + i, n);
      i = e;
      continue;
    }
    if (c == '\n') {
      line++;
      bol = 1;
    } else if (!isspace((unsigned char)c)) {
      bol = 0;
    }
    strbuf_addn(out, &c, 1);
    i++;
  }
  return 0;
}

/* The exports appended to the source: one signature function per kernel. */
void cpu_source_tail(strbuf_t *out, const char *const *names, size_t n)
{
  char sym[3 * CPU_MAX_NAME + 16];

  /* No #line: diagnostics about these lines quote them, comment included
   * (the compiler reads the quoted line from the file). */
  strbuf_add(out, "\n/* hipd: exported kernel signatures */\n");
  for (size_t i = 0; i < n; i++) {
    cpu_kernel_symbol(names[i], sym, sizeof(sym));
    strbuf_printf(
        out,
        "extern \"C\" __attribute__((visibility(\"default\"))) const "
        "hipd_kernel_sig_t *%s(void) { static const hipd_kernel_sig_t s = "
        "::hipd_make_sig(&%s); return &s; } /* kernel '%s' must name one "
        "__global__ function (not overloaded) */\n",
        sym, names[i], names[i]);
  }
}
