-- Doc strings (tide.doc): every public function, class and method has one,
-- none is repeated or names nothing, doc/api.md is what scripts/gen-doc.lua
-- makes of them, and help finds them by name and by value.
local tide = require "tide"
local doc = require "tide.doc"

local function lines(list, n)
  local out = {}
  for i = 1, math.min(#list, n or 40) do out[i] = "  " .. list[i] end
  if #list > (n or 40) then out[#out + 1] = ("  ... and %d more"):format(#list - (n or 40)) end
  return table.concat(out, "\n")
end

describe("doc strings", function()
  before_each(function() doc.reset() end)

  it("document every public function, class and method", function()
    local missing = doc.missing()
    assert(#missing == 0, ("%d public functions have no doc string (add `--- name(args) -> result` and a line "
      .. "of text next to the code; lua/tide/doc.lua describes the form):\n%s"):format(#missing, lines(missing)))
    assert.is_true(#doc.api().items > 500)
  end)

  it("catch a public function without one", function()
    local F = tide.nn.functional
    F.spec_undocumented = function() end
    tide.nn.Module.spec_method = function() end
    local ok, missing = pcall(doc.missing)
    F.spec_undocumented, tide.nn.Module.spec_method = nil, nil
    assert.is_true(ok)
    local text = table.concat(missing, "\n")
    assert.matches("tide.nn.functional.spec_undocumented", text, 1, true)
    assert.matches("tide.nn.Module.spec_method", text, 1, true)
    assert.equal(2, #missing)
  end)

  it("are neither repeated nor about nothing, and say something", function()
    local db = doc.entries()
    local rep = {}
    for _, e in ipairs(db.repeated) do rep[#rep + 1] = ("%s (%s:%d)"):format(e.name, e.file, e.line) end
    assert(#rep == 0, "doc strings repeated:\n" .. lines(rep))
    -- what a doc may name: a public path, a tensor property, a method of a base
    -- class that a subclass defines (Module:forward), tide.Tensor
    local a = doc.api()
    local known = { ["tide.Tensor"] = true }
    for k in pairs(require("tide.tensor").getters) do known["Tensor." .. k] = true end
    for _, it in ipairs(a.items) do
      for _, p in ipairs(it.paths) do known[p] = true end
      if it.kind == "method" and type(it.class) == "table" then
        local b = it.class
        for _ = 1, 16 do
          local mt = getmetatable(b)
          b = type(mt) == "table" and type(rawget(mt, "__index")) == "table" and rawget(mt, "__index") or nil
          if not b then break end
          for _, bp in ipairs(a.paths[b] or {}) do
            for _, n in ipairs(it.names) do known[bp .. "." .. n] = true end
          end
        end
      end
    end
    local bad, empty = {}, {}
    for _, e in ipairs(db.list) do
      if not known[e.key] then bad[#bad + 1] = ("%s (%s:%d)"):format(e.name, e.file, e.line) end
      if not e.text:match("%S") then empty[#empty + 1] = e.name end
    end
    assert(#bad == 0, "doc strings that name no public function:\n" .. lines(bad))
    assert(#empty == 0, "doc strings with a signature only:\n" .. lines(empty))
  end)

  it("parse headers, not descriptions that start with a name", function()
    local es = doc.parse(table.concat({
      "--- tide.zeros_like(x[, opts]) -> Tensor", "--- tide.zeros with x's shape.",
      "--- Tensor.shape", "--- The sizes.", "local x = 1", "--- nn.Linear(in, out)", "--- nn.Linear with bias.",
      "-- not a doc", "--- F.relu(x) -> Tensor", "--- max(x, 0).",
      "  --- tide.indented(x)", "--- tide.alone",
    }, "\n"), "t.lua")
    assert.equal(5, #es)
    assert.equal("tide.zeros_like", es[1].key)
    assert.equal("tide.zeros with x's shape.", es[1].text)
    assert.equal("Tensor.shape", es[2].key)
    assert.equal("tide.nn.Linear", es[3].key)
    assert.equal("tide.nn.functional.relu", es[4].key)
    assert.equal("max(x, 0).", es[4].text)
    assert.equal("tide.alone", es[5].key)
  end)

  it("make doc/api.md (make doc)", function()
    local tmp = os.tmpname()
    local p = io.popen(("luajit scripts/gen-doc.lua %s 2>&1"):format(tmp))
    local out = p:read("*a")
    assert.is_true(p:close(), out)
    local f = assert(io.open(tmp)); local want = f:read("*a"); f:close()
    os.remove(tmp)
    local g = assert(io.open("doc/api.md")); local have = g:read("*a"); g:close()
    assert(have == want, "doc/api.md is out of date: run `make doc`")
    assert.matches("`tide.zeros(size...[, opts]) -> Tensor`", have, 1, true)
  end)
end)

describe("help", function()
  local x, model
  setup(function()
    x = tide.ones(2, 3)
    model = tide.nn.Linear(3, 2)
    _G.spec_x, _G.spec_model = x, model
  end)
  teardown(function() _G.spec_x, _G.spec_model = nil, nil end)

  it("leaves tide.save working when help is the first thing a process asks for (one opendir declaration)", function()
    local tmp = os.tmpname()
    local code = ("local t = require 'tide'; require('tide.doc').help_text('tide.zeros'); " ..
      "t.save({ a = t.ones(2) }, %q); print(t.load(%q).a:sum():item())"):format(tmp, tmp)
    local p = io.popen(("LUA_PATH=%q luajit -e %q 2>&1; echo \"exit $?\""):format(package.path, code))
    local out = p:read("*a")
    p:close()
    os.remove(tmp)
    assert.matches("^2\nexit 0\n$", out)
  end)

  it("finds a doc by name, by value, through methods of instances and base classes", function()
    assert.matches("^tide.zeros%(size", doc.help_text("tide.zeros"))
    assert.matches("^Tensor:matmul%(b%)", doc.help_text("spec_x:matmul"))
    assert.matches("^Tensor:abs%(%)", doc.help_text("spec_x:absolute"))          -- an alias
    assert.matches("in place", doc.help_text("tide.exp_"))
    assert.matches("^nn.Linear%(", doc.help_text("spec_model"))
    assert.matches("^nn.Module:parameters%(%)", doc.help_text("spec_model:parameters"))
    assert.matches("^F.cross_entropy", doc.help_text("tide.nn.functional.cross_entropy"))
    assert.matches("%[2, 3%] tide.float32 on cpu", doc.help_text("spec_x"))
    local all = doc.help_text("softmax")                                          -- every match
    assert.matches("F.softmax", all, 1, true); assert.matches("nn.Softmax", all, 1, true)
    assert.matches("Tensor:softmax", all, 1, true)
    assert.matches("no help for 'nothing_like_this'", doc.help_text("nothing_like_this"))
  end)
end)
