#!/usr/bin/env python3
"""bench/repl_startup.py -- the REPL's start-up time: from starting build/tide
on a pseudo-terminal to its first prompt ("> ") on the screen, --runs times
(default 21); prints the median, min and max in ms. For scale it also times
`luajit -e ''`, `require "tide"` (LuaJIT with tide loaded, no REPL) and
`tide -e ''`. --libdir DIR puts DIR first on LD_LIBRARY_PATH (another
libtide.so.0: bench/startup_ab.sh's build linked with OpenCL, CLBlast and
libgccjit); --only-tide skips the two LuaJIT lines.
  python3 bench/repl_startup.py [--runs N] [--bin build/tide] [--libdir DIR] [--only-tide]"""
import os, pty, re, sys, time, select, statistics, subprocess

def first_prompt(argv, env):
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env)
    buf = b""
    def screen():                       # without terminal escapes (readline's bracketed paste mode)
        return re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]", b"", buf).rstrip(b" ")
    while not screen().endswith(b"\n>"):
        r, _, _ = select.select([fd], [], [], 10)
        if not r:
            raise SystemExit("no prompt within 10 s: %r" % buf)
        buf += os.read(fd, 4096)
    dt = time.perf_counter() - t0
    os.write(fd, b"\x04")              # Ctrl-D: quit
    os.waitpid(pid, 0)
    os.close(fd)
    return dt

def wall(argv, env=None):
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0

def report(name, ts):
    ms = sorted(t * 1e3 for t in ts)
    print("%-34s median %6.1f ms  min %6.1f  max %6.1f  (%d runs)" % (name, statistics.median(ms), ms[0], ms[-1], len(ms)))

def main():
    args = sys.argv[1:]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 21
    binary = args[args.index("--bin") + 1] if "--bin" in args else "build/tide"
    env = dict(os.environ, TIDE_HISTORY=os.devnull, INPUTRC=os.devnull, TERM=os.environ.get("TERM", "xterm"))
    if "--libdir" in args:
        d = os.path.abspath(args[args.index("--libdir") + 1])
        env["LD_LIBRARY_PATH"] = d + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lua_path = "%s/lua/?.lua;%s/lua/?/init.lua;;" % (root, root)
    if "--only-tide" not in args:
        report("luajit -e ''", [wall(["luajit", "-e", ""]) for _ in range(runs)])
        report("luajit -e 'require \"tide\"'",
               [wall(["env", "LUA_PATH=" + lua_path, "luajit", "-e", "require 'tide'"]) for _ in range(runs)])
    report("tide -e ''", [wall([binary, "-e", ""], env) for _ in range(runs)])
    report("tide: start to first prompt", [first_prompt([binary], env) for _ in range(runs)])

main()
