-- tide.save / tide.load (safetensors) and tide.save_npy / tide.load_npy:
-- round trips, hand-built files per the formats' specifications, malformed
-- files, atomic writes.
local tide = require "tide"
local H = require "spec.helper"

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function P(name) return dir .. "/" .. name end
local function write(path, bytes) local f = assert(io.open(path, "wb")); f:write(bytes); f:close() end
local function read(path) local f = io.open(path, "rb"); if not f then return nil end local s = f:read("*a"); f:close() return s end
local function u64(n) local t = {} for i = 1, 8 do t[i] = string.char(n % 256); n = math.floor(n / 256) end return table.concat(t) end
local function listdir() local p = io.popen("ls -A " .. dir); local s = p:read("*a"); p:close() return s end

local function same(a, b)
  assert.are.equal(tostring(a.dtype), tostring(b.dtype))
  assert.are.same(a:size(), b:size())
  assert.are.same(a:totable(), b:totable())
end

-- float32 1..n as little-endian bytes
local function f32s(...) local ffi = require "ffi"; local n = select("#", ...)
  local b = ffi.new("float[?]", n, ...); return ffi.string(b, 4 * n) end

describe("safetensors", function()
  after_each(function() os.execute("rm -f " .. dir .. "/*") end)

  it("round-trips every dtype", function()
    local vals = { { 1, 0, 1 }, { 0, 7, 255 }, { -2147483648, 0, 2147483647 }, { -2 ^ 53, 3, 2 ^ 53 },
      { 1.5, -0.25, 3e38 }, { 1 / 3, -1e300, 5e-324 } }
    for id, name in ipairs { "bool", "uint8", "int32", "int64", "float32", "float64" } do
      local x = tide.tensor(vals[id], { dtype = tide[name] }):view(3, 1)
      tide.save(x, P("a.safetensors"))
      local y = tide.load(P("a.safetensors"))
      assert.is_true(tide.is_tensor(y))
      same(y, x)
    end
  end)

  it("round-trips 0-dim, empty and non-contiguous tensors", function()
    local v = { s = tide.tensor(3.5), e = tide.zeros(0, 4), e2 = tide.zeros(3, 0, { dtype = tide.int64 }),
      t = tide.arange(1, 13):view(3, 4):t(), n = tide.arange(1, 13):view(3, 4)[{ {}, { 2, 3 } }] }
    tide.save(v, P("b.safetensors"))
    local r = tide.load(P("b.safetensors"))
    for k, x in pairs(v) do same(r[k], x) end
    assert.are.equal(0, r.s:dim())
    assert.are.same({ 4, 3 }, r.t:size())
    assert.is_true(r.t:is_contiguous())
  end)

  it("rebuilds nested tables with numbers, strings, booleans", function()
    local w = tide.randn(2, 3)
    local v = { model = { ["0.weight"] = w, ["0.bias"] = tide.zeros(3) }, step = 10, lr = 1e-3, name = "run \"a\"\n\xc3\xa9",
      flags = { true, false }, list = { w, 2, "x" }, [7] = "seven", big = 2 ^ 60, neg = -0.1, pi = math.pi,
      inf = math.huge, ninf = -math.huge, empty = {}, deep = { a = { b = { c = 1 } } } }
    tide.save(v, P("c.safetensors"))
    local r, meta = tide.load(P("c.safetensors"))
    same(r.model["0.weight"], w); same(r.list[1], w); same(r.model["0.bias"], v.model["0.bias"])
    for _, k in ipairs { "step", "lr", "name", "big", "neg", "pi", "inf", "ninf" } do assert.are.equal(v[k], r[k]) end
    assert.are.equal("seven", r[7]); assert.is_nil(r["7"])
    assert.are.same({ true, false }, r.flags)
    assert.are.same({ 2, "x" }, { r.list[2], r.list[3] })
    assert.are.same({}, r.empty); assert.are.equal(1, r.deep.a.b.c)
    assert.are.equal("pt", meta.format)
    tide.save({ x = 0 / 0 }, P("n.safetensors"))
    local n = tide.load(P("n.safetensors")).x
    assert.is_true(n ~= n)
  end)

  it("names tensors by dotted path, as Python tools see them", function()
    local a, b = tide.ones(2), tide.zeros(1)
    tide.save({ model = { ["0.weight"] = a }, ["model.0.weight"] = b, __metadata__ = a }, P("d.safetensors"))
    local s = read(P("d.safetensors"))
    local n = 0
    for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
    assert.are.equal(0, n % 8)
    local hdr = s:sub(9, 8 + n)
    -- keys are walked in sorted order: model.0.weight (a) comes before the key "model.0.weight" (b)
    assert.truthy(hdr:find('"model.0.weight":{"dtype":"F32","shape":[2],', 1, true))
    assert.truthy(hdr:find('"model.0.weight#2":{"dtype":"F32","shape":[1],', 1, true))
    assert.truthy(hdr:find('"__metadata__#2":', 1, true))
    local r = tide.load(P("d.safetensors"))
    same(r.model["0.weight"], a); same(r["model.0.weight"], b); same(r.__metadata__, a)
    tide.save(a, P("e.safetensors"))
    assert.truthy(read(P("e.safetensors")):find('"tensor":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', 1, true))
  end)

  it("reads a hand-built file (no tide metadata) as a flat table", function()
    -- per the format: u64 LE header size, JSON header, data; offsets relative to the data start
    local header = '{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
      .. '"b":{"dtype":"I64","shape":[],"data_offsets":[16,24]},'
      .. '"m":{"dtype":"BOOL","shape":[3],"data_offsets":[24,27]},'
      .. '"__metadata__":{"note":"hand \\u00e9"}}'
    local data = f32s(1, 2, 3, 4) .. u64(42) .. "\1\0\2"     -- a bool byte other than 0/1 reads as true
    write(P("h.safetensors"), u64(#header) .. header .. data)
    local r, meta = tide.load(P("h.safetensors"))
    same(r.w, tide.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = tide.float32 }))
    assert.are.equal(42, r.b:item()); assert.are.equal(0, r.b:dim()); assert.are.equal(tide.int64, r.b.dtype)
    same(r.m, tide.tensor({ true, false, true }))
    assert.are.equal(1, require("ffi").cast("uint8_t *", require("tide.tensor").fields(r.m).ptr)[2])
    assert.are.equal("hand \xc3\xa9", meta.note)
    -- padding with spaces is allowed
    local padded = header .. "     "
    write(P("h2.safetensors"), u64(#padded) .. padded .. data)
    same(tide.load(P("h2.safetensors")).w, r.w)
  end)

  local function maps(path)
    local f = io.open("/proc/self/maps", "r"); local s = f:read("*a"); f:close()
    return s:find(path, 1, true) ~= nil
  end

  it("maps the file instead of copying: copy-on-write, alive until the last tensor dies", function()
    local x = { a = tide.randn(300, 200), b = tide.randn(7, { dtype = tide.float64 }) }
    tide.save(x, P("m.safetensors"))
    collectgarbage(); collectgarbage()
    assert.is_false(maps(P("m.safetensors")))
    local y = tide.load(P("m.safetensors"))
    assert.is_true(maps(P("m.safetensors")), "the file is mapped")
    same(y.a, x.a); same(y.b, x.b)
    -- writes into a loaded tensor stay in memory
    y.a:mul_(2)
    same(y.a, x.a * 2)
    same(tide.load(P("m.safetensors"), { mmap = false }).a, x.a)
    -- replacing the file (atomic save) keeps the loaded tensors valid
    tide.save({ a = tide.zeros(2) }, P("m.safetensors"))
    same(y.b, x.b)
    same(tide.load(P("m.safetensors")).a, tide.zeros(2))
    local b = y.b
    y = nil
    collectgarbage(); collectgarbage()
    same(b, x.b)                 -- one tensor keeps the old mapping alive
    b = nil
    collectgarbage(); collectgarbage()
    assert.is_false(maps(P("m.safetensors")), "unmapped after the last tensor died")
    -- {mmap = false} reads into fresh storage
    local z = tide.load(P("m.safetensors"), { mmap = false })
    assert.is_false(maps(P("m.safetensors")))
    same(z.a, tide.zeros(2))
    H.raises(function() tide.load(P("m.safetensors"), "yes") end, "load")
  end)

  it("reads entries whose offsets are not aligned to their element size by copying", function()
    -- a 3-byte U8 entry first puts the F32 entry at data offset 3
    local header = '{"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},'
      .. '"w":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}}'
    header = header .. string.rep(" ", (8 - #header % 8) % 8)
    write(P("u.safetensors"), u64(#header) .. header .. "\7\8\9" .. f32s(1.5, -2))
    local r = tide.load(P("u.safetensors"))
    same(r.u, tide.tensor({ 7, 8, 9 }, { dtype = tide.uint8 }))
    same(r.w, tide.tensor({ 1.5, -2 }, { dtype = tide.float32 }))
  end)

  it("writes bytes per the format (header, offsets, little-endian data)", function()
    tide.save({ x = tide.tensor({ 1, 2 }, { dtype = tide.float32 }) }, P("f.safetensors"))
    local s = read(P("f.safetensors"))
    local n = 0
    for i = 8, 1, -1 do n = n * 256 + s:byte(i) end
    assert.are.equal(#s, 8 + n + 8)
    assert.are.equal(f32s(1, 2), s:sub(9 + n))
    local hdr = s:sub(9, 8 + n)
    assert.truthy(hdr:find('^{"__metadata__":{"format":"pt","tide.tree":"{\\"x\\":%[\\"T\\",\\"x\\"%]}"},'
      .. '"x":{"dtype":"F32","shape":%[2%],"data_offsets":%[0,8%]}} *$'))
  end)

  local function bad(name, header, data, ...)
    write(P(name), u64(#header) .. header .. (data or ""))
    local err = H.raises(function() tide.load(P(name)) end, "load: " .. P(name) .. ": ", ...)
    return err
  end
  local W = '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'

  it("rejects malformed files with a message naming the file and the problem", function()
    write(P("t1"), "\4\0\0")
    H.raises(function() tide.load(P("t1")) end, "has 3 bytes")
    write(P("t2"), u64(1000) .. W)
    H.raises(function() tide.load(P("t2")) end, "header claims 1000 bytes")
    write(P("t3"), u64(2 ^ 40) .. W)
    H.raises(function() tide.load(P("t3")) end, "header claims 1099511627776 bytes")
    bad("t4", W, f32s(1))                                                     -- truncated data
    H.raises(function() tide.load(P("t4")) end, "entry 'w' claims 8 bytes up to offset 8 but the file's data section has 4")
    bad("t5", '{"w":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}}', f32s(1, 2, 3),
      "entry 'w' claims 4000000 bytes", "has 12")
    bad("t6", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
      f32s(1, 2, 3), "overlaps entry")
    bad("t7", '{"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}', "\0\0\0\0", "dtype F16 is not supported yet")
    bad("t8", '{"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,4]}}', "\0\0\0\0", "unknown dtype \"Q9\"")
    bad("t9", '{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', f32s(1, 2), "hold 8 bytes but shape [3] of F32 needs 12")
    bad("t10", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', f32s(1, 2), "bad JSON")
    bad("t11", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],}}', f32s(1, 2), "bad JSON")
    bad("t12", '{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', f32s(1, 2), "shape[1] = -2")
    bad("t13", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
      f32s(1, 2), "duplicate key")
    bad("t14", W, f32s(1, 2, 3), "data bytes [8, 12) belong to no entry")
    bad("t15", '{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f32s(1, 2), "data bytes [0, 4) belong to no entry")
    bad("t16", '[1]', "", "does not start with '{'")
    bad("t17", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', f32s(1, 2), "end before they begin")
    bad("t18", '{"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}', f32s(1), "9 dims")
    bad("t19", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":1}}', f32s(1, 2), "not a string")
    bad("t20", '{"a":"\xff"}', "", "not valid UTF-8")
    bad("t21", '{"__metadata__":{"tide.tree":"[\\"T\\",\\"nope\\"]"}}', "", "'nope', which is not in the file")
    bad("t22", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"tide.tree":"{}"}}', f32s(1, 2),
      "'w' is not part of the saved value")
    bad("t23", '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x', f32s(1, 2), "trailing characters")
    H.raises(function() tide.load(P("missing")) end, "cannot open")
  end)

  it("reads huge claims without allocating for them", function()
    local before = tide.live_bytes()
    bad("big", '{"w":{"dtype":"F64","shape":[100000,100000,100000],"data_offsets":[0,8000000000000000]}}', "",
      "claims 8000000000000000 bytes")
    assert.is_true(tide.live_bytes() - before < 1e6)
  end)

  it("writes atomically: errors leave the target intact and no temp file", function()
    local target = P("keep.safetensors")
    tide.save({ a = tide.ones(2) }, target)
    local orig = read(target)
    H.raises(function() tide.save({ a = tide.ones(2), f = print }, target) end,
      "save: the value at 'f' is a function")
    H.raises(function() tide.save({ a = { b = { 1, io.stdout } } }, target) end, "at 'a.b.2'")
    local cyc = {}; cyc.self = cyc
    H.raises(function() tide.save(cyc, target) end, "contains itself")
    H.raises(function() tide.save({ [true] = 1 }, target) end, "boolean key")
    H.raises(function() tide.save({ s = "\xff" }, target) end, "not valid UTF-8")
    H.raises(function() tide.save({}, P("nodir/x.safetensors")) end, "cannot create")
    assert.are.equal(orig, read(target))
    assert.are.equal("keep.safetensors\n", listdir())
    tide.save({ a = tide.zeros(3) }, target)
    same(tide.load(target).a, tide.zeros(3))
    assert.are.equal("keep.safetensors\n", listdir())
  end)

  it("round-trips a model's state_dict", function()
    local ok, nn = pcall(require, "tide.nn")
    if not ok then pending("tide.nn not available") return end
    local function net() return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) end
    local m, m2 = net(), net()
    tide.save({ model = m:state_dict(), step = 3 }, P("sd.safetensors"))
    local r = tide.load(P("sd.safetensors"))
    assert.are.equal(3, r.step)
    m2:load_state_dict(r.model)
    local x = tide.randn(5, 3)
    same(m2(x), m(x))
  end)

  it("saves tensors that require grad as plain data", function()
    local w = tide.ones(2, { requires_grad = true })
    tide.save({ w = w * 2 }, P("g.safetensors"))
    local r = tide.load(P("g.safetensors"))
    assert.is_false(r.w.requires_grad)
    same(r.w, tide.full({ 2 }, 2))
  end)
end)

describe("the JSON codec", function()
  local S = require "tide.serialize"
  it("decodes the JSON grammar strictly", function()
    local v = S.json_decode(' {"a": [1, -2.5e3, 0, true, false, null, "x\\"\\u00e9\\ud83d\\ude00\\n"], "b": {}} ')
    assert.are.same({ "a", "b" }, v.keys)
    local a = v.map.a
    assert.are.equal(7, a.n)
    assert.are.same({ 1, -2500, 0, true, false }, { a[1], a[2], a[3], a[4], a[5] })
    assert.are.equal(S.null, a[6])
    assert.are.equal('x"\xc3\xa9\xf0\x9f\x98\x80\n', a[7])
    for _, bad in ipairs { "", "{", "[1,]", "{\"a\" 1}", "01", "1.", ".5", "+1", "\"\\x\"", "\"\\ud800\"", "\"a\nb\"",
      "tru", "[1] 2", "{\"a\":1,\"a\":2}", ("["):rep(200) .. ("]"):rep(200) } do
      local r, err = S.json_decode(bad)
      assert.is_nil(r, bad)
      assert.is_string(err)
    end
    assert.are.equal('"a\\"\\\\\\n\\u0001"', S.json_string('a"\\\n\1'))
    assert.is_false(S.utf8_ok("\xc0\x80")); assert.is_false(S.utf8_ok("\xed\xa0\x80")); assert.is_true(S.utf8_ok("\xe2\x82\xac"))
  end)
end)

describe("npy", function()
  after_each(function() os.execute("rm -f " .. dir .. "/*") end)

  -- np.save(np.arange(6, dtype='<f4').reshape(2, 3)), checked with NumPy 1.24
  local NP_F32 = "\147NUMPY\1\0v\0{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    .. (" "):rep(58) .. "\n" .. f32s(0, 1, 2, 3, 4, 5)

  it("writes the bytes NumPy writes", function()
    tide.save_npy(tide.arange(0, 6):view(2, 3):float(), P("a.npy"))
    assert.are.equal(NP_F32, read(P("a.npy")))
    assert.are.equal(152, #NP_F32)
    tide.save_npy(tide.long(5), P("s.npy"))   -- int64 0-dim: shape ()
    local s = read(P("s.npy"))
    assert.are.equal("\147NUMPY\1\0v\0{'descr': '<i8', 'fortran_order': False, 'shape': (), }" .. (" "):rep(62) .. "\n"
      .. u64(5), s)
    tide.save_npy(tide.tensor({ true, false }), P("b.npy"))
    assert.truthy(read(P("b.npy")):find("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", 1, true))
  end)

  it("reads a NumPy-written file", function()
    write(P("np.npy"), NP_F32)
    same(tide.load_npy(P("np.npy")), tide.arange(0, 6):view(2, 3):float())
  end)

  it("round-trips every dtype, 0-dim, empty, non-contiguous", function()
    local cases = { tide.tensor({ true, false, true }), tide.tensor({ 0, 200, 255 }, { dtype = tide.uint8 }),
      tide.tensor({ -5, 7 }, { dtype = tide.int32 }), tide.tensor({ { 2 ^ 40, -1 } }), tide.randn(3, 4),
      tide.randn(2, 2, { dtype = tide.float64 }), tide.tensor(2.5), tide.zeros(0, 3), tide.arange(1, 13):view(3, 4):t() }
    for _, x in ipairs(cases) do
      tide.save_npy(x, P("r.npy"))
      local s = read(P("r.npy"))
      assert.are.equal(0, (10 + s:byte(9) + 256 * s:byte(10)) % 64)
      same(tide.load_npy(P("r.npy")), x)
    end
  end)

  it("reads fortran_order by transposing, and versions 2.0 and 3.0", function()
    -- np.save(np.asfortranarray(np.arange(6, dtype='<i4').reshape(2, 3)))
    local h = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }"
    h = h .. (" "):rep(128 - 10 - #h - 1) .. "\n"
    local ffi = require "ffi"
    local data = ffi.string(ffi.new("int32_t[6]", 0, 3, 1, 4, 2, 5), 24)
    write(P("f.npy"), "\147NUMPY\1\0" .. string.char(#h, 0) .. h .. data)
    same(tide.load_npy(P("f.npy")), tide.arange(0, 6):view(2, 3):int())
    local h2 = "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3L,), }\n"
    write(P("v2.npy"), "\147NUMPY\2\0" .. string.char(#h2, 0, 0, 0) .. h2 .. ffi.string(ffi.new("double[3]", 1, 2, 3), 24))
    same(tide.load_npy(P("v2.npy")), tide.tensor({ 1, 2, 3 }, { dtype = tide.float64 }))
    write(P("v3.npy"), "\147NUMPY\3\0" .. string.char(#h2, 0, 0, 0) .. h2 .. ffi.string(ffi.new("double[3]", 1, 2, 3), 24))
    same(tide.load_npy(P("v3.npy")), tide.tensor({ 1, 2, 3 }, { dtype = tide.float64 }))
  end)

  it("rejects malformed files", function()
    local function badnpy(name, bytes, ...)
      write(P(name), bytes)
      return H.raises(function() tide.load_npy(P(name)) end, "load_npy: " .. P(name) .. ": ", ...)
    end
    local function npy(h, data) return "\147NUMPY\1\0" .. string.char(#h % 256, math.floor(#h / 256)) .. h .. (data or "") end
    badnpy("m1", "\147NUMPX\1\0" .. NP_F32:sub(9), "bad magic")
    badnpy("m2", "\147NU", "too short")
    badnpy("m3", NP_F32:sub(1, 100), "header claims 118 bytes")
    badnpy("m4", NP_F32:sub(1, 140), "needs 24 data bytes but the file has 12")
    badnpy("m5", "\147NUMPY\4\0" .. NP_F32:sub(9), "version 4.0 is not supported")
    badnpy("m6", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n", "\0\0\0\0"), "dtype '<f2' is not supported")
    badnpy("m7", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", "\0\0\0\0"), "dtype '>f4'")
    badnpy("m8", npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }\n", "\0\0\0\0"), "fortran_order")
    badnpy("m9", npy("{'descr': '<f4', 'shape': (1,), }\n", "\0\0\0\0"), "missing key 'fortran_order'")
    badnpy("m10", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n", ""), "bad shape")
    badnpy("m11", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,) \n", "\0\0\0\0"), "expected ',' or '}'")
    badnpy("m12", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100000), }\n", ""),
      "needs 4000000000000000 data bytes")
    badnpy("m13", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", "\0\0\0\0"), "unexpected key 'x'")
  end)

  it("checks its arguments", function()
    H.raises(function() tide.save_npy({}, P("x.npy")) end, "bad argument #1 to 'save_npy' (Tensor expected")
    H.raises(function() tide.save_npy(tide.ones(1), 3) end, "bad argument #2 to 'save_npy'")
    H.raises(function() tide.save(tide.ones(1)) end, "bad argument #2 to 'save'")
    H.raises(function() tide.load_npy(P("none.npy")) end, "cannot open")
  end)
end)

teardown(function() os.execute("rm -rf " .. dir) end)
