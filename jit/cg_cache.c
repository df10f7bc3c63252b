/*
** cg_cache.c -- compiled kernels: the memory table (kernel hash -> entry), the
** disk cache of shared objects (one per compiled batch, validated before
** dlopen), cg_compile, the counters, and running a kernel on the thread pool.
*/

/*
** Disk cache layout ($TIDE_CACHE_DIR, default $XDG_CACHE_HOME/tide or
** ~/.cache/tide; TIDE_CACHE_DIR= disables it): for a batch hash H,
**   H.so    the shared object, written to a temp file, fsync'ed, renamed;
**   H.meta  "tide-cg <version>\nhash H\nsize N\nfnv F\n" (F = FNV-1a of the .so; cg_meta.c),
**           written (temp, fsync, rename) before H.so is renamed into place.
** A .so is loaded only when its meta matches: format version, hash, size,
** content hash and ELF magic. Anything else is deleted and rebuilt, never
** dlopen'ed; a name that is not a regular file (a FIFO, a directory) is a
** miss with a warning, opened without blocking and never read. The batch
** hash covers the format version, the ISA level, extra compiler options and
** every kernel's IR hash and name. A directory that cannot be created or
** written means kernels stay in memory (one warning per process). Temp files
** of killed compiles are removed (see "Temp files").
*/
#include "cg_emit.h"
#include "cg_meta.h"
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define CG_FORMAT_VERSION 12  /* bump when the code printed for the same kernel IR changes */
#define CG_MAX_SO (256 << 20)

static pthread_mutex_t cg_mu = PTHREAD_MUTEX_INITIALIZER;
static CgStats cg_st;

/* -- Host ------------------------------------------------------------------------ */

static int host_lanes;                        /* atomic: read once, by whichever thread is first */

int cg_host_lanes(void)
{
  int lanes = __atomic_load_n(&host_lanes, __ATOMIC_RELAXED);
  if (!lanes) {
    const char *isa = getenv("TIDE_CG_ISA");   /* "v3" forces AVX2 on an AVX-512 host */
    __builtin_cpu_init();
    int v4 = __builtin_cpu_supports("avx512f") && !(isa && !strcmp(isa, "v3"));
    lanes = v4 ? 16 : 8;
    __atomic_store_n(&host_lanes, lanes, __ATOMIC_RELAXED);
  }
  return lanes;
}
const char *cg_host_march(void) { return cg_host_lanes() == 16 ? "x86-64-v4" : "x86-64-v3"; }
const char *td_jit_isa(void) { return cg_host_march(); }

/* -- Memory table ---------------------------------------------------------------- */

typedef struct { uint64_t hash; CgKernelFn fn; } CgSlot;
static CgSlot *tab;
static size_t tab_cap, tab_n;

static CgKernelFn tab_get(uint64_t h)
{
  if (!tab_cap) return NULL;
  for (size_t i = h & (tab_cap - 1);; i = (i + 1) & (tab_cap - 1)) {
    if (!tab[i].fn) return NULL;
    if (tab[i].hash == h) return tab[i].fn;
  }
}
static void tab_put(uint64_t h, CgKernelFn fn)
{
  if ((tab_n + 1) * 2 > tab_cap) {
    size_t cap = tab_cap ? tab_cap * 2 : 256;
    CgSlot *t = calloc(cap, sizeof *t);
    if (!t) return;                       /* not cached: compiled again next time */
    for (size_t j = 0; j < tab_cap; j++)
      if (tab[j].fn) {
        size_t i = tab[j].hash & (cap - 1);
        while (t[i].fn) i = (i + 1) & (cap - 1);
        t[i] = tab[j];
      }
    free(tab); tab = t; tab_cap = cap;
  }
  size_t i = h & (tab_cap - 1);
  while (tab[i].fn && tab[i].hash != h) i = (i + 1) & (tab_cap - 1);
  if (!tab[i].fn) tab_n++;
  tab[i].hash = h; tab[i].fn = fn;
}

