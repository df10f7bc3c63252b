/*
** cl_bin.c -- the cached OpenCL binary's header, printed and parsed (cl_bin.h).
** The parser takes the canonical form only (no leading zeros, no spaces but
** the single separators, lowercase hex), so what parses prints back to the
** same bytes; it looks at the first OCL_BIN_HEADER_MAX bytes at most.
*/
#include "cl_bin.h"
#include <stdio.h>
#include <string.h>

uint64_t ocl_fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
  return h;
}

int ocl_bin_header(char *out, size_t cap, int version, uint64_t n, uint64_t sum)
{
  int k = snprintf(out, cap, "tide-ocl %d %llu %016llx\n", version, (unsigned long long)n, (unsigned long long)sum);
  return k < 0 || (size_t)k >= cap ? -1 : k;
}

/* a decimal without sign or leading zero, at most 19 digits (fits int64) */
static int dec(const unsigned char *b, size_t n, size_t *i, uint64_t *v)
{
  size_t j = *i;
  uint64_t x = 0;
  while (j < n && b[j] >= '0' && b[j] <= '9' && j - *i < 19) x = x * 10 + (uint64_t)(b[j++] - '0');
  if (j == *i || (b[*i] == '0' && j - *i > 1) || (j < n && b[j] >= '0' && b[j] <= '9')) return -1;
  *i = j; *v = x;
  return 0;
}

int ocl_bin_parse_header(const unsigned char *b, size_t n, int *version, uint64_t *size, uint64_t *sum, size_t *off)
{
  static const char magic[] = "tide-ocl ";
  size_t m = sizeof magic - 1, i = m;
  if (n > OCL_BIN_HEADER_MAX) n = OCL_BIN_HEADER_MAX;
  uint64_t ver, sz, h = 0;
  if (n < m || memcmp(b, magic, m)) return -1;
  if (dec(b, n, &i, &ver) || ver > 0x7fffffff || i >= n || b[i++] != ' ') return -1;
  if (dec(b, n, &i, &sz) || i >= n || b[i++] != ' ') return -1;
  if (n - i < 17) return -1;
  for (int d = 0; d < 16; d++, i++) {
    unsigned c = b[i];
    if (c >= '0' && c <= '9') h = h << 4 | (c - '0');
    else if (c >= 'a' && c <= 'f') h = h << 4 | (c - 'a' + 10);
    else return -1;
  }
  if (b[i++] != '\n') return -1;
  *version = (int)ver; *size = sz; *sum = h; *off = i;
  return 0;
}

int ocl_bin_parse(const unsigned char *b, size_t n, size_t *off, size_t *bn)
{
  int ver;
  uint64_t sz, sum;
  size_t o;
  if (ocl_bin_parse_header(b, n, &ver, &sz, &sum, &o) || ver != OCL_CACHE_VERSION) return -1;
  if (sz == 0 || sz > OCL_MAX_BIN || sz != n - o || ocl_fnv(FNV0, b + o, (size_t)sz) != sum) return -1;
  *off = o; *bn = (size_t)sz;
  return 0;
}
