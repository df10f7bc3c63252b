--[[
tide.cmdline -- `--name value` options of a script (the examples use it):
defaults and help text in one list, --help prints them, a number option
takes only numbers, an unknown option or a missing value ends the script
with the usage on stderr (status 2).
--]]
local M = {}

--- tide.cmdline.parse(arg, {usage =, about =, {name, default, help}, ...}) -> options
--- The options as a table (defaults filled in); --help or -h prints them and exits.
function M.parse(argv, spec)
  local raise = require("tide.core").raise
  if argv ~= nil and type(argv) ~= "table" then
    raise(("bad argument #1 to 'parse' (table of arguments expected, got %s)"):format(type(argv)))
  end
  if type(spec) ~= "table" then raise(("bad argument #2 to 'parse' (table of options expected, got %s)"):format(type(spec))) end
  for i, o in ipairs(spec) do
    if type(o) ~= "table" or type(o[1]) ~= "string" then
      raise(("parse: option %d must be {name, default, help} with a string name, got %s"):format(i, type(o)))
    end
  end
  for i = 1, argv and #argv or 0 do
    if type(argv[i]) ~= "string" then raise(("parse: argument %d is a %s, not a string"):format(i, type(argv[i]))) end
  end
  local opt, by_name = {}, {}
  for _, o in ipairs(spec) do opt[o[1]] = o[2]; by_name[o[1]] = o end
  local function usage(out)
    local lines = { "usage: " .. (spec.usage or ((argv and argv[0] or "script") .. " [options]")) }
    if spec.about then lines[#lines + 1] = spec.about end
    lines[#lines + 1] = "options (default in brackets):"
    local w = 4                                     -- (#"help")
    for _, o in ipairs(spec) do w = math.max(w, #o[1]) end
    for _, o in ipairs(spec) do
      local d = o[2]
      d = d == "" and "none" or tostring(d)
      lines[#lines + 1] = ("  --%-" .. w .. "s  %s [%s]"):format(o[1], o[3] or "", d)
    end
    lines[#lines + 1] = ("  --%-" .. w .. "s  %s"):format("help", "print this help")
    out:write(table.concat(lines, "\n"), "\n")
  end
  local function fail(msg)
    io.stderr:write(msg, "\n")
    usage(io.stderr)
    os.exit(2)
  end
  local i = 1
  while argv and i <= #argv do
    local a = argv[i]
    if a == "--help" or a == "-h" then usage(io.stdout); os.exit(0) end
    local k = a:match("^%-%-(.+)$")
    if not k or not by_name[k] then fail(("unknown option '%s'"):format(a)) end
    local v = argv[i + 1]
    if v == nil then fail(("option --%s needs a value"):format(k)) end
    if type(by_name[k][2]) == "number" then
      local n = tonumber(v)
      if not n then fail(("option --%s needs a number, got '%s'"):format(k, v)) end
      v = n
    end
    opt[k] = v
    i = i + 2
  end
  return opt
end

return M