/* -- Hashing ------------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
  return h;
}

static uint64_t batch_hash(CgKernel *const *ks, int n)
{
  uint64_t h = 0xcbf29ce484222325ull;
  int v = CG_FORMAT_VERSION;
  h = fnv(h, &v, sizeof v);
  const char *m = cg_host_march(), *x = getenv("TIDE_CG_OPTS");
  h = fnv(h, m, strlen(m) + 1);
  if (x) h = fnv(h, x, strlen(x) + 1);
  for (int i = 0; i < n; i++) {
    h = fnv(h, &ks[i]->hash, sizeof ks[i]->hash);
    h = fnv(h, ks[i]->name, strlen(ks[i]->name) + 1);
  }
  return h;
}

/* -- Disk cache ------------------------------------------------------------------------ */

/* A malloc'd a b c (paths of any length: no fixed buffer to truncate them). */
char *cg_path_cat(const char *a, const char *b, const char *c)
{
  size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
  char *p = malloc(na + nb + nc + 1);
  if (p) { memcpy(p, a, na); memcpy(p + na, b, nb); memcpy(p + na + nb, c, nc + 1); }
  return p;
}
static char *path_cat(const char *a, const char *b) { return cg_path_cat(a, b, ""); }

char *cg_cache_dir(const char *sub, int *warned, const char *what, const char *instead)
{
  const char *d = getenv("TIDE_CACHE_DIR"), *x;
  char *buf;
  if (d) { if (!*d) return NULL; buf = cg_path_cat(d, sub, ""); }
  else if ((x = getenv("XDG_CACHE_HOME")) && *x) buf = cg_path_cat(x, "/tide", sub);
  else if ((x = getenv("HOME")) && *x) buf = cg_path_cat(x, "/.cache/tide", sub);
  else return NULL;
  if (!buf) return NULL;
  int err = 0;
  for (char *p = buf + 1; *p; p++)          /* mkdir -p */
    if (*p == '/') { *p = 0; if (mkdir(buf, 0755) && errno != EEXIST) err = errno; *p = '/'; }
  if (mkdir(buf, 0755) && errno != EEXIST) err = errno;
  struct stat st;
  const char *why = NULL;
  if (stat(buf, &st)) why = strerror(err ? err : errno);
  else if (!S_ISDIR(st.st_mode)) why = "not a directory";
  else if (access(buf, W_OK | X_OK)) why = strerror(errno);
  if (!why) return buf;
  if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
    fprintf(stderr, "%s %s cannot be used (%s); %s (set TIDE_CACHE_DIR to a writable directory, or to nothing "
            "to turn the disk cache off)\n", what, buf, why, instead);
  free(buf);
  return NULL;
}

static void clean_stale(const char *dir);

/* The kernel cache's directory (stale temporaries cleaned), or NULL. */
static char *cache_dir(void)
{
  static int warned;
  char *buf = cg_cache_dir("", &warned, "tide.compile: the kernel cache directory",
                           "compiled kernels are kept in memory only");
  if (buf) clean_stale(buf);
  return buf;
}

/* A cached file's bytes (malloc'd, NUL-terminated) in *out. 0, or -1 when it
** does not exist, -2 when it cannot be used: not a regular file (opened
** without blocking: a FIFO named like a cache file must not hang the
** process), larger than max, unreadable. */
static int read_file(const char *path, size_t *n, size_t max, char **out)
{
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return errno == ENOENT ? -1 : -2;
  struct stat st;
  char *b = NULL;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "tide.compile: %s in the kernel cache is not a regular file; it is ignored (a cache miss)\n", path);
    close(fd);
    return -2;
  }
  if ((size_t)st.st_size <= max && (b = malloc(st.st_size + 1))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, b + got, st.st_size - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += r;
    }
    b[got] = 0;
    *n = got;
    if (got != (size_t)st.st_size) { free(b); b = NULL; }
  }
  close(fd);
  *out = b;
  return b ? 0 : -2;
}

