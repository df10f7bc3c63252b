-- tide.data: TensorDataset, DataLoader (every sample once per epoch, seeded
-- order, drop_last, collate), the IDX reader (plain and gzip, validation) and
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
