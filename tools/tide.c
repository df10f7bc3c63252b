/*
** tools/tide.c -- the `tide` command: LuaJIT with tide, as `th` was for Torch7.
** `tide` opens the REPL (lua/tide/repl.lua), `tide script.lua args...` runs a
** script with `arg` set as luajit sets it, `tide -e code` runs code; options
** are read in Lua (lua/tide/cmd.lua). C does what Lua cannot: find the Lua
** modules and the library of this build from the executable's own path (no
** environment variables needed), and turn SIGINT into an interrupt.
**
** Ctrl-C while code runs: td_interrupt() makes the dispatcher fail the next op
** (a loop of tensor ops stops even when LuaJIT has compiled it), and a Lua hook
** stops a pure-Lua loop the interpreter runs. A loop compiled by LuaJIT that
** calls no op never checks: a second Ctrl-C while the first is still pending
** ends the process, as in luajit.
*/
#define _GNU_SOURCE
#include "tide.h"
#include "tide_git.h"          /* TD_GIT_DESCRIBE, made by the Makefile */
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>

#ifndef TIDE_SRC_LUA
#define TIDE_SRC_LUA ""        /* the checkout's lua/ at build time: a last resort */
#endif

/* -- Locating the build ------------------------------------------------------------------- */

static int is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }

/* The directory of the running executable (realpath), or "" */
static void exe_dir(char *out, size_t n)
{
  char buf[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", buf, sizeof buf - 1);
  out[0] = 0;
  if (k <= 0) return;
  buf[k] = 0;
  char *slash = strrchr(buf, '/');
  if (!slash) return;
  *slash = 0;
  snprintf(out, n, "%s", buf);
}

/* package.path gets the first Lua dir holding tide/init.lua: the checkout's
** lua/ next to build/ (bin/../lua), the installed share/lua/5.1, or the source
** checkout this binary was built from. */
static void set_paths(lua_State *L, const char *dir)
{
  char cand[3][PATH_MAX + 32], probe[PATH_MAX + 64 + 32];
  snprintf(cand[0], sizeof cand[0], "%s/../lua", dir);
  snprintf(cand[1], sizeof cand[1], "%s/../share/lua/5.1", dir);
  snprintf(cand[2], sizeof cand[2], "%s", TIDE_SRC_LUA);
  for (int i = 0; i < 3; i++) {
    if (!cand[i][0]) continue;
    snprintf(probe, sizeof probe, "%.*s/tide/init.lua", PATH_MAX, cand[i]);
    if (!is_file(probe)) continue;
    char real[PATH_MAX];
    const char *d = realpath(cand[i], real) ? real : cand[i];
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", d, d, lua_tostring(L, -1));
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
    return;
  }
}

/* The Lua side (tide.core) loads libtide by path: point it at the library
** this executable is linked with, so there is one runtime in the process,
** and at this build's FFI declarations when the executable sits in a build
** dir. A user's own TIDE_LIB / TIDE_BUILD win. */
static void set_build_env(const char *dir)
{
  char p[PATH_MAX + 32];
  snprintf(p, sizeof p, "%s/tide_cdef.lua", dir);
  if (is_file(p)) setenv("TIDE_BUILD", dir, 0);
  Dl_info info;
  char real[PATH_MAX];
  if (!dladdr((void *)td_version_string, &info) || !info.dli_fname || !info.dli_fname[0]) return;
  if (info.dli_fname[0] == '/') setenv("TIDE_LIB", info.dli_fname, 0);
  /* found through a relative LD_LIBRARY_PATH entry: the name is relative too */
  else if (realpath(info.dli_fname, real)) setenv("TIDE_LIB", real, 0);
}

/* -- SIGINT --------------------------------------------------------------------------------- */

enum { SIG_OFF, SIG_INPUT, SIG_EVAL };
static lua_State *host_L;
static volatile sig_atomic_t sig_mode = SIG_OFF;
static struct sigaction sig_prev;
static int sig_installed;
static char tide_dir[PATH_MAX];        /* "@/.../lua/tide/": chunk sources of tide's own Lua code */
static size_t tide_dir_len;

/* The hook a Ctrl-C sets (the interpreter runs it at its next instruction).
** An op may have taken the request already; inside tide's own Lua code the
** next op raises it (library state stays whole); elsewhere raise it here. */
static void hook_stop(lua_State *L, lua_Debug *ar)
{
  (void)ar;
  if (!td_interrupt_pending(0)) { lua_sethook(L, NULL, 0, 0); return; }
  /* the innermost Lua function decides (the hook may run at a call of a C
  ** function, which belongs to its caller) and gives the position */
  lua_Debug a;
  for (int level = 0; lua_getstack(L, level, &a); level++) {
    if (!lua_getinfo(L, "Sl", &a) || a.currentline <= 0) continue;
    if (tide_dir_len && strncmp(a.source, tide_dir, tide_dir_len) == 0) return;
    lua_sethook(L, NULL, 0, 0);
    td_interrupt_pending(1);
    lua_pushfstring(L, "%s:%d: interrupted", a.short_src, a.currentline);
    lua_error(L);
  }
  lua_sethook(L, NULL, 0, 0);
  td_interrupt_pending(1);
  lua_pushliteral(L, "interrupted");
  lua_error(L);
}

static void on_sigint(int sig)
{
  if (sig_mode == SIG_EVAL && td_interrupt_pending(0)) {
    static const char msg[] = "\ntide: interrupted twice while the first was pending (a loop LuaJIT compiled "
                              "runs no hook); exiting\n";
    ssize_t rc = write(2, msg, sizeof msg - 1);
    (void)rc;
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  td_interrupt();
  if (sig_mode == SIG_EVAL) lua_sethook(host_L, hook_stop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* host.sigint(mode [, tide_dir]): "eval" while code runs (interrupt + hook),
** "input" at the prompt (interrupt only: a read or poll returns EINTR),
** "off" restores the previous handler. */
static int host_sigint(lua_State *L)
{
  static const char *const modes[] = { "off", "input", "eval", NULL };
  int m = luaL_checkoption(L, 1, NULL, modes);
  const char *dir = luaL_optstring(L, 2, NULL);
  if (dir) { snprintf(tide_dir, sizeof tide_dir, "%s", dir); tide_dir_len = strlen(tide_dir); }
  lua_sethook(L, NULL, 0, 0);
  if (m == SIG_OFF) {
    sig_mode = SIG_OFF;
    if (sig_installed) { sigaction(SIGINT, &sig_prev, NULL); sig_installed = 0; }
    return 0;
  }
  sig_mode = m;
  if (!sig_installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;          /* no SA_RESTART: the prompt's poll sees EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &sig_prev)) return luaL_error(L, "sigint: sigaction failed");
    sig_installed = 1;
  }
  return 0;
}

static int host_open(lua_State *L)
{
  lua_newtable(L);
  lua_pushcfunction(L, host_sigint); lua_setfield(L, -2, "sigint");
  lua_pushstring(L, td_version_string()); lua_setfield(L, -2, "version");
  lua_pushstring(L, TD_GIT_DESCRIBE); lua_setfield(L, -2, "git");
  lua_pushstring(L, LUAJIT_VERSION); lua_setfield(L, -2, "luajit");
  return 1;
}

/* -- main ----------------------------------------------------------------------------------- */

static int traceback(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  lua_pushstring(L, msg);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

int main(int argc, char **argv)
{
  lua_State *L = luaL_newstate();
  if (!L) { fprintf(stderr, "tide: cannot create the Lua state (out of memory)\n"); return 1; }
  host_L = L;
  luaL_openlibs(L);
  char dir[PATH_MAX];
  exe_dir(dir, sizeof dir);
  if (dir[0]) { set_paths(L, dir); set_build_env(dir); }
  /* package.preload["tide.host"] */
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, host_open);
  lua_setfield(L, -2, "tide.host");
  lua_pop(L, 2);

  /* require("tide.cmd").main(argv) under a traceback */
  lua_pushcfunction(L, traceback);
  int base = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushstring(L, "tide.cmd");
  if (lua_pcall(L, 1, 1, base)) {
    fprintf(stderr, "tide: cannot load the Lua modules of tide (looked next to %s): %s\n", dir,
            lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_getfield(L, -1, "main");
  lua_createtable(L, argc, 1);
  for (int i = 0; i < argc; i++) { lua_pushstring(L, argv[i]); lua_rawseti(L, -2, i); }
  int status = 1;
  if (lua_pcall(L, 1, 1, base)) {
    fprintf(stderr, "tide: %s\n", lua_tostring(L, -1));
  } else {
    status = lua_isnumber(L, -1) ? (int)lua_tointeger(L, -1) : 0;
  }
  lua_close(L);
  return status;
}