static int fsync_path(const char *path)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* "<dir>/<16 hex digits of bh><ext>", malloc'd */
static char *cache_path(const char *dir, uint64_t bh, const char *ext)
{
  char name[40];
  snprintf(name, sizeof name, "/%016llx%s", (unsigned long long)bh, ext);
  return path_cat(dir, name);
}

/* Load batch bh from the disk cache into fns. 0 = loaded, 1 = not there,
** -1 = there but invalid (deleted). */
/* dlopen a compiled batch (kept open for the process) and find its kernels */
static int load_so(const char *so, CgKernel *const *ks, int n, CgKernelFn *fns)
{
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  for (int i = 0; dl && i < n; i++)
    if (!(fns[i] = (CgKernelFn)dlsym(dl, ks[i]->name))) { dlclose(dl); dl = NULL; }
  return dl ? 0 : -1;
}

/* -- Builds that cannot end the process ----------------------------------------------------
** libgccjit ends the process on an internal compiler error (exit(4), as gcc
** does), and libgccjit 12 has such errors on a few AVX-512 patterns (a
** float64 comparison of a value with itself narrowed to bytes). So a batch is
** compiled in a forked child into a shared object, which the parent loads; a
** compile error comes back through a pipe; a child that died is tried once
** more at x86-64-v3 (one note), then reported with the batch's C text.
** TIDE_CG_FORK=0 compiles in the process instead (debugging). */
static int fork_off(void)
{
  static int v = -1;
  if (v < 0) { const char *e = getenv("TIDE_CG_FORK"); v = e && !strcmp(e, "0"); }
  return v;
}

static int safe_build(CgKernel *const *ks, int n, const char *path)
{
  /* libgccjit is loaded here, once: each child inherits it (a missing one is
  ** reported here, not from a child) */
  int lrc = cg_gccjit_load();
  if (lrc) return lrc;
  if (fork_off()) return cg_jit_build(ks, n, path, NULL);
  for (int attempt = 0; attempt < 2; attempt++) {
    int pfd[2];
    if (pipe(pfd)) return rt_err(TD_ERR_STATE, "cg: pipe failed: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) { close(pfd[0]); close(pfd[1]); return cg_jit_build(ks, n, path, NULL); }
    if (pid == 0) {
      close(pfd[0]);
      if (attempt) __atomic_store_n(&host_lanes, 8, __ATOMIC_RELAXED);
      int rc = cg_jit_build(ks, n, path, NULL);
      if (rc) {
        const char *e = td_last_error();
        for (size_t k = 0, len = strlen(e); k < len; ) { ssize_t w = write(pfd[1], e + k, len - k); if (w <= 0) break; k += (size_t)w; }
      }
      _exit(rc ? 1 : 0);
    }
    close(pfd[1]);
    char *msg = NULL; size_t len = 0, cap = 0;
    for (;;) {
      if (len + 4096 > cap) { char *m = realloc(msg, cap = cap ? 2 * cap : 8192); if (!m) break; msg = m; }
      ssize_t r = read(pfd[0], msg + len, cap - len - 1);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += (size_t)r;
    }
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) <= 1) {
      int rc = WEXITSTATUS(st) ? rt_err(TD_ERR_STATE, "%s", msg ? (msg[len] = 0, msg) : "cg: compile failed") : 0;
      free(msg);
      return rc;
    }
    free(msg);
    char how[64];
    if (WIFSIGNALED(st)) snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(st));
    else snprintf(how, sizeof how, "exit status %d, an internal compiler error", WEXITSTATUS(st));
    if (attempt == 0 && cg_host_lanes() == 16) {
      fprintf(stderr, "tide.compile: libgccjit crashed compiling %s at -march=x86-64-v4 (%s); compiling it for "
              "x86-64-v3 instead\n", ks[0]->name, how);
      continue;
    }
    char *src = cg_c_source_batch(ks, n, cg_host_lanes(), NULL);
    int rc = rt_err(TD_ERR_STATE, "cg: libgccjit crashed compiling %s%s (%s)\n%s", ks[0]->name,
                    n > 1 ? " (and the rest of its batch)" : "", how, src ? src : "");
    free(src);
    return rc;
  }
  return 0;
}

