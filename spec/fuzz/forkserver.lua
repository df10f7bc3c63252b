--[[
fuzz.forkserver -- the fork server of the API fuzzer: the parent loads tide once,
then runs each batch of calls in a forked child. The child reports over a pipe
("S i" before call i, "D i status msg" after it), so when it dies from a signal,
a timeout (alarm) or a sanitizer abort, the parent knows which call did it.
Everything goes through the LuaJIT FFI (fork, pipe2, poll, waitpid, alarm, _exit):
no dependency beyond LuaJIT and libc. The libc names are bound with asm labels
(fz_*) so they never clash with the ffi.cdef of tide's own modules (serialize
declares open/read/write/close).
--]]
local ffi = require "ffi"
local bit = require "bit"

ffi.cdef [[
typedef struct fz_pollfd { int fd; short events; short revents; } fz_pollfd;
typedef struct fz_rlimit { unsigned long cur, max; } fz_rlimit;
int fz_fork(void) asm("fork");
int fz_pipe2(int fds[2], int flags) asm("pipe2");
int fz_poll(fz_pollfd *fds, unsigned long n, int timeout_ms) asm("poll");
long fz_read(int fd, void *buf, size_t n) asm("read");
long fz_write(int fd, const void *buf, size_t n) asm("write");
int fz_close(int fd) asm("close");
int fz_waitpid(int pid, int *status, int options) asm("waitpid");
unsigned int fz_alarm(unsigned int sec) asm("alarm");
void fz_exit(int code) asm("_exit");
int fz_kill(int pid, int sig) asm("kill");
int fz_open(const char *path, int flags, int mode) asm("open");
int fz_dup2(int from, int to) asm("dup2");
int fz_chdir(const char *path) asm("chdir");
int fz_setrlimit(int res, const fz_rlimit *r) asm("setrlimit");
int fz_setenv(const char *k, const char *v, int overwrite) asm("setenv");
int fz_getpid(void) asm("getpid");
int fz_mkdir(const char *path, int mode) asm("mkdir");
]]
local C = ffi.C

local M = {}
local O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC, O_CLOEXEC = 0, 1, 0x40, 0x200, 0x80000
local POLLIN, RLIMIT_AS, SIGKILL, SIGALRM, EINTR = 1, 9, 9, 14, 4
M.SIGALRM = SIGALRM

M.signame = { [1] = "SIGHUP", [2] = "SIGINT", [3] = "SIGQUIT", [4] = "SIGILL", [5] = "SIGTRAP", [6] = "SIGABRT",
  [7] = "SIGBUS", [8] = "SIGFPE", [9] = "SIGKILL", [11] = "SIGSEGV", [13] = "SIGPIPE", [14] = "SIGALRM", [15] = "SIGTERM",
  [24] = "SIGXCPU", [25] = "SIGXFSZ", [31] = "SIGSYS" }

function M.setenv(k, v, overwrite) C.fz_setenv(k, v, overwrite and 1 or 0) end
function M.mkdir(path) C.fz_mkdir(path, 448) end   -- 0700
function M.getpid() return C.fz_getpid() end

-- -- Child side -----------------------------------------------------------------------------------

local wfd = -1
local function send(s)
  local p, n = ffi.cast("const char *", s), #s
  while n > 0 do
    local w = C.fz_write(wfd, p, n)
    if w < 0 then if ffi.errno() ~= EINTR then return end else p, n = p + w, n - w end
  end
end
M.send = send
M.alarm = function(sec) C.fz_alarm(sec) end

-- -- Parent side ----------------------------------------------------------------------------------

-- Run child(send) in a forked process; on_line(line) gets each line it sends.
-- opts: timeout (seconds of silence after which the parent kills the child, as
-- a backstop to the child's own alarm), stderr_path (the child's stderr), cwd,
-- mem_mb (address space the child may add to what it inherits, through RLIMIT_AS;
-- 0 = no limit). Returns how it ended: { exit = code } or
-- { signal = n } (and killed = true when the parent killed it).
function M.run(child, on_line, opts)
  local fds = ffi.new("int[2]")
  assert(C.fz_pipe2(fds, O_CLOEXEC) == 0, "pipe2 failed")
  io.stdout:flush(); io.stderr:flush()
  local pid = C.fz_fork()
  assert(pid >= 0, "fork failed")
  if pid == 0 then
    C.fz_close(fds[0]); wfd = fds[1]
    local null = C.fz_open("/dev/null", O_RDONLY, 0)
    C.fz_dup2(null, 0)
    local out = C.fz_open("/dev/null", O_WRONLY, 0)
    C.fz_dup2(out, 1)
    if opts.stderr_path then
      local e = C.fz_open(opts.stderr_path, bit.bor(O_WRONLY, O_CREAT, O_TRUNC), 420)
      if e >= 0 then C.fz_dup2(e, 2) end
    end
    if opts.mem_mb and opts.mem_mb > 0 then
      -- on top of the inherited size: under ASan that is terabytes of reserved shadow
      local f = io.open("/proc/self/status", "r")
      local vm = f and tonumber(f:read("*a"):match("VmSize:%s*(%d+)")) or 0
      if f then f:close() end
      local lim = vm * 1024 + opts.mem_mb * 2 ^ 20
      C.fz_setrlimit(RLIMIT_AS, ffi.new("fz_rlimit", lim, lim))
    end
    if opts.cwd then C.fz_chdir(opts.cwd) end
    local ok, err = pcall(child)
    if not ok then send(("X %q\n"):format(tostring(err))) end
    C.fz_exit(ok and 0 or 3)
  end
  C.fz_close(fds[1])
  local rfd, buf, pending = fds[0], ffi.new("char[65536]"), ""
  local pfd = ffi.new("fz_pollfd[1]")
  pfd[0].fd, pfd[0].events = rfd, POLLIN
  local killed = false
  local silence_ms = math.floor((opts.timeout or 60) * 1000) + 5000
  while true do
    local r = C.fz_poll(pfd, 1, silence_ms)
    if r == 0 then C.fz_kill(pid, SIGKILL); killed = true; break end
    if r > 0 then
      local n = C.fz_read(rfd, buf, 65536)
      if n == 0 then break end
      if n > 0 then
        pending = pending .. ffi.string(buf, n)
        while true do
          local nl = pending:find("\n", 1, true)
          if not nl then break end
          on_line(pending:sub(1, nl - 1))
          pending = pending:sub(nl + 1)
        end
      elseif ffi.errno() ~= EINTR then break end
    elseif ffi.errno() ~= EINTR then break end
  end
  C.fz_close(rfd)
  local st = ffi.new("int[1]")
  while C.fz_waitpid(pid, st, 0) < 0 and ffi.errno() == EINTR do end
  local s = st[0]
  local sig = bit.band(s, 0x7f)
  if sig == 0 then return { exit = bit.band(bit.rshift(s, 8), 0xff), killed = killed } end
  return { signal = sig, killed = killed }
end

return M
