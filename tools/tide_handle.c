/*
** tools/tide_handle.c -- the handle shim: a Lua C module (build/tide_handle.so)
** that only makes and frees tensor handles, as DESIGN.md allows. A handle is
** a full userdata whose payload is the td_tensor pointer (the same layout as
** the FFI's td_handle, so ffi.cast("td_handle *", ud).p reads it), with the
** Tensor metatable plus a C __gc that releases the reference. LuaJIT finalizes
** userdata several times more cheaply than cdata given ffi.gc: one small op
** from Lua costs much less (bench/RESULTS.md). tide.core falls back to ffi.gc
** handles when the shim cannot load.
**
** Not part of libtide.so (a C host without Lua still links) and not linked
** with libtide or LuaJIT: the Lua API comes from the host process (luajit,
** LÖVE, the tide command), td_release's address from the Lua side at open.
**
**   local new = package.loadlib(path, "luaopen_tide_handle")()(mt, release_addr)
**   new(addr)  -- a handle owning the reference at address addr (a number)
*/
#include <lua.h>
#include <lauxlib.h>
#include <stdint.h>

typedef struct td_tensor td_tensor;
static void (*hd_release)(td_tensor *);

/* __gc: drop the reference (a freed handle holds NULL) */
static int hd_gc(lua_State *L)
{
  td_tensor **u = (td_tensor **)lua_touserdata(L, 1);
  if (u && *u) { td_tensor *p = *u; *u = NULL; hd_release(p); }
  return 0;
}

/* new(addr): upvalue 1 is the handles' metatable */
static int hd_new(lua_State *L)
{
  td_tensor *p = (td_tensor *)(uintptr_t)lua_tonumber(L, 1);
  td_tensor **u = (td_tensor **)lua_newuserdata(L, sizeof *u);
  *u = p;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_setmetatable(L, -2);
  return 1;
}

/* open(mt, release_addr) -> new: mt gets __gc; release_addr is td_release's address */
static int hd_open(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TTABLE);
  uintptr_t a = (uintptr_t)luaL_checknumber(L, 2);
  if (!a || (lua_Number)a != lua_tonumber(L, 2)) return luaL_error(L, "tide_handle: bad release address");
  hd_release = (void (*)(td_tensor *))a;
  lua_pushcfunction(L, hd_gc);
  lua_setfield(L, 1, "__gc");
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, hd_new, 1);
  return 1;
}

int luaopen_tide_handle(lua_State *L)
{
  lua_pushcfunction(L, hd_open);
  return 1;
}
