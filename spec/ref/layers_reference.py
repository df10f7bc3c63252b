# Generates PyTorch's reference values for the recurrent and attention layers
# (spec/lua/layers_spec.lua), not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/layers_reference.py
# writes
#   spec/ref/layers_reference.lua   cases: a tide module (Lua expression), its
#       state_dict (PyTorch's names, order and values), literal inputs, the Lua
#       body that calls it and PyTorch's outputs, all float64
#   spec/ref/layers_torch.safetensors   float32 state_dicts of an LSTM, a GRU, a
#       MultiheadAttention and a TransformerEncoderLayer as PyTorch initializes
#       them, with an input and PyTorch's outputs for each ("lstm.weight_ih_l0",
#       ..., "lstm.input", "lstm.output", ...), written by hand in the
#       safetensors format (the safetensors package is not needed)
# Parameters of the Lua cases are set to short random values (3 decimals) in
# PyTorch before the outputs are computed, so the file stays small. Modules
# run in training mode with dropout 0 (PyTorch's fast paths are for eval).
# Flags: grad = float64 gradcheck of the outputs in the float inputs and parameters;
# cl = also on OpenCL (a subset: each new shape costs PoCL a kernel build on a cold cache).
import json, math, os, struct, sys
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence, pack_sequence

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
F64 = "dtype = tide.float64"

def T(*shape): return ("randn", shape)
def lit(t): return ("lit", t)

def causal(n):
    return nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.float64)

KPM = lit(torch.tensor([[False, False, True, False], [False, False, False, True]]))

