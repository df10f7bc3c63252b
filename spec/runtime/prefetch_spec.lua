-- The batch prefetcher (runtime/rt_prefetch.c) through the C API, as a host
-- without Lua's DataLoader uses it: batches equal index_select's for 0 and many
-- workers and every depth, freeing mid-epoch, and the argument checks.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local C = require("tide.core").C

local arr = ffi.typeof("td_tensor *[?]")

-- all batches of a prefetcher over tensors ts in row order rows (1-based), as Lua tensors
local function run(ts, rows, bs, nworkers, depth, take)
  local src, out = arr(#ts), arr(#ts)
  for k, t in ipairs(ts) do src[k - 1] = t.p end
  local order = ffi.new("int64_t[?]", #rows)
  for i, r in ipairs(rows) do order[i - 1] = r - 1 end
  local pf = C.td_prefetch_new(#ts, src, order, #rows, bs, nworkers, depth)
  if pf == nil then error(ffi.string(C.td_last_error()), 0) end
  local batches = {}
  while #batches < (take or math.huge) do
    local rc = C.td_prefetch_next(pf, out)
    assert(rc >= 0, rc < 0 and ffi.string(C.td_last_error()))
    if rc == 0 then break end
    local b = {}
    for k = 1, #ts do b[k] = require("tide.core").wrap(out[k - 1]) end
    batches[#batches + 1] = b
  end
  C.td_prefetch_free(pf)
  return batches
end

describe("td_prefetch", function()
  local A = tide.randn(50, 7)
  local B = tide.arange(50):to(tide.uint8)
  local rows = tide.data.randperm(50, 9)

  it("gathers index_select's rows in order for 0, 1 and 4 workers and any depth", function()
    for _, cfg in ipairs { { 0, 1 }, { 1, 1 }, { 4, 1 }, { 4, 3 }, { 2, 64 } } do
      local got = run({ A, B }, rows, 6, cfg[1], cfg[2])
      assert.equal(9, #got)
      for b, batch in ipairs(got) do
        local idx = {}
        for i = (b - 1) * 6 + 1, math.min(b * 6, 50) do idx[#idx + 1] = rows[i] end
        local ix = tide.long(idx)
        assert.is_true(batch[1]:eq(A:index_select(1, ix)):all():item(), ("workers %d batch %d"):format(cfg[1], b))
        assert.is_true(batch[2]:eq(B:index_select(1, ix)):all():item())
        assert.equal(tide.uint8, batch[2].dtype)
      end
    end
  end)

  it("frees with batches in flight and workers waiting", function()
    for _ = 1, 20 do
      local got = run({ A }, rows, 1, 3, 2, 2)
      assert.equal(2, #got)
    end
  end)

  it("checks its arguments", function()
    H.raises(function() run({ A }, { 1, 51 }, 2, 1, 1) end, "DataLoader: row 51 is out of range for tensor 1 with 50 rows")
    H.raises(function() run({ A }, { 1 }, 0, 1, 1) end, "DataLoader: batch_size must be positive, got 0")
    H.raises(function() run({ A }, { 1 }, 1, 1, 0) end, "DataLoader: prefetch depth must be in 1..4096, got 0")
    H.raises(function() run({ tide.tensor(1) }, { 1 }, 1, 1, 1) end, "DataLoader: tensor 1 is 0-dim")
    assert.equal(nil, C.td_prefetch_new(1, arr(1), nil, 0, 1, 1, 1) ~= nil and "made" or nil)
    assert.truthy(ffi.string(C.td_last_error()):find("tensor 1 is NULL", 1, true))
    assert.equal(0, #run({ A }, {}, 4, 2, 2))       -- an empty epoch
  end)
end)
