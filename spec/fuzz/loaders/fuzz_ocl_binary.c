/*
** fuzz_ocl_binary.c -- libFuzzer target: the header reader of the OpenCL
** program binaries in the disk cache (opencl/cl_bin.c, read by cl_prog.c
** before it hands a binary to the driver).
** Any input: no crash, no read past the buffer (ASan); a file that is
** accepted has a header that prints back to its own bytes, a size equal to
** what follows and a matching hash; and the other way, any header printed
** for a binary made of the input's bytes is accepted with that binary.
*/
#include "../../../opencl/cl_bin.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what)
{
  fprintf(stderr, "fuzz_ocl_binary: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  /* the reader gets exactly n bytes, copied so ASan sees any overread */
  unsigned char *b = malloc(n ? n : 1);
  if (!b) return 0;
  memcpy(b, data, n);
  size_t off, bn;
  char head[OCL_BIN_HEADER_MAX];
  if (ocl_bin_parse(b, n, &off, &bn) == 0) {
    int k = ocl_bin_header(head, sizeof head, OCL_CACHE_VERSION, bn, ocl_fnv(FNV0, b + off, bn));
    if (k < 0 || (size_t)k != off || memcmp(head, b, off)) fail("an accepted header does not print back to its bytes");
    if (off + bn != n) fail("an accepted binary's size is not what follows its header");
  }
  int ver;
  uint64_t sz, sum;
  if (ocl_bin_parse_header(b, n, &ver, &sz, &sum, &off) == 0) {
    int k = ocl_bin_header(head, sizeof head, ver, sz, sum);
    if (k < 0 || (size_t)k != off || memcmp(head, b, off)) fail("a header that parses does not print back to its bytes");
  }
  free(b);
  if (n > 0) {                 /* the other way: the input as a binary, with its printed header */
    int k = ocl_bin_header(head, sizeof head, OCL_CACHE_VERSION, n, ocl_fnv(FNV0, data, n));
    unsigned char *f = k > 0 ? malloc((size_t)k + n) : NULL;
    if (!f) return 0;
    memcpy(f, head, (size_t)k);
    memcpy(f + k, data, n);
    if (ocl_bin_parse(f, (size_t)k + n, &off, &bn) || off != (size_t)k || bn != n) fail("a written binary is not read back");
    f[k + n - 1] ^= 1;         /* one flipped bit: the hash must catch it */
    if (ocl_bin_parse(f, (size_t)k + n, &off, &bn) == 0) fail("a binary with a flipped bit is accepted");
    if (ocl_bin_parse(f, (size_t)k + n - 1, &off, &bn) == 0) fail("a truncated binary is accepted");
    free(f);
  }
  return 0;
}
