/*
** cl_prog.c -- OpenCL programs: built once per text and device, cached in
** memory and on disk (the driver's binaries), each text dumped for the strict
** OpenCL C check, a failed build an error with the build log and the source.
*/

/*
** Disk cache ($TIDE_CACHE_DIR/ocl, default $XDG_CACHE_HOME/tide/ocl or
** ~/.cache/tide/ocl; TIDE_CACHE_DIR= disables it): for a key K, the FNV-1a
** hash of the device (platform, device, driver version), the build options
** and the program's text,
**   K.bin   "tide-ocl <version> <size> <fnv>\n" then the CL_PROGRAM_BINARIES
**           bytes, written to a temp file, fsync'ed, renamed into place.
** A file whose header, size or content hash does not match is deleted and
** the program built from its text again; so is a binary the driver refuses.
** A second process thus builds nothing (clBuildProgram of a binary is cheap:
** no front end; NVIDIA's binary is PTX, PoCL's LLVM bitcode).
*/
#include "cl.h"
#include "cl_bin.h"
#include "../jit/cg.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t prog_mu = PTHREAD_MUTEX_INITIALIZER;
static ClProgStats prog_st;


/* -- Source dumps: every program's full text, for the strict OpenCL C check ---------------- */

static char dump_dir[1024];
static int dump_gen = 1;            /* bumped when the dir changes: every program is written again */
static pthread_once_t dump_once = PTHREAD_ONCE_INIT;
static void dump_env(void)
{
  const char *e = getenv("TIDE_CL_DUMP");
  if (e && *e && !dump_dir[0]) snprintf(dump_dir, sizeof dump_dir, "%s", e);
}

TD_API void td_opencl_dump_dir(const char *dir)
{
  pthread_once(&dump_once, dump_env);
  pthread_mutex_lock(&prog_mu);
  snprintf(dump_dir, sizeof dump_dir, "%s", dir ? dir : "");
  dump_gen++;
  pthread_mutex_unlock(&prog_mu);
}

/* dir/<fnv of the text>.cl, written once (temp file, rename): the text exactly
** as the driver gets it. Failures are ignored: a dump is a diagnostic. Called
** with prog_mu held. */
static void dump_source(const char *src)
{
  pthread_once(&dump_once, dump_env);
  if (!dump_dir[0]) return;
  uint64_t h = ocl_fnv(FNV0, src, strlen(src));
  char path[1200], tmp[1300];
  snprintf(path, sizeof path, "%s/%016llx.cl", dump_dir, (unsigned long long)h);
  if (access(path, F_OK) == 0) return;
  mkdir(dump_dir, 0755);
  snprintf(tmp, sizeof tmp, "%s/.tmp-%016llx-XXXXXX", dump_dir, (unsigned long long)h);
  int fd = mkstemp(tmp);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "w");
  if (!f) { close(fd); unlink(tmp); return; }
  fputs(src, f);
  if (fclose(f) || rename(tmp, path)) unlink(tmp);
}

/* -- Disk cache ---------------------------------------------------------------------------- */

/* The program cache's directory, or NULL (jit/cg_cache.c's rules, under "/ocl"). */
static char *cache_dir(void)
{
  static int warned;
  return cg_cache_dir("/ocl", &warned, "tide: the OpenCL program cache directory", "programs are built in each process");
}

/* the device's identity: what makes a binary valid (asked once) */
static uint64_t device_key(void)
{
  static uint64_t key;
  if (key) return key;
  char b[1024];
  uint64_t h = FNV0;
  cl_platform_id pl = NULL;
  clGetDeviceInfo(cl_dev(), CL_DEVICE_PLATFORM, sizeof pl, &pl, NULL);
  static const cl_uint pinfo[] = { CL_PLATFORM_NAME, CL_PLATFORM_VERSION };
  static const cl_uint dinfo[] = { CL_DEVICE_NAME, CL_DEVICE_VERSION, CL_DRIVER_VERSION, CL_DEVICE_VENDOR };
  for (int i = 0; i < 2; i++) { b[0] = 0; clGetPlatformInfo(pl, pinfo[i], sizeof b - 1, b, NULL); h = ocl_fnv(h, b, strlen(b) + 1); }
  for (int i = 0; i < 4; i++) { b[0] = 0; clGetDeviceInfo(cl_dev(), dinfo[i], sizeof b - 1, b, NULL); h = ocl_fnv(h, b, strlen(b) + 1); }
  return key = h ? h : 1;
}

/* dir/<key>.bin, malloc'd */
static char *bin_path(const char *dir, uint64_t key)
{
  char name[32];
  snprintf(name, sizeof name, "/%016llx.bin", (unsigned long long)key);
  return cg_path_cat(dir, name, "");
}

