-- The file loaders on hostile input (FUZZING.md, "Loaders"): the cases the loader
-- fuzzers (spec/fuzz/loaders) and their review turned up, and the replay of
-- the checked-in fuzz corpus through the real loaders, in child processes so
-- that a crash fails the spec instead of killing busted.
local tide = require "tide"
local data = require "tide.data"
local H = require "spec.helper"

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function P(name) return dir .. "/" .. name end
local function write(path, bytes) local f = assert(io.open(path, "wb")); f:write(bytes); f:close() end
local function u64(n) local t = {} for i = 1, 8 do t[i] = string.char(n % 256); n = math.floor(n / 256) end return table.concat(t) end
local function st(header, payload) return u64(#header) .. header .. (payload or "") end
local function npy(h, payload)
  h = h .. (" "):rep((64 - (#h + 11) % 64) % 64) .. "\n"
  return "\147NUMPY\1\0" .. string.char(#h % 256, math.floor(#h / 256)) .. h .. payload
end
local function be32(d) return string.char(math.floor(d / 16777216) % 256, math.floor(d / 65536) % 256, math.floor(d / 256) % 256, d % 256) end

-- the error of f(), which must be a loader's own: "<op>: ..." at this file's line
local function loader_error(op, f)
  local ok, err = pcall(f)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  assert.is_nil(err:find("lua/tide/", 1, true), err)
  assert.is_truthy(err:find("loader_fuzz_spec.lua:%d+: " .. op .. ": "), err)
  return err
end

describe("loaders on hostile files", function()
  teardown(function() os.execute("rm -rf " .. dir) end)

  -- before: the dim went through tonumber to the FFI as INT64_MIN, and td_empty raised
  -- "empty: negative size -9223372036854775808", an op the user never called
  it("npy: a dim past 2^53 is load_npy's error, not a wrapped size", function()
    write(P("big.npy"), npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999999999999), }", ""))
    local e = loader_error("load_npy", function() tide.load_npy(P("big.npy")) end)
    assert.is_truthy(e:find("shape[2] = 100000000000000000000 is not an integer in 0..2^53", 1, true), e)
  end)

  -- before: a zero dim let the other dims' product overflow; td_empty raised "empty: ...
  -- is too large" for one order of the dims and made the tensor for the other
  it("a zero dim does not excuse an overflowing shape, in every loader and dim order", function()
    write(P("z.npy"), npy("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 9007199254740992, 9007199254740992), }", ""))
    local e = loader_error("load_npy", function() tide.load_npy(P("z.npy")) end)
    assert.is_truthy(e:find("shape [0, 9007199254740992, 9007199254740992] is too large", 1, true), e)
    -- safetensors: before, the mapped load made a [0, 2^53, 2^53] tensor (whose C
    -- strides overflow) and the read load ({mmap = false}) failed inside td_empty
    write(P("z.st"), st('{"a":{"dtype":"F32","shape":[0,9007199254740992,9007199254740992],"data_offsets":[0,0]}}'))
    for _, opts in ipairs { {}, { mmap = false } } do
      e = loader_error("load", function() tide.load(P("z.st"), opts) end)
      assert.is_truthy(e:find("entry 'a': shape [0, 9007199254740992, 9007199254740992] is too large", 1, true), e)
    end
    -- IDX: before, [0, 2^32-1, 2^32-1] loaded
    write(P("z.idx"), "\0\0\8\3" .. be32(0) .. be32(4294967295) .. be32(4294967295))
    e = loader_error("read_idx", function() data.read_idx(P("z.idx")) end)
    assert.is_truthy(e:find("shape [0, 4294967295, 4294967295] is too large", 1, true), e)
    -- still fine: a zero dim beside small ones
    write(P("ok.idx"), "\0\0\8\3" .. be32(2) .. be32(0) .. be32(3))
    assert.are.same({ 2, 0, 3 }, data.read_idx(P("ok.idx")):size())
  end)

  -- before: read_idx gunzipped the whole file into one string, then compared sizes
  it("idx: a gzip bomb is cut off where it passes the header's size", function()
    local ffi = require "ffi"
    local z = data._zlib()
    local g = z.gzopen(P("bomb.gz"), "wb1")
    z.gzwrite(g, "\0\0\8\1\0\0\0\2", 8)
    local zero = ffi.new("uint8_t[?]", 1048576)
    for _ = 1, 48 do z.gzwrite(g, zero, 1048576) end          -- 48 MiB of zeros, ~50 KB on disk
    z.gzclose(g)
    collectgarbage(); collectgarbage()
    local before = collectgarbage("count")
    local e = loader_error("read_idx", function() data.read_idx(P("bomb.gz")) end)
    local grew = collectgarbage("count") - before
    assert.is_truthy(e:find("has more than 10 bytes but its header [2] of 0x08 needs 10", 1, true), e)
    assert.is_true(grew < 4096, ("the Lua heap grew by %.0f KB"):format(grew))
  end)

  it("idx: big-endian elements convert across chunk boundaries", function()
    -- 300k float64 (2.4 MB): three 1 MiB chunks, the element values checked at both ends
    local n = 300000
    local ffi = require "ffi"
    local b = ffi.new("uint8_t[?]", 8 * n)
    for i = 0, n - 1 do                         -- value i as a big-endian double
      local d = ffi.new("double[1]", i)
      local s = ffi.cast("uint8_t *", d)
      for k = 0, 7 do b[8 * i + k] = s[7 - k] end
    end
    write(P("f64.idx"), "\0\0\14\1" .. be32(n) .. ffi.string(b, 8 * n))
    local t = data.read_idx(P("f64.idx"))
    assert.are.equal(tide.float64, t.dtype)
    assert.are.equal(n * (n - 1) / 2, t:sum():item())
    assert.are.equal(131071, t[131072]:item())   -- the first element of the second chunk
  end)

  -- before: the string scanner used %c, which takes DEL (127) for a control character
  it("safetensors: DEL is a plain character in a JSON string", function()
    local h = '{"__metadata__":{"note":"a\127b"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    write(P("del.st"), st(h, "\7"))
    local v, meta = tide.load(P("del.st"))
    assert.are.equal("a\127b", meta.note)
    assert.are.equal(7, v.w[1]:item())
  end)
end)

-- The checked-in corpus (spec/fuzz/corpus/<target>) through the fuzz harness, which
-- loads each file with the real loader and requires a sound result or a clean
-- tide error. A child process per target: a crash or a hang shows as its status.
describe("the loader fuzz corpus", function()
  local function sh(cmd)
    local p = io.popen(cmd .. " 2>&1")
    local out = p:read("*a")
    local ok, _, code = p:close()
    return out, ok and 0 or code
  end
  for _, t in ipairs { "safetensors", "npy", "idx" } do
    it(("replays %s cleanly"):format(t), function()
      local out, rc = sh(("timeout 120 luajit spec/fuzz/loaders/harness.lua %s spec/fuzz/corpus/%s"):format(t, t))
      assert.are.equal(0, rc, out)
      local n, loaded = out:match(t .. ": (%d+) inputs, (%d+) loaded")
      assert.is_truthy(n, out)
      assert.is_true(tonumber(n) >= 8 and tonumber(loaded) >= 8, out)   -- the seeds at least load
    end)
  end
  it("the harness tells a finding from a clean error", function()
    local M = dofile("spec/fuzz/loaders/harness.lua")
    local function outcome(err)
      M.targets.fake = { op = "load", run = function() error(err, 0) end }
      local ok, r = pcall(M.run, "fake", "x")
      M.targets.fake = nil
      return ok and (r and "loaded" or "clean") or r
    end
    assert.are.equal("clean", outcome("spec.lua:3: load: x: the header is not valid UTF-8"))
    assert.are.equal("clean", outcome("load: x: entry 'lua/tide/core.lua:1: ' is not an object"))  -- echoed bytes
    assert.matches("^FINDING: load raised an error inside tide", outcome("/a/lua/tide/serialize.lua:512: attempt to index a nil value"))
    assert.matches("^FINDING: load raised an error that does not name it", outcome("spec.lua:3: empty: negative size -1"))
    assert.matches("^FINDING: load raised a table", outcome({}))
  end)
  for _, t in ipairs { { "cache_meta", "jit/cg_meta.c" }, { "ocl_binary", "opencl/cl_bin.c" } } do
    it(("replays %s cleanly (%s, built with cc)"):format(t[1], t[2]), function()
      local B = os.getenv("TIDE_BUILD") or "build"
      local exe = B .. "/replay_" .. t[1]
      local out, rc = sh(("cc -O1 -Iruntime -Ijit spec/fuzz/loaders/fuzz_%s.c spec/fuzz/loaders/replay_main.c %s -o %s")
        :format(t[1], t[2], exe))
      assert.are.equal(0, rc, out)
      out, rc = sh(("timeout 60 %s spec/fuzz/corpus/%s"):format(exe, t[1]))
      os.remove(exe)
      assert.are.equal(0, rc, out)
      local n = tonumber(out:match("replayed (%d+) inputs, 0 unreadable"))
      assert(n and n >= 3, out)
    end)
  end
end)
