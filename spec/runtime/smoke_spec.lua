local tide = require "tide"
local H = require "helper"

describe("smoke", function()
  it("adds with broadcasting", function()
    local a = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    H.close(a + tide.tensor { 10, 20, 30 }, { { 11, 22, 33 }, { 14, 25, 36 } })
  end)
  it("reports broadcast errors with shapes", function()
    H.raises(function() return tide.randn(3, 4) + tide.randn(5) end, "add: shapes [3,4] and [5] cannot be broadcast")
  end)
  it("differentiates mul", function()
    local a, b = H.rand64 { 3, 4 }, H.rand64 { 4 }
    H.gradcheck(function(x, y) return x * y end, { a, b })
  end)
end)
