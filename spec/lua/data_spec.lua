-- tide.data: TensorDataset, DataLoader (every sample once per epoch, seeded
-- order, drop_last, collate, worker threads), the IDX reader (plain and gzip, validation) and
-- the character vocabulary.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local data = tide.data

local function tmpname() local p = os.tmpname(); os.remove(p); return p end

describe("TensorDataset and DataLoader", function()
  local X = tide.arange(0, 23):view(23, 1) * 10       -- sample i has value 10 (i-1)
  local Y = tide.arange(1, 24)
  local ds = data.TensorDataset(X, Y)

  it("indexes samples 1-based", function()
    assert.are.equal(23, ds:len())
    local s = ds:get(3)
    H.close(s[1], { 20 }); assert.are.equal(3, s[2]:item())
  end)

  it("visits every sample once per epoch, in order without shuffle", function()
    local loader = data.DataLoader(ds, { batch_size = 5 })
    assert.are.equal(5, loader:len())
    local seen, sizes = {}, {}
    for x, y in loader:batches() do
      sizes[#sizes + 1] = y:numel()
      for _, v in ipairs(y:totable()) do seen[#seen + 1] = v end
      H.close(x:view(-1), (y - 1) * 10)               -- fields stay paired
    end
    assert.are.same({ 5, 5, 5, 5, 3 }, sizes)
    for i = 1, 23 do assert.are.equal(i, seen[i]) end
  end)

  it("shuffles with a seed: a permutation per epoch, reproducible, different across epochs", function()
    local function epoch_orders(seed)
      local loader = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = seed })
      local orders = {}
      for e = 1, 2 do
        local o = {}
        for _, y in loader:batches() do for _, v in ipairs(y:totable()) do o[#o + 1] = v end end
        orders[e] = o
      end
      return orders
    end
    local a, b = epoch_orders(7), epoch_orders(7)
    assert.are.same(a, b)
    assert.are_not.same(a[1], a[2])
    for e = 1, 2 do
      local sorted = { unpack(a[e]) }
      table.sort(sorted)
      for i = 1, 23 do assert.are.equal(i, sorted[i]) end
    end
    local c = epoch_orders(8)
    assert.are_not.same(a[1], c[1])
  end)

  it("drops the last partial batch on request", function()
    local loader = data.DataLoader(ds, { batch_size = 5, drop_last = true })
    local n = 0
    for _, y in loader:batches() do n = n + 1; assert.are.equal(5, y:numel()) end
    assert.are.equal(4, n); assert.are.equal(4, loader:len())
  end)

  it("uses a custom dataset and collate function", function()
    local Squares = data.Dataset:extend()
    function Squares:len() return 6 end
    function Squares:get(i) return { tide.tensor({ i, i * i }), i } end
    local loader = data.DataLoader(setmetatable({}, Squares), { batch_size = 4 })
    local x, y = loader:batches()()
    H.close(x, { { 1, 1 }, { 2, 4 }, { 3, 9 }, { 4, 16 } }); H.close(y, { 1, 2, 3, 4 })
    local sums = data.DataLoader(setmetatable({}, Squares), { batch_size = 3,
      collate_fn = function(samples) local s = 0; for _, v in ipairs(samples) do s = s + v[2] end; return s end })
    local got = {}
    for s in sums:batches() do got[#got + 1] = s end
    assert.are.same({ 6, 15 }, got)
  end)

  it("rejects bad arguments", function()
    H.raises(function() data.DataLoader(ds, { batch_size = 0 }) end, "batch_size must be a positive integer, got 0")
    H.raises(function() data.DataLoader({}, {}) end, "dataset with :len() and :get(i) expected")
    H.raises(function() data.TensorDataset(tide.zeros(3), tide.zeros(4)) end, "tensor 2 has 4 samples but tensor 1 has 3")
  end)
end)

describe("DataLoader worker threads (num_workers)", function()
  -- three tensors of different dtypes and row sizes, one of them strided
  local n = 37
  local X = tide.randn(n, 3, 5)
  local T = tide.randn(4, n):t()                       -- (n, 4), not contiguous
  local Y = tide.arange(1, n + 1):long()
  local ds = data.TensorDataset(X, T, Y)

  local function epochs(opts, count)
    local loader = data.DataLoader(ds, opts)
    local all = {}
    for e = 1, count or 2 do
      local batches = {}
      for x, t, y in loader:batches() do batches[#batches + 1] = { x, t, y } end
      all[e] = batches
    end
    return all
  end

  it("give the same batches in the same order for num_workers = 0, 1, 2, 3", function()
    for _, o in ipairs { { batch_size = 5 }, { batch_size = 4, shuffle = true, seed = 3 },
                         { batch_size = 6, shuffle = true, drop_last = true } } do
      local ref = epochs(o)
      for _, nw in ipairs { 1, 2, 3 } do
        local w = {}
        for k, v in pairs(o) do w[k] = v end
        w.num_workers = nw
        if nw == 3 then w.prefetch_factor = 1 end
        local got = epochs(w)
        for e = 1, 2 do
          assert.equal(#ref[e], #got[e])
          for b, want in ipairs(ref[e]) do
            for k = 1, 3 do
              assert.same(want[k]:size(), got[e][b][k]:size())
              assert.equal(want[k].dtype, got[e][b][k].dtype)
              assert.is_true(want[k]:eq(got[e][b][k]):all():item(), ("nw=%d epoch %d batch %d field %d"):format(nw, e, b, k))
            end
          end
        end
      end
    end
  end)

  it("serve one-tensor datasets and subclasses of TensorDataset, and survive a break", function()
    local got = {}
    for y in data.DataLoader(data.TensorDataset(Y), { batch_size = 10, num_workers = 2 }):batches() do
      got[#got + 1] = y:size(1)
    end
    assert.same({ 10, 10, 10, 7 }, got)
    local Sub = data.TensorDataset:extend()
    local sub = setmetatable({ tensors = { Y } }, Sub)
    local loader = data.DataLoader(sub, { batch_size = 8, num_workers = 2, prefetch_factor = 1 })
    for y in loader:batches() do H.close(y, { 1, 2, 3, 4, 5, 6, 7, 8 }, 0); break end    -- threads left waiting
    collectgarbage(); collectgarbage()
    local count = 0
    for _ in loader:batches() do count = count + 1 end
    assert.equal(5, count)
  end)

  it("refuse, at construction, datasets only Lua can serve, naming why", function()
    local Squares = data.Dataset:extend()
    function Squares:len() return 6 end
    function Squares:get(i) return i end
    H.raises(function() data.DataLoader(setmetatable({}, Squares), { num_workers = 2 }) end,
      "DataLoader: num_workers = 2 needs a dataset that C threads can gather batches from",
      "but its get is a Lua function, which only the Lua thread can run; use num_workers = 0")
    local lazy = setmetatable({ len = function() return 3 end }, { __index = function(_, k)
      if k == "get" then return function(_, i) return i end end
    end })
    H.raises(function() data.DataLoader(lazy, { num_workers = 1 }) end, "but its __index is a Lua function")
    local Batched = data.TensorDataset:extend()
    function Batched:get_batch(idx) return { idx } end
    H.raises(function() data.DataLoader(setmetatable({ tensors = { Y } }, Batched), { num_workers = 1 }) end,
      "but its get_batch is a Lua function")
    H.raises(function() data.DataLoader(ds, { num_workers = 2, collate_fn = function(s) return s end }) end,
      "but a collate_fn is Lua code")
    H.raises(function() data.DataLoader(ds, { num_workers = -1 }) end, "num_workers must be an integer in 0..64, got -1")
    H.raises(function() data.DataLoader(ds, { num_workers = 1.5 }) end, "num_workers must be an integer in 0..64, got 1.5")
    H.raises(function() data.DataLoader(ds, { prefetch_factor = 2 }) end, "prefetch_factor needs worker threads (num_workers > 0)")
    H.raises(function() data.DataLoader(ds, { num_workers = 1, prefetch_factor = 0 }) end,
      "prefetch_factor must be a positive integer, got 0")
    local err = H.raises(function() data.DataLoader(setmetatable({}, Squares), { num_workers = 2 }) end, "num_workers")
    assert.truthy(err:find("data_spec.lua:%d+:"))
  end)
end)

-- IDX bytes: magic 00 00 type ndim, big-endian u32 dims, big-endian data
local function idx_bytes(code, dims, payload)
  local h = { string.char(0, 0, code, #dims) }
  for _, d in ipairs(dims) do
    h[#h + 1] = string.char(math.floor(d / 16777216) % 256, math.floor(d / 65536) % 256, math.floor(d / 256) % 256, d % 256)
  end
  return table.concat(h) .. payload
end
local function write(path, bytes) local f = assert(io.open(path, "wb")); f:write(bytes); f:close() end
local function write_gz(path, bytes)
  local z = data._zlib()
  local g = z.gzopen(path, "wb")
  assert(g ~= nil)
  z.gzwrite(g, bytes, #bytes)
  z.gzclose(g)
end

describe("read_idx", function()
  it("reads uint8 images, plain and gzip, with the header's shape", function()
    local payload = {}
    for i = 0, 2 * 3 * 4 - 1 do payload[#payload + 1] = string.char((i * 37) % 256) end
    local bytes = idx_bytes(0x08, { 2, 3, 4 }, table.concat(payload))
    for _, gz in ipairs { false, true } do
      local p = tmpname()
      if gz then write_gz(p, bytes) else write(p, bytes) end
      local t = data.read_idx(p)
      os.remove(p)
      assert.are.equal(tide.uint8, t.dtype)
      assert.are.same({ 2, 3, 4 }, t:size())
      H.close(t[{ 2, 3, 4 }], (23 * 37) % 256)
      H.close(t[{ 1, 1, 2 }], 37)
    end
  end)

  it("reads big-endian int32, float32 and float64 and signed bytes", function()
    local p = tmpname()
    write(p, idx_bytes(0x0C, { 3 }, string.char(0, 0, 0, 7, 0xFF, 0xFF, 0xFF, 0xFE, 0x01, 0x00, 0x00, 0x00)))
    H.close(data.read_idx(p), { 7, -2, 16777216 })
    write(p, idx_bytes(0x0D, { 2 }, string.char(0x3F, 0x80, 0, 0, 0xC0, 0x20, 0, 0)))       -- 1.0, -2.5
    local f = data.read_idx(p)
    assert.are.equal(tide.float32, f.dtype); H.close(f, { 1, -2.5 })
    write(p, idx_bytes(0x0E, { 1 }, string.char(0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18)))   -- pi
    H.close(data.read_idx(p), { math.pi }, 1e-15)
    write(p, idx_bytes(0x09, { 2 }, string.char(0x80, 0x05)))
    H.close(data.read_idx(p), { -128, 5 })
    os.remove(p)
  end)

  it("rejects a bad magic number, a wrong size, a truncated header and a missing file", function()
    local p = tmpname()
    write(p, "\1\0\8\1" .. string.char(0, 0, 0, 1) .. "x")
    H.raises(function() data.read_idx(p) end, "is not an IDX file (bad magic number)")
    write(p, idx_bytes(0x08, { 10 }, "abc"))
    H.raises(function() data.read_idx(p) end, "has 11 bytes but its header [10] of 0x08 needs 18")
    write(p, "\0\0\8\3\0\0")
    H.raises(function() data.read_idx(p) end, "truncated inside its header")
    write(p, idx_bytes(0x07, { 1 }, "a"))
    H.raises(function() data.read_idx(p) end, "unknown element type 0x07")
    os.remove(p)
    H.raises(function() data.read_idx(p) end, "cannot open")
  end)
end)

describe("CharVocab", function()
  it("encodes to 1-based ids and decodes back", function()
    local v = data.CharVocab("hello world")
    assert.are.equal(8, v.size)                     -- ' ' d e h l o r w
    local ids = v:encode("hold")
    assert.are.equal(tide.int64, ids.dtype)
    H.close(ids, { 4, 6, 5, 2 })
    assert.are.equal("hold", v:decode(ids))
    assert.are.equal("low", v:decode({ 5, 6, 8 }))
    H.raises(function() v:encode("hex") end, "character \"x\" (byte 120) at position 3 is not in the vocabulary")
    H.raises(function() v:decode({ 9 }) end, "id 9 at position 1 is out of range 1..8")
  end)

  it("splits a sequence into train and validation parts", function()
    local a, b = data.split(tide.arange(10), 0.9)
    H.close(a, { 0, 1, 2, 3, 4, 5, 6, 7, 8 }); H.close(b, { 9 })
    H.raises(function() data.split(tide.arange(3), 0.01) end, "leaves an empty part")
  end)
end)
