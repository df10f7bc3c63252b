/*
** cl_bin.h -- the header of a cached OpenCL program binary (cl_prog.c's disk
** cache): "tide-ocl <version> <size> <fnv>\n", then <size> bytes of the
** driver's CL_PROGRAM_BINARIES whose FNV-1a hash is <fnv> (16 hex digits).
** No OpenCL here: the reader is fuzzed on its own (spec/fuzz/loaders/fuzz_ocl_binary.c).
*/
#ifndef TIDE_CL_BIN_H
#define TIDE_CL_BIN_H
#include <stddef.h>
#include <stdint.h>

#define OCL_CACHE_VERSION 1
#define OCL_MAX_BIN (64 << 20)
#define OCL_BIN_HEADER_MAX 64

/* FNV-1a of n bytes, continuing from h (FNV0 to start). */
#define FNV0 1469598103934665603ull
uint64_t ocl_fnv(uint64_t h, const void *p, size_t n);

/* The header of a binary of n bytes with hash sum into out (NUL-terminated);
** its length, or -1 when it does not fit in cap. */
int ocl_bin_header(char *out, size_t cap, int version, uint64_t n, uint64_t sum);

/* Parse a file of n bytes (not NUL-terminated): 0 and the binary's offset and
** size when the header is canonical (exactly what ocl_bin_header prints), the
** version is OCL_CACHE_VERSION, the size matches what follows and the hash
** matches its bytes; -1 otherwise. Reads nothing outside b[0..n). */
int ocl_bin_parse(const unsigned char *b, size_t n, size_t *off, size_t *bn);

/* The header fields alone (any version), for the round-trip check: 0 or -1. */
int ocl_bin_parse_header(const unsigned char *b, size_t n, int *version, uint64_t *size, uint64_t *sum, size_t *off);
#endif
