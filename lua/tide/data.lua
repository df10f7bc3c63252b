--[[
tide.data -- datasets and batching: Dataset, TensorDataset, DataLoader (batch
size, seeded shuffle, drop_last, collate, C worker threads), the IDX reader (MNIST family, plain
or gzip through zlib), and a character vocabulary for text. Samples and
batches are 1-based, as everything in tide's Lua API.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local ffi = core.ffi
local raise, is_tensor = core.raise, core.is_tensor

local D = {}

-- -- Datasets ----------------------------------------------------------------------------

-- A dataset is any table with :len() and :get(i) (1-based) returning a sample:
-- a tensor, a number, or a list of them.
--- tide.data.Dataset
--- The dataset base class: any table with :len() and :get(i) (1-based) is a dataset.
local Dataset = {}
Dataset.__index = Dataset
D.Dataset = Dataset

--- tide.data.Dataset:extend() -> class
--- A subclass; define its len and get.
function Dataset:extend()
  local cls = setmetatable({}, { __index = self })
  cls.__index = cls
  return cls
end
--- tide.data.Dataset:len() -> number
--- The number of samples (defined by each dataset).
--- tide.data.Dataset:get(i) -> sample
--- Sample i (1-based): a tensor, a number, or a list of them.
function Dataset:len() raise("Dataset:len() must be defined by the dataset") end
function Dataset:get() raise("Dataset:get(i) must be defined by the dataset") end

-- TensorDataset(t1, t2, ...): sample i is { t1[i], t2[i], ... } along dim 1
--- tide.data.TensorDataset(t1, t2, ...)
--- Sample i is {t1[i], t2[i], ...}, taken along dim 1.
local TensorDataset = Dataset:extend()
D.TensorDataset = TensorDataset

function TensorDataset.new(...)
  local ts, n = { ... }, select("#", ...)
  if n == 0 then raise("TensorDataset: at least one tensor is required") end
  for i = 1, n do                 -- every argument: ipairs would stop at a nil
    local t = ts[i]
    if not is_tensor(t) then raise(("bad argument #%d to 'TensorDataset' (Tensor expected, got %s)"):format(i, type(t))) end
    if t:dim() == 0 then raise(("TensorDataset: tensor %d is 0-dim; samples are taken along dim 1"):format(i)) end
    if t:size(1) ~= ts[1]:size(1) then
      raise(("TensorDataset: tensor %d has %d samples but tensor 1 has %d"):format(i, t:size(1), ts[1]:size(1)))
    end
  end
  return setmetatable({ tensors = ts }, TensorDataset)
end
setmetatable(TensorDataset, { __index = Dataset, __call = function(_, ...) return TensorDataset.new(...) end })

function TensorDataset:len() return self.tensors[1]:size(1) end
function TensorDataset:get(i)
  local s = {}
  for k, t in ipairs(self.tensors) do s[k] = t[i] end
  return s
end
-- a whole batch at once: one index_select per tensor instead of one view per sample
-- (the indices go to the device of a tensor that lives on one)
--- tide.data.TensorDataset:get_batch(idx) -> list of Tensor
--- The samples at the 1-based indices idx (a tensor), one index_select per tensor.
function TensorDataset:get_batch(idx)
  args.tensor(idx, 1, "get_batch")
  local out = {}
  for k, t in ipairs(self.tensors) do
    out[k] = t:index_select(1, t.device_type == idx.device_type and idx or idx:to(t.device))
  end
  return out
end

-- -- Collation -------------------------------------------------------------------------------

-- Stack a list of samples field by field: tensors with tide.stack, numbers
-- into a tensor: int64 if all are integers (class labels, as PyTorch collates
-- Python ints), else the default float dtype. (tide.tensor{...} itself always
-- makes floats from numbers.)
--- tide.data.default_collate(samples) -> batch
--- Stacks samples field by field: tensors with tide.stack, integer numbers into int64, others into floats.
function D.default_collate(samples)
  if type(samples) ~= "table" or is_tensor(samples) or #samples == 0 then
    args.argerr(1, "default_collate", "non-empty list of samples", samples)
  end
  local first = samples[1]
  if is_tensor(first) then return tide.stack(samples, 1) end
  if type(first) == "number" then
    for _, v in ipairs(samples) do
      if not args.is_int(v) then return tide.tensor(samples) end
    end
    return tide.tensor(samples, { dtype = tide.int64 })
  end
  if type(first) == "table" then
    local out = {}
    for k = 1, #first do
      local field = {}
      for j, s in ipairs(samples) do field[j] = s[k] end
      out[k] = D.default_collate(field)
    end
    return out
  end
  raise(("default_collate: cannot batch samples of type %s"):format(type(first)))
end

-- -- Seeded permutations ------------------------------------------------------------------------

-- Fisher-Yates with a small counter-based generator (splitmix64 over
-- seed and draw index): the same seed gives the same order everywhere.
local U64 = ffi.typeof("uint64_t")
local function splitmix(x)
  x = x + 0x9E3779B97F4A7C15ULL
  x = bit.bxor(x, bit.rshift(x, 30)) * 0xBF58476D1CE4E5B9ULL
  x = bit.bxor(x, bit.rshift(x, 27)) * 0x94D049BB133111EBULL
  return bit.bxor(x, bit.rshift(x, 31))
end

-- (a Lua table: n is at most 2^27, a 1 GiB table)
--- tide.data.randperm(n[, seed = 0]) -> table
--- A permutation of 1..n that depends only on seed.
function D.randperm(n, seed)
  args.count(n, 1, "randperm", "non-negative integer n")
  if n > 2 ^ 27 then raise(("randperm: n = %d is too large for a permutation held in a Lua table (at most 2^27)"):format(n)) end
  if seed ~= nil then args.int(seed, 2, "randperm", "integer seed") end
  local p = {}
  for i = 1, n do p[i] = i end
  local s = U64(seed or 0) * 0x100000001B3ULL
  for i = n, 2, -1 do
    s = s + 1
    local j = tonumber(splitmix(s) % U64(i)) + 1
    p[i], p[j] = p[j], p[i]
  end
  return p
end

-- -- DataLoader ------------------------------------------------------------------------------------

--- tide.data.DataLoader(dataset[, {batch_size = 1, shuffle, drop_last, seed = 0, collate_fn, num_workers = 0, prefetch_factor = 2}])
--- Batches of a dataset; with shuffle, epoch e uses the order randperm(n, seed + e); num_workers C threads gather ahead.
local DataLoader = {}
DataLoader.__index = DataLoader
D.DataLoader = DataLoader

-- The tensors C threads can gather a dataset's batches from, or nil and why not.
-- They can serve a TensorDataset (or a subclass keeping its get and get_batch)
-- of CPU tensors: anything computed by Lua code (a get, a get_batch, an
-- __index function, a collate_fn) can run only on the Lua thread.
local function thread_tensors(ds, collate_fn)
  if collate_fn then return nil, "a collate_fn is Lua code, which only the Lua thread can run" end
  local mt, depth = getmetatable(ds), 0
  while type(mt) == "table" and depth < 32 do
    local ix = rawget(mt, "__index")
    if type(ix) == "function" then
      return nil, "its __index is a Lua function, which only the Lua thread can run"
    end
    mt, depth = type(ix) == "table" and getmetatable(ix) or nil, depth + 1
  end
  if ds.get ~= TensorDataset.get then return nil, "its get is a Lua function, which only the Lua thread can run" end
  if ds.get_batch ~= TensorDataset.get_batch then
    return nil, "its get_batch is a Lua function, which only the Lua thread can run"
  end
  local ts = rawget(ds, "tensors")
  if type(ts) ~= "table" or #ts == 0 then return nil, "it holds no tensors" end
  for k, t in ipairs(ts) do
    if not is_tensor(t) then return nil, ("its tensors[%d] is a %s"):format(k, type(t)) end
    if t.device_type ~= 0 then return nil, ("its tensor %d is on %s, and the threads read CPU memory"):format(k, t.device) end
  end
  if #ts > 16 then return nil, ("it has %d tensors (the threads gather from at most 16)"):format(#ts) end
  return ts
end

-- DataLoader(dataset, {batch_size=1, shuffle=false, drop_last=false, seed=0, collate_fn=, num_workers=0, prefetch_factor=2})
-- With shuffle, epoch e (counting calls to :batches()) uses the order randperm(n, seed + e).
-- num_workers = N > 0: N C threads (rt_prefetch.c) gather up to N * prefetch_factor
-- batches ahead; the batches and their order are those of num_workers = 0.
function DataLoader.new(dataset, opts)
  opts = args.opts("DataLoader", opts, "batch_size shuffle drop_last seed collate_fn num_workers prefetch_factor", 2)
  local function method(k) local f = dataset[k]; return type(f) == "function" or (type(f) == "table" and getmetatable(f) ~= nil) end
  if type(dataset) ~= "table" or is_tensor(dataset) or not method("len") or not method("get") then
    raise("bad argument #1 to 'DataLoader' (dataset with :len() and :get(i) expected)")
  end
  local bs = opts.batch_size or 1
  if type(bs) ~= "number" or bs < 1 or bs ~= math.floor(bs) then
    raise(("DataLoader: batch_size must be a positive integer, got %s"):format(tostring(bs)))
  end
  if opts.seed ~= nil and not args.is_int(opts.seed) then
    raise(("DataLoader: seed must be an integer, got %s"):format(tostring(opts.seed)))
  end
  local cf = opts.collate_fn
  if cf ~= nil and type(cf) ~= "function" and not (type(cf) == "table" and getmetatable(cf) and getmetatable(cf).__call) then
    raise(("DataLoader: collate_fn must be a function, got %s"):format(args.typename(cf)))
  end
  local nw = opts.num_workers or 0
  if not args.is_int(nw) or nw < 0 or nw > 64 then
    raise(("DataLoader: num_workers must be an integer in 0..64, got %s"):format(tostring(nw)))
  end
  local pf = opts.prefetch_factor
  if pf ~= nil then
    if nw == 0 then
      raise("DataLoader: prefetch_factor needs worker threads (num_workers > 0); with num_workers = 0 leave it out")
    end
    if not args.is_int(pf) or pf < 1 then
      raise(("DataLoader: prefetch_factor must be a positive integer, got %s"):format(tostring(pf)))
    end
  end
  local ts
  if nw > 0 then
    local why
    ts, why = thread_tensors(dataset, opts.collate_fn)
    if not ts then
      raise(("DataLoader: num_workers = %d needs a dataset that C threads can gather batches from (a TensorDataset "
        .. "of CPU tensors), but %s; use num_workers = 0"):format(nw, why))
    end
  end
  return setmetatable({ dataset = dataset, batch_size = bs, shuffle = opts.shuffle or false,
    drop_last = opts.drop_last or false, seed = opts.seed or 0, collate_fn = opts.collate_fn,
    num_workers = nw, prefetch_factor = pf or 2, _thread_tensors = ts, epoch = 0 }, DataLoader)
end
setmetatable(DataLoader, { __call = function(_, ...) return DataLoader.new(...) end })

-- dataset:len(), checked (a user's dataset may return anything)
local function dataset_len(ds)
  local n = ds:len()
  if not args.is_int(n) or n < 0 then
    raise(("DataLoader: dataset:len() must return a non-negative integer, got %s"):format(tostring(n)))
  end
  return n
end

--- tide.data.DataLoader:len() -> number
--- The number of batches per epoch.
function DataLoader:len()
  local n = dataset_len(self.dataset)
  if self.drop_last then return math.floor(n / self.batch_size) end
  return math.ceil(n / self.batch_size)
end


-- for x, y in loader:batches() do ... end: the fields of each collated batch
--- tide.data.DataLoader:batches() -> iterator
--- One epoch: for x, y in loader:batches() do ... end (the fields of each collated batch).
function DataLoader:batches()
  local ds, n, bs = self.dataset, dataset_len(self.dataset), self.batch_size
  local order
  if self.shuffle then order = D.randperm(n, self.seed + self.epoch) end
  self.epoch = self.epoch + 1
  local nb, b = self:len(), 0
  if self.num_workers > 0 then return self:_worker_batches(order, math.min(n, nb * bs)) end
  return function()
    b = b + 1
    if b > nb then return nil end
    local lo, hi = (b - 1) * bs + 1, math.min(b * bs, n)
    local batch
    if ds.get_batch and not self.collate_fn then
      local idx = {}
      for i = lo, hi do idx[#idx + 1] = order and order[i] or i end
      batch = ds:get_batch(tide.tensor(idx, { dtype = "int64" }))
    else
      local samples = {}
      for i = lo, hi do samples[#samples + 1] = ds:get(order and order[i] or i) end
      batch = (self.collate_fn or D.default_collate)(samples)
    end
    if type(batch) == "table" and not is_tensor(batch) then return unpack(batch) end
    return batch
  end
end

-- The epoch's batches from the worker threads: rows order[1..nrows] (or 1..nrows)
-- of the dataset's tensors. The prefetcher's threads stop when the epoch ends, or
-- when the iterator is collected after a break.
local td_tensor_arr = ffi.typeof("td_tensor *[?]")
function DataLoader:_worker_batches(order, nrows)
  local ts, C = self._thread_tensors, core.C
  local nt = #ts
  local src, out = td_tensor_arr(nt), td_tensor_arr(nt)
  for k, t in ipairs(ts) do src[k - 1] = t.p end
  local rows = ffi.new("int64_t[?]", math.max(nrows, 1))
  for i = 1, nrows do rows[i - 1] = (order and order[i] or i) - 1 end
  local pf = C.td_prefetch_new(nt, src, rows, nrows, self.batch_size, self.num_workers,
    self.num_workers * self.prefetch_factor)
  if pf == nil then raise(core.last_error()) end
  pf = ffi.gc(pf, C.td_prefetch_free)
  local batch = {}
  return function()
    if pf == nil then return nil end
    local rc = C.td_prefetch_next(pf, out)
    if rc <= 0 then
      C.td_prefetch_free(ffi.gc(pf, nil)); pf = nil
      if rc < 0 then raise(core.last_error()) end
      return nil
    end
    for k = 1, nt do batch[k] = core.wrap(out[k - 1]) end
    return unpack(batch, 1, nt)
  end
end

-- image transforms (torchvision's): Compose, Normalize, RandomCrop, RandomHorizontalFlip
D.transforms = require "tide.transforms"

-- -- IDX files (MNIST family) ------------------------------------------------------------------------

ffi.cdef [[
typedef struct gzFile_s *gzFile;
gzFile gzopen(const char *path, const char *mode);
int gzread(gzFile file, void *buf, unsigned int len);
int gzwrite(gzFile file, const void *buf, unsigned int len);
int gzclose(gzFile file);
]]
local zlib
local function z()
  if not zlib then
    local ok, lib = pcall(ffi.load, "z")
    if not ok then ok, lib = pcall(ffi.load, "libz.so.1") end
    if not ok then raise("read_idx: zlib (libz.so.1) is not available: " .. tostring(lib)) end
    zlib = lib
  end
  return zlib
end
D._zlib = z

-- IDX type codes -> tide dtype, element size in the file, and whether single
-- bytes are signed
local IDX = {
  [0x08] = { "uint8", 1 }, [0x09] = { "int32", 1, signed8 = true }, [0x0B] = { "int32", 2 },
  [0x0C] = { "int32", 4 }, [0x0D] = { "float32", 4 }, [0x0E] = { "float64", 8 },
}
local CHUNK = 1048576          -- a multiple of every element size

-- Up to n bytes of the (gunzipped) stream into buf: fewer only at its end; -1 on a
-- gzip error. (zlib's gzread passes plain files through unchanged.)
local function gz_fill(gz, buf, n)
  local got = 0
  while got < n do
    local r = z().gzread(gz, buf + got, n - got)
    if r < 0 then return -1 end
    if r == 0 then break end
    got = got + r
  end
  return got
end

-- read_idx(path) -> tensor with the file's shape (uint8 images stay uint8)
-- The header is read and checked first; then exactly the bytes it asks for, in
-- chunks, and one more to see that the data ends there: memory follows the data
-- actually present, never the header's claim, and a gzip bomb is cut off where
-- its data passes the claim.
--- tide.data.read_idx(path) -> Tensor
--- Reads an IDX file (MNIST, Fashion-MNIST; gzip or plain) with its shape and dtype.
function D.read_idx(path)
  if type(path) ~= "string" then raise(("bad argument #1 to 'read_idx' (string expected, got %s)"):format(type(path))) end
  local gz = z().gzopen(path, "rb")
  if gz == nil then raise(("read_idx: cannot open '%s'"):format(path)) end
  local function fail(msg)
    if gz ~= nil then z().gzclose(gz); gz = nil end
    raise(("read_idx: '%s' %s"):format(path, msg))
  end
  local hb = ffi.new("uint8_t[36]")
  local n = gz_fill(gz, hb, 4)
  if n < 0 then fail("is not a valid gzip or plain file") end
  if n < 4 or hb[0] ~= 0 or hb[1] ~= 0 then fail("is not an IDX file (bad magic number)") end
  local code, nd = hb[2], hb[3]
  local info = IDX[code]
  if not info then fail(("has unknown element type 0x%02x"):format(code)) end
  if nd < 1 or nd > 8 then fail(("claims %d dims (1..8 supported)"):format(nd)) end
  local hn = gz_fill(gz, hb + 4, 4 * nd)
  if hn < 0 then fail("is not a valid gzip or plain file") end
  if hn < 4 * nd then fail("is truncated inside its header") end
  local shape, count = {}, 1
  for d = 1, nd do
    local o = 4 * d
    shape[d] = ((hb[o] * 256 + hb[o + 1]) * 256 + hb[o + 2]) * 256 + hb[o + 3]
    count = count * shape[d]
  end
  local serr = require("tide.serialize").file_shape_error(shape, nd)
  if serr then fail("header: " .. serr) end
  local esz = info[2]
  local want, head = count * esz, 4 + 4 * nd
  local function wrong_size(have, more)
    fail(("has %s%.0f bytes but its header [%s] of 0x%02x needs %.0f"):format(more and "more than " or "", have,
      table.concat(shape, ","), code, head + want))
  end
  local chunks, total = {}, 0
  local buf = ffi.new("uint8_t[?]", math.min(want, CHUNK) + 1)
  while total < want do
    local k = gz_fill(gz, buf, math.min(want - total, CHUNK))
    if k < 0 then fail("is not a valid gzip or plain file") end
    if k == 0 then wrong_size(head + total) end
    chunks[#chunks + 1] = ffi.string(buf, k)
    total = total + k
  end
  local extra = gz_fill(gz, buf, 1)
  if extra < 0 then fail("is not a valid gzip or plain file") end
  if extra > 0 then wrong_size(head + want, true) end
  z().gzclose(gz); gz = nil
  -- copy, or convert big-endian (or signed byte) elements, into the tensor
  local dt = tide[info[1]]
  local t = tide.empty(shape, { dtype = dt })
  local ptr = require("tide.tensor").fields(t).ptr
  local d8, d32 = ffi.cast("uint8_t *", ptr), ffi.cast("int32_t *", ptr)
  local i0 = 0                                     -- elements done
  for _, c in ipairs(chunks) do                    -- every chunk holds whole elements
    local src, m = ffi.cast("const uint8_t *", c), #c / esz
    if esz == 1 and not info.signed8 then ffi.copy(d8 + i0, src, m)
    elseif esz == 1 then
      for i = 0, m - 1 do local v = src[i]; d32[i0 + i] = v >= 128 and v - 256 or v end
    elseif esz == 2 then
      for i = 0, m - 1 do local v = src[2 * i] * 256 + src[2 * i + 1]; d32[i0 + i] = v >= 32768 and v - 65536 or v end
    else
      local s32 = ffi.cast("const int32_t *", src)   -- int32, float32: swap each word; float64: and the two words
      if esz == 4 then for i = 0, m - 1 do d32[i0 + i] = bit.bswap(s32[i]) end
      else
        for i = 0, m - 1 do
          d32[2 * (i0 + i)] = bit.bswap(s32[2 * i + 1]); d32[2 * (i0 + i) + 1] = bit.bswap(s32[2 * i])
        end
      end
    end
    i0 = i0 + m
  end
  return t
end

-- -- Text ----------------------------------------------------------------------------------------------

-- CharVocab(text): the sorted distinct characters (bytes) of text; ids are 1-based.
--- tide.data.CharVocab(text)
--- A vocabulary of text's distinct characters (bytes), sorted; ids are 1-based; .size is their number.
local CharVocab = {}
CharVocab.__index = CharVocab
D.CharVocab = CharVocab

function CharVocab.new(text)
  if type(text) ~= "string" then raise(("bad argument #1 to 'CharVocab' (string expected, got %s)"):format(type(text))) end
  local seen, chars = {}, {}
  for i = 1, #text do
    local c = text:sub(i, i)
    if not seen[c] then seen[c] = true; chars[#chars + 1] = c end
  end
  table.sort(chars)
  local stoi = {}
  for i, c in ipairs(chars) do stoi[c] = i end
  return setmetatable({ itos = chars, stoi = stoi, size = #chars }, CharVocab)
end
setmetatable(CharVocab, { __call = function(_, ...) return CharVocab.new(...) end })

-- encode(str) -> int64 tensor of 1-based ids
--- tide.data.CharVocab:encode(str) -> Tensor
--- The int64 ids of str's characters.
function CharVocab:encode(str)
  if type(str) ~= "string" then args.argerr(1, "encode", "string", str) end
  local ids = ffi.new("double[?]", math.max(#str, 1))
  for i = 1, #str do
    local id = self.stoi[str:sub(i, i)]
    if not id then raise(("CharVocab:encode: character %q (byte %d) at position %d is not in the vocabulary"):format(
      str:sub(i, i), str:byte(i), i)) end
    ids[i - 1] = id
  end
  return core.wrap(core.C.td_from_doubles(1, ffi.new("int64_t[1]", #str), tide.int64.id, ids))
end

-- decode(ids) -> string; ids a tensor or a table of 1-based ids
--- tide.data.CharVocab:decode(ids) -> string
--- The text of ids (a tensor or a table).
function CharVocab:decode(ids)
  if is_tensor(ids) then ids = ids:reshape(-1):totable()
  elseif type(ids) ~= "table" then args.argerr(1, "decode", "Tensor or table of ids", ids) end
  local out = {}
  for i, id in ipairs(ids) do
    local c = self.itos[id]
    if not c then raise(("CharVocab:decode: id %s at position %d is out of range 1..%d"):format(tostring(id), i, self.size)) end
    out[i] = c
  end
  return table.concat(out)
end

-- split(t, frac) -> the first frac of t along dim 1, and the rest (views)
--- tide.data.split(t, frac) -> Tensor, Tensor
--- The first frac of t along dim 1 and the rest (views).
function D.split(t, frac)
  args.tensor(t, 1, "split")
  if type(frac) ~= "number" or frac ~= frac then args.argerr(2, "split", "number", frac) end
  local n = t:size(1)
  local k = math.floor(n * frac + 0.5)
  if k < 1 or k >= n then raise(("split: fraction %g of %d leaves an empty part"):format(frac, n)) end
  return t:narrow(1, 1, k), t:narrow(1, k + 1, n - k)
end

return D
