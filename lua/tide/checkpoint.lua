--[[
tide.checkpoint -- save and resume a training run in one safetensors file,
written atomically (tide.save: temp file, fsync, rename): the model's and the
optimizer's and scheduler's state_dicts, the DataLoader's epoch (its shuffle
order), the RNG state, the step and any extra values. A resumed run continues
with the same numbers as an uninterrupted one.

  tide.checkpoint.save(path, { model = m, optimizer = opt, scheduler = s, loader = l, step = n, extra = {...} })
  local step, extra = tide.checkpoint.resume(path, { model = m, optimizer = opt, scheduler = s, loader = l })
--]]
local tide = require "tide"
local core = require "tide.core"
local raise = core.raise

local M = {}

-- uint64 RNG words travel as decimal strings (a double cannot hold them)
local function u64_str(v) return (tostring(v):gsub("U?LL$", "")) end
local function str_u64(s)
  if type(s) ~= "string" or not s:match("^%d+$") then raise(("checkpoint: bad RNG state %q"):format(tostring(s))) end
  local v = 0ULL
  for i = 1, #s do v = v * 10 + (s:byte(i) - 48) end
  return v
end

-- parts.model / optimizer / scheduler: objects with the given method (or nil)
local function part(parts, k, method, fname)
  local v = parts[k]
  if v ~= nil and (type(v) ~= "table" or type(v[method]) ~= "function") then
    raise(("%s: %s must be an object with :%s(), got %s"):format(fname, k, method, type(v)))
  end
  return v
end
local function loader_part(parts, fname)
  local l = parts.loader
  if l ~= nil and type(l) ~= "table" then raise(("%s: loader must be a DataLoader, got %s"):format(fname, type(l))) end
  return l
end

--- tide.checkpoint.save(path, {model, optimizer, scheduler, loader, step, extra})
--- Saves the training state (with the RNG state) in one file.
function M.save(path, parts)
  if type(path) ~= "string" then raise(("bad argument #1 to 'save' (string expected, got %s)"):format(type(path))) end
  if type(parts) ~= "table" then raise(("bad argument #2 to 'save' (table expected, got %s)"):format(type(parts))) end
  local rng = tide.get_rng_state()
  local v = { version = 1, rng = { seed = u64_str(rng.seed), offset = u64_str(rng.offset) } }
  for _, k in ipairs { "model", "optimizer", "scheduler" } do
    local p = part(parts, k, "state_dict", "save")
    if p then v[k] = p:state_dict() end
  end
  local loader = loader_part(parts, "save")
  if loader then v.loader_epoch = loader.epoch end
  v.step = parts.step
  v.extra = parts.extra
  tide.save(v, path)
end

-- Load path into the given objects; returns step, extra. Every part the
-- checkpoint holds must have a target and the other way round, so a resume
-- never silently skips state.
--- tide.checkpoint.resume(path, {model, optimizer, scheduler, loader}) -> step, extra
--- Loads a checkpoint into the given objects (each part needs its target) and restores the RNG.
function M.resume(path, targets)
  targets = targets or {}
  if type(targets) ~= "table" then raise(("bad argument #2 to 'resume' (table expected, got %s)"):format(type(targets))) end
  for _, k in ipairs { "model", "optimizer", "scheduler" } do part(targets, k, "load_state_dict", "resume") end
  loader_part(targets, "resume")
  local v = tide.load(path)
  if type(v) ~= "table" or v.version ~= 1 then raise(("resume: %s is not a tide checkpoint"):format(path)) end
  for _, k in ipairs { "model", "optimizer", "scheduler" } do
    if (v[k] ~= nil) ~= (targets[k] ~= nil) then
      raise(("resume: %s %s %s state but the call %s one"):format(path, v[k] ~= nil and "has" or "has no", k,
        targets[k] ~= nil and "passes" or "does not pass"))
    end
    if v[k] ~= nil then targets[k]:load_state_dict(v[k]) end
  end
  if targets.loader then
    if v.loader_epoch == nil then raise(("resume: %s has no DataLoader epoch"):format(path)) end
    targets.loader.epoch = v.loader_epoch
  end
  tide.set_rng_state({ seed = str_u64(v.rng.seed), offset = str_u64(v.rng.offset) })
  return v.step, v.extra
end

return M
