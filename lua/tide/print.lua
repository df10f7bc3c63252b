--[[
tide.print -- tensors print exactly like PyTorch 1.13's torch/_tensor_str.py with
its default options (precision 4, threshold 1000, edgeitems 3, linewidth 80):
one formatter per tensor (integer, fixed or scientific, chosen from the nonzero
finite values shown), rows wrapped at a fixed number of elements per line,
"..." summaries above 1000 elements, and dtype=/size=/requires_grad=/grad_fn=
suffixes where PyTorch shows them ("dtype=float64", not "dtype=torch.float64").
A tensor on OpenCL is copied to the CPU to be shown and gets PyTorch's
device='opencl:0' suffix first; a tensor traced inside tide.compile (on the
CPU, no data yet) prints as <traced [shape]>.
Called by the Tensor metatype's __tostring (tensor.lua).
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local ffi = core.ffi

local M = {}
local PRECISION, THRESHOLD, EDGE, LINEWIDTH = 4, 1000, 3, 80

local ptr_type = { [0] = ffi.typeof("uint8_t *"), ffi.typeof("uint8_t *"), ffi.typeof("int32_t *"),
  ffi.typeof("int64_t *"), ffi.typeof("float *"), ffi.typeof("double *") }

-- float and double elements are read by their bits first: LuaJIT keeps its type
-- tags in the payload bits of NaNs, so loading a NaN with payload (uninitialized
-- memory, a file) through a float pointer would give nil or a forged object
local u32_t, band = ffi.typeof("uint32_t *"), require("bit").band
local function element_reader(st, ptr)
  local p = ffi.cast(ptr_type[st], ptr)
  if st == 4 then
    local w = ffi.cast(u32_t, ptr)
    return function(off)
      local b = w[off]
      if band(b, 0x7F800000) == 0x7F800000 and band(b, 0x7FFFFF) ~= 0 then return 0 / 0 end
      return p[off]
    end
  elseif st == 5 then
    local w = ffi.cast(u32_t, ptr)
    return function(off)
      local hi = w[2 * off + 1]     -- little-endian: the high word holds sign, exponent and top of the payload
      if band(hi, 0x7FF00000) == 0x7FF00000 and (band(hi, 0xFFFFF) ~= 0 or w[2 * off] ~= 0) then return 0 / 0 end
      return p[off]
    end
  end
  return function(off) return p[off] end
end

local function finite(v) return v == v and v ~= math.huge and v ~= -math.huge end

-- Python's '{:.Nf}' / '{:.Ne}' for a double (C prints nan as "-nan" when the sign bit is set)
local function pyfmt(spec, v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
  return spec:format(v)
end

-- The values to print, as a flat row-major list plus per-dim index lists
-- (false marks the "..." between the first and last EDGE entries when summarizing).
-- data: x itself or its copy on the CPU; compact: data holds only the shown
-- indices of each dim, in order (a summarized device tensor's corners)
local function shown(x, summarize, data, compact)
  local nd, lists = x.ndim, {}
  for d = 0, nd - 1 do
    local n, l = tonumber(x.sizes[d]), {}
    if summarize and n > 2 * EDGE then
      for i = 1, EDGE do l[#l + 1] = i end
      l[#l + 1] = false
      -- the last EDGE indices by count: above 2^53, i + 1 == i and a loop up to n never ends
      -- (an expanded dim can be that long: its stride is 0, so any index reads the same)
      for k = EDGE - 1, 0, -1 do l[#l + 1] = n - k end
    else
      for i = 1, n do l[i] = i end
    end
    lists[d + 1] = l
  end
  local st = x.scalar_type
  local load = element_reader(st, data.ptr)
  local vals = {}
  local function walk(d, off)
    if d > nd then
      local v = load(off)
      if st == 3 then v = tostring(v):sub(1, -3)         -- int64 exactly: "123LL" -> "123"
      elseif st == 0 then v = v ~= 0
      else v = tonumber(v) end
      vals[#vals + 1] = v
      return
    end
    local stride, j = tonumber(data.strides[d - 1]), 0
    for _, i in ipairs(lists[d]) do
      if i then j = j + 1; walk(d + 1, off + ((compact and j or i) - 1) * stride) end
    end
  end
  walk(1, 0)
  return vals, lists
end

-- PyTorch's _Formatter: returns format(v) (padded to the common width) and the width.
local function formatter(vals, st)
  local max_width = 1
  if st == 0 or st == 3 or st == 1 or st == 2 then
    local tostr = st == 0 and function(v) return v and "True" or "False" end
      or st == 3 and function(v) return v end
      or function(v) return ("%d"):format(v) end
    for _, v in ipairs(vals) do max_width = math.max(max_width, #tostr(v)) end
    return function(v)
      local s = tostr(v)
      return (" "):rep(max_width - #s) .. s
    end, max_width
  end
  local int_mode, sci_mode = true, false
  local maxa, mina, any = 0, math.huge, false
  for _, v in ipairs(vals) do
    if finite(v) and v ~= 0 then
      any = true
      local a = math.abs(v)
      if a > maxa then maxa = a end
      if a < mina then mina = a end
      if v ~= math.ceil(v) then int_mode = false end
    end
  end
  local sci_spec = "%." .. PRECISION .. "e"
  local fix_spec = "%." .. PRECISION .. "f"
  if any then
    -- one format for every shown value: scientific when the range is wide,
    -- else "%.0f." for whole numbers or fixed-point (PyTorch's _Formatter)
    local spec, extra
    if maxa / mina > 1000 or maxa > 1e8 or (not int_mode and mina < 1e-4) then
      sci_mode, spec, extra = true, sci_spec, 0
    elseif int_mode then spec, extra = "%.0f", 1
    else spec, extra = fix_spec, 0 end
    for _, v in ipairs(vals) do
      if finite(v) and v ~= 0 then max_width = math.max(max_width, #pyfmt(spec, v) + extra) end
    end
  end
  return function(v)
    local s
    if sci_mode then s = pyfmt(sci_spec, v)
    elseif int_mode then
      s = pyfmt("%.0f", v)
      if finite(v) then s = s .. "." end
    else s = pyfmt(fix_spec, v) end
    return (" "):rep(max_width - #s) .. s
  end, max_width
end

-- Append suffixes, moving one to a new line when the line would pass 80 columns
-- (PyTorch's _add_suffixes, including its count of the last line's length).
local function add_suffixes(s, suffixes, indent)
  local parts = { s }
  local nl = s:match(".*()\n")
  local last_line_len = #s - (nl and nl - 1 or -1) + 1
  for _, suf in ipairs(suffixes) do
    if last_line_len + #suf + 2 > LINEWIDTH then
      parts[#parts + 1] = ",\n" .. (" "):rep(indent) .. suf
      last_line_len = indent + #suf
    else
      parts[#parts + 1] = ", " .. suf
      last_line_len = last_line_len + #suf + 2
    end
  end
  parts[#parts + 1] = ")"
  return table.concat(parts)
end

-- A device tensor's values on the CPU: all of them, or, when summarized, only
-- the first and last EDGE indices of each long dim (selected on the device), so
-- printing an expanded [2^62] tensor copies a few elements, not 2^62.
function M.host_copy(x, summarize)
  local tide = require "tide"
  local y = x:detach()
  if summarize then
    for d = 1, x.ndim do
      local n = x:size(d)
      if n > 2 * EDGE then
        local idx = {}
        for i = 1, EDGE do idx[i] = i end
        for k = EDGE - 1, 0, -1 do idx[#idx + 1] = n - k end
        y = y:index_select(d, tide.tensor(idx, { dtype = tide.int64, device = x.device }))
      end
    end
  end
  return y:to("cpu")
end

function M.tostring(x)
  local tide = require "tide"
  if x.p == nil then return "tensor(<freed>)" end
  local nd, n, st = x.ndim, x:numel(), x.scalar_type
  local prefix = "tensor("
  local indent = #prefix
  local suffixes = {}
  local body
  local default = tide.get_default_dtype().id
  local data = x              -- where the values are read: x, or its copy on the CPU
  if x.device_type ~= 0 then
    suffixes[1] = "device='" .. x.device .. "'"
    if n > 0 then data = tide.no_grad(function() return M.host_copy(x, n > THRESHOLD) end) end
  end
  if x.device_type == 0 and x.ptr == nil then
    body = "<traced " .. tensor.shape_str(x) .. ">"
  elseif n == 0 then
    if nd ~= 1 then
      local sz = x:size()
      suffixes[#suffixes + 1] = "size=(" .. table.concat(sz, ", ") .. (nd == 1 and ",)" or ")")
    end
    if st ~= default then suffixes[#suffixes + 1] = "dtype=" .. x.dtype.name end
    body = "[]"
  else
    if st ~= default and st ~= 3 and st ~= 0 then suffixes[#suffixes + 1] = "dtype=" .. x.dtype.name end
    local summarize = n > THRESHOLD
    local vals, lists = shown(x, summarize, data, data ~= x and summarize)
    local fmt, width = formatter(vals, st)
    local pos = 0
    local function nextval() pos = pos + 1; return fmt(vals[pos]) end
    local function render(d, ind)
      local l = lists[d]
      if d == nd then
        -- _vector_str: a fixed number of elements per line
        local per_line = math.max(1, math.floor((LINEWIDTH - ind) / (width + 2)))
        local data = {}
        for _, i in ipairs(l) do data[#data + 1] = i and nextval() or " ..." end
        local lines = {}
        for i = 1, #data, per_line do
          lines[#lines + 1] = table.concat(data, ", ", i, math.min(i + per_line - 1, #data))
        end
        return "[" .. table.concat(lines, ",\n" .. (" "):rep(ind + 1)) .. "]"
      end
      local slices = {}
      for _, i in ipairs(l) do slices[#slices + 1] = i and render(d + 1, ind + 1) or "..." end
      return "[" .. table.concat(slices, "," .. ("\n"):rep(nd - d) .. (" "):rep(ind + 1)) .. "]"
    end
    if nd == 0 then body = nextval() else body = render(1, indent) end
  end
  local gf = x.grad_fn
  if gf then suffixes[#suffixes + 1] = "grad_fn=<" .. gf .. ">"
  elseif x.requires_grad then suffixes[#suffixes + 1] = "requires_grad=True" end
  return add_suffixes(prefix .. body, suffixes, indent)
end

return M
