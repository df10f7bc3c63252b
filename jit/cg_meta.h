/*
** cg_meta.h -- the kernel disk cache's metadata record (H.meta beside H.so,
** cg_cache.c): its one writer and its one strict reader, on buffers, so that
** the reader can be fuzzed on its own (spec/fuzz/loaders/fuzz_cache_meta.c).
*/
#ifndef CG_META_H
#define CG_META_H

#include <stddef.h>
#include <stdint.h>

/* "tide-cg <version>\nhash <16 hex>\nsize <bytes>\nfnv <16 hex>\n" */
typedef struct {
  int version;        /* CG_FORMAT_VERSION of the writer */
  uint64_t hash;      /* the batch hash, also the file name */
  uint64_t size;      /* byte size of H.so */
  uint64_t fnv;       /* FNV-1a 64 of H.so's bytes */
} CgMeta;

#define CG_META_MAX 128   /* longest record: 8+10+1 + 5+16+1 + 5+20+1 + 4+16+1 = 88 bytes */

/* Print m into buf (n >= CG_META_MAX): the length, or -1 (version < 0). */
int cg_meta_format(char *buf, size_t n, const CgMeta *m);
/* Parse exactly the n bytes at b (no terminator needed): 0 and *m filled, or
** -1 when they are not exactly what cg_meta_format prints for some record. */
int cg_meta_parse(const char *b, size_t n, CgMeta *m);

#endif
