/*
** fuzz_cache_meta.c -- libFuzzer target: the kernel cache's metadata reader
** (jit/cg_meta.c, read by cg_cache.c before it trusts a cached .so).
** Any input: no crash, no read past the buffer (ASan), and the record format is
** canonical both ways: what parses prints back to the same bytes, and a
** record built from the input's bytes parses back to itself.
*/
#include "../../../jit/cg_meta.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what)
{
  fprintf(stderr, "fuzz_cache_meta: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  /* the reader gets exactly n bytes, copied so ASan sees any overread */
  char *b = malloc(n ? n : 1);
  if (!b) return 0;
  memcpy(b, data, n);
  CgMeta m, m2;
  char out[CG_META_MAX];
  if (cg_meta_parse(b, n, &m) == 0) {
    int k = cg_meta_format(out, sizeof out, &m);
    if (k < 0 || (size_t)k != n || memcmp(out, b, n)) fail("a record that parses does not print back to its bytes");
  }
  free(b);
  if (n >= 28) {               /* the other way: any record round-trips */
    memcpy(&m.version, data, 4);
    memcpy(&m.hash, data + 4, 8);
    memcpy(&m.size, data + 12, 8);
    memcpy(&m.fnv, data + 20, 8);
    m.version &= 0x7fffffff;
    int k = cg_meta_format(out, sizeof out, &m);
    if (k < 0) fail("a record does not print");
    if (cg_meta_parse(out, (size_t)k, &m2) || m2.version != m.version || m2.hash != m.hash || m2.size != m.size ||
        m2.fnv != m.fnv)
      fail("a printed record does not parse back");
    if (k > 1 && cg_meta_parse(out, (size_t)k - 1, &m2) == 0) fail("a record without its last newline parses");
  }
  return 0;
}
