--[[
tide.readline -- line input for the REPL through GNU readline (libreadline8)
or libedit (libedit2, its readline interface), called through the FFI: line
editing, a history file, tab completion. Without either library, plain
io.read (say so once). TIDE_READLINE=readline|edit|none picks one.

Readline runs in its callback mode (rl_callback_read_char) under ppoll, as
Python's readline module does: SIGINT stays blocked except inside ppoll, so a
Ctrl-C at the prompt arrives as EINTR and cancels the line at once. The
line handler and the completion function are FFI callbacks that readline
calls from C; LuaJIT cannot enter a callback from compiled code, so every
Lua function here that calls into readline is kept out of the JIT (jit.off).
--]]
local ffi = require "ffi"

local M = {}

local function cdef(s) pcall(ffi.cdef, s) end   -- other modules may declare the same names
cdef "void free(void *p);"
cdef "void *malloc(size_t n);"
cdef "int isatty(int fd);"
cdef [[
typedef struct tide_pollfd { int fd; short events; short revents; } tide_pollfd;
typedef struct tide_sigset { unsigned long val[16]; } tide_sigset;
int ppoll(tide_pollfd *fds, unsigned long nfds, const void *timeout, const tide_sigset *sigmask);
int sigemptyset(tide_sigset *set);
int sigaddset(tide_sigset *set, int sig);
int pthread_sigmask(int how, const tide_sigset *set, tide_sigset *old);
]]
cdef [[
typedef char **(*tide_rl_complete_fn)(const char *text, int start, int end);
typedef void (*tide_rl_line_fn)(char *line);
]]
-- the readline interface both libraries export
local RL = [[
char *rl_line_buffer;
int rl_point;
int rl_catch_signals;
int rl_attempted_completion_over;
int rl_completion_append_character;
const char *rl_completer_word_break_characters;
const char *rl_readline_name;
tide_rl_complete_fn rl_attempted_completion_function;
void rl_callback_handler_install(const char *prompt, tide_rl_line_fn fn);
void rl_callback_read_char(void);
void rl_callback_handler_remove(void);
void rl_free_line_state(void);
void rl_cleanup_after_signal(void);
void rl_callback_sigcleanup(void);
void using_history(void);
void add_history(const char *line);
int read_history(const char *path);
int write_history(const char *path);
int append_history(int n, const char *path);
int history_truncate_file(const char *path, int keep);
]]
cdef(RL)
-- GNU readline only: a statement of several lines stays one entry in the file
-- (each entry after a "#<time>" line, as bash's lithist)
cdef "int history_write_timestamps; int history_multiline_entries; char history_comment_char;"

local SIGINT, SIG_BLOCK, SIG_SETMASK, POLLIN, EINTR = 2, 0, 2, 1, 4

local function try_load(which)
  local names = which == "edit" and { "libedit.so.2", "edit" } or { "libreadline.so.8", "readline" }
  for _, n in ipairs(names) do
    local ok, lib = pcall(ffi.load, n)
    if ok and pcall(function() return lib.rl_callback_read_char end) then return lib end
  end
end

-- new{ history = path or nil, complete = fn(text, line, start) -> list or nil,
--      max_history = 1000 } -> reader with :read(prompt), :add(entry), .kind
-- read returns the line, nil at end of input, or false after Ctrl-C.
function M.new(opts)
  local self = { history = opts.history, complete = opts.complete, kind = "plain" }
  local pick = os.getenv("TIDE_READLINE")
  local order = pick == "edit" and { "edit" } or pick == "readline" and { "readline" } or
    pick == "none" and {} or { "readline", "edit" }
  for _, which in ipairs(order) do
    local lib = ffi.C.isatty(0) == 1 and try_load(which)
    if lib then self.lib, self.kind = lib, which; break end
  end
  if not self.lib then return setmetatable(self, { __index = M.Plain }) end
  local lib = self.lib
  setmetatable(self, { __index = M.Readline })
  lib.rl_catch_signals = 0               -- SIGINT is ours (blocked outside ppoll)
  self.name = "tide"
  lib.rl_readline_name = self.name       -- for ~/.inputrc conditionals ($if tide)
  -- words are Lua expressions: a.b:c completes as one word
  self.breaks = " \t\n\"'`><=;|&{(,+-*/%^#~[]"
  lib.rl_completer_word_break_characters = self.breaks
  lib.rl_completion_append_character = 0
  if self.complete then self:_install_completion() end
  lib.using_history()
  pcall(function()
    lib.history_write_timestamps, lib.history_multiline_entries, lib.history_comment_char = 1, 1, 35
  end)
  if self.history then
    local f = io.open(self.history, "r")
    if f then f:close(); lib.read_history(self.history)
      lib.history_truncate_file(self.history, opts.max_history or 1000)
    else lib.write_history(self.history) end        -- create it: append_history needs it
  end
  -- the signal masks: SIGINT blocked except inside ppoll
  self.block, self.orig = ffi.new("tide_sigset"), ffi.new("tide_sigset")
  ffi.C.sigemptyset(self.block)
  ffi.C.sigaddset(self.block, SIGINT)
  self.line_cb = ffi.cast("tide_rl_line_fn", function(p)
    if p == nil then self.got = nil else self.got = ffi.string(p); ffi.C.free(p) end
    self.done = true
    lib.rl_callback_handler_remove()
  end)
  return self
end

-- -- GNU readline / libedit ------------------------------------------------------------------

M.Readline = {}

-- A list of strings as readline's match array: [0] the text that replaces the
-- word (the longest common prefix), then the matches, NULL-terminated; all
-- malloc'ed, readline frees them.
local function cstr(s)
  local p = ffi.cast("char *", ffi.C.malloc(#s + 1))
  ffi.copy(p, s, #s)
  p[#s] = 0
  return p
end
local function common_prefix(list)
  local p = list[1]
  for i = 2, #list do
    local s, k = list[i], 0
    while k < #p and k < #s and p:byte(k + 1) == s:byte(k + 1) do k = k + 1 end
    p = p:sub(1, k)
  end
  return p
end

function M.Readline:_install_completion()
  local lib = self.lib
  self.complete_cb = ffi.cast("tide_rl_complete_fn", function(text, start, stop)
    lib.rl_attempted_completion_over = 1           -- never fall back to file names
    local ok, list = pcall(self.complete, ffi.string(text), ffi.string(lib.rl_line_buffer), start)
    if not ok or type(list) ~= "table" or #list == 0 then return nil end
    local arr = ffi.cast("char **", ffi.C.malloc((#list + 2) * ffi.sizeof("char *")))
    arr[0] = cstr(#list == 1 and list[1] or common_prefix(list))
    for i = 1, #list do arr[i] = cstr(list[i]) end
    arr[#list + 1] = nil
    return arr
  end)
  lib.rl_attempted_completion_function = self.complete_cb
end

-- One line: readline's callback mode driven by ppoll, SIGINT unblocked only
-- inside ppoll. interrupted() says whether a Ctrl-C arrived (and takes it).
function M.Readline:read(prompt, interrupted)
  local lib, C = self.lib, ffi.C
  C.pthread_sigmask(SIG_BLOCK, self.block, self.orig)
  self.done, self.got = false, nil
  self.prompt = prompt
  lib.rl_callback_handler_install(prompt, self.line_cb)
  local fds = ffi.new("tide_pollfd[1]")
  fds[0].fd, fds[0].events = 0, POLLIN
  local result
  while true do
    local n = C.ppoll(fds, 1, nil, self.orig)
    if n > 0 then
      lib.rl_callback_read_char()
      if self.done then result = self.got; break end
    elseif n < 0 and ffi.errno() ~= EINTR then
      lib.rl_callback_handler_remove(); result = nil; break
    end
    if interrupted() then                          -- Ctrl-C: drop the line, as bash does
      lib.rl_free_line_state()
      pcall(function() lib.rl_callback_sigcleanup() end)   -- (GNU readline only)
      lib.rl_cleanup_after_signal()
      lib.rl_callback_handler_remove()
      io.write("^C\n"); io.flush()
      result = false
      break
    end
  end
  C.pthread_sigmask(SIG_SETMASK, self.orig, nil)
  return result
end
jit.off(M.Readline.read, true)

-- An entry for the history (a whole statement), saved to the file at once.
function M.Readline:add(entry)
  if entry:match("^%s*$") or entry == self.last then return end
  self.last = entry
  self.lib.add_history(entry)
  if not self.history then return end
  -- libedit's append_history writes the entry before the last one again: rewrite the file there
  if self.kind == "edit" then self.lib.write_history(self.history)
  else self.lib.append_history(1, self.history) end
end

-- -- Plain io.read ---------------------------------------------------------------------------

M.Plain = {}

function M.Plain:read(prompt, interrupted)
  io.write(prompt); io.flush()
  local line, err = io.read("*l")
  if line == nil and err and interrupted() then io.write("^C\n"); return false end
  if interrupted() then return false end
  return line
end

function M.Plain:add() end

return M
