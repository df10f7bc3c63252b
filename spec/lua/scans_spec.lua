-- Scans, atan2/hypot/fmod/remainder and the indexing ops against PyTorch's
-- values (spec/ref/scans_reference.lua, written by spec/ref/scans_reference.py),
-- with float64 gradcheck, compiled == eager (or the data-dependent error) and
-- OpenCL == CPU per case (spec/ref_walk.lua); then what a literal file cannot
-- hold: long lines scanned in blocks, thread-count independence, errors.
local tide = require "tide"
local H = require "helper"

require("ref_walk")(dofile("spec/ref/scans_reference.lua"), "scans, elementwise math and indexing against PyTorch")
