--[[
examples/lib/chartext.lua -- the text of the character-level examples (char_gpt.lua,
char_lstm.lua): the King James Bible from Debian's bible-kjv (or any text
file), its character vocabulary, a 90/10 train/validation split, and random
windows of it as batches.
--]]
local tide = require "tide"
local data = tide.data

local M = {}

-- the text: the file at path, or (path "") the whole Bible through the bible command
function M.read(path)
  if path ~= "" then
    local f = assert(io.open(path, "rb")); local s = f:read("*a"); f:close(); return s
  end
  local p = io.popen("bible -l0 gen1:1-rev22:21 2>/dev/null")
  local s = p and p:read("*a") or ""
  if p then p:close() end
  if #s < 1000 then
    io.stderr:write("no text: install bible-kjv (and bible-kjv-text), or pass --text FILE\n"); os.exit(1)
  end
  return s
end

-- text, vocabulary and the two splits of character ids; prints their sizes
function M.load(path)
  local text = M.read(path)
  local vocab = data.CharVocab(text)
  local train, val = data.split(vocab:encode(text), 0.9)
  print(("text: %d characters, vocabulary %d; train %d, val %d"):format(#text, vocab.size, train:numel(), val:numel()))
  return text, vocab, train, val
end

-- batch(split) -> x (B, len) of random windows and y (B, len), the characters after each, on device
function M.batcher(B, len, device)
  local offsets = tide.arange(0, len):view(1, len)
  return function(split)
    local n = split:numel() - len - 1
    local idx = (tide.randint(1, n + 1, { B, 1 }) + offsets):view(-1)
    local x = split:index_select(1, idx):view(B, len)
    local y = split:index_select(1, idx + 1):view(B, len)
    return x:to(device), y:to(device)
  end
end

return M
