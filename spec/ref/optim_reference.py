# Generates the REF table of spec/lua/optim_spec.lua (torch 1.13 trajectories and lr
# sequences): /usr/bin/python3 spec/ref/optim_reference.py > REF lines. Not run by the tests.
import torch, math, warnings
warnings.filterwarnings("ignore")
torch.set_default_dtype(torch.float64)
def f(x): return repr(float(x))
def lt(xs): return "{ " + ", ".join(f(x) for x in xs) + " }"
def params():
    w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    v = torch.tensor([[0.3, -0.7], [1.2, 0.4]], requires_grad=True)
    return w, v
c = torch.tensor([0.5, -1.5, 2.0])
def loss(w, v): return (w*w*c).sum() + (v**3).sum() * 0.25
def luaopts(d):
    parts=[]
    for k,val in d.items():
        if isinstance(val, bool): parts.append(f"{k} = {'true' if val else 'false'}")
        elif isinstance(val, tuple): parts.append(f"{k} = {{ {val[0]!r}, {val[1]!r} }}")
        else: parts.append(f"{k} = {val!r}")
    return "{ " + ", ".join(parts) + " }"
cases = [
 ("SGD", dict(lr=0.1)),
 ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
 ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
 ("SGD", dict(lr=0.1, momentum=0.5, maximize=True)),
 ("Adam", dict(lr=0.1)),
 ("Adam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True)),
 ("Adam", dict(lr=0.05, maximize=True, eps=1e-3)),
 ("AdamW", dict(lr=0.1)),
 ("AdamW", dict(lr=0.1, weight_decay=0.1, amsgrad=True)),
 ("RMSprop", dict(lr=0.01)),
 ("RMSprop", dict(lr=0.01, alpha=0.9, centered=True, momentum=0.9, weight_decay=0.1)),
 ("RMSprop", dict(lr=0.01, momentum=0.5, maximize=True)),
 ("Adagrad", dict(lr=0.1)),
 ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6)),
]
out = ["local REF = {", "  optimizers = {"]
for name, opts in cases:
    w, v = params()
    opt = getattr(torch.optim, name)([w, v], **opts)
    traj = []
    for i in range(5):
        opt.zero_grad(); loss(w, v).backward(); opt.step()
        traj.append("{ " + lt(w.tolist()) + ", " + lt(v.flatten().tolist()) + " }")
    out.append(f"    {{ name = {name!r}, opts = {luaopts(opts)},\n      traj = {{\n        " + ",\n        ".join(traj) + " } },")
out.append("  },")
# param groups
w, v = params()
opt = torch.optim.SGD([{"params": [w]}, {"params": [v], "lr": 0.01, "momentum": 0.9}], lr=0.1)
traj=[]
for i in range(3):
    opt.zero_grad(); loss(w, v).backward(); opt.step()
    traj.append("{ " + lt(w.tolist()) + ", " + lt(v.flatten().tolist()) + " }")
out.append("  groups = { " + ", ".join(traj) + " },")
# schedulers
def run_sched(make, n=25, mom=None):
    p = torch.zeros(2, requires_grad=True)
    opt, sch = make(p)
    lrs, moms = [], []
    for i in range(n):
        lrs.append(sch.get_last_lr())
        if mom == "momentum": moms.append(opt.param_groups[0]["momentum"])
        if mom == "betas": moms.append(opt.param_groups[0]["betas"][0])
        opt.step(); sch.step()
    return lrs, moms
