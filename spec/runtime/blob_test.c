/*
** blob_test.c -- td_from_blob from C, run by spec/runtime/blob_spec.lua under
** ASan+UBSan and under valgrind: tensors over the host's memory (stack,
** malloc, a large block the caching allocator would keep), views that outlive
** their base, strides, the release callback exactly once and only at the end,
** and failures that leave the memory the caller's (no callback).
** Prints "ok" and exits 0, or names the first failed check and exits 1.
*/
#include "tide.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int calls;
static void *last_data, *last_ctx;
static void count_release(void *data, void *ctx) { calls++; last_data = data; last_ctx = ctx; }
static void free_release(void *data, void *ctx) { (void)ctx; calls++; free(data); }

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "blob_test: line %d: %s (%s)\n", __LINE__, #c, td_last_error()); return 1; } } while (0)

int main(void)
{
  /* a stack array, contiguous: no copy, writes go both ways */
  float a[6] = { 1, 2, 3, 4, 5, 6 };
  int64_t s23[2] = { 2, 3 };
  int tag;
  td_tensor *t = td_from_blob(a, 2, s23, NULL, TD_FLOAT32, count_release, &tag);
  CHECK(t && t->ptr == (void *)a && td_is_contiguous(t));
  a[4] = 50;
  double v[6];
  CHECK(td_read(t, v) == 0 && v[4] == 50);
  td_tensor *two = td_full(0, NULL, 2, TD_FLOAT32);
  td_tensor *d = td_mul(t, two);
  CHECK(d && td_read(d, v) == 0 && v[5] == 12);
  /* a view outlives its base: the callback waits for the last one */
  int64_t perm[2] = { 1, 0 };
  td_tensor *tr = td_permute(t, 2, perm);
  CHECK(tr);
  td_release(t);
  CHECK(calls == 0);
  CHECK(td_read(tr, v) == 0 && v[1] == 4 && v[3] == 50 && v[2] == 2);
  td_release(tr);
  CHECK(calls == 1 && last_data == (void *)a && last_ctx == (void *)&tag);
  td_release(d); td_release(two);

  /* explicit strides: column-major 3x2 over 6 doubles */
  double cm[6] = { 1, 2, 3, 4, 5, 6 };
  int64_t s32[2] = { 3, 2 }, st[2] = { 1, 3 };
  t = td_from_blob(cm, 2, s32, st, TD_FLOAT64, NULL, NULL);
  CHECK(t && !td_is_contiguous(t));
  CHECK(td_read(t, v) == 0 && v[0] == 1 && v[1] == 4 && v[2] == 2 && v[5] == 6);
  td_tensor *c = td_contiguous(t);
  CHECK(c && td_read(c, v) == 0 && v[3] == 5);
  td_release(c); td_release(t);                 /* release NULL: nothing runs, cm untouched */
  CHECK(calls == 1 && cm[0] == 1);

  /* a large malloc'd block (above the caching allocator's 64 KiB): the host
  ** frees it in the callback; tide must neither free nor cache it */
  int64_t n = 1 << 16;
  float *big = malloc((size_t)n * sizeof *big);
  CHECK(big);
  for (int64_t i = 0; i < n; i++) big[i] = 1;
  int64_t cached0 = td_cached_bytes();
  t = td_from_blob(big, 1, &n, NULL, TD_FLOAT32, free_release, NULL);
  CHECK(t);
  td_tensor *sum = td_sum(t, -1, NULL, 0);
  double sv;
  CHECK(sum && td_item(sum, &sv) == 0 && sv == (double)n);
  td_release(sum);
  td_release(t);
  CHECK(calls == 2 && td_cached_bytes() == cached0);
  td_empty_cache();

  /* failures: NULL, the memory stays the caller's (no callback) */
  int64_t neg[1] = { -1 }, one[1] = { 4 };
  CHECK(!td_from_blob(a, 1, neg, NULL, TD_FLOAT32, count_release, NULL) && strstr(td_last_error(), "negative"));
  CHECK(!td_from_blob((char *)a + 1, 1, one, NULL, TD_FLOAT32, count_release, NULL) &&
        strstr(td_last_error(), "aligned"));
  CHECK(!td_from_blob(a, 1, one, NULL, 99, count_release, NULL) && strstr(td_last_error(), "dtype"));
  CHECK(!td_from_blob(NULL, 1, one, NULL, TD_FLOAT32, count_release, NULL) && strstr(td_last_error(), "NULL"));
  int64_t bad_st[1] = { -1 };
  CHECK(!td_from_blob(a, 1, one, bad_st, TD_FLOAT32, count_release, NULL) && strstr(td_last_error(), "stride"));
  CHECK(calls == 2);

  /* an empty tensor over no memory at all */
  int64_t zero[1] = { 0 };
  t = td_from_blob(NULL, 1, zero, NULL, TD_FLOAT32, count_release, NULL);
  CHECK(t && t->nelem == 0);
  td_release(t);
  CHECK(calls == 3);

  /* the binding's owner notes: ids come back once each */
  t = td_from_blob(a, 1, one, NULL, TD_FLOAT32, td_blob_note, (void *)(intptr_t)42);
  CHECK(t);
  int64_t ids[4];
  CHECK(td_blob_released(ids, 4) == 0);
  td_release(t);
  CHECK(td_blob_released(ids, 4) == 1 && ids[0] == 42 && td_blob_released(ids, 4) == 0);

  puts("ok");
  return 0;
}
