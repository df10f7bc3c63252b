--[[
make_seeds.lua -- writes the seed files of the loader fuzz corpus: small valid
files of every dtype and of the shapes that take distinct paths (0-dim, size
0, 1-D, 2-D, 8 dims), for each format, plus the cache's metadata record.
  luajit spec/fuzz/loaders/make_seeds.lua [corpus dir, default spec/fuzz/corpus]
Seeds are named seed-*; files that fuzzing found worth keeping (minimized
crashers, inputs that reach new code) sit beside them under other names.
--]]
local out = arg[1] or "spec/fuzz/corpus"
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local data = require "tide.data"

local function write(path, bytes) local f = assert(io.open(path, "wb")); f:write(bytes); f:close() end
local function dir(name) os.execute(("mkdir -p %q"):format(out .. "/" .. name)); return out .. "/" .. name .. "/" end
local dtypes = { "bool", "uint8", "int32", "int64", "float32", "float64" }
local shapes = { s0 = {}, e0 = { 0 }, v3 = { 3 }, m23 = { 2, 3 }, z20 = { 2, 0 }, d8 = { 1, 2, 1, 1, 2, 1, 1, 1 } }

local function sample(shape, dt)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local vals = {}
  for i = 1, n do vals[i] = dt == "bool" and i % 2 == 0 or (i * 7) % 5 - (dt == "uint8" and 0 or 2) end
  return tide.tensor(vals, { dtype = dt }):reshape(#shape > 0 and shape or {})
end

-- safetensors: one tensor per file, a tree with every kind of node, a foreign flat file
local st = dir("safetensors")
for _, dt in ipairs(dtypes) do
  for sn, shape in pairs(shapes) do
    if dt == "float32" or sn == "m23" or sn == "s0" then tide.save(sample(shape, dt), st .. "seed-" .. dt .. "-" .. sn) end
  end
end
tide.save({ w = sample({ 2, 2 }, "float32"), b = sample({ 2 }, "int64"), { 1, 2.5, "x", true },
  n = { math.huge, -math.huge, 0 / 0 }, deep = { a = { b = { c = sample({ 1 }, "uint8") } } } }, st .. "seed-tree")
do  -- no "tide.tree": what other tools write; an unaligned F32 entry read instead of mapped
  local h = '{"__metadata__":{"format":"pt"},"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},' ..
    '"b":{"dtype":"F32","shape":[1],"data_offsets":[3,7]}}'
  h = h .. (" "):rep((8 - #h % 8) % 8)
  local n, len = #h, {}
  for i = 1, 8 do len[i] = string.char(n % 256); n = math.floor(n / 256) end
  write(st .. "seed-flat-unaligned", table.concat(len) .. h .. "\1\2\3" .. "\0\0\128\63")
end

-- error paths the fuzzer reaches rarely, and the inputs of fixed findings (FUZZING.md)
local function st_file(h, payload)
  local n, len = #h, {}
  for i = 1, 8 do len[i] = string.char(n % 256); n = math.floor(n / 256) end
  return table.concat(len) .. h .. payload
end
write(st .. "seed-err-overlap", st_file('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},' ..
  '"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}', "abcdef"))
write(st .. "seed-err-zero-dim-overflow",
  st_file('{"a":{"dtype":"F32","shape":[0,9007199254740992,9007199254740992],"data_offsets":[0,0]}}', ""))
write(st .. "seed-json-del", st_file('{"__metadata__":{"n":"a\\u00e9\127"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', "\7"))

-- .npy: every dtype, C and Fortran order, format versions 1.0, 2.0 and 3.0
local np = dir("npy")
for _, dt in ipairs(dtypes) do
  for sn, shape in pairs(shapes) do
    if dt == "float32" or sn == "m23" then tide.save_npy(sample(shape, dt), np .. "seed-" .. dt .. "-" .. sn) end
  end
end
local function npy(major, h, payload)
  h = h .. (" "):rep((64 - (#h + 13) % 64) % 64) .. "\n"
  local len = major == 1 and string.char(#h % 256, math.floor(#h / 256)) or
    string.char(#h % 256, math.floor(#h / 256) % 256, 0, 0)
  return "\147NUMPY" .. string.char(major, 0) .. len .. h .. payload
end
local six = "\0\0\128\63\0\0\0\64\0\0\64\64\0\0\128\64\0\0\160\64\0\0\192\64"      -- float32 1..6
write(np .. "seed-fortran", npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", six))
write(np .. "seed-v2", npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", six))
write(np .. "seed-v3-utf8", npy(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", six))
write(np .. "seed-err-huge-dim", npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999999999999), }", ""))
write(np .. "seed-err-zero-dim-overflow",
  npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 9007199254740992, 9007199254740992), }", ""))
write(np .. "seed-u1-dq", npy(1, '{"descr": "<u1", "fortran_order": False, "shape": (2,), }', "\7\8"))

-- IDX: every element type, 1 to 3 dims, plain and gzip
local ix = dir("idx")
local function be32(d) return string.char(math.floor(d / 16777216) % 256, math.floor(d / 65536) % 256, math.floor(d / 256) % 256, d % 256) end
local function idx(code, dims, payload)
  local h = { string.char(0, 0, code, #dims) }
  for _, d in ipairs(dims) do h[#h + 1] = be32(d) end
  return table.concat(h) .. payload
end
write(ix .. "seed-u8", idx(0x08, { 2, 3 }, "\1\2\3\4\5\255"))
write(ix .. "seed-i8", idx(0x09, { 2 }, "\128\5"))
write(ix .. "seed-i16", idx(0x0B, { 2 }, "\255\254\1\0"))
write(ix .. "seed-i32", idx(0x0C, { 1, 2 }, "\0\0\0\7\255\255\255\254"))
write(ix .. "seed-f32", idx(0x0D, { 2 }, "\63\128\0\0\192\32\0\0"))
write(ix .. "seed-f64", idx(0x0E, { 1 }, "\64\9\33\251\84\68\45\24"))
write(ix .. "seed-u8-3d-empty", idx(0x08, { 2, 0, 3 }, ""))
write(ix .. "seed-err-zero-dim-overflow", idx(0x08, { 0, 4294967295, 4294967295 }, ""))
do
  local z = data._zlib()
  local g = z.gzopen(ix .. "seed-u8-gzip", "wb")
  local b = idx(0x08, { 4 }, "\9\8\7\6")
  z.gzwrite(g, b, #b)
  z.gzclose(g)
end

-- the kernel cache's metadata record (jit/cg_meta.c)
local cm = dir("cache_meta")
write(cm .. "seed-meta", "tide-cg 11\nhash 0123456789abcdef\nsize 15872\nfnv 9ae16a3b2f90404f\n")
write(cm .. "seed-meta-zero", "tide-cg 0\nhash 0000000000000000\nsize 0\nfnv 0000000000000000\n")
write(cm .. "seed-meta-max", "tide-cg 2147483647\nhash ffffffffffffffff\nsize 18446744073709551615\nfnv ffffffffffffffff\n")
-- the OpenCL program binaries of the disk cache (opencl/cl_bin.c): "tide-ocl <version> <size> <fnv>\n" + bytes
local function fnv(s)
  local h = 1469598103934665603ULL
  for i = 1, #s do h = bit.bxor(h, s:byte(i)) * 1099511628211ULL end
  return h
end
local function oclbin(body, version)
  return ("tide-ocl %d %d %s\n"):format(version or 1, #body, bit.tohex(fnv(body), 16)) .. body
end
local ob = dir("ocl_binary")
write(ob .. "seed-bin", oclbin("BC\192\222\53\20\0\0\5\0\0\0b\12\48$" .. ("\0\1\2\3"):rep(16)))
write(ob .. "seed-bin-1", oclbin("x"))
write(ob .. "seed-bin-v0", oclbin("ptx", 0))
-- sscanf's %d skipped newlines past the end of an unterminated buffer (the reader before cl_bin.c)
write(ob .. "seed-err-whitespace", "tide-ocl\n" .. (" "):rep(40) .. "\n\n")
print("seeds written under " .. out)