CASES = [
    # -- recurrent layers
    ("lstm", "nn.LSTM(3, 4, { %s })" % F64, lambda: nn.LSTM(3, 4),
     "return m(A)", lambda m, A: m(A), {"A": T(5, 2, 3)}, "grad"),
    ("lstm_deep", "nn.LSTM(3, 4, { num_layers = 2, bidirectional = true, batch_first = true, %s })" % F64,
     lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
     "return m(A, { B, C })", lambda m, A, B, C: m(A, (B, C)), {"A": T(2, 4, 3), "B": T(4, 2, 4), "C": T(4, 2, 4)}, "grad"),
    ("lstm_unbatched_nobias", "nn.LSTM(3, 4, { bias = false, %s })" % F64, lambda: nn.LSTM(3, 4, bias=False),
     "return m(A, { B, C })", lambda m, A, B, C: m(A, (B, C)), {"A": T(4, 3), "B": T(1, 4), "C": T(1, 4)}, "grad"),
    ("gru", "nn.GRU(3, 4, { num_layers = 2, %s })" % F64, lambda: nn.GRU(3, 4, num_layers=2),
     "return m(A, B)", lambda m, A, B: m(A, B), {"A": T(5, 2, 3), "B": T(2, 2, 4)}, "grad cl"),
    ("gru_bi", "nn.GRU(3, 4, { bidirectional = true, batch_first = true, %s })" % F64,
     lambda: nn.GRU(3, 4, bidirectional=True, batch_first=True), "return m(A)", lambda m, A: m(A), {"A": T(2, 4, 3)}, "grad"),
    ("gru_nobias", "nn.GRU(3, 4, { bias = false, %s })" % F64, lambda: nn.GRU(3, 4, bias=False),
     "return m(A)", lambda m, A: m(A), {"A": T(3, 2, 3)}, ""),
    ("rnn_tanh", "nn.RNN(3, 4, { %s })" % F64, lambda: nn.RNN(3, 4), "return m(A)", lambda m, A: m(A), {"A": T(5, 2, 3)}, "grad"),
    ("rnn_relu_deep", "nn.RNN(3, 4, { nonlinearity = 'relu', num_layers = 2, bidirectional = true, %s })" % F64,
     lambda: nn.RNN(3, 4, nonlinearity="relu", num_layers=2, bidirectional=True),
     "return m(A, B)", lambda m, A, B: m(A, B), {"A": T(4, 2, 3), "B": T(4, 2, 4)}, "grad cl"),
    ("lstm_packed", "nn.LSTM(3, 4, { bidirectional = true, %s })" % F64, lambda: nn.LSTM(3, 4, bidirectional=True),
     "local o, hc = m(P.pack_padded_sequence(A, { 3, 5, 2 }, { enforce_sorted = false }), { B, C })\n"
     "local p, l = P.pad_packed_sequence(o)\nreturn p, l, hc[1], hc[2]",
     lambda m, A, B, C: (lambda o: (*pad_packed_sequence(o[0]), o[1][0], o[1][1]))(
         m(pack_padded_sequence(A, [3, 5, 2], enforce_sorted=False), (B, C))),
     {"A": T(5, 3, 3), "B": T(2, 3, 4), "C": T(2, 3, 4)}, "grad cl"),
    ("gru_packed", "nn.GRU(3, 4, { num_layers = 2, batch_first = true, %s })" % F64,
     lambda: nn.GRU(3, 4, num_layers=2, batch_first=True),
     "local o, h = m(P.pack_padded_sequence(A, tide.long { 4, 3, 3, 1 }, { batch_first = true }))\n"
     "local p, l = P.pad_packed_sequence(o, { batch_first = true, total_length = 5, padding_value = -2 })\nreturn p, l, h",
     lambda m, A: (lambda o: (*pad_packed_sequence(o[0], batch_first=True, total_length=5, padding_value=-2.0), o[1]))(
         m(pack_padded_sequence(A, torch.tensor([4, 3, 3, 1]), batch_first=True))),
     {"A": T(4, 4, 3)}, "grad"),
    ("rnn_pack_sequence", "nn.RNN(3, 4, { %s })" % F64, lambda: nn.RNN(3, 4),
     "local o, h = m(P.pack_sequence({ A, B, C }, { enforce_sorted = false }))\nlocal p, l = P.pad_packed_sequence(o)\nreturn p, l, h",
     lambda m, A, B, C: (lambda o: (*pad_packed_sequence(o[0]), o[1]))(m(pack_sequence([A, B, C], enforce_sorted=False))),
     {"A": T(3, 3), "B": T(1, 3), "C": T(2, 3)}, "grad"),
    ("pad_sequence", None, None, "return P.pad_sequence({ A, B, C }, { batch_first = true, padding_value = -1 })",
     lambda A, B, C: pad_sequence([A, B, C], batch_first=True, padding_value=-1.0),
     {"A": T(3, 2), "B": T(1, 2), "C": T(2, 2)}, "grad"),
    ("pad_sequence_left", None, None, "return P.pad_sequence({ A, B }, { padding_side = 'left' })",
     lambda A, B: pad_sequence([A, B], padding_side="left"), {"A": T(2, 3), "B": T(3, 3)}, "grad"),
    ("lstm_cell", "nn.LSTMCell(3, 4, { %s })" % F64, lambda: nn.LSTMCell(3, 4),
     "return m(A, { B, C })", lambda m, A, B, C: m(A, (B, C)), {"A": T(2, 3), "B": T(2, 4), "C": T(2, 4)}, "grad cl"),
    ("lstm_cell_nobias", "nn.LSTMCell(3, 4, { bias = false, %s })" % F64, lambda: nn.LSTMCell(3, 4, bias=False),
     "return m(A)", lambda m, A: m(A), {"A": T(2, 3)}, ""),
    ("gru_cell", "nn.GRUCell(3, 4, { %s })" % F64, lambda: nn.GRUCell(3, 4),
     "return m(A, B)", lambda m, A, B: m(A, B), {"A": T(2, 3), "B": T(2, 4)}, "grad"),
    ("rnn_cell_relu", "nn.RNNCell(3, 4, { nonlinearity = 'relu', %s })" % F64, lambda: nn.RNNCell(3, 4, nonlinearity="relu"),
     "return m(A)", lambda m, A: m(A), {"A": T(3)}, "grad"),
    # -- attention
    ("mha_self", "nn.MultiheadAttention(8, 2, { %s })" % F64, lambda: nn.MultiheadAttention(8, 2),
     "return m(A, A, A)", lambda m, A: m(A, A, A), {"A": T(5, 2, 8)}, "grad"),
    ("mha_kdim_vdim", "nn.MultiheadAttention(8, 2, { kdim = 6, vdim = 5, batch_first = true, %s })" % F64,
     lambda: nn.MultiheadAttention(8, 2, kdim=6, vdim=5, batch_first=True),
     "return m(A, B, C, { key_padding_mask = D, average_attn_weights = false })",
     lambda m, A, B, C, D: m(A, B, C, key_padding_mask=D, average_attn_weights=False),
     {"A": T(2, 3, 8), "B": T(2, 4, 6), "C": T(2, 4, 5), "D": KPM}, "grad cl"),
    ("mha_masks", "nn.MultiheadAttention(8, 4, { bias = false, %s })" % F64, lambda: nn.MultiheadAttention(8, 4, bias=False),
     "return m(A, B, B, { attn_mask = C, key_padding_mask = D, need_weights = false })",
     lambda m, A, B, C, D: m(A, B, B, attn_mask=C, key_padding_mask=D, need_weights=False),
     {"A": T(3, 2, 8), "B": T(4, 2, 8),
      "C": lit(torch.tensor([[False, True, False, False], [True, False, False, True], [False, False, True, False]])),
      "D": lit(torch.tensor([[0.0, -1.5, 0.25, 0.0], [-0.5, 0.0, 0.0, 1.0]]))}, "grad cl"),
    ("mha_3d_mask", "nn.MultiheadAttention(8, 2, { %s })" % F64, lambda: nn.MultiheadAttention(8, 2),
     "return m(A, A, A, { attn_mask = B })", lambda m, A, B: m(A, A, A, attn_mask=B), {"A": T(3, 2, 8), "B": T(4, 3, 3)}, "grad"),
    ("mha_causal", "nn.MultiheadAttention(8, 2, { batch_first = true, %s })" % F64,
     lambda: nn.MultiheadAttention(8, 2, batch_first=True),
     "return m(A, A, A, { attn_mask = B, is_causal = true, need_weights = false })",
     lambda m, A, B: m(A, A, A, attn_mask=B, is_causal=True, need_weights=False), {"A": T(2, 3, 8), "B": lit(causal(3))}, "grad"),
    ("mha_unbatched", "nn.MultiheadAttention(8, 2, { %s })" % F64, lambda: nn.MultiheadAttention(8, 2),
     "return m(A, B, B, { key_padding_mask = C })", lambda m, A, B, C: m(A, B, B, key_padding_mask=C),
     {"A": T(3, 8), "B": T(4, 8), "C": lit(torch.tensor([False, True, False, False]))}, "grad"),
    # -- transformer
    ("enc_layer", "nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, %s })" % F64,
     lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
     "return m(A, { src_mask = B, src_key_padding_mask = C })",
     lambda m, A, B, C: m(A, src_mask=B, src_key_padding_mask=C),
     {"A": T(4, 2, 8), "B": lit(causal(4)), "C": lit(torch.tensor([[False, False, False, True], [False, False, False, False]]))}, "grad"),
    ("enc_layer_prenorm", "nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, activation = 'gelu', "
     "norm_first = true, batch_first = true, layer_norm_eps = 1e-6, %s })" % F64,
     lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", norm_first=True,
                                        batch_first=True, layer_norm_eps=1e-6),
     "return m(A)", lambda m, A: m(A), {"A": T(2, 4, 8)}, "grad cl"),
    ("encoder", "nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, %s }), 2, "
     "{ norm = nn.LayerNorm(8, { %s }) })" % (F64, F64),
     lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2,
                                   norm=nn.LayerNorm(8), enable_nested_tensor=False),
     "return m(A, { mask = B })", lambda m, A, B: m(A, mask=B), {"A": T(4, 2, 8), "B": lit(causal(4))}, ""),
    ("dec_layer", "nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, %s })" % F64,
     lambda: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
     "return m(A, B, { tgt_mask = C, memory_key_padding_mask = D })",
     lambda m, A, B, C, D: m(A, B, tgt_mask=C, memory_key_padding_mask=D),
     {"A": T(3, 2, 8), "B": T(4, 2, 8), "C": lit(causal(3)), "D": KPM}, "grad cl"),
    ("dec_layer_prenorm", "nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, norm_first = true, "
     "batch_first = true, activation = 'gelu', %s })" % F64,
     lambda: nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, norm_first=True, batch_first=True,
                                        activation="gelu"),
     "return m(A, B, { tgt_mask = C, tgt_is_causal = true })", lambda m, A, B, C: m(A, B, tgt_mask=C, tgt_is_causal=True),
     {"A": T(2, 3, 8), "B": T(2, 4, 8), "C": lit(causal(3))}, "grad"),
    ("decoder", "nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, %s }), 2, "
     "{ norm = nn.LayerNorm(8, { %s }) })" % (F64, F64),
     lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0), 2, norm=nn.LayerNorm(8)),
     "return m(A, B, { tgt_mask = C })", lambda m, A, B, C: m(A, B, tgt_mask=C),
     {"A": T(3, 2, 8), "B": T(4, 2, 8), "C": lit(causal(3))}, ""),
    ("transformer", "nn.Transformer({ d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 1, "
     "dim_feedforward = 16, dropout = 0, %s })" % F64,
     lambda: nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0),
     "return m(A, B, { tgt_mask = C, src_key_padding_mask = D, memory_key_padding_mask = D })",
     lambda m, A, B, C, D: m(A, B, tgt_mask=C, src_key_padding_mask=D, memory_key_padding_mask=D),
     {"A": T(4, 2, 8), "B": T(3, 2, 8), "C": lit(causal(3)), "D": KPM}, ""),
    ("square_mask", None, None, "return nn.Transformer.generate_square_subsequent_mask(4, { dtype = tide.float64 })",
     lambda: nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64), {}, ""),
]

