/* daemon/drivers/cpu/cpu_compile.c: HIP kernel source to a host shared object,
 * for the CPU device. The contract is in cpu_compile.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu_compile.h"
#include "cpu_proto.h"
#include "hipd.h"
#include "util/clock.h"
#include "util/strbuf.h"
#include "util/array.h"

#ifndef PKGDATADIR
#define PKGDATADIR "/usr/local/share/hipd"
#endif
#define HEADER_DEFAULT PKGDATADIR "/hipd_cpu_device.h"
#define DEFAULT_TIMEOUT_S 60
/* Diagnostics kept from the compiler (the rest is read and dropped). */
#define MAX_CAPTURE (256 * 1024)
#define SRC_NAME "kernel.hip"
#define SO_NAME "kernel.so"

extern char **environ;

static void set_log(char *log, size_t logsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_log(char *log, size_t logsz, const char *fmt, ...)
{
  va_list ap;

  if (log == NULL || logsz == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(log, logsz, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------ compiler */

static char *found_cxx;
static pthread_once_t find_once = PTHREAD_ONCE_INIT;

/* @p name if it names an executable (with a '/'), else its first match on
 * $PATH; malloc'ed, or NULL. */
static char *which(const char *name)
{
  const char *path = getenv("PATH");
  size_t nlen = strlen(name);

  if (strchr(name, '/') != NULL)
    return access(name, X_OK) == 0 ? strdup(name) : NULL;
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    const char *end = strchr(path, ':');
    size_t dlen = end ? (size_t)(end - path) : strlen(path);
    char *cand = malloc(dlen + nlen + 3);
    if (cand == NULL)
      return NULL;
    if (dlen == 0)
      snprintf(cand, dlen + nlen + 3, "./%s", name);
    else
      snprintf(cand, dlen + nlen + 3, "%.*s/%s", (int)dlen, path, name);
    struct stat st;
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
      return cand;
    free(cand);
    path += dlen;
    if (*path == ':')
      path++;
  }
  return NULL;
}

static void find_cxx(void)
{
  static const char *const names[] = {"c++", "g++", "clang++"};
  const char *env = getenv("HIPD_CXX");

  if (env != NULL && env[0] != '\0') {
    found_cxx = which(env); /* set explicitly: no fallback */
    return;
  }
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if ((found_cxx = which(names[i])) != NULL)
      return;
}

const char *cpu_compile_compiler(void)
{
  pthread_once(&find_once, find_cxx);
  return found_cxx;
}

/* ---------------------------------------------------- names and options */

/* A kernel name as written in C++: identifiers joined by "::", with
 * optional template arguments made of names, numbers, ',', '*', '&' and
 * spaces. It is pasted into the module's source, so nothing else goes. */
static int name_ok(const char *n)
{
  int depth = 0;
  size_t len = strlen(n);

  if (len == 0 || len > CPU_MAX_NAME)
    return 0;
  if (!(isalpha((unsigned char)n[0]) || n[0] == '_' || n[0] == ':'))
    return 0;
  for (const char *p = n; *p != '\0'; p++) {
    unsigned char c = (unsigned char)*p;
    if (c == '<') {
      depth++;
    } else if (c == '>') {
      if (--depth < 0)
        return 0;
    } else if (!(isalnum(c) || c == '_' || c == ':' ||
                 (depth > 0 && strchr(", *&-.", c) != NULL))) {
      return 0;
    }
  }
  return depth == 0;
}

static int ident_ok(const char *s, size_t n)
{
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
      return 0;
  return 1;
}

/*
 * Check one client option. @return 1 to pass *use (an option of ours: the
 * same string or a mapped one) to the compiler, 0 to drop it (meaningless
 * on the host), -1 to refuse it.
 */
static int option_check(const char *o, const char **use)
{
  static const char *const exact[] = {"-O0",
                                      "-O1",
                                      "-O2",
                                      "-O3",
                                      "-Os",
                                      "-Ofast",
                                      "-O",
                                      "-ffast-math",
                                      "-fno-fast-math",
                                      "-fno-math-errno",
                                      "-funroll-loops",
                                      "-fno-unroll-loops",
                                      "-ffp-contract=off",
                                      "-ffp-contract=on",
                                      "-ffp-contract=fast",
                                      "-g",
                                      "-g0",
                                      "-w",
                                      "-Wall",
                                      "-Wextra",
                                      "-Werror",
                                      "-march=native",
                                      "-mtune=native"};
  static const char *const stds[] = {"c++17", "gnu++17", "c++20", "gnu++20",
                                     "c++2a", "gnu++2a", "c++23", "gnu++23",
                                     "c++2b", "gnu++2b"};
  static const char *const ignored_prefix[] = {"--gpu-architecture=",
                                               "-arch=",
                                               "--offload-arch=",
                                               "-rdc=",
                                               "--relocatable-device-code=",
                                               "--gpu-max-threads-per-block=",
                                               "-maxrregcount=",
                                               "--maxrregcount="};
  static const char *const ignored[] = {"-lineinfo",
                                        "--generate-line-info",
                                        "-fgpu-rdc",
                                        "-fno-gpu-rdc",
                                        "-G",
                                        "--device-debug",
                                        "-default-device",
                                        "--device-as-default-execution-space",
                                        "-dopt=on",
                                        "--extra-device-vectorization"};

  *use = o;
  for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
    if (strcmp(o, exact[i]) == 0)
      return 1;
  if (strcmp(o, "--use_fast_math") == 0 || strcmp(o, "-use_fast_math") == 0 ||
      strcmp(o, "--use-fast-math") == 0) {
    *use = "-ffast-math";
    return 1;
  }
  if (strncmp(o, "-D", 2) == 0 || strncmp(o, "-U", 2) == 0) {
    const char *eq = strchr(o + 2, '=');
    size_t n = eq ? (size_t)(eq - (o + 2)) : strlen(o + 2);
    if (o[1] == 'U' && eq != NULL)
      return -1;
    return ident_ok(o + 2, n) ? 1 : -1;
  }
  if (strncmp(o, "-std=", 5) == 0 || strncmp(o, "--std=", 6) == 0) {
    const char *v = o + (o[1] == '-' ? 6 : 5);
    for (size_t i = 0; i < sizeof(stds) / sizeof(stds[0]); i++) {
      if (strcmp(v, stds[i]) == 0) {
        *use = o[1] == '-' ? o + 1 : o; /* "--std=c++17" -> "-std=c++17" */
        return 1;
      }
    }
    return -1;
  }
  for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
    if (strcmp(o, ignored[i]) == 0)
      return 0;
  for (size_t i = 0; i < sizeof(ignored_prefix) / sizeof(ignored_prefix[0]);
       i++)
    if (strncmp(o, ignored_prefix[i], strlen(ignored_prefix[i])) == 0)
      return 0;
  return -1;
}

/* ----------------------------------------------------- source transform */

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
  if (!ident_ok(s + ns, ne - ns))
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
  strbuf_printf(out,
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
static int source_transform(const char *src, size_t len, strbuf_t *out, char *log,
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
            set_log(log, logsz,
                    SRC_NAME ":%zu: error: unsupported dynamic shared memory "
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
static void source_tail(strbuf_t *out, const char *const *names, size_t n)
{
  char sym[3 * CPU_MAX_NAME + 16];

  /* No #line: diagnostics about these lines quote them, comment included
   * (the compiler reads the quoted line from the file). */
  strbuf_add(out, "\n/* hipd: exported kernel signatures */\n");
  for (size_t i = 0; i < n; i++) {
    cpu_kernel_symbol(names[i], sym, sizeof(sym));
    strbuf_printf(out,
           "extern \"C\" __attribute__((visibility(\"default\"))) const "
           "hipd_kernel_sig_t *%s(void) { static const hipd_kernel_sig_t s = "
           "::hipd_make_sig(&%s); return &s; } /* kernel '%s' must name one "
           "__global__ function (not overloaded) */\n",
           sym, names[i], names[i]);
  }
}

/* ------------------------------------------------------------- running */

static int write_file(const char *path, const char *data, size_t len)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

  if (fd < 0)
    return -1;
  while (len > 0) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      close(fd);
      return -1;
    }
    data += w;
    len -= (size_t)w;
  }
  return close(fd);
}

/* The environment for the compiler: ours with messages in English, so that
 * diagnostics read the same everywhere. */
static char **child_env(void)
{
  size_t n = 0, k = 0;
  char **env;

  while (environ[n] != NULL)
    n++;
  env = calloc(n + 2, sizeof(*env));
  if (env == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LC_", 3) != 0 &&
        strncmp(environ[i], "LANG=", 5) != 0 &&
        strncmp(environ[i], "LANGUAGE=", 9) != 0)
      env[k++] = environ[i];
  env[k++] = "LC_ALL=C";
  env[k] = NULL;
  return env;
}

/* The compilers running now, by process group, so that a shutdown can
 * stop them (cpu_compile_stop_all); compiles run on libuv's pool. */
static struct {
  pthread_mutex_t lock;
  pid_t *groups;
  unsigned n, cap;
  int stopped; /* no compiler starts any more */
} running = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Record compiler group @p pid. @return 0, or HIPD_ESHUTDOWN (the group
 * was killed: hipd is stopping) or HIPD_ENOMEM. */
static int running_add(pid_t pid)
{
  int rc = 0;

  pthread_mutex_lock(&running.lock);
  if (running.stopped) {
    kill(-pid, SIGKILL);
    rc = HIPD_ESHUTDOWN;
  } else if (ARRAY_GROW(running.groups, running.n, running.cap, 8) != 0) {
    kill(-pid, SIGKILL);
    rc = HIPD_ENOMEM;
  }
  if (rc == 0)
    running.groups[running.n++] = pid;
  pthread_mutex_unlock(&running.lock);
  return rc;
}

static void running_remove(pid_t pid)
{
  pthread_mutex_lock(&running.lock);
  for (unsigned i = 0; i < running.n; i++)
    if (running.groups[i] == pid) {
      running.groups[i] = running.groups[--running.n];
      break;
    }
  pthread_mutex_unlock(&running.lock);
}

unsigned cpu_compile_stop_all(void)
{
  unsigned n;

  pthread_mutex_lock(&running.lock);
  running.stopped = 1;
  n = running.n;
  for (unsigned i = 0; i < running.n; i++)
    kill(-running.groups[i], SIGKILL);
  pthread_mutex_unlock(&running.lock);
  return n;
}

/*
 * Run @p argv with stdout and stderr into @p outbuf, for at most
 * @p timeout_s seconds (then its whole process group is killed).
 * @return 0 and the wait status in *status, 1 if it timed out, or a
 *         negative code if it could not be started (@p log says why).
 */
static int run_compiler(char *const *argv, unsigned timeout_s, strbuf_t *outbuf,
                        int *status, char *log, size_t logsz)
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, dflt;
  int pfd[2], e, timed_out = 0;
  char **env;
  pid_t pid;
  int64_t deadline = (int64_t)util_now_ms() + (int64_t)timeout_s * 1000;

  if (pipe2(pfd, O_CLOEXEC) != 0) {
    set_log(log, logsz, "cannot run the C++ compiler: pipe: %s",
            strerror(errno));
    return HIPD_EIO;
  }
  env = child_env();
  if (env == NULL) {
    close(pfd[0]);
    close(pfd[1]);
    set_log(log, logsz, "out of memory");
    return HIPD_ENOMEM;
  }
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, pfd[1], STDERR_FILENO);
  posix_spawnattr_init(&attr);
  sigemptyset(&none);
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGPIPE);
  sigaddset(&dflt, SIGCHLD);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGTERM);
  sigaddset(&dflt, SIGHUP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setpgroup(&attr, 0); /* to kill cc1plus, as, ld too */
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
  e = posix_spawn(&pid, argv[0], &fa, &attr, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  free(env);
  close(pfd[1]);
  if (e != 0) {
    close(pfd[0]);
    set_log(log, logsz, "cannot run the C++ compiler %s: %s", argv[0],
            strerror(e));
    return HIPD_EIO;
  }
  if ((e = running_add(pid)) != 0) {
    close(pfd[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
      ;
    set_log(log, logsz, "%s", e == HIPD_ESHUTDOWN ? "hipd is stopping"
                                                  : "out of memory");
    return e;
  }

  /* Read its output until every process of the group has closed it. */
  for (;;) {
    char buf[4096];
    int64_t left = deadline - (int64_t)util_now_ms();
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    int pr = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      continue;
    ssize_t n = read(pfd[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (outbuf->len < MAX_CAPTURE)
      strbuf_addn(outbuf, buf, (size_t)n);
  }
  close(pfd[0]);
  if (timed_out)
    kill(-pid, SIGKILL);
  for (;;) {
    pid_t w = waitpid(pid, status, timed_out ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR))
      break;
    if (w == 0) {
      if ((int64_t)util_now_ms() >= deadline) {
        timed_out = 1;
        kill(-pid, SIGKILL);
        continue;
      }
      struct timespec ts = {0, 5000000};
      nanosleep(&ts, NULL);
    }
  }
  running_remove(pid);
  return timed_out ? 1 : 0;
}

/* Copy the compiler's output to @p log without the private directory's
 * name, so that diagnostics read "kernel.hip:3:5: error: ...". */
static void log_output(const strbuf_t *o, const char *dir, char *log,
                       size_t logsz)
{
  size_t dl = strlen(dir), used = 0;
  const char *p = o->p ? o->p : "";

  if (log == NULL || logsz == 0)
    return;
  while (*p != '\0' && used + 1 < logsz) {
    if (strncmp(p, dir, dl) == 0 && p[dl] == '/') {
      p += dl + 1;
      continue;
    }
    log[used++] = *p++;
  }
  log[used] = '\0';
  if (*p != '\0' && logsz > 5)
    memcpy(log + logsz - 5, "...\n", 5); /* truncated */
}

static void remove_dir(const char *dir)
{
  char path[PATH_MAX];

  snprintf(path, sizeof(path), "%s/" SRC_NAME, dir);
  unlink(path);
  snprintf(path, sizeof(path), "%s/" SO_NAME, dir);
  unlink(path);
  rmdir(dir);
}

int cpu_compile(const cpu_compile_cfg_t *cfg, const char *source, size_t len,
                const char *const *kernel_names, size_t nkernels,
                const char *const *options, size_t nopts, char **so_path_out,
                char *log, size_t logsz)
{
  cpu_compile_cfg_t dflt = {0};
  const char *cxx, *header, *tmpdir;
  strbuf_t src = {0}, out = {0};
  char dir[PATH_MAX], srcpath[PATH_MAX + 16], sopath[PATH_MAX + 16];
  const char **argv = NULL;
  size_t argc = 0;
  int rc, st = 0, have_dir = 0;
  unsigned timeout_s;

  if (log != NULL && logsz > 0)
    log[0] = '\0';
  if (cfg == NULL)
    cfg = &dflt;
  if (source == NULL || memchr(source, '\0', len) != NULL) {
    set_log(log, logsz, "the kernel source contains a NUL byte");
    return HIPD_EINVAL;
  }
  if (nkernels == 0) {
    set_log(log, logsz, "no kernel names given");
    return HIPD_EINVAL;
  }
  for (size_t i = 0; i < nkernels; i++) {
    if (kernel_names[i] == NULL || !name_ok(kernel_names[i])) {
      set_log(log, logsz,
              "'%s' is not a kernel name (a C++ function name, optionally "
              "qualified or with template arguments)",
              kernel_names[i] ? kernel_names[i] : "(null)");
      return HIPD_EINVAL;
    }
  }
  argv = calloc(nopts + 24, sizeof(*argv));
  if (argv == NULL) {
    set_log(log, logsz, "out of memory");
    return HIPD_ENOMEM;
  }

  cxx = cfg->cxx != NULL ? cfg->cxx : cpu_compile_compiler();
  if (cxx == NULL || (cfg->cxx != NULL && access(cxx, X_OK) != 0)) {
    set_log(log, logsz,
            "no C++ compiler for the CPU device (tried %s): kernels cannot be "
            "compiled on it; install g++ or set HIPD_CXX",
            cfg->cxx ? cfg->cxx
            : getenv("HIPD_CXX") && getenv("HIPD_CXX")[0]
                ? "$HIPD_CXX"
                : "c++, g++, clang++ on $PATH");
    rc = HIPD_ENOTSUP;
    goto fail;
  }
  header = cfg->header;
  if (header == NULL && (header = getenv("HIPD_CPU_HEADER")) != NULL &&
      header[0] == '\0')
    header = NULL;
  if (header == NULL)
    header = HEADER_DEFAULT;
  if (access(header, R_OK) != 0) {
    set_log(log, logsz, "the CPU device header %s is missing: %s", header,
            strerror(errno));
    rc = HIPD_ENOENT;
    goto fail;
  }
  tmpdir = cfg->tmpdir;
  if (tmpdir == NULL &&
      ((tmpdir = getenv("TMPDIR")) == NULL || tmpdir[0] != '/'))
    tmpdir = "/tmp";
  timeout_s = cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S;

  argv[argc++] = cxx;
  argv[argc++] = "-std=c++17";
  argv[argc++] = "-O2";
  argv[argc++] = "-fPIC";
  argv[argc++] = "-shared";
  argv[argc++] = "-fvisibility=hidden";
  argv[argc++] = "-include";
  argv[argc++] = header;
  for (size_t i = 0; i < nopts; i++) {
    const char *use;
    int ok = options[i] ? option_check(options[i], &use) : -1;
    if (ok < 0) {
      set_log(log, logsz,
              "compiler option '%s' is not allowed on the CPU device "
              "(allowed: -D, -U, -O0..-O3, -Os, -Ofast, -ffast-math, "
              "-std=c++17 or later, -g, -w, -Wall, -Wextra, -Werror, "
              "-march=native; see cpu_compile.h)",
              options[i] ? options[i] : "(null)");
      rc = HIPD_EINVAL;
      goto fail;
    }
    if (ok > 0)
      argv[argc++] = use;
  }

  rc = source_transform(source, len, &src, log, logsz);
  if (rc != 0)
    goto fail;
  source_tail(&src, kernel_names, nkernels);
  if (src.oom) {
    set_log(log, logsz, "out of memory");
    rc = HIPD_ENOMEM;
    goto fail;
  }

  if (snprintf(dir, sizeof(dir), "%s/hipd-cpu-XXXXXX", tmpdir) >=
          (int)sizeof(dir) ||
      mkdtemp(dir) == NULL) {
    set_log(log, logsz, "cannot create a directory in %s: %s", tmpdir,
            strerror(errno));
    rc = HIPD_EIO;
    goto fail;
  }
  have_dir = 1;
  snprintf(srcpath, sizeof(srcpath), "%s/" SRC_NAME, dir);
  snprintf(sopath, sizeof(sopath), "%s/" SO_NAME, dir);
  if (write_file(srcpath, src.p, src.len) != 0) {
    set_log(log, logsz, "cannot write %s: %s", srcpath, strerror(errno));
    rc = HIPD_EIO;
    goto fail;
  }
  argv[argc++] = "-Wl,-z,defs"; /* undefined symbols fail here, not later */
  argv[argc++] = "-x";
  argv[argc++] = "c++";
  argv[argc++] = srcpath;
  argv[argc++] = "-o";
  argv[argc++] = sopath;
  argv[argc] = NULL;

  rc = run_compiler((char *const *)argv, timeout_s, &out, &st, log, logsz);
  if (rc < 0)
    goto fail;
  log_output(&out, dir, log, logsz);
  if (rc == 1) {
    size_t used = log ? strlen(log) : 0;
    if (log != NULL && used + 1 < logsz)
      snprintf(log + used, logsz - used, "%scompilation timed out after %u s\n",
               used && log[used - 1] != '\n' ? "\n" : "", timeout_s);
    rc = HIPD_ECOMPILE;
    goto fail;
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || access(sopath, R_OK) != 0) {
    if (log != NULL && log[0] == '\0') {
      if (WIFSIGNALED(st))
        set_log(log, logsz, "the C++ compiler was killed by signal %d",
                WTERMSIG(st));
      else
        set_log(log, logsz, "the C++ compiler failed (exit status %d)",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    rc = HIPD_ECOMPILE;
    goto fail;
  }
  unlink(srcpath);
  *so_path_out = strdup(sopath);
  if (*so_path_out == NULL) {
    set_log(log, logsz, "out of memory");
    rc = HIPD_ENOMEM;
    goto fail;
  }
  free(src.p);
  free(out.p);
  free(argv);
  return 0;

fail:
  if (have_dir)
    remove_dir(dir);
  free(src.p);
  free(out.p);
  free(argv);
  return rc;
}

void cpu_compile_free(char *so_path)
{
  char *slash;

  if (so_path == NULL)
    return;
  unlink(so_path);
  slash = strrchr(so_path, '/');
  if (slash != NULL) {
    *slash = '\0';
    rmdir(so_path);
  }
  free(so_path);
}