/* a batch compiled (safely) into a temp file and loaded: the in-memory cache without a disk cache */
static int mem_build(CgKernel *const *ks, int n, CgKernelFn *fns)
{
  if (fork_off()) return cg_jit_build(ks, n, NULL, fns);
  const char *t = getenv("TMPDIR");
  char *path = path_cat(t && *t ? t : "/tmp", "/tide-kernels-XXXXXX.so");
  int fd = path ? mkstemps(path, 3) : -1;
  if (fd < 0) { free(path); return cg_jit_build(ks, n, NULL, fns); }
  close(fd);
  int rc = safe_build(ks, n, path);
  if (!rc && load_so(path, ks, n, fns)) rc = rt_err(TD_ERR_STATE, "cg: cannot load %s: %s", path, dlerror());
  unlink(path);                               /* the mapping stays valid */
  free(path);
  return rc;
}

static int disk_load(const char *dir, uint64_t bh, CgKernel *const *ks, int n, CgKernelFn *fns)
{
  char *so = cache_path(dir, bh, ".so"), *meta = cache_path(dir, bh, ".meta"), *m = NULL, *b = NULL;
  int res = 1;
  if (!so || !meta) goto done;
  size_t mn = 0, sn = 0;
  int mrc = read_file(meta, &mn, 4096, &m);
  if (mrc == -2) goto done;                                /* unusable: a miss, left alone */
  if (mrc == -1) {
    struct stat st;
    if (!lstat(so, &st) && S_ISREG(st.st_mode)) { unlink(so); res = -1; }   /* a .so without meta: foreign or torn */
    goto done;
  }
  CgMeta md;
  int ok = cg_meta_parse(m, mn, &md) == 0 && md.version == CG_FORMAT_VERSION && md.hash == bh;
  uint64_t size = md.size, sum = md.fnv;
  int src = ok ? read_file(so, &sn, CG_MAX_SO, &b) : 0;
  if (ok && src == -1) goto done;                          /* meta written, .so not yet renamed */
  if (ok && src == -2 && !b) {
    struct stat st;
    if (lstat(so, &st) || !S_ISREG(st.st_mode)) goto done; /* not a regular file: a miss, left alone */
  }
  ok = ok && b && sn == size && sn > 4 && !memcmp(b, "\177ELF", 4) && fnv(0xcbf29ce484222325ull, b, sn) == sum;
  if (!ok || load_so(so, ks, n, fns)) { unlink(so); unlink(meta); res = -1; goto done; }
  res = 0;                                                 /* the handle stays open for the process */
done:
  free(so); free(meta); free(m); free(b);
  return res;
}

/* -- Temp files ---------------------------------------------------------------------------
** A batch is compiled into ".tmp-<batch hash>-<host>-<pid>-XXXXXX" (mkstemp)
** and renamed into place. A process killed while compiling leaves its temp
** files behind; the first compile of each process that uses the directory
** removes those of this host whose process is gone, and any other ".tmp-"
** file older than a day (another host's, or an older tide's). */

static char host_buf[72];
static void host_fill(void)
{
  char h[65] = "";
  gethostname(h, sizeof h - 1);
  int k = 0;
  for (const char *c = h; *c && k < 64; c++)          /* '-' separates the name's fields */
    host_buf[k++] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ? *c : '_';
  if (!k) host_buf[k++] = '_';
  host_buf[k] = 0;
}
/* this host's name, as a temp file's field */
static const char *host_tag(void)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, host_fill);
  return host_buf;
}

static void clean_stale(const char *dir)
{
  static char *done;                       /* the directory cleaned last (cg_mu held) */
  if (done && !strcmp(done, dir)) return;
  free(done);
  done = path_cat(dir, "");
  DIR *d = opendir(dir);
  if (!d) return;
  const char *me = host_tag();
  time_t now = time(NULL);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, ".tmp-", 5)) continue;
    char host[72], suf[8];
    int pid = 0, end = 0, rm = 0;
    if (sscanf(e->d_name, ".tmp-%*16[0-9a-f]-%64[^-]-%d-%6[A-Za-z0-9]%n", host, &pid, suf, &end) == 3 &&
        !e->d_name[end] && !strcmp(host, me))
      rm = pid > 0 && pid != getpid() && kill(pid, 0) && errno == ESRCH;
    else {
      struct stat st;
      rm = !fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) && now - st.st_mtime > 86400;
    }
    if (rm) unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

