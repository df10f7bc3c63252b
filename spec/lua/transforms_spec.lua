-- tide.data.transforms: Normalize, RandomCrop (padding modes, pad_if_needed),
-- RandomHorizontalFlip and Compose against hand-computed images; the random
-- ones repeat under the same tide.manual_seed.
local tide = require "tide"
local H = require "helper"
local T = tide.data.transforms

local img = tide.arange(1, 17):view(1, 4, 4):double()   -- rows 1..4, 5..8, 9..12, 13..16

-- the 2x2 window of img whose top-left is (i, j), 1-based
local function window(i, j)
  local s = (i - 1) * 4 + j
  return { { { s, s + 1 }, { s + 4, s + 5 } } }
end

describe("transforms", function()
  it("Normalize subtracts the mean and divides by the std of each channel", function()
    local x = tide.tensor({ { { 1, 3 }, { 5, 7 } }, { { 2, 4 }, { 6, 10 } } })
    local n = T.Normalize({ 1, 2 }, { 2, 4 })
    H.close(n(x), { { { 0, 1 }, { 2, 3 } }, { { 0, 0.5 }, { 1, 2 } } }, 1e-7)
    H.close(x, { { { 1, 3 }, { 5, 7 } }, { { 2, 4 }, { 6, 10 } } }, 0)         -- not in place
    H.close(T.Normalize(1, 2)(x:view(1, 2, 2, 2)), { { { { 0, 1 }, { 2, 3 } }, { { 0.5, 1.5 }, { 2.5, 4.5 } } } }, 1e-7)
    local y = x:clone()
    assert.equal(y, T.Normalize({ 1, 2 }, { 2, 4 }, { inplace = true })(y))
    H.close(y, n(x), 0)
    H.raises(function() n(tide.zeros(3, 2, 2)) end, "Normalize: 2 mean values for an image with 3 channels")
    H.raises(function() n(tide.zeros(2, 2, 2, { dtype = tide.uint8 })) end, "Normalize: expected a float image, got dtype uint8")
    H.raises(function() n(tide.zeros(2, 2)) end, "Normalize: expected an image of shape (..., C, H, W), got shape (2x2)")
    H.raises(function() T.Normalize({ 0.5 }, { 0 }) end, "Normalize: std[1] is 0, which would divide by zero")
    H.raises(function() T.Normalize({ 0.5 }, { 1 }, { inplce = true }) end, "Normalize: unknown option 'inplce'")
  end)

  it("RandomCrop takes each of the windows, the same one for the same seed", function()
    local crop = T.RandomCrop(2)
    local seen = {}
    for seed = 1, 60 do
      tide.manual_seed(seed)
      local y = crop(img)
      tide.manual_seed(seed)
      local i, j = crop:get_params(img)
      H.close(y, window(i, j), 0, "seed " .. seed)
      tide.manual_seed(seed)
      H.close(crop(img), y, 0)
      seen[i * 10 + j] = true
    end
    local n = 0
    for _ in pairs(seen) do n = n + 1 end
    assert.equal(9, n)                                  -- all 3 x 3 positions occur
    H.close(T.RandomCrop({ 4, 4 })(img), img, 0)        -- the whole image: no draw
    local r = T.RandomCrop({ 1, 4 })(img)
    assert.same({ 1, 1, 4 }, r:size())
  end)

  it("RandomCrop pads in torchvision's modes and order", function()
    local x = tide.tensor({ { { 1, 2, 3 } } })           -- one row
    local function crop(opts) return T.RandomCrop({ 1, 7 }, opts)(x):view(-1):totable() end
    assert.same({ 0, 0, 1, 2, 3, 0, 0 }, crop({ padding = { 2, 0 } }))
    assert.same({ 9, 9, 1, 2, 3, 9, 9 }, crop({ padding = { 2, 0, 2, 0 }, fill = 9 }))
    assert.same({ 1, 1, 1, 2, 3, 3, 3 }, crop({ padding = { 2, 0 }, padding_mode = "edge" }))
    assert.same({ 3, 2, 1, 2, 3, 2, 1 }, crop({ padding = { 2, 0 }, padding_mode = "reflect" }))
    assert.same({ 2, 1, 1, 2, 3, 3, 2 }, crop({ padding = { 2, 0 }, padding_mode = "symmetric" }))
    -- {left, top, right, bottom}: 1 left, 2 below
    H.close(T.RandomCrop({ 3, 4 }, { padding = { 1, 0, 0, 2 } })(x), { { { 0, 1, 2, 3 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } } }, 0)
    -- pad_if_needed pads both sides of a dim that is too small, then crops
    tide.manual_seed(5)
    local y = T.RandomCrop({ 2, 3 }, { pad_if_needed = true })(x)
    assert.same({ 1, 2, 3 }, y:size())
    local rows = y:sum(-1):view(-1):totable()
    assert.is_true((rows[1] == 0 and rows[2] == 6) or (rows[1] == 6 and rows[2] == 0))
    H.raises(function() T.RandomCrop(5)(img) end, "RandomCrop: crop size (5, 5) is larger than the image's (4, 4)")
    H.raises(function() T.RandomCrop(2, { padding_mode = "wrap" }) end,
      "padding_mode must be 'constant', 'edge', 'reflect' or 'symmetric', got wrap")
    H.raises(function() T.RandomCrop(0) end, "RandomCrop: size must be positive integers, got 0")
    H.raises(function() T.RandomCrop(2, { padding = { 1, 2, 3 } }) end, "bad argument #2 to 'RandomCrop' (padding")
    H.raises(function() T.RandomCrop(2)(tide.zeros(4)) end, "RandomCrop: expected an image tensor of shape (..., H, W), got shape (4)")
  end)

  it("RandomHorizontalFlip mirrors with probability p, seeded", function()
    local flipped = { { { 4, 3, 2, 1 }, { 8, 7, 6, 5 }, { 12, 11, 10, 9 }, { 16, 15, 14, 13 } } }
    H.close(T.RandomHorizontalFlip(1)(img), flipped, 0)
    H.close(T.RandomHorizontalFlip(0)(img), img, 0)
    local f = T.RandomHorizontalFlip()
    local function pattern(seed)
      tide.manual_seed(seed)
      local bits = {}
      for k = 1, 40 do bits[k] = f(img)[1][1][1]:item() == 4 and 1 or 0 end
      return bits
    end
    local a = pattern(11)
    assert.same(a, pattern(11))
    -- the flips are the draws u < 0.5 of tide.rand(1) under the same seed
    tide.manual_seed(11)
    for k = 1, 40 do assert.equal(tide.rand(1):item() < 0.5 and 1 or 0, a[k]) end
    local ones = 0
    for _, b in ipairs(a) do ones = ones + b end
    assert.is_true(ones > 5 and ones < 35)
    H.raises(function() T.RandomHorizontalFlip(1.5) end, "RandomHorizontalFlip: p must be a probability in [0, 1], got 1.5")
  end)

  it("Compose applies the transforms in order", function()
    local t = T.Compose({ T.RandomCrop(4, { padding = 1 }), T.RandomHorizontalFlip(), T.Normalize({ 8 }, { 2 }),
      function(x) return x * 10 end })
    tide.manual_seed(42)
    local y = t(img)
    tide.manual_seed(42)
    local z = img
    for _, s in ipairs(t.transforms) do z = s(z) end
    H.close(y, z, 0)
    assert.same({ 1, 4, 4 }, y:size())
    assert.truthy(tostring(t):find("RandomCrop(size={4, 4}, padding={1, 1, 1, 1})", 1, true))
    H.raises(function() T.Compose({ 3 }) end, "Compose: transform 1 is a number, expected a transform or a function")
  end)
end)
