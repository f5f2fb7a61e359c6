/* SPDX-License-Identifier: MIT */
/* tests/fuzz/replay.c: main() of a fuzz target built without libFuzzer.
 *
 * Runs every file named on the command line (a directory: every regular
 * file in it, in name order) through LLVMFuzzerTestOneInput, once; with no
 * argument, the target's seed corpus (FUZZ_CORPUS). A property failure
 * aborts, so `make check` fails on it; the file being run is printed first
 * so that the log names the input.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Weak: a target need not define it. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Read all of @p path into an exactly sized buffer (so that ASan or a
 * guard page sees a read past it). @return 0 or -1 with errno set. */
static int read_all(const char *path, uint8_t **out, size_t *len)
{
  FILE *f = fopen(path, "rb");
  uint8_t *buf = NULL;
  size_t cap = 0, n = 0;

  if (f == NULL)
    return -1;
  for (;;) {
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
      if (nb == NULL)
        goto fail;
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror(f))
    goto fail;
  fclose(f);
  /* An exact copy: the entry point must not read past @p len. */
  *out = malloc(n ? n : 1);
  if (*out == NULL) {
    free(buf);
    return -1;
  }
  memcpy(*out, buf, n);
  free(buf);
  *len = n;
  return 0;
fail:
  free(buf);
  fclose(f);
  return -1;
}

static int run_file(const char *path)
{
  uint8_t *data;
  size_t len;

  if (read_all(path, &data, &len) != 0) {
    fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
    return -1;
  }
  printf("replay: %s (%zu bytes)\n", path, len);
  fflush(stdout);
  LLVMFuzzerTestOneInput(data, len);
  free(data);
  return 0;
}

static int cmp_names(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run @p path, a file or a directory of files. @return the files run, or
 * -1 on an error. */
static long run_path(const char *path)
{
  struct stat st;
  DIR *dir;
  struct dirent *e;
  char **names = NULL;
  size_t n = 0, cap = 0;
  long done = 0;

  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode))
    return run_file(path) == 0 ? 1 : -1;
  if ((dir = opendir(path)) == NULL) {
    fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    return -1;
  }
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*nn));
      if (nn == NULL)
        break;
      names = nn;
    }
    size_t l = strlen(path) + strlen(e->d_name) + 2;
    if ((names[n] = malloc(l)) == NULL)
      break;
    snprintf(names[n++], l, "%s/%s", path, e->d_name);
  }
  closedir(dir);
  qsort(names, n, sizeof(*names), cmp_names);
  for (size_t i = 0; i < n; i++) {
    if (done >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
      done = run_file(names[i]) == 0 ? done + 1 : -1;
    free(names[i]);
  }
  free(names);
  return done;
}

int main(int argc, char **argv)
{
  long total = 0;

  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize(&argc, &argv);
  if (argc < 2) {
    total = run_path(FUZZ_CORPUS);
  } else {
    for (int i = 1; i < argc && total >= 0; i++) {
      long r = run_path(argv[i]);
      total = r < 0 ? -1 : total + r;
    }
  }
  if (total < 0)
    return 1;
  if (total == 0) {
    /* An empty corpus replays nothing: a test that cannot fail. */
    fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  printf("replay: %ld inputs, all properties held\n", total);
  return 0;
}
