--[[
tide.nn's loss modules (PyTorch's names): each holds its options and calls the
loss of tide.nn.functional, m(input, target, ...) = F.loss(input, target, ...,
options). Tensor options (weight, pos_weight) are buffers, so they move with
m:to(...) and are in the state_dict as PyTorch's are.

Loaded by tide.nn (lua/tide/nn/init.lua) once nn.Module exists; the classes
are installed into it.
--]]
local core = require "tide.core"
local args = require "tide.args"
local nn = require "tide.nn"
local F = require "tide.nn.functional"

-- a class calling F[fname] with nargs positional arguments and the options
local function loss_class(name, fname, nargs, allowed)
  local cls = nn.Module:extend(name)
  nn[name] = cls
  function cls:__init(opts)
    opts = args.opts(name, opts, allowed, 1)
    self._loss_opts, self._loss_tensors = {}, {}
    for k, v in pairs(opts) do
      if core.is_tensor(v) then
        self:register_buffer(k, v)
        self._loss_tensors[#self._loss_tensors + 1] = k
      else
        self._loss_opts[k] = v
      end
    end
  end
  function cls:forward(...)
    local a = { ... }
    if select("#", ...) > nargs then
      core.raise(("%s: forward takes %d arguments, got %d"):format(name, nargs, select("#", ...)))
    end
    local o = {}
    for k, v in pairs(self._loss_opts) do o[k] = v end
    for _, k in ipairs(self._loss_tensors) do o[k] = self[k] end
    a[nargs + 1] = o
    return F[fname](unpack(a, 1, nargs + 1))
  end
  function cls:extra_repr()
    local ks = {}
    for k in pairs(self._loss_opts) do ks[#ks + 1] = k end
    table.sort(ks)
    for i, k in ipairs(ks) do
      local v = self._loss_opts[k]
      ks[i] = k .. "=" .. (type(v) == "string" and ("'" .. v .. "'") or tostring(v))
    end
    return table.concat(ks, ", ")
  end
  return cls
end

--- nn.MSELoss([{reduction = "mean"}])
--- F.mse_loss as a module: m(input, target).
loss_class("MSELoss", "mse_loss", 2, "reduction")
--- nn.L1Loss([{reduction = "mean"}])
--- F.l1_loss as a module: m(input, target).
loss_class("L1Loss", "l1_loss", 2, "reduction")
--- nn.SmoothL1Loss([{reduction = "mean", beta = 1}])
--- F.smooth_l1_loss as a module: m(input, target).
loss_class("SmoothL1Loss", "smooth_l1_loss", 2, "reduction beta")
--- nn.HuberLoss([{reduction = "mean", delta = 1}])
--- F.huber_loss as a module: m(input, target).
loss_class("HuberLoss", "huber_loss", 2, "reduction delta")
--- nn.BCELoss([{weight, reduction = "mean"}])
--- F.binary_cross_entropy as a module: m(p, target).
loss_class("BCELoss", "binary_cross_entropy", 2, "weight reduction")
--- nn.BCEWithLogitsLoss([{weight, pos_weight, reduction = "mean"}])
--- F.binary_cross_entropy_with_logits as a module: m(x, target).
loss_class("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", 2, "weight pos_weight reduction")
--- nn.KLDivLoss([{reduction = "mean", log_target = false}])
--- F.kl_div as a module: m(logq, target).
loss_class("KLDivLoss", "kl_div", 2, "reduction log_target")
--- nn.NLLLoss([{weight, ignore_index = -100, reduction = "mean"}])
--- F.nll_loss as a module: m(logp, target) with 1-based labels.
loss_class("NLLLoss", "nll_loss", 2, "weight ignore_index reduction")
--- nn.CrossEntropyLoss([{weight, ignore_index = -100, reduction = "mean", label_smoothing = 0}])
--- F.cross_entropy as a module: m(logits, target) with 1-based labels or class probabilities.
loss_class("CrossEntropyLoss", "cross_entropy", 2, "weight ignore_index reduction label_smoothing")
--- nn.CTCLoss([{blank = 1, reduction = "mean", zero_infinity = false}])
--- F.ctc_loss as a module: m(log_probs, targets, input_lengths, target_lengths).
loss_class("CTCLoss", "ctc_loss", 4, "blank reduction zero_infinity")
--- nn.TripletMarginLoss([{margin = 1, p = 2, eps = 1e-6, swap = false, reduction = "mean"}])
--- F.triplet_margin_loss as a module: m(anchor, positive, negative).
loss_class("TripletMarginLoss", "triplet_margin_loss", 3, "margin p eps swap reduction")
--- nn.CosineEmbeddingLoss([{margin = 0, reduction = "mean"}])
--- F.cosine_embedding_loss as a module: m(x1, x2, target).
loss_class("CosineEmbeddingLoss", "cosine_embedding_loss", 3, "margin reduction")
--- nn.MarginRankingLoss([{margin = 0, reduction = "mean"}])
--- F.margin_ranking_loss as a module: m(x1, x2, target).
loss_class("MarginRankingLoss", "margin_ranking_loss", 3, "margin reduction")
--- nn.PoissonNLLLoss([{log_input = true, full = false, eps = 1e-8, reduction = "mean"}])
--- F.poisson_nll_loss as a module: m(input, target).
loss_class("PoissonNLLLoss", "poisson_nll_loss", 2, "log_input full eps reduction")
--- nn.GaussianNLLLoss([{full = false, eps = 1e-6, reduction = "mean"}])
--- F.gaussian_nll_loss as a module: m(input, target, var).
loss_class("GaussianNLLLoss", "gaussian_nll_loss", 3, "full eps reduction")
--- nn.MultiLabelSoftMarginLoss([{weight, reduction = "mean"}])
--- F.multilabel_soft_margin_loss as a module: m(input, target).
loss_class("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss", 2, "weight reduction")
--- nn.MultiMarginLoss([{p = 1, margin = 1, weight, reduction = "mean"}])
--- F.multi_margin_loss as a module: m(input, target) with 1-based labels.
loss_class("MultiMarginLoss", "multi_margin_loss", 2, "p margin weight reduction")

return nn
