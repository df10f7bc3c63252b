--[[
fuzz.gen -- argument generators of the API fuzzer. Every value is produced as
Lua source (an expression), so a call is a standalone snippet that reproduces
itself; a generator also returns what it knows of the value (a tensor's shape
and dtype) so that later arguments can fit it (a dim of that tensor, a tensor
of the same shape). Deterministic: one xorshift PRNG per run, seeded.
Argument kinds are named by short tokens (the hints of fuzz.targets use them):
  t tf ti tb tl@N tlist     tensors: any, floating, index (values 1..3), bool, like argument N
  dim@N dims@N               a dim / a dims list of argument N (a tensor)
  shape shape@N pair         a size list (one with argument N's element count); an int or {a, b}
  int size num bool str      integers (small), sizes, numbers, booleans, strings
  dtype device fn path mod   dtypes, devices, Lua functions, file paths, a module
  params optim opts{k=kind}  parameter lists, an optimizer, an options table
  any nil =expr              anything (hostile), nil, a literal Lua expression
--]]
local bit = require "bit"

local G = {}
G.__index = G

-- -- PRNG (xorshift32; Lua numbers, so runs are the same on every host) -----------------------

function G.new(seed, opts)
  local s = bit.tobit(seed * 2654435761 + 0x9e3779b9)
  if s == 0 then s = 1 end
  local g = setmetatable({ s = s, cfg = opts or {} }, G)
  g.hostile = g.cfg.hostile or 0.15        -- probability that an argument is replaced by any()
  g.p_opencl = g.cfg.p_opencl or 0         -- probability that a tensor lives on OpenCL
  g.tmp = g.cfg.tmp or "/tmp"
  for _ = 1, 4 do g:u32() end
  return g
end

function G:u32()
  local x = self.s
  x = bit.bxor(x, bit.lshift(x, 13)); x = bit.bxor(x, bit.rshift(x, 17)); x = bit.bxor(x, bit.lshift(x, 5))
  self.s = x
  return x % 4294967296
end
function G:rand() return self:u32() / 4294967296 end
function G:int(lo, hi) return lo + self:u32() % (hi - lo + 1) end
function G:pick(list) return list[1 + self:u32() % #list] end
function G:chance(p) return self:rand() < p end
-- a hostile pick: never while calm (the valid calls that make sure every target is reached)
function G:bad(p) return not self.calm and self:rand() < p end

-- -- Numbers as source ------------------------------------------------------------------------------

function G.num_src(v)
  if v ~= v then return "0/0" end
  if v == math.huge then return "math.huge" elseif v == -math.huge then return "-math.huge" end
  if v == 0 and 1 / v < 0 then return "-0.0" end
  if v == math.floor(v) then
    if math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
    local a = math.abs(v)
    local e = math.floor(math.log(a) / math.log(2) + 0.5)
    if 2 ^ e == a then return (v < 0 and "-2^%d" or "2^%d"):format(e) end
  end
  return ("%.17g"):format(v)
end
local num_src = G.num_src

-- boundary and hostile numbers
local NUMS = { 0, 1, -1, 2, 3, 0.5, -2.5, 1e-8, 1e300, -1e300, 0 / 0, math.huge, -math.huge, 2 ^ 31, 2 ^ 31 - 1,
  -2 ^ 31 - 1, 2 ^ 32, 2 ^ 53, 2 ^ 62, 2 ^ 63, -2 ^ 63, 2 ^ 64, 1e15, -0.0, 7, 100, 0.1, 1e-3, 255, 256 }
local BAD_SIZES = { -1, -2, 2 ^ 31, 2 ^ 32, 2 ^ 62, 2 ^ 63, -2 ^ 63, math.huge, -math.huge, 0 / 0, 1.5, 1e15, 2 ^ 40 }
G.NUMS, G.BAD_SIZES = NUMS, BAD_SIZES

function G:num()
  if self.calm then return num_src(self:pick { 0, 1, 2, 0.5, -1, 3 }) end
  if self:chance(0.6) then return num_src(self:pick(NUMS)) end
  if self:chance(0.5) then return num_src(self:int(-4, 8)) end
  return num_src(math.floor((self:rand() * 8 - 4) * 1000) / 1000)
end
-- a small integer, sometimes a hostile one
function G:intv(lo, hi)
  if self:bad(0.08) then return num_src(self:pick(BAD_SIZES)) end
  return num_src(self:int(lo or -2, hi or 4))
end
function G:size()
  if self:bad(0.08) then return num_src(self:pick(BAD_SIZES)) end
  return num_src(self:pick { 0, 1, 1, 2, 2, 3, 3, 4, 5 })
end

local STRS = { "", "x", "fro", "nuc", "inf", "mean", "sum", "none", "batchmean", "tanh", "cpu", "opencl",
  "opencl:0", "opencl:9", "cuda", "float32", "int64", "bool", "eager", "error", "max", "fan_in", "fan_out",
  "relu", "leaky_relu", "linear", "cos", "weight", "bias", "0", "1.5", "-1", "%s%d", "a\0b",
  string.rep("a", 300), "num_workrs", "step", "lr" }
function G:str() return ("%q"):format(self:pick(STRS)):gsub("\\\n", "\\n") end

-- -- Tensors ------------------------------------------------------------------------------------

local DTYPES = { "float32", "float32", "float32", "float32", "float64", "float64", "int64", "int64", "int32",
  "uint8", "bool", "bool" }
G.ALL_DTYPES = { "bool", "uint8", "int32", "int64", "float32", "float64" }
local function shape_src(s)
  local p = {}
  for i = 1, #s do p[i] = num_src(s[i]) end
  return "{" .. table.concat(p, ", ") .. "}"
end
G.shape_src = shape_src

function G:rand_shape()
  local r = self:rand()
  if r < 0.07 then return {} end
  if r < 0.10 then return { 1, 2, 1, 2, 1, 1, 2, 1 } end            -- 8 dims
  local n = self:pick { 1, 1, 2, 2, 2, 3, 3, 4 }
  local s = {}
  for i = 1, n do s[i] = self:pick { 1, 2, 2, 3, 3, 4, 5 } end
  if r < 0.17 then s[self:int(1, n)] = 0 end                        -- size 0
  return s
end

-- a fresh contiguous tensor of shape s and dtype dt
function G:base(s, dt, rg)
  local ss = shape_src(s)
  if dt == "bool" then return ("tide.rand(%s):gt(0.5)"):format(ss) end
  if dt == "uint8" then return ("tide.randint(0, 5, %s, {dtype = \"uint8\"})"):format(ss) end
  if dt == "int32" or dt == "int64" then
    return ("tide.randint(-3, 4, %s, {dtype = %q})"):format(ss, dt)
  end
  local o = dt == "float32" and "" or (", {dtype = %q}"):format(dt)
  if rg then o = dt == "float32" and ", {requires_grad = true}" or (", {dtype = %q, requires_grad = true}"):format(dt) end
  local r = self:rand()
  if r < 0.04 then return ("tide.full(%s, 0/0%s)"):format(ss, o) end
  if r < 0.08 then                                               -- inf, -inf and finite values
    return ("tide.randn(%s%s):div(tide.randint(0, 2, %s))"):format(ss, o, ss):gsub("requires_grad = true", "requires_grad = false")
  end
  return ("tide.randn(%s%s)"):format(ss, o)
end

-- A tensor: { src=, shape=, dtype=, tensor=true }. o: dtype=, float=, shape=, nofree=, grad=
function G:tensor(o)
  o = o or {}
  local s = o.shape or self:rand_shape()
  local dt = o.dtype or (o.float and self:pick { "float32", "float32", "float64" }) or self:pick(DTYPES)
  local isf = dt == "float32" or dt == "float64"
  local rg = isf and (o.grad or self:chance(0.12))
  local n = #s
  local src
  local r = self:rand()
  if n >= 2 and r < 0.12 then                                      -- transposed view
    local b = {}
    for i = 1, n do b[i] = s[i] end
    b[1], b[n] = b[n], b[1]
    src = ("%s:transpose(1, %d)"):format(self:base(b, dt, rg), n)
  elseif n >= 1 and r < 0.20 then                                  -- strided slice
    local b = {}
    for i = 1, n do b[i] = s[i] end
    b[1] = s[1] * 2
    src = ("%s:slice(1, 1, %d, 2)"):format(self:base(b, dt, rg), math.max(s[1] * 2, 1))
  elseif n >= 1 and r < 0.27 then                                  -- expanded (stride 0)
    local b = {}
    for i = 1, n do b[i] = s[i] end
    local k = self:int(1, n)
    b[k] = 1
    src = ("%s:expand(%s)"):format(self:base(b, dt, rg), shape_src(s))
  elseif r < 0.32 then                                             -- a select of a bigger tensor
    local b = { 2 }
    for i = 1, n do b[i + 1] = s[i] end
    src = ("%s:select(1, 2)"):format(self:base(b, dt, rg))
  elseif n >= 3 and r < 0.37 then
    local b = {}
    for i = 1, n do b[i] = s[i] end
    b[1], b[2], b[3] = s[2], s[3], s[1]
    local perm = { 3, 1, 2 }
    for i = 4, n do perm[i] = i end
    src = ("%s:permute(%s)"):format(self:base(b, dt, rg), table.concat(perm, ", "))
  else
    src = self:base(s, dt, rg)
  end
  if rg and self:chance(0.4) then src = ("(%s * 1)"):format(src) end   -- a non-leaf
  local cl = false
  if self.p_opencl > 0 and not o.cpu and self:chance(self.p_opencl) then
    src = ("%s:to(\"opencl\")"):format(src); cl = true
  end
  if not o.nofree and self:bad(o.p_free or 0.03) then
    src = ("(function() local t = %s; t:free(); return t end)()"):format(src)
  end
  return { src = src, shape = s, dtype = dt, tensor = true, opencl = cl }
end

-- integer tensor of 1-based indices in 1..hi (sometimes out of range or negative)
function G:index_tensor(hi, shape)
  hi = math.max(hi or 3, 1)
  local s = shape or { self:int(0, 4) }
  local r = self:rand()
  local lo, top = 1, hi + 1
  if self.calm then r = 1 end
  if r < 0.1 then lo, top = -hi, 0 elseif r < 0.2 then lo, top = 1, hi + 3 end
  local dt = self:chance(0.2) and "int32" or "int64"
  local src = ("tide.randint(%d, %d, %s, {dtype = %q})"):format(lo, top, shape_src(s), dt)
  return { src = src, shape = s, dtype = dt, tensor = true }
end

-- -- Values of every kind ---------------------------------------------------------------------------

local FNS = {
  -- benign ones first (the valid calls pick among these)
  "function(...) return ... end",
  "function(x) return x * 2 end",
  "function(x) return (x * 2):sum() end",
  "function(x, y) return x + y end",
  "function(x) return x:relu():sum() end",
  "function(x) return x:softmax(-1) * 2 end",
  "function(x) return x:log_softmax(-1) + 1 end",
  "function(x) return x:sum(), x:mean() end",
  "function(x) return x:exp():log() end",
  "function() return nil end",
  -- hostile ones
  "function(x, y) return x:matmul(y) + 1 end",
  "function(x, y) return x:matmul(y):relu() end",
  "function() error(\"fuzz callback error\") end",
  "function() return 1 end",
  "function(x) return { x, { y = x * 2 } } end",
  "function(x) return x:item() end",
  "function(x) x:free(); return x end",
  "function(x) return x:detach():requires_grad_() end",
  "function(x) return x:view(-1):cumsum_missing() end",
  "function(x, y) coroutine.yield(x); return x * 2 end",
}
G.FNS = FNS
local BENIGN = 10
function G:fn() return FNS[self:int(1, self.calm and BENIGN or #FNS)] end

local ANY = {
  function() return "nil" end,
  function() return "true" end,
  function() return "false" end,
  function(g) return g:num() end,
  function(g) return num_src(g:pick(BAD_SIZES)) end,
  function(g) return g:str() end,
  function() return "{}" end,
  function() return "{1, 2}" end,
  function() return "{{}}" end,
  function() return "{foo = 1}" end,
  function(g) return g:tensor().src end,
  function(g) return g:tensor().src end,
  function(g) return g:tensor().src end,
  function(g) return ("(function() local t = %s; t:free(); return t end)()"):format(g:tensor({ nofree = true }).src) end,
  function(g) return "tide." .. g:pick(G.ALL_DTYPES) end,
  function(g) return g:fn() end,
  function() return "newproxy()" end,
  function() return "coroutine.create(function() end)" end,
  function() return "require(\"ffi\").new(\"int[2]\")" end,
  function() return "tide.nn.Linear(2, 2)" end,
  function(g) return ("{%s, %s}"):format(g:tensor().src, g:tensor().src) end,
  function() return "tide.Tensor" end,
  function() return "setmetatable({}, {__index = function(t, k) return 1 end})" end,
}
function G:any() return self:pick(ANY)(self) end

function G:dtype()
  if self:bad(0.15) then return self:pick { "\"float16\"", "\"x\"", "7", "{}", "tide.Tensor" } end
  if self:chance(0.5) then return ("%q"):format(self:pick(G.ALL_DTYPES)) end
  return "tide." .. self:pick(G.ALL_DTYPES)
end
function G:device()
  if self.p_opencl > 0 and self:chance(0.3) then return self:pick { "\"opencl\"", "\"opencl:0\"" } end
  if self.calm then return "\"cpu\"" end
  return self:pick { "\"cpu\"", "\"cpu\"", "\"opencl:7\"", "\"cuda\"", "\"gpu\"", "1", "{}" }
end

-- a dim of a tensor with n dims (1-based; negative from the end); sometimes out of range
function G:dim_of(n)
  n = n or 2
  local r = self.calm and 1 or self:rand()
  if r < 0.08 then return num_src(self:pick { 0, n + 1, -n - 1, 9, -9, 2 ^ 63, 0 / 0, 1.5, math.huge, 2 ^ 31 }) end
  if n == 0 then return self:pick { "1", "-1" } end
  local d = self:int(1, n)
  if self:chance(0.3) then d = d - n - 1 end
  return num_src(d)
end
function G:dims_of(n)
  n = n or 2
  local r = self.calm and 1 or self:rand()
  if r < 0.1 then                                                  -- too many, duplicates, out of range
    local k, p = self:pick { 9, 12, 100 }, {}
    for i = 1, k do p[i] = num_src(1 + (i - 1) % math.max(n, 1)) end
    return "{" .. table.concat(p, ", ") .. "}"
  end
  if r < 0.15 then return "{1, 1}" end
  if r < 0.2 then return "{}" end
  local p = {}
  for i = 1, self:int(1, math.max(1, math.min(n, 3))) do p[i] = self:dim_of(n) end
  if self:chance(0.3) and #p == 1 then return p[1] end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- a shape with the same element count as s (for view/reshape), or a random one
function G:shape_like(s)
  if not s or self:bad(0.15) then
    local r = self:rand_shape()
    if self:bad(0.1) then r[#r + 1] = self:pick(BAD_SIZES) end
    return shape_src(r)
  end
  local n = 1
  for i = 1, #s do n = n * s[i] end
  local r = self:rand()
  if r < 0.3 then return shape_src({ n }) end
  if r < 0.45 then return "{-1}" end
  if r < 0.6 then local t = { 1 }; for i = 1, #s do t[i + 1] = s[i] end; return shape_src(t) end
  if r < 0.7 and #s >= 1 then local t = {}; for i = 1, #s do t[i] = s[i] end; t[1] = -1; return shape_src(t) end
  local t = {}
  for i = #s, 1, -1 do t[#t + 1] = s[i] end
  return shape_src(t)
end

-- a permutation of 1..n (sometimes not one)
function G:perm_of(n)
  local p = {}
  for i = 1, n do p[i] = i end
  for i = n, 2, -1 do local j = self:int(1, i); p[i], p[j] = p[j], p[i] end
  if self:bad(0.1) and n > 0 then p[1] = p[n] end                  -- a repeated dim
  if self:bad(0.05) then p[#p + 1] = n + 1 end
  return "{" .. table.concat(p, ", ") .. "}"
end

function G:pair()
  local r = self.calm and 0 or self:rand()
  if r < 0.6 then return num_src(self:int(0, 3)) end
  if r < 0.85 then return ("{%d, %d}"):format(self:int(0, 3), self:int(0, 3)) end
  return self:pick { num_src(2 ^ 60), num_src(2 ^ 62), "math.huge", "-1", "{1}", "{1, 2, 3}", "\"x\"", "1.5", "0/0",
    "{2^61, 1}" }
end

function G:path()
  local t = self.tmp
  return ("%q"):format(self:pick { t .. "/f.safetensors", t .. "/f.npy", t .. "/f.ckpt", t .. "/f", t,
    t .. "/missing/dir/f", t .. "/f.safetensors", "", t .. "/f.idx" })
end

local MODS = {
  "tide.nn.Linear(3, 2)", "tide.nn.Sequential(tide.nn.Linear(3, 4), tide.nn.ReLU(), tide.nn.Linear(4, 2))",
  "tide.nn.Conv2d(2, 3, 3)", "tide.nn.LayerNorm(3)", "tide.nn.BatchNorm1d(3)", "tide.nn.Embedding(5, 3)",
  "tide.nn.ReLU()", "tide.nn.ModuleList({tide.nn.Linear(2, 2)})", "tide.nn.Bilinear(2, 3, 4)",
  "tide.nn.ModuleDict({a = tide.nn.Linear(2, 2)})", "tide.nn.BatchNorm2d(2)",
}
function G:mod() return self:pick(MODS) end

function G:params()
  local r = self:rand()
  if r < 0.5 then return ("{%s}"):format(self:tensor({ float = true, grad = true, nofree = true }).src) end
  if r < 0.8 then return "tide.nn.Linear(3, 2):parameters()" end
  return ("{%s, %s}"):format(self:tensor({ float = true, grad = true }).src, self:tensor({ float = true, grad = true }).src)
end
function G:optim()
  local o = self:pick { "SGD", "Adam", "AdamW", "RMSprop", "Adagrad" }
  return ("tide.optim.%s(tide.nn.Linear(3, 2):parameters(), {lr = 0.1})"):format(o)
end

-- a list of 1..3 tensors, often of one shape
function G:tlist()
  local n, p = self:int(0, 3), {}
  local s = self:rand_shape()
  for i = 1, n do p[i] = self:tensor({ shape = self:chance(0.8) and s or nil }).src end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- -- Hints ---------------------------------------------------------------------------------------

-- Parse "opts{stride=pair,padding=pair}" -> { stride = "pair", padding = "pair" }
-- split s at `sep` outside braces and parentheses
local function split_top(s, sep)
  local parts, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "{" or c == "(" then depth = depth + 1
    elseif c == "}" or c == ")" then depth = depth - 1
    elseif c == sep and depth == 0 then parts[#parts + 1] = s:sub(start, i - 1); start = i + 1 end
  end
  parts[#parts + 1] = s:sub(start)
  return parts
end
G.split_top = split_top

local function opt_spec(s)
  local spec = {}
  for _, kv in ipairs(split_top(s:match("^opts(%b{})$"):sub(2, -2), ",")) do
    local k, v = kv:match("^%s*([%w_]+)=(.+)$")
    if k then spec[k] = v end
  end
  return spec
end

-- An options table with some of the known keys (and sometimes an unknown one).
function G:opts(spec, args)
  local p = {}
  local keys = {}
  for k in pairs(spec or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    if self:chance(0.5) then p[#p + 1] = ("%s = %s"):format(k, self:value(spec[k], args).src) end
  end
  if self:bad(0.08) then p[#p + 1] = ("%s = %s"):format(self:pick { "num_workrs", "foo", "stridee", "lr_" }, self:num()) end
  if self:bad(0.03) then p[#p + 1] = ("[%s] = 1"):format(self:pick { "1", "true", "{}" }) end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- The value of a hint token; args: the values generated so far (for @N references).
function G:value(tok, args)
  local kind, ref = tok:match("^([%w_]+)@(%d+)$")
  local a = ref and args[tonumber(ref)]
  if a and not a.tensor then a = nil end
  kind = kind or tok
  if tok:sub(1, 1) == "=" then return { src = tok:sub(2) } end
  if tok:match("^opts{") then return { src = self:opts(opt_spec(tok), args) } end
  if tok:match("^one{") then                                       -- one{a|b|c}: one of the listed tokens
    local alts = split_top(tok:sub(5, -2), "|")
    if self.calm then         -- valid calls leave out the hostile alternatives
      local keep = {}
      for _, a in ipairs(alts) do if a ~= "any" then keep[#keep + 1] = a end end
      if #keep > 0 then alts = keep end
    end
    return self:value(self:pick(alts), args)
  end
  if tok:match("^lit{") then                                       -- lit{1|"x"}: one of the listed sources
    return { src = self:pick(split_top(tok:sub(5, -2), "|")) }
  end
  if kind == "t" then return self:tensor() end
  if kind == "tf" then return self:tensor({ float = true }) end
  if kind == "tg" then return self:tensor({ float = true, grad = true }) end
  if kind == "tb" then return self:tensor({ dtype = "bool" }) end
  if kind == "ti" then return self:index_tensor(a and a.shape[1] or 3) end
  if kind == "tl" then                                             -- a tensor shaped like argument ref
    if a then
      local dt = self:chance(0.7) and a.dtype or nil
      return self:tensor({ shape = a.shape, dtype = dt, float = dt == nil and self:chance(0.5) or nil })
    end
    return self:tensor()
  end
  if kind == "tlf" then                                            -- a float tensor shaped like argument ref
    return self:tensor({ shape = a and a.shape, float = true })
  end
  if kind == "tlist" then return { src = self:tlist() } end
  if kind == "dim" then return { src = self:dim_of(a and #a.shape or self:int(0, 3)) } end
  if kind == "dims" then return { src = self:dims_of(a and #a.shape or self:int(0, 3)) } end
  if kind == "shape" then return { src = self:shape_like(a and a.shape) } end
  if kind == "perm" then return { src = self:perm_of(a and #a.shape or self:int(0, 3)) } end
  if kind == "pair" then return { src = self:pair() } end
  if kind == "int" then return { src = self:intv(-2, 4) } end
  if kind == "pint" then return { src = self:intv(1, 4) } end
  if kind == "size" then return { src = self:size() } end
  if kind == "num" then return { src = self:num() } end
  if kind == "prob" then return { src = (self.calm or self:chance(0.8)) and num_src(self:pick { 0, 0.1, 0.5, 0.9, 1 }) or self:num() } end
  if kind == "bool" then return { src = self:pick { "true", "false" } } end
  if kind == "str" then return { src = self:str() } end
  if kind == "dtype" then return { src = self:dtype() } end
  if kind == "device" then return { src = self:device() } end
  if kind == "fn" then return { src = self:fn() } end
  if kind == "path" then return { src = self:path() } end
  if kind == "mod" then return { src = self:mod() } end
  if kind == "params" then return { src = self:params() } end
  if kind == "optim" then return { src = self:optim() } end
  if kind == "opts" then return { src = self:opts(nil, args) } end
  if kind == "any" then return { src = self:any() } end
  if kind == "nil" then return { src = "nil" } end
  error("fuzz.gen: unknown hint token '" .. tok .. "'")
end

-- Arguments for a list of hint tokens. A token ending in '*' repeats 0..4 times
-- (varargs). With probability `hostile` an argument becomes any(); sometimes
-- a trailing argument is dropped or an extra one added.
function G:args(tokens, valid, recv)
  local args = { [0] = recv }
  for _, tok in ipairs(tokens) do
    local rep = tok:match("^(.-)%*$")
    if rep then
      for _ = 1, self:int(0, 4) do args[#args + 1] = self:value(rep, args) end
    else
      local v
      if not valid and self:chance(self.hostile) then v = { src = self:any() } else v = self:value(tok, args) end
      args[#args + 1] = v
    end
  end
  if not valid then
    if #args > 0 and self:chance(0.05) then args[#args] = nil end
    if self:chance(0.04) then args[#args + 1] = { src = self:any() } end
  end
  return args
end

return G