static int tmp_file(const char *dir, uint64_t bh, char **path)
{
  char name[128];
  snprintf(name, sizeof name, "/.tmp-%016llx-%s-%d-XXXXXX", (unsigned long long)bh, host_tag(), (int)getpid());
  if (!(*path = path_cat(dir, name))) return -1;
  int fd = mkstemp(*path);
  if (fd < 0) { free(*path); *path = NULL; }
  return fd;
}

/* Compile the batch into the cache dir and load it. 0, or nonzero when the
** disk could not be used (the caller compiles in memory); *rc a compile error. */
static int disk_build(const char *dir, uint64_t bh, CgKernel *const *ks, int n, CgKernelFn *fns, int *rc)
{
  char *so = cache_path(dir, bh, ".so"), *meta = cache_path(dir, bh, ".meta"), *tso = NULL, *tmeta = NULL, *b = NULL;
  int res = 1, fd;
  if (!so || !meta || (fd = tmp_file(dir, bh, &tso)) < 0) goto done;
  close(fd);
  *rc = safe_build(ks, n, tso);
  if (*rc) { unlink(tso); res = 0; goto done; }
  cg_st.compiles++;
  size_t sn = 0;
  read_file(tso, &sn, CG_MAX_SO, &b);
  int fail = !b || sn < 4 || fsync_path(tso);
  if (!fail) {
    FILE *f = (fd = tmp_file(dir, bh, &tmeta)) >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) { if (fd >= 0) close(fd); fail = 1; }
    else {
      CgMeta md = { CG_FORMAT_VERSION, bh, sn, fnv(0xcbf29ce484222325ull, b, sn) };
      char mb[CG_META_MAX];
      fputs(cg_meta_format(mb, sizeof mb, &md) > 0 ? mb : "", f);
      fail = fflush(f) || fsync(fileno(f));
      fail = fclose(f) || fail;
      fail = fail || rename(tmeta, meta) || rename(tso, so);
    }
    if (fail && tmeta) unlink(tmeta);
  }
  if (fail) { unlink(tso); goto done; }
  int fd2 = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd2 >= 0) { fsync(fd2); close(fd2); }
  res = disk_load(dir, bh, ks, n, fns) == 0 ? 0 : 1;
done:
  free(so); free(meta); free(tso); free(tmeta); free(b);
  return res;
}

/* -- Compile ---------------------------------------------------------------------------- */

static double now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

int cg_compile(CgKernel *const *ks, int n, CgKernelFn *fns)
{
  if (n <= 0) return 0;
  CgKernel **miss = malloc(n * sizeof *miss);
  CgKernelFn *mfn = malloc(n * sizeof *mfn);
  if (!miss || !mfn) { free(miss); free(mfn); return rt_err(TD_ERR_NOMEM, "cg: out of memory"); }
  int nm = 0, rc = 0;
  pthread_mutex_lock(&cg_mu);
  for (int i = 0; i < n; i++) {
    if ((fns[i] = tab_get(ks[i]->hash))) { cg_st.mem_hits++; continue; }
    int dup = 0;
    for (int j = 0; j < nm && !dup; j++) dup = miss[j]->hash == ks[i]->hash;
    if (!dup) miss[nm++] = ks[i];
  }
  if (nm) {
    double t0 = now_ms();
    char *dir = cache_dir();
    uint64_t bh = batch_hash(miss, nm);
    int done = 0, loaded = 0;
    if (dir && disk_load(dir, bh, miss, nm, mfn) == 0) { cg_st.disk_loads++; done = loaded = 1; }
    if (!done && dir) done = disk_build(dir, bh, miss, nm, mfn, &rc) == 0;
    if (!done && !rc) {
      rc = mem_build(miss, nm, mfn);
      if (!rc) cg_st.compiles++;
    }
    if (!rc) {
      for (int j = 0; j < nm; j++) tab_put(miss[j]->hash, mfn[j]);
      if (!loaded) cg_st.kernels_compiled += nm;
    }
    free(dir);
    cg_st.compile_ms += now_ms() - t0;
    for (int i = 0; i < n && !rc; i++)
      if (!fns[i]) for (int j = 0; j < nm; j++) if (miss[j]->hash == ks[i]->hash) { fns[i] = mfn[j]; break; }
  }
  pthread_mutex_unlock(&cg_mu);
  free(miss); free(mfn);
  return rc;
}

