/*
** lua_driver.c -- libFuzzer driver for tide's Lua loaders (safetensors, .npy,
** IDX): it embeds LuaJIT, loads spec/fuzz/loaders/harness.lua, and for each
** input writes the bytes to a fresh file and calls the harness's run(target,
** path), which loads it through the real loader and checks the outcome.
**
** Coverage from Lua. libFuzzer only sees the C it instruments, and the parsers
** are Lua, so the driver feeds it Lua-level edge coverage: the JIT is off (a
** compiled trace calls no hooks), a line hook (lua_sethook, LUA_MASKLINE) runs
** on every new line of a chunk under lua/tide/, and the pair (previous line,
** this line) is hashed, AFL-style, into an array placed in the section
** "__libfuzzer_extra_counters", which libFuzzer clears before each input and
** reads after it like its own 8-bit counters. New line-to-line edges, and new
** hit-count buckets of an edge (loop trip counts), make an input interesting.
**
** A finding (the harness raises: a crash-free but unclean error, a broken
** invariant) aborts, so libFuzzer saves the input as a crash. Signals,
** timeouts (-timeout) and memory blowups (-rss_limit_mb, -malloc_limit_mb for
** malloc in libtide) are libFuzzer's own. Environment: TIDE_FUZZ_TARGET
** (safetensors | npy | idx), TIDE_HOME (the checkout; default: compiled in),
** TIDE_FUZZ_LUA_COV=0 (no Lua coverage: blind mutation, for comparison).
*/
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TIDE_HOME_DEFAULT
#define TIDE_HOME_DEFAULT "."
#endif

/* -- Lua edge coverage --------------------------------------------------------- */

#define LCOV_BITS 16
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lcov[1 << LCOV_BITS];
static uint32_t lcov_prev;
static const char *lcov_src;     /* the last chunk name seen (interned: a stable pointer) */
static uint32_t lcov_salt;       /* its hash, or 0 when it is not under lua/tide/ */

static uint32_t mix(uint32_t x)
{
  x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16;
  return x;
}

static void lcov_hook(lua_State *L, lua_Debug *ar)
{
  if (!lua_getinfo(L, "S", ar)) return;
  if (ar->source != lcov_src) {
    lcov_src = ar->source;
    lcov_salt = 0;
    if (strstr(ar->source, "lua/tide/")) {     /* FNV-1a of the chunk name, never 0 */
      uint32_t h = 2166136261u;
      for (const char *p = ar->source; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
      lcov_salt = h | 1;
    }
  }
  if (!lcov_salt) return;
  uint32_t cur = mix(lcov_salt ^ (uint32_t)ar->currentline * 0x9e3779b1u);
  uint8_t *c = &lcov[(cur ^ lcov_prev) & ((1u << LCOV_BITS) - 1)];
  if (*c < 255) (*c)++;
  lcov_prev = cur >> 1;          /* A->B and B->A differ */
}

/* -- The harness ----------------------------------------------------------------- */

static lua_State *L;
static int run_ref, lua_cov = 1;
static const char *target;
static char path[4096];

static void remove_input(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc; (void)argv;
  target = getenv("TIDE_FUZZ_TARGET");
  const char *cov = getenv("TIDE_FUZZ_LUA_COV");
  lua_cov = !(cov && !strcmp(cov, "0"));
  const char *home = getenv("TIDE_HOME");
  if (!home || !*home) home = TIDE_HOME_DEFAULT;
  if (!target) { fprintf(stderr, "lua_driver: set TIDE_FUZZ_TARGET (safetensors, npy or idx)\n"); exit(2); }
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/tide-fuzz-%s-%d", tmp && *tmp ? tmp : "/tmp", target, (int)getpid());
  atexit(remove_input);          /* libFuzzer ends a run with exit() */
  L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  char file[4200];
  snprintf(file, sizeof file, "%s/spec/fuzz/loaders/harness.lua", home);
  lua_pushstring(L, home);
  if (luaL_loadfile(L, file) || (lua_insert(L, -2), lua_pcall(L, 1, 1, 0))) {
    fprintf(stderr, "lua_driver: %s\n", lua_tostring(L, -1));
    exit(2);
  }
  lua_getfield(L, -1, "run");
  run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
  /* a new file each time: a tensor still mapping the last one keeps its own inode */
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) { perror(path); abort(); }
  for (size_t done = 0; done < n;) {
    ssize_t w = write(fd, data + done, n - done);
    if (w <= 0) { perror(path); abort(); }
    done += (size_t)w;
  }
  close(fd);
  lua_rawgeti(L, LUA_REGISTRYINDEX, run_ref);
  lua_pushstring(L, target);
  lua_pushstring(L, path);
  lcov_prev = 0;
  if (lua_cov) lua_sethook(L, lcov_hook, LUA_MASKLINE, 0);
  int rc = lua_pcall(L, 2, 0, 0);
  lua_sethook(L, NULL, 0, 0);
  if (rc) {
    fprintf(stderr, "\n==tide-fuzz== FINDING (%s): %s\n", target, lua_tostring(L, -1));
    abort();
  }
  static unsigned runs;
  if (++runs % 64 == 0) lua_gc(L, LUA_GCCOLLECT, 0);   /* drop loaded tensors and their mappings */
  return 0;
}
