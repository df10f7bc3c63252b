-- busted output handler: busted's usual terminal output, then one closing line
-- "N passed, N failed, N skipped" counted from the real results (what CI reads).
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.plainTerminal"(options)
  busted.subscribe({ "suite", "end" }, function()
    io.write(("\n%d passed, %d failed, %d skipped\n"):format(#handler.successes,
      #handler.failures + #handler.errors, #handler.pendings))
    io.flush()
    return nil, true
  end)
  return handler
end
