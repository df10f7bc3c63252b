/*
** cg_meta.c -- the disk cache's metadata record (cg_meta.h): one printer and
** one reader that accepts only its canonical output. sscanf, used before,
** took leading blanks, signs, wrapped "-1" to 2^64-1 and ignored trailing
** bytes; here each field has one spelling, so parse(format(m)) == m and
** format(parse(b)) == b, the property the fuzz target checks.
*/
#include "cg_meta.h"
#include <stdio.h>
#include <string.h>

int cg_meta_format(char *buf, size_t n, const CgMeta *m)
{
  if (m->version < 0) return -1;
  int k = snprintf(buf, n, "tide-cg %d\nhash %016llx\nsize %llu\nfnv %016llx\n", m->version,
                   (unsigned long long)m->hash, (unsigned long long)m->size, (unsigned long long)m->fnv);
  return k < 0 || (size_t)k >= n ? -1 : k;
}

/* -- Reader: a cursor over [p, e) ------------------------------------------------ */

typedef struct { const char *p, *e; } MetaCur;

static int meta_lit(MetaCur *c, const char *s)
{
  size_t k = strlen(s);
  if ((size_t)(c->e - c->p) < k || memcmp(c->p, s, k)) return -1;
  c->p += k;
  return 0;
}

/* a decimal without sign or leading zeros, <= max */
static int meta_dec(MetaCur *c, uint64_t max, uint64_t *v)
{
  const char *s = c->p;
  uint64_t x = 0;
  while (c->p < c->e && *c->p >= '0' && *c->p <= '9') {
    unsigned d = (unsigned)(*c->p - '0');
    if (x > (max - d) / 10) return -1;     /* x*10 + d > max */
    x = x * 10 + d;
    c->p++;
  }
  if (c->p == s || (*s == '0' && c->p - s > 1)) return -1;
  *v = x;
  return 0;
}

/* exactly 16 lower-case hex digits */
static int meta_hex16(MetaCur *c, uint64_t *v)
{
  if (c->e - c->p < 16) return -1;
  uint64_t x = 0;
  for (int i = 0; i < 16; i++) {
    char ch = c->p[i];
    unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0') : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10) : 16;
    if (d == 16) return -1;
    x = x << 4 | d;
  }
  c->p += 16;
  *v = x;
  return 0;
}

int cg_meta_parse(const char *b, size_t n, CgMeta *m)
{
  MetaCur c = { b, b + n };
  uint64_t ver;
  if (meta_lit(&c, "tide-cg ") || meta_dec(&c, 0x7fffffff, &ver) || meta_lit(&c, "\nhash ") ||
      meta_hex16(&c, &m->hash) || meta_lit(&c, "\nsize ") || meta_dec(&c, UINT64_MAX, &m->size) ||
      meta_lit(&c, "\nfnv ") || meta_hex16(&c, &m->fnv) || meta_lit(&c, "\n") || c.p != c.e)
    return -1;
  m->version = (int)ver;
  return 0;
}