S = torch.optim.lr_scheduler
scheds = {
 "step": lambda p: (lambda o: (o, S.StepLR(o, step_size=3, gamma=0.5)))(torch.optim.SGD([p], lr=0.1)),
 "multistep": lambda p: (lambda o: (o, S.MultiStepLR(o, milestones=[9, 2, 5, 5], gamma=0.3)))(torch.optim.SGD([p], lr=0.1)),
 "exponential": lambda p: (lambda o: (o, S.ExponentialLR(o, gamma=0.9)))(torch.optim.SGD([p], lr=0.1)),
 "cosine": lambda p: (lambda o: (o, S.CosineAnnealingLR(o, T_max=7, eta_min=0.001)))(torch.optim.SGD([p], lr=0.1)),
 "linear_default": lambda p: (lambda o: (o, S.LinearLR(o)))(torch.optim.SGD([p], lr=0.1)),
 "linear": lambda p: (lambda o: (o, S.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=8)))(torch.optim.SGD([p], lr=0.1)),
 "sequential": lambda p: (lambda o: (o, S.SequentialLR(o, schedulers=[S.LinearLR(o, start_factor=0.1, total_iters=4), S.CosineAnnealingLR(o, T_max=20)], milestones=[5])))(torch.optim.SGD([p], lr=0.1)),
 "constant": lambda p: (lambda o: (o, S.ConstantLR(o, factor=0.25, total_iters=4)))(torch.optim.SGD([p], lr=0.1)),
 "lambda_cosine": lambda p: (lambda o: (o, S.SequentialLR(o, schedulers=[S.LambdaLR(o, lambda e: min(1.0, (e + 1) / 5)), S.CosineAnnealingLR(o, T_max=15, eta_min=0.01)], milestones=[5])))(torch.optim.SGD([p], lr=0.1)),
 "constant_exp": lambda p: (lambda o: (o, S.SequentialLR(o, schedulers=[S.ConstantLR(o, factor=0.5, total_iters=10), S.ExponentialLR(o, gamma=0.8)], milestones=[3])))(torch.optim.SGD([p], lr=0.1)),
 "sequential3": lambda p: (lambda o: (o, S.SequentialLR(o, schedulers=[S.ExponentialLR(o, gamma=0.5), S.StepLR(o, step_size=2, gamma=0.7), S.MultiStepLR(o, milestones=[3, 6], gamma=0.1)], milestones=[4, 10])))(torch.optim.SGD([p], lr=0.1)),
}
out.append("  schedulers = {")
for k, mk in scheds.items():
    lrs, _ = run_sched(mk)
    out.append(f"    {k} = " + lt([l[0] for l in lrs]) + ",")
lrs, moms = run_sched(lambda p: (lambda o: (o, S.OneCycleLR(o, max_lr=0.5, total_steps=25)))(torch.optim.SGD([p], lr=0.1, momentum=0.9)), 25, "momentum")
out.append("    onecycle = " + lt([l[0] for l in lrs]) + ",")
out.append("    onecycle_momentum = " + lt(moms) + ",")
lrs, moms = run_sched(lambda p: (lambda o: (o, S.OneCycleLR(o, max_lr=0.01, epochs=3, steps_per_epoch=8, three_phase=True, anneal_strategy='linear', pct_start=0.25, div_factor=10, final_div_factor=100)))(torch.optim.Adam([p], lr=0.1)), 24, "betas")
out.append("    onecycle3 = " + lt([l[0] for l in lrs]) + ",")
out.append("    onecycle3_beta1 = " + lt(moms) + ",")
# two groups cosine
p, q = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
o = torch.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.02}], lr=0.1)
sch = S.CosineAnnealingLR(o, T_max=10)
g1, g2 = [], []
for i in range(12):
    l = sch.get_last_lr(); g1.append(l[0]); g2.append(l[1]); o.step(); sch.step()
out.append("    cosine_groups = { " + lt(g1) + ", " + lt(g2) + " },")
out.append("  },")
# clip_grad_norm_
out.append("  clip = {")
for (mx, nt) in [(1.0, 2.0), (100.0, 2.0), (0.5, float('inf')), (2.0, 1.0), (1.0, 3.0)]:
    w, v = params(); loss(w, v).backward()
    tot = torch.nn.utils.clip_grad_norm_([w, v], mx, nt)
    ntl = "math.huge" if nt == float('inf') else repr(nt)
    out.append(f"    {{ max_norm = {mx!r}, norm_type = {ntl}, total = {f(tot)}, w = {lt(w.grad.tolist())}, v = {lt(v.grad.flatten().tolist())} }},")
out.append("  },")
# float32 clip
w = torch.tensor([3.0, -4.0], dtype=torch.float32, requires_grad=True)
(w*w).sum().backward()
tot = torch.nn.utils.clip_grad_norm_([w], 1.0)
out.append(f"  clip32 = {{ total = {f(tot)}, g = {lt(w.grad.tolist())} }},")
out.append("}")
open("/tmp/optref/ref.lua","w").write("\n".join(out) + "\n")