/* A program from the disk cache, built; NULL when absent or invalid (deleted). */
static cl_program disk_load(const char *dir, uint64_t key, const char *opts)
{
  char *path = bin_path(dir, key);
  /* without blocking: a FIFO named like a cache file must not hang the process */
  int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
  if (fd < 0) { free(path); return NULL; }
  struct stat st;
  unsigned char *b = NULL;
  size_t got = 0;
  int reg = !fstat(fd, &st) && S_ISREG(st.st_mode);
  if (reg && st.st_size > 0 && st.st_size <= OCL_MAX_BIN && (b = malloc(st.st_size))) {
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, b + got, st.st_size - got);
      if (r <= 0) break;
      got += (size_t)r;
    }
  }
  close(fd);
  cl_program p = NULL;
  size_t off, bn;
  if (b && ocl_bin_parse(b, got, &off, &bn) == 0) {
    const unsigned char *bin = b + off;
    cl_int st1 = CL_SUCCESS, st2 = CL_SUCCESS;
    cl_device_id d = cl_dev();
    p = clCreateProgramWithBinary(cl_ctx(), 1, &d, &bn, &bin, &st2, &st1);
    if (p && (st1 != CL_SUCCESS || st2 != CL_SUCCESS || clBuildProgram(p, 1, &d, opts, NULL, NULL) != CL_SUCCESS)) {
      clReleaseProgram(p);
      p = NULL;
    }
  }
  free(b);
  if (!p && reg) unlink(path);            /* a stale or corrupt binary; anything else is left alone */
  free(path);
  return p;
}

/* The built program's binary into the cache (atomically); failures ignored. */
static void disk_store(const char *dir, uint64_t key, cl_program p)
{
  size_t bn = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof bn, &bn, NULL) != CL_SUCCESS || bn == 0 || bn > OCL_MAX_BIN) return;
  unsigned char *bin = malloc(bn);
  if (!bin) return;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) { free(bin); return; }
  char name[48];
  snprintf(name, sizeof name, "/.tmp-%016llx-XXXXXX", (unsigned long long)key);
  char *path = bin_path(dir, key), *tmp = cg_path_cat(dir, name, "");
  int fd = path && tmp ? mkstemp(tmp) : -1;
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) { if (fd >= 0) { close(fd); unlink(tmp); } free(bin); free(path); free(tmp); return; }
  char head[OCL_BIN_HEADER_MAX];
  int hn = ocl_bin_header(head, sizeof head, OCL_CACHE_VERSION, bn, ocl_fnv(FNV0, bin, bn));
  int fail = hn < 0 || fwrite(head, 1, (size_t)hn, f) != (size_t)hn;
  fail = fwrite(bin, 1, bn, f) != bn || fail;
  fail = fflush(f) || fail;
  fail = fsync(fileno(f)) || fail;
  fail = fclose(f) || fail;
  if (fail || rename(tmp, path)) unlink(tmp);
  free(bin); free(path); free(tmp);
}

/* -- Programs ---------------------------------------------------------------------------------- */

typedef struct Kern { struct Kern *next; char name[64]; cl_kernel k; } Kern;
typedef struct Prog { struct Prog *next; uint64_t hash; size_t len; char *src; cl_program p; Kern *kernels; int dumped; } Prog;
static Prog *progs;

