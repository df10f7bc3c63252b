--[[
examples/love/main.lua -- a LÖVE 11 game that trains while you watch: a small
MLP learns to tell two interleaved spirals apart, and every frame draws its
decision boundary (the class probability over a grid, written by tide straight
into the pixels of a LÖVE ImageData: tide.from_blob, no copy), the points,
the loss and the accuracy.

Run:  love examples/love                     (from a tide checkout; see below)
      love examples/love --frames 300 --out build/love   quits after 300 frames,
            writing loss.txt (the loss after each frame), summary.txt and
            screenshot.png into --out (spec/examples/love_spec.lua runs it
            headless under xvfb-run)
Options: --frames N (0: run until closed), --out DIR, --steps K (training steps
per frame, 4), --hidden H (32), --lr (0.01), --seed (1).

Where tide comes from, with no environment variables: a copy inside the game
folder (tide/ and build/ of a checkout, or tide/ and libtide.so of an installed
layout), an installed tide on LÖVE's Lua path (/usr/local/share/lua/5.1), or,
when this folder sits in a checkout, the checkout's lua/ (added below).
--]]
io.stdout:setvbuf("line")

-- -- Options (after the game path on LÖVE's command line) --------------------------------

local opt = { frames = 0, out = "", steps = 4, hidden = 32, lr = 0.01, seed = 1 }
local function parse(args)
  local i = 1
  while args[i] do
    local k = args[i]:match("^%-%-(.+)$")
    if not k or opt[k] == nil or args[i + 1] == nil then
      error(("usage: love examples/love [--frames N] [--out DIR] [--steps K] [--hidden H] [--lr LR] "
        .. "[--seed S] (bad option '%s')"):format(args[i]), 0)
    end
    opt[k] = type(opt[k]) == "number" and assert(tonumber(args[i + 1]), "--" .. k .. " takes a number") or args[i + 1]
    i = i + 2
  end
end

-- headless runs (--frames) print an error and exit 1 instead of LÖVE's error
-- screen, which waits for a key that nobody will press
local function headless_errors()
  love.errorhandler = function(msg)
    io.stderr:write("tide spirals: error: ", tostring(msg), "\n", debug.traceback(), "\n")
    os.exit(1)
  end
end

-- the checkout's lua/ when this folder is examples/love of a checkout and tide is not copied in
local function find_tide()
  if love.filesystem.getInfo("tide/init.lua") then return end
  local lua = love.filesystem.getSource() .. "/../../lua"
  local f = io.open(lua .. "/tide/init.lua")
  if f then
    f:close()
    package.path = lua .. "/?.lua;" .. lua .. "/?/init.lua;" .. package.path
  end
end

-- -- The data: two spirals, 1-based labels -------------------------------------------------

local tide, nn, F
local X, Y, N
local model, optim
local G, GW, GH = nil, 128, 96         -- the grid the boundary is drawn on
local image, imagedata, pixels, rgb_a, rgb_d
local history, frame, t_start = {}, 0, 0
local accuracy = 0
local points                          -- per class, {x1, y1, x2, y2, ...} in screen coordinates

local function spirals(n)
  local xs, ys = {}, {}
  for k = 0, 1 do
    for i = 1, n do
      local t = i / n
      local a = 3.5 * math.pi * t + k * math.pi
      local r = 0.9 * t
      xs[#xs + 1] = { r * math.cos(a) + 0.03 * (math.random() - 0.5), r * math.sin(a) + 0.03 * (math.random() - 0.5) }
      ys[#ys + 1] = k + 1
    end
  end
  return tide.tensor(xs), tide.long(ys)
end

function love.load(args)
  parse(args or arg or {})
  if opt.frames > 0 then headless_errors() end
  find_tide()
  tide = require "tide"
  nn, F = tide.nn, tide.nn.functional
  math.randomseed(opt.seed)
  tide.manual_seed(opt.seed)
  X, Y = spirals(150)
  N = X:size(1)
  model = nn.Sequential(nn.Linear(2, opt.hidden), nn.Tanh(), nn.Linear(opt.hidden, opt.hidden), nn.Tanh(),
    nn.Linear(opt.hidden, 2))
  optim = tide.optim.Adam(model:parameters(), { lr = opt.lr })

  -- grid points in [-1, 1]^2, one per pixel of the boundary image (row-major, y down)
  local gx = tide.linspace(-1, 1, GW):view(1, GW):expand(GH, GW)
  local gy = tide.linspace(1, -1, GH):view(GH, 1):expand(GH, GW)
  G = tide.stack({ gx:reshape(-1), gy:reshape(-1) }, 2)

  -- the ImageData's pixels as a tensor (GH, GW, 4) of uint8, shared with LÖVE
  imagedata = love.image.newImageData(GW, GH, "rgba8")
  pixels = tide.from_blob(imagedata:getFFIPointer(), { GH, GW, 4 }, { dtype = tide.uint8, owner = imagedata })
  pixels:narrow(3, 4, 1):fill_(255)
  image = love.graphics.newImage(imagedata)
  image:setFilter("linear", "linear")
  rgb_a = tide.tensor({ 60, 110, 200 })                        -- class 1
  rgb_d = tide.tensor({ 235, 120, 60 }) - rgb_a               -- towards class 2

  local w, h = love.graphics.getDimensions()
  points = { {}, {} }
  local xt, yt = X:totable(), Y:totable()
  for i = 1, N do
    local list = points[yt[i]]
    list[#list + 1] = (xt[i][1] + 1) / 2 * w
    list[#list + 1] = (1 - xt[i][2]) / 2 * h
  end
  t_start = love.timer.getTime()
  print(("tide spirals: %d points, MLP 2-%d-%d-2, Adam lr %g, %d steps per frame, handles: %s")
    :format(N, opt.hidden, opt.hidden, opt.lr, opt.steps, require("tide.core").handles))
end

function love.update(dt)
  local loss
  for _ = 1, opt.steps do
    optim:zero_grad()
    loss = F.cross_entropy(model(X), Y)
    loss:backward()
    optim:step()
  end
  history[#history + 1] = loss:item()
end

local function draw_boundary()
  tide.no_grad(function()
    local p = F.softmax(model(G), 2):narrow(2, 2, 1):view(GH, GW, 1)    -- P(class 2)
    pixels:narrow(3, 1, 3):copy_(p * rgb_d + rgb_a)
    local pred = model(X):argmax(2)
    accuracy = pred:eq(Y):float():mean():item()
  end)
  image:replacePixels(imagedata)
end

local function finish()
  local out = opt.out ~= "" and opt.out or love.filesystem.getSaveDirectory()
  os.execute(("mkdir -p '%s'"):format(out))
  local f = assert(io.open(out .. "/loss.txt", "w"))
  for i, l in ipairs(history) do f:write(i, " ", l, "\n") end
  f:close()
  local elapsed = love.timer.getTime() - t_start
  f = assert(io.open(out .. "/summary.txt", "w"))
  f:write(("frames %d\nfirst_loss %.6f\nlast_loss %.6f\naccuracy %.4f\nseconds %.3f\nhandles %s\n"):format(frame,
    history[1], history[#history], accuracy, elapsed, require("tide.core").handles))
  f:close()
  love.graphics.captureScreenshot(function(shot)
    local png = shot:encode("png")
    local s = assert(io.open(out .. "/screenshot.png", "wb"))
    s:write(png:getString())
    s:close()
    print(("tide spirals: %d frames in %.2f s, loss %.4f -> %.4f, accuracy %.1f%%; wrote %s"):format(frame, elapsed,
      history[1], history[#history], 100 * accuracy, out))
    love.event.quit(0)
  end)
end

function love.draw()
  frame = frame + 1
  draw_boundary()
  local w, h = love.graphics.getDimensions()
  love.graphics.setColor(1, 1, 1)
  love.graphics.draw(image, 0, 0, 0, w / GW, h / GH)
  love.graphics.setPointSize(5)
  love.graphics.setColor(0.1, 0.2, 0.6)
  love.graphics.points(points[1])
  love.graphics.setColor(0.6, 0.2, 0.05)
  love.graphics.points(points[2])
  love.graphics.setColor(0, 0, 0, 0.6)
  love.graphics.rectangle("fill", 0, 0, w, 24)
  love.graphics.setColor(1, 1, 1)
  love.graphics.print(("frame %d   loss %.4f   accuracy %.1f%%   %d steps/frame"):format(frame,
    history[#history] or 0, 100 * accuracy, opt.steps), 8, 5)
  if opt.frames > 0 and frame == opt.frames then finish() end
end

function love.keypressed(key)
  if key == "escape" then love.event.quit(0) end
end