void cg_stats(CgStats *s)
{
  pthread_mutex_lock(&cg_mu);
  *s = cg_st;
  pthread_mutex_unlock(&cg_mu);
}

/* -- Run ---------------------------------------------------------------------------------- */

typedef struct { CgKernelFn fn; char **bufs; const double *args; int64_t off; const int64_t *dims; int64_t rows; } CgRun;

static void run_rows(void *ctx, int64_t r0, int64_t r1)
{
  const CgRun *r = ctx;
  r->fn(r->off + r0, r->off + r1, r->bufs, r->args, r->dims);
}

/* row mode with column sums: whole blocks of rows */
static void run_blocks(void *ctx, int64_t b0, int64_t b1)
{
  const CgRun *r = ctx;
  int64_t blk = r->dims[CG_DIM_BLK], e = b1 * blk;
  r->fn(b0 * blk, e < r->rows ? e : r->rows, r->bufs, r->args, r->dims);
}

/* column mode: the partials of every unit, grown on demand, kept per calling thread */
static _Thread_local char *run_part;
static _Thread_local size_t run_npart;

/* Calls that store at least this many bytes bypass the cache (cg.h,
** "Non-temporal stores"): TIDE_NT_BYTES, default 16 MiB, about what one
** core complex's last-level cache holds. (sysconf's LLC size is no guide:
** 320 MiB inside this machine's VM.) */
static int64_t nt_bytes(void)
{
  static int64_t cached = -1;                 /* atomic: read once, by whichever thread is first */
  int64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v < 0) {
    const char *s = getenv("TIDE_NT_BYTES");
    char *end = NULL;
    long long x = s && *s ? strtoll(s, &end, 10) : -1;
    v = x >= 0 && end && *end == 0 ? (int64_t)x : (int64_t)16 << 20;   /* not a byte count: the default */
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

/* dims[CG_DIM_NT] of a row kernel's call: every buffer a non-temporal store
** may write starts 64-byte aligned, and those stores write enough. */
static int kernel_nt(const CgKernel *k, char **bufs, int64_t rows)
{
  if (k->ntrow <= 0 || (k->flat > 0 ? k->flat / k->inner : rows) * k->ntrow < nt_bytes()) return 0;
  for (int i = 0; i < k->nins; i++)
    if (k->ins[i].kind == CG_STORE && k->ins[i].level == 1 && (uintptr_t)bufs[k->acc[k->ins[i].acc].buf] % 64) return 0;
  return 1;
}

static int part_grow(const CgKernel *k, size_t need, int64_t n)
{
  if (need <= run_npart) return 0;
  char *p = realloc(run_part, need);
  if (!p) return rt_err(TD_ERR_NOMEM, "%s: out of memory for %lld partial results", k->name, (long long)n);
  run_part = p; run_npart = need;
  return 0;
}

/* A row kernel with column sums (cg.h): zeroed partials per block of rows,
** whole blocks per thread, then each column's blocks added in order. */
static int run_csums(const CgKernel *k, CgRun *r, char **bufs, int64_t rows, int64_t inner)
{
  int64_t blk = r->dims[CG_DIM_BLK], nblk = r->dims[CG_DIM_NBLK];
  int ns = k->nscratch, nb = k->nbuf - ns;
  /* each sum's partials 1 KiB further modulo 4 KiB than the last, and off the
  ** page offsets of rows: a load whose address matches a pending store's in
  ** its low 12 bits waits for it (4K aliasing; the partials' loop ran ~2x
  ** slower with every stream at the same offset) */
  size_t per = ((size_t)(nblk * inner) * sizeof(double) + 4095) / 4096 * 4096 + 1024;
  if (part_grow(k, 4096 + 512 + per * (size_t)ns, nblk * inner)) return TD_ERR_NOMEM;
  char *base = (char *)(((uintptr_t)run_part + 4095) & ~(uintptr_t)4095) + 512;
  memset(base, 0, per * (size_t)ns);
  char *b[CG_MAX_BUFS];
  memcpy(b, bufs, sizeof *b * (size_t)nb);
  for (int i = 0; i < ns; i++) b[nb + i] = base + (size_t)i * per;
  r->bufs = b; r->rows = rows;
  rt_parallel_for(nblk, (16384 + inner * blk - 1) / (inner * blk), run_blocks, r);
  for (int i = 0, sb = nb; i < k->nins; i++) {
    const CgIns *in = &k->ins[i];
    if (in->kind != CG_CSUM) continue;
    const CgAccess *a = &k->acc[in->acc];
    const char *p = b[sb++];
    bool f32 = in->dtype == TD_FLOAT32, o32 = k->buf_dtype[a->buf] == TD_FLOAT32;
    for (int64_t c = 0; c < inner; c++) {
      double s = 0;
      for (int64_t q = 0; q < nblk; q++) s += f32 ? ((const float *)p)[q * inner + c] : ((const double *)p)[q * inner + c];
      int64_t o = a->offset + c * a->istride;
      if (o32) ((float *)bufs[a->buf])[o] = (float)s; else ((double *)bufs[a->buf])[o] = s;
    }
  }
  return 0;
}

int cg_kernel_run(const CgKernel *k, CgKernelFn fn, char **bufs, const double *args)
{
  char *based[CG_MAX_BUFS];           /* the pointers at the buffer bases (cg.h) */
  int nreal = k->nbuf - k->nscratch;   /* scratch buffers come later (they have no base) */
  for (int i = 0; i < nreal && i < CG_MAX_BUFS; i++)
    if (k->buf_base[i]) {
      if (bufs != based) { memcpy(based, bufs, sizeof *based * (size_t)nreal); bufs = based; }
      based[i] += k->buf_base[i] * (int64_t)rt_dtype_size(k->buf_dtype[i]);
    }
  int64_t rows = cg_kernel_rows(k), inner = k->inner > 0 ? k->inner : 1, dims[CG_NDIMS];
  cg_kernel_dims(k, dims);        /* this kernel's sizes, run-time arguments of its code */
  CgRun r = { fn, bufs, args, 0, dims };
  if (k->cred <= 0) {
    dims[CG_DIM_NT] = kernel_nt(k, bufs, rows);
    if (k->nscratch > 0) return run_csums(k, &r, bufs, rows, inner);
    rt_parallel_for(rows, (16384 + inner - 1) / inner, run_rows, &r);
    return 0;
  }
  /* phase 1 folds (row, block) units into partials, phase 2 combines each row's */
  int64_t nblk = dims[CG_DIM_NBLK], n1 = dims[CG_DIM_UNITS], slot = k->ctile * 8;
  int ns = k->nscratch, nb = k->nbuf - ns;
  if (part_grow(k, (size_t)(n1 * slot * ns), n1)) return TD_ERR_NOMEM;
  char *b[CG_MAX_BUFS];
  memcpy(b, bufs, sizeof *b * (size_t)nb);
  for (int i = 0; i < ns; i++) b[nb + i] = run_part + (size_t)(i * n1 * slot);
  r.bufs = b;
  rt_parallel_for(n1, (16384 + k->ctile * k->cblk - 1) / (k->ctile * k->cblk), run_rows, &r);
  r.off = n1;
  rt_parallel_for(rows, (16384 + k->ctile * nblk - 1) / (k->ctile * nblk), run_rows, &r);
  return 0;
}