/* the build options: OpenCL C 1.2, IEEE division and sqrt where the device offers them */
static const char *build_options(void)
{
  static char opts[128];
  if (!opts[0]) {
    cl_device_fp_config fc = 0;
    clGetDeviceInfo(cl_dev(), CL_DEVICE_SINGLE_FP_CONFIG, sizeof fc, &fc, NULL);
    snprintf(opts, sizeof opts, "-cl-std=CL1.2%s", (fc & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ?
             " -cl-fp32-correctly-rounded-divide-sqrt" : "");
  }
  return opts;
}

/* Build a program from its text; on failure an error with the build log and the source. */
static cl_program build_source(const char *src, const char *opts, const char *what)
{
  cl_int st;
  cl_device_id d = cl_dev();
  cl_program pr = clCreateProgramWithSource(cl_ctx(), 1, &src, NULL, &st);
  if (st != CL_SUCCESS) return cl_check(st, what, "clCreateProgramWithSource"), NULL;
  st = clBuildProgram(pr, 1, &d, opts, NULL, NULL);
  if (st == CL_SUCCESS) return pr;
  size_t n = 0;
  clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
  char *log = calloc(1, n + 1);
  if (log) clGetProgramBuildInfo(pr, d, CL_PROGRAM_BUILD_LOG, n, log, NULL);
  rt_err(TD_ERR_DEVICE, "%s: OpenCL kernel build failed on %s: %s\n--- build log ---\n%s\n--- kernel source ---\n%s",
         what, cl_device_name(), cl_status_name(st), log ? log : "", src);
  free(log);
  clReleaseProgram(pr);
  return NULL;
}

/* The first program a process builds from its text (none in the disk cache)
** says so on stderr, once: a driver compiling on the CPU takes ~0.5 s a
** program on PoCL (and CLBlast ~10 s for its GEMM with a cold PoCL cache), so
** a first run would otherwise pause silently for seconds. */
static void note_first_build(const char *dir)
{
  static int noted;
  if (__atomic_exchange_n(&noted, 1, __ATOMIC_RELAXED)) return;
  if (dir)
    fprintf(stderr, "tide: compiling OpenCL kernels for %s: the first run on a device is slow (each new kernel is "
            "built once, ~0.5 s on PoCL; CLBlast's matmul ~10 s), later runs load them from %s\n", cl_device_name(), dir);
  else
    fprintf(stderr, "tide: compiling OpenCL kernels for %s: each new kernel is built once per process (~0.5 s on "
            "PoCL; CLBlast's matmul ~10 s) as the disk cache is off (TIDE_CACHE_DIR)\n", cl_device_name());
}

/* the program of this text, with prog_mu held */
static Prog *program_locked(const char *src, const char *what)
{
  size_t len = strlen(src);
  uint64_t h = ocl_fnv(FNV0, src, len);
  for (Prog *p = progs; p; p = p->next)
    if (p->hash == h && p->len == len && !memcmp(p->src, src, len)) {
      if (p->dumped != dump_gen) { dump_source(src); p->dumped = dump_gen; }   /* every program in use, once */
      return p;
    }
  if (cl_init(-1)) return NULL;
  dump_source(src);
  const char *opts = build_options();
  char *dir = cache_dir();
  uint64_t key = ocl_fnv(ocl_fnv(device_key() ^ h, opts, strlen(opts)), &len, sizeof len);
  cl_program pr = dir ? disk_load(dir, key, opts) : NULL;
  if (pr) prog_st.disk_loads++;
  else {
    note_first_build(dir);
    pr = build_source(src, opts, what);
    if (pr) prog_st.builds++;
    if (pr && dir) disk_store(dir, key, pr);
  }
  free(dir);
  if (!pr) return NULL;
  Prog *p = calloc(1, sizeof *p);
  char *copy = malloc(len + 1);
  if (!p || !copy) { free(p); free(copy); clReleaseProgram(pr); return rt_errp(TD_ERR_NOMEM, "%s: out of memory", what); }
  memcpy(copy, src, len + 1);
  p->hash = h; p->len = len; p->src = copy; p->p = pr; p->next = progs; progs = p; p->dumped = dump_gen;
  return p;
}

static cl_kernel kernel_locked(Prog *p, const char *name, const char *what)
{
  for (Kern *k = p->kernels; k; k = k->next)
    if (!strcmp(k->name, name)) return k->k;
  cl_int st;
  cl_kernel kk = clCreateKernel(p->p, name, &st);
  if (st != CL_SUCCESS) return cl_check(st, what, "clCreateKernel"), NULL;
  Kern *k = calloc(1, sizeof *k);
  if (!k) { clReleaseKernel(kk); return rt_errp(TD_ERR_NOMEM, "%s: out of memory", what); }
  snprintf(k->name, sizeof k->name, "%s", name);
  k->k = kk; k->next = p->kernels; p->kernels = k;
  return kk;
}

int ocl_program_kernels(const char *src, int n, const char *const *names, cl_kernel *out, const char *what)
{
  pthread_mutex_lock(&prog_mu);
  Prog *p = program_locked(src, what);
  int rc = p ? 0 : TD_ERR_DEVICE;
  for (int i = 0; i < n && !rc; i++) if (!(out[i] = kernel_locked(p, names[i], what))) rc = TD_ERR_DEVICE;
  pthread_mutex_unlock(&prog_mu);
  return rc;
}

/* The hand-written kernels (cl_index.c, ...): the prelude, then their text. */
cl_kernel cl_kernel_get(const char *src, const char *name, const char *op)
{
  size_t a = strlen(cl_prelude), b = strlen(src);
  char *full = malloc(a + b + 1);
  if (!full) return rt_errp(TD_ERR_NOMEM, "%s: out of memory", op);
  memcpy(full, cl_prelude, a); memcpy(full + a, src, b + 1);
  cl_kernel k = NULL;
  ocl_program_kernels(full, 1, &name, &k, op);
  free(full);
  return k;
}

void ocl_prog_stats(ClProgStats *s)
{
  pthread_mutex_lock(&prog_mu);
  *s = prog_st;
  pthread_mutex_unlock(&prog_mu);
}
