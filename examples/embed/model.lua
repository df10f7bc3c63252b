--[[
examples/embed/model.lua -- the Lua side of examples/embed/host.c: a model
script a C program loads. It returns a table of functions the host calls with
tensors it made over its own arrays (td_from_blob, no copy), passed as light
userdata and taken with tide.from_ptr:
  fit(X, y, w)      least squares by gradient descent: X (N, 3), y (N); the
                    weights and the bias go into w (4), the host's array
  predict(X, w, out) X @ w[1..3] + w[4] into out (N), the host's array
--]]
local tide = require "tide"
local F = tide.nn.functional

local M = {}

function M.fit(px, py, pw)
  local X, y, w_out = tide.from_ptr(px), tide.from_ptr(py), tide.from_ptr(pw)
  local lin = tide.nn.Linear(X:size(2), 1)
  local opt = tide.optim.Adam(lin:parameters(), { lr = 0.05 })
  local loss
  for _ = 1, 300 do
    opt:zero_grad()
    loss = F.mse_loss(lin(X):view(-1), y)
    loss:backward()
    opt:step()
  end
  -- into the host's memory: the tensor is a view of its array
  w_out:narrow(1, 1, 3):copy_(lin.weight:view(-1))
  w_out[4] = lin.bias:item()
  return loss:item()
end

function M.predict(px, pw, pout)
  local X, w, out = tide.from_ptr(px), tide.from_ptr(pw), tide.from_ptr(pout)
  out:copy_(X:matmul(w:narrow(1, 1, 3)) + w[4])
end

return M
