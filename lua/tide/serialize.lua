--[[
tide.serialize -- tide.save / tide.load in the safetensors format (Hugging
Face: u64 LE header size, JSON header, raw little-endian row-major data), and
tide.save_npy / tide.load_npy for NumPy .npy files. Files are written
atomically (temp file, fsync, rename) through libc via the FFI.
--]]
--[[
Design note.
* Layout written by save: {"__metadata__": {"format": "pt", "tide.tree": T},
  name: {dtype, shape, data_offsets}, ...}, tensors packed in the order they
  are met (keys sorted), header padded with spaces to a multiple of 8.
* Names: a tensor's name is its dotted key path ("model.0.weight"); a tensor
  given directly is named "tensor". A name already taken (or "__metadata__")
  gets "#2", "#3", ... appended. The same tensor reached twice is written twice.
* T, the tree under the reserved metadata key "tide.tree", is JSON that
  rebuilds the value exactly: a string, boolean or finite number is itself; a
  tensor is ["T", name]; a non-finite number is ["N", "inf"|"-inf"|"nan"]; a
  table whose keys are all strings is a JSON object; any other table is
  ["M", k1, v1, k2, v2, ...] (number keys first, ascending, then strings).
* load returns the rebuilt value when "tide.tree" is present, else a flat
  table {name = tensor} (files from other tools), and the metadata as a second
  result. Everything is validated before any allocation proportional to the
  file's claims: the header is bounded by the file size and 100 MB, and every
  entry is checked (dtype, shape, offsets, no overlap, no hole, the data
  section fully indexed as the format requires) before a tensor is made.
* JSON: a small strict codec here (RFC 8259 grammar, UTF-8 checked, duplicate
  keys rejected, depth <= 128) instead of depending on lua-cjson.
* Tensors share the pages of the file: load maps it once (private,
  copy-on-write, so writing into a loaded tensor never changes the file; a
  file replaced by an atomic save keeps the old mapping valid) and each tensor
  whose data offset is aligned to its element size is a storage inside the
  mapping, which is unmapped when the last such tensor dies. Unaligned entries,
  bool entries with bytes other than 0/1, files on network filesystems (another
  host may rewrite them in place) and {mmap = false} read with pread into
  fresh storage instead. A mapped file truncated in place (not replaced by
  rename) kills the process with SIGBUS at the next access to a lost page:
  no mapping can prevent that, so it is documented (README, M.load).
* Devices: save copies a tensor on OpenCL to the CPU to write it (as
  torch.save); load makes CPU tensors, or moves them to {device = "opencl"}
  (torch.load's map_location for a device string).
* Linux (x86-64) only for now: open flags are Linux's values; little-endian host.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local ffi, C = core.ffi, core.C
local raise, wrap, is_tensor = core.raise, core.wrap, core.is_tensor
local fields = tensor.fields

ffi.cdef [[
int open(const char *path, int flags, int mode);
int close(int fd);
long read(int fd, void *buf, size_t n);
long write(int fd, const void *buf, size_t n);
long pread(int fd, void *buf, size_t n, int64_t off);
int64_t lseek(int fd, int64_t off, int whence);
int fsync(int fd);
int rename(const char *from, const char *to);
int unlink(const char *path);
int getpid(void);
char *strerror(int errnum);
]]
-- (under names of their own, so a host's or spec's cdef of the same functions never clashes)
ffi.cdef [[
typedef struct tide_dirent { uint64_t d_ino; int64_t d_off; unsigned short d_reclen; unsigned char d_type;
  char d_name[256]; } tide_dirent;
void *tide_opendir(const char *path) __asm__("opendir");
tide_dirent *tide_readdir(void *dir) __asm__("readdir");
int tide_closedir(void *dir) __asm__("closedir");
int tide_flock(int fd, int op) __asm__("flock");
int tide_kill(int pid, int sig) __asm__("kill");
int tide_fstatfs(int fd, void *buf) __asm__("fstatfs");
]]
local O_RDONLY, O_WRONLY, O_CREAT, O_EXCL = 0, 1, 0x40, 0x80
local O_NONBLOCK, O_NOFOLLOW, O_CLOEXEC = 0x800, 0x20000, 0x80000
local EINTR, ESRCH, EEXIST = 4, 3, 17
local LOCK_EX, LOCK_NB = 2, 4
assert(ffi.abi("le"), "tide.serialize: big-endian hosts are not supported")

local M = {}
local MAX_HEADER = 100 * 1000 * 1000
local MAX_INT = 2 ^ 53

local function errstr() return ffi.string(C.strerror(ffi.errno())) end

-- -- JSON ---------------------------------------------------------------------------------

local esc = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function jstr(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return esc[c] or ("\\u%04x"):format(c:byte()) end) .. '"'
end
M.json_string = jstr

-- true if s is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF)
local function utf8_ok(s)
  local i, n = 1, #s
  while i <= n do
    local c = s:byte(i)
    if c < 0x80 then i = i + 1
    else
      local len, min
      if c >= 0xC2 and c <= 0xDF then len, min = 2, 0x80
      elseif c >= 0xE0 and c <= 0xEF then len, min = 3, 0x800
      elseif c >= 0xF0 and c <= 0xF4 then len, min = 4, 0x10000
      else return false end
      if i + len - 1 > n then return false end
      local cp = c % (2 ^ (7 - len))
      for k = 1, len - 1 do
        local b = s:byte(i + k)
        if b < 0x80 or b > 0xBF then return false end
        cp = cp * 64 + b - 0x80
      end
      if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then return false end
      i = i + len
    end
  end
  return true
end
M.utf8_ok = utf8_ok

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
    0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

-- Strict JSON decoder. Objects decode to { keys = {k1, ...}, map = {k = v} } so
-- that entry order is kept; arrays to Lua arrays with field n; null to M.null.
local null = setmetatable({}, { __tostring = function() return "null" end })
M.null = null
local function json_decode(s)
  local pos = 1
  local function fail(msg) error({ json = ("%s at byte %d"):format(msg, pos) }, 0) end
  local function ws() pos = s:find("[^ \t\n\r]", pos) or #s + 1 end
  local value
  local function str()
    pos = pos + 1
    local parts = {}
    while true do
      local a = s:find('["\\%z\1-\31]', pos)      -- not %c: DEL (127) is a plain character in JSON
      if not a then fail("unterminated string") end
      parts[#parts + 1] = s:sub(pos, a - 1)
      local c = s:sub(a, a)
      if c == '"' then pos = a + 1; break end
      if c ~= "\\" then pos = a; fail("control character in string") end
      local e = s:sub(a + 1, a + 1)
      local simple = ({ ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' })[e]
      if simple then parts[#parts + 1] = simple; pos = a + 2
      elseif e == "u" then
        local h = s:match("^%x%x%x%x", a + 2)
        if not h then pos = a; fail("bad \\u escape") end
        local cp = tonumber(h, 16); pos = a + 6
        if cp >= 0xD800 and cp <= 0xDBFF then
          local l = s:match("^\\u(%x%x%x%x)", pos)
          local lo = l and tonumber(l, 16)
          if not lo or lo < 0xDC00 or lo > 0xDFFF then fail("unpaired surrogate") end
          cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00); pos = pos + 6
        elseif cp >= 0xDC00 and cp <= 0xDFFF then fail("unpaired surrogate") end
        parts[#parts + 1] = utf8_char(cp)
      else pos = a; fail("bad escape") end
    end
    return table.concat(parts)
  end
  local depth = 0
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" or c == "[" then
      depth = depth + 1
      if depth > 128 then fail("nesting too deep") end
      pos = pos + 1; ws()
      local r
      if c == "{" then
        r = { keys = {}, map = {} }
        if s:sub(pos, pos) == "}" then pos = pos + 1
        else
          while true do
            ws()
            if s:sub(pos, pos) ~= '"' then fail("expected a string key") end
            local k = str(); ws()
            if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
            pos = pos + 1
            if r.map[k] ~= nil then fail(("duplicate key %s"):format(jstr(k))) end
            r.keys[#r.keys + 1] = k; r.map[k] = value(); ws()
            c = s:sub(pos, pos); pos = pos + 1
            if c == "}" then break elseif c ~= "," then pos = pos - 1; fail("expected ',' or '}'") end
          end
        end
      else
        r = { n = 0 }
        if s:sub(pos, pos) == "]" then pos = pos + 1
        else
          while true do
            r.n = r.n + 1; r[r.n] = value(); ws()
            c = s:sub(pos, pos); pos = pos + 1
            if c == "]" then break elseif c ~= "," then pos = pos - 1; fail("expected ',' or ']'") end
          end
        end
      end
      depth = depth - 1
      return r
    elseif c == '"' then return str()
    elseif s:find("^true", pos) then pos = pos + 4; return true
    elseif s:find("^false", pos) then pos = pos + 5; return false
    elseif s:find("^null", pos) then pos = pos + 4; return null
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or not (num:match("^-?0$") or num:match("^-?0[.eE]") or num:match("^-?[1-9]"))
          or not (num:match("^-?%d+$") or num:match("^-?%d+%.%d+$") or num:match("^-?%d+[eE][-+]?%d+$")
            or num:match("^-?%d+%.%d+[eE][-+]?%d+$")) then
        fail("unexpected " .. (c == "" and "end of text" or ("character %q"):format(c)))
      end
      pos = pos + #num
      return tonumber(num)
    end
  end
  local ok, v = pcall(function()
    local r = value(); ws()
    if pos <= #s then fail("trailing characters") end
    return r
  end)
  if ok then return v end
  if type(v) == "table" then return nil, v.json end
  error(v, 0)
end
M.json_decode = json_decode

local function jnum(v)
  if v == math.floor(v) and math.abs(v) < MAX_INT then return ("%d"):format(v) end
  return ("%.17g"):format(v)
end

-- -- Files --------------------------------------------------------------------------------

--[[
Saving. write_atomic writes into a temp file next to the target, fsyncs it,
renames it over the target and fsyncs the directory: a reader (or a crash)
sees the old file or the new one, whole. A write that fails (a full disk,
EFBIG, EIO) removes the temp file and raises; the target is left as it was.

Temp files are "<path>.tmp.<pid>.<k>" (created O_EXCL: threads and processes
saving the same path never share one) and stay flock'ed by their writer until
after the rename. A writer killed before the rename leaves its temp file
behind; the next save of the same path removes every such file whose pid is
not alive on this host and whose lock nobody holds (the lock is what protects
a live writer on another host sharing the directory, e.g. over NFS). Names of
the older form "<path>.tmp.<pid>" are cleaned the same way.
--]]

-- dir and base name of a path ("a/b" -> "a", "b"; "b" -> ".", "b"; "/b" -> "/", "b")
local function split_path(path)
  local dir, base = path:match("^(.*)/([^/]*)$")
  if not dir then return ".", path end
  return dir == "" and "/" or dir, base
end

local function pid_dead(pid)
  return C.tide_kill(pid, 0) ~= 0 and ffi.errno() == ESRCH
end

-- Remove the temp files that killed saves of path left behind.
local function clean_stale(path)
  local dir, base = split_path(path)
  local prefix, me = base .. ".tmp.", C.getpid()
  local d = C.tide_opendir(dir)
  if d == nil then return end
  local stale = {}
  while true do
    local e = C.tide_readdir(d)
    if e == nil then break end
    local name = ffi.string(e.d_name)
    if name:sub(1, #prefix) == prefix then
      local rest = name:sub(#prefix + 1)
      local pid = tonumber(rest:match("^(%d+)$") or rest:match("^(%d+)%.%d+$"))
      if pid and pid ~= me and pid < 2 ^ 31 and pid_dead(pid) then stale[#stale + 1] = name end
    end
  end
  C.tide_closedir(d)
  for _, name in ipairs(stale) do
    local p = dir .. "/" .. name
    local fd = C.open(p, O_RDONLY + O_NONBLOCK + O_NOFOLLOW + O_CLOEXEC, 0)
    if fd >= 0 then
      if C.tide_flock(fd, LOCK_EX + LOCK_NB) == 0 then C.unlink(p) end
      C.close(fd)
    end
  end
end

-- Write chunks ({ptr, n} or strings) to path atomically (above).
local function write_atomic(fname, path, chunks)
  clean_stale(path)
  local base, fd, tmp = ("%s.tmp.%d."):format(path, C.getpid()), -1, nil
  for k = 1, 1000 do
    tmp = base .. k
    fd = C.open(tmp, O_WRONLY + O_CREAT + O_EXCL + O_CLOEXEC, 420)   -- 0644 (less the umask)
    if fd >= 0 then
      if C.tide_flock(fd, LOCK_EX + LOCK_NB) == 0 then break end
      C.close(fd); fd = -1            -- a cleaner holds it: it is about to go; take the next name
    elseif ffi.errno() ~= EEXIST then
      raise(("%s: %s: cannot create the temp file %s: %s"):format(fname, path, tmp, errstr()))
    end
  end
  if fd < 0 then raise(("%s: %s: cannot create a temp file next to it: %s"):format(fname, path, errstr())) end
  local function bail(what)
    local e = errstr()
    C.unlink(tmp); C.close(fd)
    raise(("%s: %s: %s failed: %s (the file at that path, if any, is unchanged)"):format(fname, path, what, e))
  end
  for _, ch in ipairs(chunks) do
    local p, n = ch, 0
    if type(ch) == "string" then n = #ch else p, n = ch[1], ch[2] end
    p = ffi.cast("const char *", p)
    while n > 0 do
      local w = tonumber(C.write(fd, p, math.min(n, 2 ^ 30)))
      if w < 0 then
        if ffi.errno() ~= EINTR then bail("write") end
      else p, n = p + w, n - w end
    end
  end
  if C.fsync(fd) ~= 0 then bail("fsync") end
  if C.rename(tmp, path) ~= 0 then bail("rename") end
  -- closed after the rename: the lock covers the temp file's whole life
  if C.close(fd) ~= 0 then raise(("%s: %s: close failed: %s"):format(fname, path, errstr())) end
  -- the directory entry: fsync the directory so the rename itself is durable
  local dfd = C.open(split_path(path), O_RDONLY + O_CLOEXEC, 0)
  if dfd >= 0 then C.fsync(dfd); C.close(dfd) end
end

M.write_atomic = write_atomic

-- An open file for reading: { fd, size, path }
local function open_read(fname, path)
  if type(path) ~= "string" then tensor.argerr(1, fname, "string path", path) end
  local fd = C.open(path, O_RDONLY + O_CLOEXEC, 0)
  if fd < 0 then raise(("%s: %s: cannot open: %s"):format(fname, path, errstr())) end
  local size = tonumber(C.lseek(fd, 0, 2))
  if size < 0 then local e = errstr(); C.close(fd); raise(("%s: %s: cannot seek: %s"):format(fname, path, e)) end
  return { fd = fd, size = size, path = path }
end

-- n bytes at offset off into dst (a pointer), or into a new Lua string
local function pread_into(f, fname, dst, n, off)
  local p = ffi.cast("char *", dst)
  local done = 0
  while done < n do
    local r = tonumber(C.pread(f.fd, p + done, math.min(n - done, 2 ^ 30), off + done))
    if r < 0 and ffi.errno() ~= EINTR then
      local e = errstr(); C.close(f.fd); f.fd = -1
      raise(("%s: %s: read failed: %s"):format(fname, f.path, e))
    elseif r == 0 then
      C.close(f.fd); f.fd = -1
      raise(("%s: %s: file shrank while reading"):format(fname, f.path))
    elseif r > 0 then done = done + r end
  end
end
local function pread_string(f, fname, n, off)
  if n == 0 then return "" end
  local buf = ffi.new("char[?]", n)
  pread_into(f, fname, buf, n, off)
  return ffi.string(buf, n)
end

-- An empty tensor of the given shape filled from the file; bool bytes normalized to 0/1.
local i64 = ffi.new("int64_t[8]")
local function read_tensor(f, fname, shape, dtype, nbytes, off)
  for i = 1, #shape do i64[i - 1] = shape[i] end
  local t = wrap(C.td_empty(#shape, i64, dtype))
  local fl = fields(t)
  if nbytes > 0 then
    pread_into(f, fname, fl.ptr, nbytes, off)
    if dtype == 0 then
      local b = ffi.cast("uint8_t *", fl.ptr)
      for i = 0, nbytes - 1 do if b[i] > 1 then b[i] = 1 end end
    end
  end
  return t
end

-- A host-contiguous, detached copy (or the tensor itself) with its data pointer and
-- byte count; a tensor on a device is copied to the CPU.
local function host_data(fname, x, what)
  local fl = fields(x)
  x = x:detach()
  if fl.device_type ~= 0 then x = x:to("cpu") end
  x = x:contiguous()
  fl = fields(x)
  -- a shape the loaders would refuse (M.file_shape_error: dims and the product of the
  -- non-zero ones up to 2^53) is refused here: only a size-0 tensor can have one
  local dims, big = {}, false
  for i = 0, fl.ndim - 1 do
    dims[i + 1] = tonumber(fl.sizes[i])
    big = big or fl.sizes[i] > MAX_INT
  end
  if big or M.file_shape_error(dims, fl.ndim) then
    for j = 0, fl.ndim - 1 do dims[j + 1] = tostring(fl.sizes[j]):gsub("LL$", "") end
    raise(("%s: %s has shape [%s]: a file cannot hold it (loading reads dims, and the product of the non-zero "
      .. "ones, up to 2^53)"):format(fname, what, table.concat(dims, ", ")))
  end
  local n = tonumber(fl.nelem) * C.td_dtype_size(fl.scalar_type)
  if n > 0 and fl.ptr == nil then raise(("%s: %s has no data"):format(fname, what)) end
  return x, fl.ptr, n
end

-- Whether fd's file lives on a network filesystem (NFS, SMB/CIFS, FUSE, 9p, Ceph,
-- AFS, Lustre, GlusterFS over FUSE, ...): another machine can rewrite such a
-- file in place at any time, and a mapped page that is no longer in the file
-- kills the process with SIGBUS, so load reads those files instead of mapping.
local NETFS = { [0x6969] = "nfs", [0x517B] = "smb", [0xFF534D42] = "cifs", [0xFE534D42] = "smb2",
  [0x65735546] = "fuse", [0x01021997] = "9p", [0x00C36400] = "ceph", [0x5346414F] = "afs",
  [0x73757245] = "coda", [0x0BD00BD0] = "lustre", [0x7461636F] = "ocfs2", [0x01161970] = "gfs2" }
local statfs_buf = ffi.new("int64_t[16]")      -- struct statfs (120 bytes on x86-64), f_type first
local function network_fs(fd)
  if C.tide_fstatfs(fd, statfs_buf) ~= 0 then return nil end
  return NETFS[tonumber(statfs_buf[0]) % 2 ^ 32]
end
M.network_fs = network_fs

-- -- safetensors --------------------------------------------------------------------------

local ST_DTYPE = { [0] = "BOOL", "U8", "I32", "I64", "F32", "F64" }
local ST_ID = { BOOL = 0, U8 = 1, I32 = 2, I64 = 3, F32 = 4, F64 = 5 }
local ST_OTHER = { F16 = 1, BF16 = 1, I8 = 1, I16 = 1, U16 = 1, U32 = 1, U64 = 1, F8_E4M3 = 1, F8_E5M2 = 1,
  F8_E8M0 = 1, F6_E2M3 = 1, F6_E3M2 = 1, F4 = 1, C64 = 1 }
local TREE_KEY = "tide.tree"

local function path_str(p) return p == "" and "the value" or ("'%s'"):format(p) end

-- Walk the value: returns the tree JSON; appends {name, tensor} to entries.
local function encode_tree(v, entries)
  local used, seen = { __metadata__ = true }, {}
  local function name_for(p)
    local name, k = p, 1
    while used[name] do k = k + 1; name = p .. "#" .. k end
    used[name] = true
    return name
  end
  local function enc(x, p)
    local tx = type(x)
    if is_tensor(x) then
      local name = name_for(p == "" and "tensor" or p)
      entries[#entries + 1] = { name = name, t = x, where = path_str(p) }
      return '["T",' .. jstr(name) .. ']'
    elseif tx == "number" then
      if x ~= x then return '["N","nan"]' end
      if x == math.huge then return '["N","inf"]' end
      if x == -math.huge then return '["N","-inf"]' end
      return jnum(x)
    elseif tx == "boolean" then return tostring(x)
    elseif tx == "string" then
      if not utf8_ok(x) then raise(("save: the string at %s is not valid UTF-8"):format(path_str(p))) end
      return jstr(x)
    elseif tx == "table" and (getmetatable(x) == nil or getmetatable(x) == tensor.shape_mt) then   -- sizes too
      if seen[x] then raise(("save: the table at %s contains itself"):format(path_str(p))) end
      seen[x] = true
      local nums, strs = {}, {}
      for k in pairs(x) do
        if type(k) == "number" and k == k and k > -math.huge and k < math.huge then nums[#nums + 1] = k
        elseif type(k) == "string" then
          if not utf8_ok(k) then raise(("save: a key in the table at %s is not valid UTF-8"):format(path_str(p))) end
          strs[#strs + 1] = k
        else
          raise(("save: the table at %s has a %s key (expected string or finite number keys)"):format(path_str(p), type(k)))
        end
      end
      table.sort(nums); table.sort(strs)
      local out = {}
      local function sub(k) return p == "" and tostring(k) or p .. "." .. (type(k) == "number" and jnum(k) or k) end
      if #nums == 0 then
        for _, k in ipairs(strs) do out[#out + 1] = jstr(k) .. ":" .. enc(x[k], sub(k)) end
        seen[x] = nil
        return "{" .. table.concat(out, ",") .. "}"
      end
      out[1] = '"M"'
      for _, k in ipairs(nums) do out[#out + 1] = jnum(k); out[#out + 1] = enc(x[k], sub(jnum(k))) end
      for _, k in ipairs(strs) do out[#out + 1] = jstr(k); out[#out + 1] = enc(x[k], sub(k)) end
      seen[x] = nil
      return "[" .. table.concat(out, ",") .. "]"
    else
      local what = tx == "table" and "table with a metatable" or tx
      raise(("save: the value at %s is a %s (expected a tensor, table, number, string or boolean)"):format(
        path_str(p), what))
    end
  end
  return enc(v, "")
end

--- tide.save(value, path)
--- Writes tensors, or tables of them with numbers, strings and booleans, as a safetensors file (atomically).
function M.save(value, path)
  if type(path) ~= "string" then tensor.argerr(2, "save", "string path", path) end
  local entries = {}
  local tree = encode_tree(value, entries)
  local parts, chunks, off = {}, {}, 0
  parts[1] = '"__metadata__":{"format":"pt",' .. jstr(TREE_KEY) .. ":" .. jstr(tree) .. "}"
  for _, e in ipairs(entries) do
    local x, ptr, n = host_data("save", e.t, e.where == "the value" and "the tensor" or "the tensor at " .. e.where)
    local fl = fields(x)
    local shape = {}
    for i = 0, fl.ndim - 1 do shape[#shape + 1] = jnum(tonumber(fl.sizes[i])) end
    parts[#parts + 1] = ('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}'):format(
      jstr(e.name), ST_DTYPE[fl.scalar_type], table.concat(shape, ","), jnum(off), jnum(off + n))
    off = off + n
    if n > 0 then chunks[#chunks + 1] = { ptr, n, x } end     -- x keeps the data alive
  end
  local header = "{" .. table.concat(parts, ",") .. "}"
  header = header .. (" "):rep((8 - #header % 8) % 8)
  local n = #header
  local len = {}
  for i = 1, 8 do len[i] = string.char(n % 256); n = math.floor(n / 256) end
  table.insert(chunks, 1, table.concat(len) .. header)
  write_atomic("save", path, chunks)
end

-- Rebuild the value from the tree, taking tensors by name.
local function decode_tree(v, tensors, fail)
  local used = {}
  local function dec(x)
    local tx = type(x)
    if tx == "string" or tx == "number" or tx == "boolean" then return x end
    if tx ~= "table" or x == null then fail("tree: unexpected null") end
    if x.map then
      local r = {}
      for _, k in ipairs(x.keys) do r[k] = dec(x.map[k]) end
      return r
    end
    local tag = x[1]
    if tag == "T" and x.n == 2 and type(x[2]) == "string" then
      local t = tensors[x[2]]
      if not t then fail(("tree: refers to entry '%s', which is not in the file"):format(x[2])) end
      if used[x[2]] then fail(("tree: entry '%s' is used twice"):format(x[2])) end
      used[x[2]] = true
      return t
    elseif tag == "N" and x.n == 2 then
      local v2 = ({ nan = 0 / 0, inf = math.huge, ["-inf"] = -math.huge })[x[2]]
      if v2 == nil then fail("tree: bad number " .. tostring(x[2])) end
      return v2
    elseif tag == "M" and x.n % 2 == 1 then
      local r = {}
      for i = 2, x.n, 2 do
        local k = x[i]
        if type(k) ~= "string" and type(k) ~= "number" then fail("tree: bad table key") end
        r[k] = dec(x[i + 1])
      end
      return r
    end
    fail("tree: malformed node")
  end
  local r = dec(v)
  for name in pairs(tensors) do
    if not used[name] then fail(("tree: entry '%s' is not part of the saved value"):format(name)) end
  end
  return r
end

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v >= 0 and v <= MAX_INT end

-- A shape read from a file (safetensors, .npy, IDX): at most 8 dims, each an
-- integer in [0, 2^53], and the product of its non-zero dims at most 2^53, as
-- numpy requires: a zero dim makes the tensor empty but does not excuse the
-- others, whose product the C runtime still forms for sizes and strides (and
-- would overflow). nil when it is fine, else what is wrong with it.
local function file_shape_error(shape, n)
  if n > 8 then return ("shape has %d dims (at most 8 are supported)"):format(n) end
  local prod = 1
  for i = 1, n do
    local d = shape[i]
    if not is_int(d) then
      local ds = type(d) == "number" and d == math.floor(d) and math.abs(d) < math.huge and ("%.0f"):format(d) or tostring(d)
      return ("shape[%d] = %s is not an integer in 0..2^53"):format(i, ds)
    end
    if d > 0 then prod = prod * d end
  end
  if prod > MAX_INT then
    local s = {}
    for i = 1, n do s[i] = ("%.0f"):format(shape[i]) end
    return ("shape [%s] is too large"):format(table.concat(s, ", "))
  end
end
M.file_shape_error = file_shape_error

-- load(path, {mmap=nil, device="cpu"}) -> value, metadata. mmap: nil maps files on local
-- filesystems and reads those on network ones; true maps always; false reads. A mapped
-- file must not be truncated or rewritten in place while tensors loaded from it live
-- (SIGBUS on the next access to a page gone from the file): tide.save replaces files
-- by rename, which is safe; load with {mmap = false} a file other programs rewrite.
--- tide.load(path[, {mmap, device}]) -> value, metadata
--- Reads a safetensors file (tide's nested values, or a flat name -> tensor table from elsewhere).
--- The file is mapped (mmap = nil: on local filesystems; true: always; false: read instead); a mapped
--- file truncated or rewritten in place while its tensors live kills the process (SIGBUS).
function M.load(path, opts)
  opts = args.opts("load", opts, "mmap device", 2)
  local mm = opts.mmap
  if mm ~= nil and type(mm) ~= "boolean" then tensor.argerr(2, "load", "boolean mmap option", mm) end
  local use_map = mm == nil and "auto" or mm
  local device = opts.device
  if device ~= nil and tensor.check_device(device, "load") == 0 then device = nil end
  local f = open_read("load", path)
  local function fail(msg)
    if f.fd >= 0 then C.close(f.fd); f.fd = -1 end
    raise(("load: %s: %s"):format(path, msg))
  end
  if f.size < 8 then fail(("the file has %d bytes; a safetensors file starts with an 8-byte header size"):format(f.size)) end
  local lb = ffi.new("uint8_t[8]")
  pread_into(f, "load", lb, 8, 0)
  local n = 0
  for i = 7, 0, -1 do n = n * 256 + lb[i] end
  if n > f.size - 8 then fail(("the header claims %.0f bytes but the file has only %d after the size field"):format(n, f.size - 8)) end
  if n > MAX_HEADER then fail(("the header claims %.0f bytes (more than the 100 MB limit)"):format(n)) end
  if n < 2 then fail(("the header has %d bytes; it must be a JSON object"):format(n)) end
  local text = pread_string(f, "load", n, 8)
  if text:sub(1, 1) ~= "{" then fail("the header does not start with '{'") end
  if not utf8_ok(text) then fail("the header is not valid UTF-8") end
  local hdr, jerr = json_decode(text)
  if not hdr then fail("bad JSON in the header: " .. jerr) end
  if type(hdr) ~= "table" or not hdr.map then fail("the header is not a JSON object") end
  local data_size = f.size - 8 - n
  local meta, list = nil, {}
  for _, name in ipairs(hdr.keys) do
    local e = hdr.map[name]
    if name == "__metadata__" then
      if type(e) ~= "table" or not e.map then fail("__metadata__ is not an object") end
      meta = {}
      for _, k in ipairs(e.keys) do
        if type(e.map[k]) ~= "string" then fail(("__metadata__ value '%s' is not a string"):format(k)) end
        meta[k] = e.map[k]
      end
    else
      local function bad(msg) fail(("entry '%s': %s"):format(name, msg)) end
      if type(e) ~= "table" or not e.map then bad("not an object") end
      local dt, shape, offs = e.map.dtype, e.map.shape, e.map.data_offsets
      if type(dt) ~= "string" then bad("missing dtype") end
      local id = ST_ID[dt]
      if not id then
        if ST_OTHER[dt] then bad(("dtype %s is not supported yet (supported: F64 F32 I64 I32 U8 BOOL)"):format(dt)) end
        bad(("unknown dtype %s"):format(jstr(dt)))
      end
      if type(shape) ~= "table" or shape.map or shape == null then bad("shape is not an array") end
      local serr = file_shape_error(shape, shape.n)
      if serr then bad(serr) end
      local numel, sh = 1, {}
      for i = 1, shape.n do sh[i] = shape[i]; numel = numel * shape[i] end
      if type(offs) ~= "table" or offs.map or offs == null or offs.n ~= 2 or not is_int(offs[1]) or not is_int(offs[2]) then
        bad("data_offsets is not a pair of non-negative integers")
      end
      local b, en = offs[1], offs[2]
      if en < b then bad(("data_offsets [%.0f, %.0f] end before they begin"):format(b, en)) end
      local want = numel * C.td_dtype_size(id)
      if en - b ~= want then
        bad(("data_offsets [%.0f, %.0f] hold %.0f bytes but shape [%s] of %s needs %.0f"):format(
          b, en, en - b, table.concat(sh, ", "), dt, want))
      end
      if en > data_size then
        fail(("entry '%s' claims %.0f bytes up to offset %.0f but the file's data section has %d"):format(
          name, en - b, en, data_size))
      end
      list[#list + 1] = { name = name, id = id, shape = sh, b = b, e = en }
    end
  end
  -- the entries must tile the data section: sorted by offsets, no overlap, no hole
  local sorted = {}
  for i, e in ipairs(list) do sorted[i] = e end
  table.sort(sorted, function(a, b) if a.b ~= b.b then return a.b < b.b end return a.e < b.e end)
  local pos, prev = 0, nil
  for _, e in ipairs(sorted) do
    if e.b < pos then
      fail(("entry '%s' [%.0f, %.0f) overlaps entry '%s' [%.0f, %.0f)"):format(e.name, e.b, e.e, prev.name, prev.b, prev.e))
    elseif e.b > pos then
      fail(("data bytes [%.0f, %.0f) belong to no entry (the format requires a fully indexed data section)"):format(pos, e.b))
    end
    pos, prev = e.e, e
  end
  if pos ~= data_size then
    fail(("data bytes [%.0f, %d) belong to no entry (the format requires a fully indexed data section)"):format(pos, data_size))
  end
  local tree
  if meta and meta[TREE_KEY] then
    local terr
    tree, terr = json_decode(meta[TREE_KEY])
    if tree == nil then fail("bad JSON in the tree: " .. terr) end
  end
  local tensors = {}
  if use_map == "auto" and network_fs(f.fd) then use_map = false end
  local map = use_map and #list > 0 and C.td_map_fd(f.fd, nil) or nil
  -- map == nil: not mappable (a pipe, /proc): read instead
  local mapped = map ~= nil and ffi.cast("const uint8_t *", C.td_mapping_data(map))
  for _, e in ipairs(list) do
    local off, nb = 8 + n + e.b, e.e - e.b
    local ok = mapped and off % C.td_dtype_size(e.id) == 0 and 8 + n + e.e <= f.size
    if ok and e.id == 0 then for i = off, off + nb - 1 do if mapped[i] > 1 then ok = false; break end end end
    if ok then
      for i = 1, #e.shape do i64[i - 1] = e.shape[i] end
      local p = C.td_from_mapping(map, off, #e.shape, i64, e.id)
      if p == nil then C.td_mapping_release(map); fail(core.last_error()) end
      tensors[e.name] = wrap(p)
    else
      tensors[e.name] = read_tensor(f, "load", e.shape, e.id, nb, off)
    end
  end
  if map ~= nil then C.td_mapping_release(map) end
  C.close(f.fd); f.fd = -1
  if device ~= nil then
    for name, t in pairs(tensors) do tensors[name] = t:to(device) end
  end
  local result = tensors
  if tree ~= nil then result = decode_tree(tree, tensors, fail) end
  return result, meta or {}
end

-- -- .npy ---------------------------------------------------------------------------------

local NPY_DESCR = { [0] = "|b1", "|u1", "<i4", "<i8", "<f4", "<f8" }
local NPY_ID = { ["|b1"] = 0, ["|u1"] = 1, ["<u1"] = 1, ["<i4"] = 2, ["<i8"] = 3, ["<f4"] = 4, ["<f8"] = 5 }

--- tide.save_npy(x, path)
--- Writes a tensor as a NumPy .npy file.
function M.save_npy(x, path)
  if not is_tensor(x) then tensor.argerr(1, "save_npy", "Tensor", x) end
  if type(path) ~= "string" then tensor.argerr(2, "save_npy", "string path", path) end
  local t, ptr, nbytes = host_data("save_npy", x, "the tensor")
  local fl = fields(t)
  local dims = {}
  for i = 0, fl.ndim - 1 do dims[#dims + 1] = jnum(tonumber(fl.sizes[i])) end
  local shape = #dims == 1 and "(" .. dims[1] .. ",)" or "(" .. table.concat(dims, ", ") .. ")"
  local h = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }"):format(NPY_DESCR[fl.scalar_type], shape)
  local total = 10 + #h + 1
  h = h .. (" "):rep((64 - total % 64) % 64) .. "\n"
  local hl = #h
  if hl > 65535 then raise("save_npy: header too long") end
  local chunks = { "\147NUMPY\1\0" .. string.char(hl % 256, math.floor(hl / 256)) .. h }
  if nbytes > 0 then chunks[2] = { ptr, nbytes, t } end
  write_atomic("save_npy", path, chunks)
end

-- Parse the header dict literal: {'descr': str, 'fortran_order': bool, 'shape': tuple}.
local function parse_npy_header(h, fail)
  local pos = 1
  local function ws() pos = h:find("[^ \t\n\r]", pos) or #h + 1 end
  local function expect(c)
    ws()
    if h:sub(pos, pos) ~= c then fail(("header: expected '%s' at byte %d"):format(c, pos)) end
    pos = pos + 1
  end
  local function pystr()
    ws()
    local q = h:sub(pos, pos)
    if q ~= "'" and q ~= '"' then fail(("header: expected a string at byte %d"):format(pos)) end
    local e = h:find(q, pos + 1, true)
    if not e then fail("header: unterminated string") end
    local s = h:sub(pos + 1, e - 1); pos = e + 1
    if s:find("\\", 1, true) then fail("header: escapes in strings are not supported") end
    return s
  end
  local function value(key)
    ws()
    if key == "descr" then return pystr() end
    if key == "fortran_order" then
      if h:find("^True", pos) then pos = pos + 4; return true end
      if h:find("^False", pos) then pos = pos + 5; return false end
      fail("header: fortran_order is not True or False")
    end
    if key == "shape" then
      expect("(")
      local dims = {}
      while true do
        ws()
        if h:sub(pos, pos) == ")" then pos = pos + 1; break end
        local d = h:match("^%d+", pos)
        if not d then fail(("header: bad shape at byte %d"):format(pos)) end
        pos = pos + #d
        if h:sub(pos, pos) == "L" then pos = pos + 1 end      -- Python 2 longs
        dims[#dims + 1] = tonumber(d)
        ws()
        local c = h:sub(pos, pos)
        if c == "," then pos = pos + 1
        elseif c ~= ")" then fail(("header: bad shape at byte %d"):format(pos)) end
      end
      if #dims == 1 and not h:sub(1, pos - 1):find(",%s*%)$") then fail("header: a 1-tuple shape needs a trailing comma") end
      return dims
    end
    fail(("header: unexpected key '%s'"):format(key))
  end
  expect("{")
  local d = {}
  while true do
    ws()
    if h:sub(pos, pos) == "}" then pos = pos + 1; break end
    local k = pystr()
    if d[k] ~= nil then fail(("header: duplicate key '%s'"):format(k)) end
    expect(":")
    d[k] = value(k)
    ws()
    local c = h:sub(pos, pos)
    if c == "," then pos = pos + 1 elseif c ~= "}" then fail(("header: expected ',' or '}' at byte %d"):format(pos)) end
  end
  ws()
  if pos <= #h then fail("header: trailing characters after the dict") end
  for _, k in ipairs { "descr", "fortran_order", "shape" } do
    if d[k] == nil then fail(("header: missing key '%s'"):format(k)) end
  end
  return d
end

--- tide.load_npy(path) -> Tensor
--- Reads a NumPy .npy file.
function M.load_npy(path)
  local f = open_read("load_npy", path)
  local function fail(msg)
    if f.fd >= 0 then C.close(f.fd); f.fd = -1 end
    raise(("load_npy: %s: %s"):format(path, msg))
  end
  if f.size < 10 then fail(("the file has %d bytes, too short for a .npy header"):format(f.size)) end
  local pre = pread_string(f, "load_npy", math.min(12, f.size), 0)
  if pre:sub(1, 6) ~= "\147NUMPY" then fail("bad magic (not a .npy file)") end
  local major, minor = pre:byte(7), pre:byte(8)
  local hl, start
  if major == 1 then
    hl, start = pre:byte(9) + 256 * pre:byte(10), 10
  elseif major == 2 or major == 3 then
    if #pre < 12 then fail("truncated header") end
    hl, start = pre:byte(9) + 256 * pre:byte(10) + 65536 * pre:byte(11) + 16777216 * pre:byte(12), 12
  else
    fail(("format version %d.%d is not supported (1.0, 2.0 and 3.0 are)"):format(major, minor))
  end
  if minor ~= 0 then fail(("format version %d.%d is not supported (1.0, 2.0 and 3.0 are)"):format(major, minor)) end
  if start + hl > f.size then fail(("the header claims %d bytes but the file has %d after the prefix"):format(hl, f.size - start)) end
  if hl > MAX_HEADER then fail("the header is larger than 100 MB") end
  local h = pread_string(f, "load_npy", hl, start)
  if major == 3 and not utf8_ok(h) then fail("the header is not valid UTF-8") end
  local d = parse_npy_header(h, fail)
  if type(d.descr) ~= "string" then fail("header: descr is not a string") end
  local id = NPY_ID[d.descr]
  if not id then
    fail(("dtype '%s' is not supported (supported: <f4 <f8 <i4 <i8 |u1 |b1)"):format(d.descr))
  end
  local serr = file_shape_error(d.shape, #d.shape)
  if serr then fail(serr) end
  local numel = 1
  for _, v in ipairs(d.shape) do numel = numel * v end
  local nbytes = numel * C.td_dtype_size(id)
  local have = f.size - start - hl
  if have ~= nbytes then
    fail(("shape (%s) of %s needs %.0f data bytes but the file has %d"):format(
      table.concat(d.shape, ", "), d.descr, nbytes, have))
  end
  local shape = d.shape
  if d.fortran_order then
    shape = {}
    for i = #d.shape, 1, -1 do shape[#shape + 1] = d.shape[i] end
  end
  local t = read_tensor(f, "load_npy", shape, id, nbytes, start + hl)
  C.close(f.fd); f.fd = -1
  if d.fortran_order and #shape > 1 then
    local perm = {}
    for i = #shape, 1, -1 do perm[#perm + 1] = i end
    t = t:permute(perm):contiguous()
  end
  return t
end

return M
