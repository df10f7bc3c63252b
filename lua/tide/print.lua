--[[
tide.print -- tensors print like PyTorch: tensor([[ 0.1234, -1.0000], ...]),
with a shared format per tensor (fixed or scientific), summarization with
"..." above 1000 elements (3 items each side), and dtype=/requires_grad=
suffixes where PyTorch shows them.
--]]
local tensor = require "tide.tensor"
local T = tensor.Tensor

local M = {}
local THRESHOLD, EDGE = 1000, 3

local function is_int(v) return v == math.floor(v) and v == v and v ~= math.huge and v ~= -math.huge end

-- Pick a formatter for all the values shown (as PyTorch's _Formatter does).
local function formatter(vals, isfloat, isbool)
  if isbool then return function(v) return v ~= 0 and "True" or "False" end, 5 end
  if not isfloat then
    local w = 1
    for _, v in ipairs(vals) do w = math.max(w, #string.format("%d", v)) end
    return function(v) return string.format("%" .. w .. "d", v) end, w
  end
  local finite, allint, maxa, mina = {}, true, 0, math.huge
  for _, v in ipairs(vals) do
    if v == v and v ~= math.huge and v ~= -math.huge then
      finite[#finite + 1] = v
      local a = math.abs(v)
      if a > maxa then maxa = a end
      if a ~= 0 and a < mina then mina = a end
      if not is_int(v) then allint = false end
    end
  end
  local fmt
  if #finite == 0 then fmt = function(v) return tostring(v) end
  elseif allint then
    if maxa > 1e8 then fmt = function(v) return string.format("%.4e", v) end
    else fmt = function(v) return string.format("%.0f.", v) end end
  elseif maxa / mina > 1000 or maxa > 1e8 or mina < 1e-4 then
    fmt = function(v) return string.format("%.4e", v) end
  else
    fmt = function(v) return string.format("%.4f", v) end
  end
  local function f(v)
    if v ~= v then return "nan" elseif v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
    local s = fmt(v)
    if s == "-0." or s == "-0.0000" then s = s:sub(2) end
    return s
  end
  local w = 1
  for _, v in ipairs(vals) do w = math.max(w, #f(v)) end
  return function(v) local s = f(v); return string.rep(" ", w - #s) .. s end, w
end

function M.tostring(x)
  local tide = require "tide"
  local nd, n = x.ndim, x:numel()
  local st = x.scalar_type
  local isfloat, isbool = st >= 4, st == 0
  local suffix = {}
  if st ~= tide.get_default_dtype().id and st ~= 3 and st ~= 0 then suffix[#suffix + 1] = "dtype=" .. x.dtype.name end
  if st == 0 and n == 0 then suffix[#suffix + 1] = "dtype=bool" end
  local gf = x.grad_fn
  if gf then suffix[#suffix + 1] = "grad_fn=<" .. gf .. ">"
  elseif x.requires_grad then suffix[#suffix + 1] = "requires_grad=True" end
  if x.ptr == nil then return "tensor(<traced " .. tensor.shape_str(x) .. ">)" end
  local summarize = n > THRESHOLD
  local sizes = x:size()
  local body
  if n == 0 then
    body = "[]"
    if nd > 1 then suffix[#suffix + 1] = "size=(" .. table.concat(sizes, ", ") .. ")" end
  else
    -- gather the values that will be shown
    local vals = {}
    local function collect(v, d)
      if d > nd then vals[#vals + 1] = T.item(v); return end
      local len = sizes[d]
      for i = 1, len do
        if summarize and len > 2 * EDGE and i == EDGE + 1 then
          for j = len - EDGE + 1, len do collect(T.select(v, 1, j), d + 1) end
          return
        end
        collect(T.select(v, 1, i), d + 1)
      end
    end
    if nd == 0 then vals[1] = T.item(x)
    elseif not summarize then
      local flat = x:contiguous():reshape(-1)
      local buf = tensor.read_all(flat)
      for i = 0, n - 1 do vals[i + 1] = buf[i] end
    else collect(x, 1) end
    if isbool then for i = 1, #vals do vals[i] = vals[i] and 1 or 0 end end
    local fmt = formatter(vals, isfloat, isbool)
    local pos = 0
    local function render(d, indent)
      if d > nd then pos = pos + 1; return fmt(vals[pos]) end
      local len, parts = sizes[d], {}
      for i = 1, len do
        if summarize and len > 2 * EDGE and i == EDGE + 1 then
          parts[#parts + 1] = "..."
          for _ = len - EDGE + 1, len do parts[#parts + 1] = render(d + 1, indent .. " ") end
          break
        end
        parts[#parts + 1] = render(d + 1, indent .. " ")
      end
      if d == nd then
        -- wrap long rows at ~80 columns like PyTorch
        local line, lines = "", {}
        for i, p in ipairs(parts) do
          local piece = p .. (i < #parts and "," or "")
          if #line > 0 and #indent + #line + #piece + 1 > 80 then lines[#lines + 1] = line; line = piece
          else line = (#line > 0 and line .. " " or "") .. piece end
        end
        lines[#lines + 1] = line
        return "[" .. table.concat(lines, "\n" .. indent .. " ") .. "]"
      end
      local sep = ",\n" .. string.rep("\n", nd - d - 1) .. indent .. " "
      return "[" .. table.concat(parts, sep) .. "]"
    end
    body = nd == 0 and fmt(vals[1]):gsub("^%s+", "") or render(1, "       ")
  end
  local s = "tensor(" .. body
  if #suffix > 0 then s = s .. ", " .. table.concat(suffix, ", ") end
  return s .. ")"
end

return M
