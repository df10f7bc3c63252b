/*
** replay_main.c -- a main() for the C fuzz targets without libFuzzer: runs
** LLVMFuzzerTestOneInput once on each file named (directories are walked one
** level deep), so `make test` replays the checked-in corpus with plain cc.
** Exit status 0 when every input ran; a finding aborts, as under libFuzzer.
*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static int run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return -1; }
  size_t cap = 4096, n = 0, r;
  uint8_t *b = malloc(cap);
  while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) { uint8_t *nb = realloc(b, cap *= 2); if (!nb) { free(b); b = NULL; } else b = nb; }
  }
  fclose(f);
  if (!b) { fprintf(stderr, "replay: out of memory reading %s\n", path); return -1; }
  LLVMFuzzerTestOneInput(b, n);
  free(b);
  return 0;
}

int main(int argc, char **argv)
{
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st)) { fprintf(stderr, "replay: no such file %s\n", argv[i]); bad++; continue; }
    if (!S_ISDIR(st.st_mode)) { bad += run_file(argv[i]) != 0; files++; continue; }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
      bad += run_file(p) != 0; files++;
    }
    if (d) closedir(d);
  }
  printf("replayed %d inputs, %d unreadable\n", files, bad);
  return bad != 0;
}
