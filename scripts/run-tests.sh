#!/bin/sh
# Run the busted specs under LuaJIT. The last line printed is
# "N passed, N failed, N skipped" (spec/summary.lua); the exit code is busted's.
cd "$(dirname "$0")/.."
export TIDE_NUM_THREADS="${TIDE_NUM_THREADS:-2}"
exec luajit /usr/bin/busted "$@"
