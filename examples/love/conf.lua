-- examples/love/conf.lua -- LÖVE settings: no audio (nothing to play; headless
-- runs have no sound device), a 640x480 window, no vsync (train as fast as it draws)
function love.conf(t)
  t.identity = "tide-spirals"
  t.window.title = "tide: two spirals, trained while you watch"
  t.window.width, t.window.height = 640, 480
  t.window.vsync = 0
  t.modules.audio, t.modules.sound, t.modules.joystick, t.modules.physics, t.modules.video = false, false, false, false, false
end