def lua_num(x):
    if isinstance(x, (bool, np.bool_)): return "true" if x else "false"
    x = float(x)
    if math.isnan(x): return "0/0"
    if math.isinf(x): return "math.huge" if x > 0 else "-math.huge"
    if x == int(x) and abs(x) < 2 ** 53: return str(int(x))
    return repr(x)

DT = {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64", torch.bool: "bool"}

def lua_tensor(t):
    t = t.detach()
    data = ", ".join(lua_num(x) for x in t.reshape(-1).tolist())
    return '{ shape = { %s }, dtype = "%s", data = { %s } }' % (", ".join(str(s) for s in t.shape), DT[t.dtype], data)

def flat(r):
    if r is None: return []
    if isinstance(r, (tuple, list)): return [x for y in r for x in flat(y)]
    return [r]

def q(s): return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

out = ["-- generated by spec/ref/layers_reference.py with torch %s; do not edit" % torch.__version__.split("+")[0], "return {"]
for i, (name, lua_mod, build, body, fn, inputs, flags) in enumerate(CASES):
    rng = np.random.default_rng(2000 + i)
    torch.manual_seed(i)
    ts, parts = [], []
    for key in sorted(inputs):
        kind, v = inputs[key]
        t = v if kind == "lit" else torch.tensor(np.round(rng.standard_normal(v), 3))
        ts.append(t)
        parts.append("%s = %s" % (key, lua_tensor(t)))
    params = []
    if build is not None:
        m = build()
        m.train()
        with torch.no_grad():
            for pname, p in m.named_parameters():
                p.copy_(torch.tensor(np.round(rng.uniform(-0.6, 0.6, tuple(p.shape)), 3)))
        for k, v in m.state_dict().items():
            params.append('{ %s, %s }' % (q(k), lua_tensor(v)))
        r = fn(m, *ts)
    else:
        r = fn(*ts)
    outs = flat(r)
    out.append("  { name = %s, module = %s, body = %s, flags = %s,\n    params = { %s },\n    inputs = { %s },\n    outs = { %s } }," % (
        q(name), q(lua_mod) if lua_mod else "nil", q(body), q(flags), ", ".join(params), ", ".join(parts),
        ", ".join(lua_tensor(o) for o in outs)))
out.append("}")
with open(os.path.join(HERE, "layers_reference.lua"), "w") as f:
    f.write("\n".join(out) + "\n")

# -- the safetensors file: float32 modules with PyTorch's own initialization
torch.set_default_dtype(torch.float32)
torch.manual_seed(17)
tensors = {}
def add(prefix, m, **io):
    for k, v in m.state_dict().items(): tensors[prefix + "." + k] = v
    for k, v in io.items(): tensors[prefix + "." + k] = v
lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True)
x = torch.randn(3, 5, 4)
o, (h, c) = lstm(x)
add("lstm", lstm, input=x, output=o, h_n=h, c_n=c)
gru = nn.GRU(4, 6, num_layers=2)
x = torch.randn(5, 3, 4)
o, h = gru(x)
add("gru", gru, input=x, output=o, h_n=h)
mha = nn.MultiheadAttention(8, 2, batch_first=True)
x = torch.randn(2, 5, 8)
kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
o, w = mha(x, x, x, key_padding_mask=kpm)
add("mha", mha, input=x, key_padding_mask=kpm, output=o, weights=w)
enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=32, batch_first=True)
enc.eval()
x = torch.randn(2, 5, 8)
o = enc(x, src_mask=causal(5).float())
add("enc", enc, input=x, output=o)

ST = {torch.float32: "F32", torch.bool: "BOOL"}
header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for k in sorted(tensors):
    t = tensors[k].detach().contiguous()
    b = t.numpy().tobytes()
    header[k] = {"dtype": ST[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open(os.path.join(HERE, "layers_torch.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
print("wrote %d cases and %d tensors (%d bytes of data)" % (len(CASES), len(tensors), off))
