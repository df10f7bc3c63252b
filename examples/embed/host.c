/*
** examples/embed/host.c -- a C program that embeds LuaJIT and tide: it loads a
** Lua model script (examples/embed/model.lua), hands it its own C arrays as
** tensors without a copy (td_from_blob), lets it fit a linear model, reads the
** weights straight from its array and asks for predictions into another one.
** The arrays stay the host's: tide calls on_release when the last tensor over
** each dies (Lua's handles die when the state closes), and never frees them.
**
** Build and run (make test does it: spec/examples/embed_spec.lua):
**   make build/embed_host && ./build/embed_host
** or, against an installed tide:
**   cc host.c $(pkg-config --cflags --libs tide luajit) -ldl -o host && ./host model.lua
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "tide.h"

#ifndef TIDE_LUA_DIR
#define TIDE_LUA_DIR ""          /* a checkout's lua/ (the Makefile sets it); installed: on the default path */
#endif
#ifndef MODEL_SCRIPT
#define MODEL_SCRIPT "model.lua"
#endif

enum { N = 64 };
static int released;

static void on_release(void *data, void *ctx)
{
  (void)data;
  released++;
  printf("released %s\n", (const char *)ctx);
}

static int fail(lua_State *L, const char *what)
{
  fprintf(stderr, "embed: %s: %s\n", what, lua_tostring(L, -1));
  lua_close(L);
  return 1;
}

int main(int argc, char **argv)
{
  const char *script = argc > 1 ? argv[1] : MODEL_SCRIPT;

  /* the data: y = 1.5 x1 - 2 x2 + 0.5 x3 + 0.25, from a fixed LCG */
  static float X[N][3], y[N], w[4], pred[N];
  uint32_t r = 12345;
  for (int i = 0; i < N; i++) {
    for (int j = 0; j < 3; j++) { r = r * 1664525u + 1013904223u; X[i][j] = (float)(r >> 8) / 16777216.0f * 2 - 1; }
    y[i] = 1.5f * X[i][0] - 2.0f * X[i][1] + 0.5f * X[i][2] + 0.25f;
  }

  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  /* where the Lua side finds tide: a checkout's lua/ first, and the library
  ** this program is linked with (so there is one runtime in the process) */
  if (TIDE_LUA_DIR[0]) {
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", TIDE_LUA_DIR, TIDE_LUA_DIR);
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
  }
  Dl_info info;
  if (dladdr((void *)td_from_blob, &info) && info.dli_fname) {
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_newtable(L);
    lua_pushstring(L, info.dli_fname);
    lua_setfield(L, -2, "lib");
    lua_setfield(L, -2, "tide.paths");      /* package.loaded["tide.paths"] = { lib = ... } */
    lua_pop(L, 2);
  }
  if (luaL_dofile(L, script)) return fail(L, script);     /* leaves the model table */

  /* the host's arrays as tensors: no copy, released through on_release */
  int64_t sx[2] = { N, 3 }, sy[1] = { N }, sw[1] = { 4 };
  td_tensor *tx = td_from_blob(X, 2, sx, NULL, TD_FLOAT32, on_release, "X");
  td_tensor *ty = td_from_blob(y, 1, sy, NULL, TD_FLOAT32, on_release, "y");
  td_tensor *tw = td_from_blob(w, 1, sw, NULL, TD_FLOAT32, on_release, "w");
  td_tensor *tp = td_from_blob(pred, 1, sy, NULL, TD_FLOAT32, on_release, "pred");
  if (!tx || !ty || !tw || !tp) { fprintf(stderr, "embed: %s\n", td_last_error()); return 1; }

  lua_getfield(L, -1, "fit");
  lua_pushlightuserdata(L, tx); lua_pushlightuserdata(L, ty); lua_pushlightuserdata(L, tw);
  if (lua_pcall(L, 3, 1, 0)) return fail(L, "fit");
  printf("loss %.6f\n", lua_tonumber(L, -1));
  lua_pop(L, 1);
  printf("w = %.3f %.3f %.3f, b = %.3f (true: 1.5 -2 0.5, 0.25)\n", w[0], w[1], w[2], w[3]);

  lua_getfield(L, -1, "predict");
  lua_pushlightuserdata(L, tx); lua_pushlightuserdata(L, tw); lua_pushlightuserdata(L, tp);
  if (lua_pcall(L, 3, 0, 0)) return fail(L, "predict");
  double err = 0;
  for (int i = 0; i < N; i++) err = fmax(err, fabs(pred[i] - y[i]));
  printf("max |prediction - y| = %.4f\n", err);

  /* C's references go now; Lua's when the state closes (its handles are collected) */
  td_release(tx); td_release(ty); td_release(tw); td_release(tp);
  printf("released before close: %d\n", released);
  lua_close(L);
  printf("released after close: %d of 4\n", released);
  int ok = released == 4 && err < 0.05 && fabs(w[0] - 1.5) < 0.05 && fabs(w[1] + 2) < 0.05 && fabs(w[3] - 0.25) < 0.05;
  return ok ? 0 : 1;
}
