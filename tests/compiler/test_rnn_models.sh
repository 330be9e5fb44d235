#!/usr/bin/env bash
# Recurrent models from PyTorch (random weights, seeded), compiled with FP32 matmuls and run on a simulated trn1 core
# with `tern run`; every output's cosine similarity with PyTorch's must be at least 0.9999 (and max |diff| is
# printed). LSTM/GRU/RNN expand into MatMul/Slice/elementwise nodes (src/graph/expand_rnn.c):
#  - a 2-layer LSTM with initial states as inputs (outputs y, h_n, c_n), a bidirectional batch-first LSTM,
#    a 2-layer bidirectional GRU, a bidirectional ReLU RNN;
#  - an embedding followed by an LSTM and by a GRU, then a linear head (token ids in, logits out);
#  - sequence lengths: torch does not export packed sequences, so an ONNX LSTM and GRU node with sequence_lens
#    (forward and bidirectional) is built with torch's weights in ONNX's gate order and compared with torch's
#    pack_padded_sequence run: outputs past a row's length are zero, h_n/c_n are each row's last valid state, and
#    the reverse direction starts at each row's own last element;
#  - ReverseSequence (an ONNX node) time- and batch-major with run-time lengths 6, 3, 1, 0, against numpy.
# A node with an unknown activation is refused, naming the node and the activation. Gets build/tern as $1.
set -u
TERN=${1:?usage: test_rnn_models.sh path/to/tern}
PY=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"

$PY - "$tmp" <<'PY' >"$tmp/gen.log" 2>&1 || { echo "NOT OK: cannot make the models"; cat "$tmp/gen.log"; exit 1; }
import sys, warnings, numpy as np, torch, torch.nn as nn, onnx
from onnx import helper, numpy_helper, TensorProto as TP
warnings.filterwarnings("ignore")
d = sys.argv[1]
torch.manual_seed(0)
def export(name, model, args, in_names, out_names):
    model.eval()
    with torch.no_grad():
        outs = model(*args)
    outs = outs if isinstance(outs, tuple) else (outs,)
    flat = []
    for o in outs:
        flat += list(o) if isinstance(o, tuple) else [o]
    torch.onnx.export(model, args, f"{d}/{name}.onnx", input_names=in_names, output_names=out_names, opset_version=14)
    for n, a in zip(in_names, args):
        np.save(f"{d}/{name}.{n}.npy", a.numpy())
    for n, o in zip(out_names, flat):
        np.save(f"{d}/{name}.ref.{n}.npy", o.numpy())
    print(f"{name}|{' '.join(in_names)}|{' '.join(out_names)}")

class Lstm2(nn.Module):
    def __init__(s):
        super().__init__(); s.rnn = nn.LSTM(8, 16, num_layers=2)
    def forward(s, x, h0, c0):
        y, (h, c) = s.rnn(x, (h0, c0)); return y, h, c
export("lstm2", Lstm2(), (torch.randn(12, 3, 8), torch.randn(2, 3, 16), torch.randn(2, 3, 16)), ["x", "h0", "c0"],
       ["y", "hn", "cn"])
class LstmBi(nn.Module):
    def __init__(s):
        super().__init__(); s.rnn = nn.LSTM(8, 16, bidirectional=True, batch_first=True)
    def forward(s, x):
        y, (h, c) = s.rnn(x); return y, h, c
export("lstm_bi", LstmBi(), (torch.randn(3, 10, 8),), ["x"], ["y", "hn", "cn"])
class GruBi(nn.Module):
    def __init__(s):
        super().__init__(); s.rnn = nn.GRU(8, 16, num_layers=2, bidirectional=True)
    def forward(s, x, h0):
        y, h = s.rnn(x, h0); return y, h
export("gru_bi", GruBi(), (torch.randn(10, 3, 8), torch.randn(4, 3, 16)), ["x", "h0"], ["y", "hn"])
class RnnBi(nn.Module):
    def __init__(s):
        super().__init__(); s.rnn = nn.RNN(8, 16, nonlinearity="relu", bidirectional=True)
    def forward(s, x):
        y, h = s.rnn(x); return y, h
export("rnn_bi", RnnBi(), (torch.randn(7, 2, 8),), ["x"], ["y", "hn"])
class EmbRnn(nn.Module):
    def __init__(s, cell):
        super().__init__(); s.emb = nn.Embedding(50, 12); s.rnn = cell(12, 20, batch_first=True); s.head = nn.Linear(20, 5)
    def forward(s, ids):
        y, _ = s.rnn(s.emb(ids)); return s.head(y)
ids = torch.randint(0, 50, (2, 9))
export("emb_lstm", EmbRnn(nn.LSTM), (ids,), ["ids"], ["logits"])
export("emb_gru", EmbRnn(nn.GRU), (ids,), ["ids"], ["logits"])

# sequence_lens: ONNX nodes with torch's weights, against torch's packed-sequence run
def onnx_gates(w, kind, H):
    # torch LSTM rows i,f,g,o -> ONNX i,o,f,c; torch GRU rows r,z,n -> ONNX z,r,h
    p = w.reshape(-1, H, *w.shape[1:])
    p = p[[0, 3, 1, 2]] if kind == "LSTM" else p[[1, 0, 2]]
    return p.reshape(w.shape)
for kind in ["LSTM", "GRU"]:
    for bi in [False, True]:
        I, H, T, B = 6, 10, 8, 4
        cell = (nn.LSTM if kind == "LSTM" else nn.GRU)(I, H, bidirectional=bi)
        lens = torch.tensor([8, 5, 3, 1])
        x = torch.randn(T, B, I)
        for t in range(T): # padding past each length is garbage the op must ignore
            x[t, lens <= t] = 100.0
        with torch.no_grad():
            packed = nn.utils.rnn.pack_padded_sequence(x, lens, enforce_sorted=True)
            out = cell(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(out[0], total_length=T)
            hn = out[1][0] if kind == "LSTM" else out[1]
        nd = 2 if bi else 1
        sfx = ["", "_reverse"][:nd]
        W = np.stack([onnx_gates(getattr(cell, "weight_ih_l0" + s).detach().numpy(), kind, H) for s in sfx])
        R = np.stack([onnx_gates(getattr(cell, "weight_hh_l0" + s).detach().numpy(), kind, H) for s in sfx])
        Bb = np.stack([np.concatenate([onnx_gates(getattr(cell, "bias_ih_l0" + s).detach().numpy(), kind, H),
                                       onnx_gates(getattr(cell, "bias_hh_l0" + s).detach().numpy(), kind, H)])
                       for s in sfx])
        attrs = dict(hidden_size=H, direction="bidirectional" if bi else "forward")
        if kind == "GRU":
            attrs["linear_before_reset"] = 1
        outs = ["y", "hn"]
        node = helper.make_node(kind, ["x", "W", "R", "B", "lens"], outs, **attrs)
        inits = [numpy_helper.from_array(a, n) for a, n in [(W, "W"), (R, "R"), (Bb, "B")]]
        g = helper.make_graph([node], "seq", [helper.make_tensor_value_info("x", TP.FLOAT, [T, B, I]),
                                              helper.make_tensor_value_info("lens", TP.INT32, [B])],
                              [helper.make_tensor_value_info(o, TP.FLOAT, None) for o in outs], inits)
        name = f"seq_{kind.lower()}{'_bi' if bi else ''}"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/{name}.onnx")
        np.save(f"{d}/{name}.x.npy", x.numpy())
        np.save(f"{d}/{name}.lens.npy", lens.numpy().astype(np.int32))
        # ONNX Y is [T, dirs, B, H]; torch's padded output is [T, B, dirs*H]
        np.save(f"{d}/{name}.ref.y.npy", y.numpy().reshape(T, B, nd, H).transpose(0, 2, 1, 3))
        np.save(f"{d}/{name}.ref.hn.npy", hn.numpy())
        print(f"{name}|x lens|y hn")
# ReverseSequence (ONNX nodes; torch has no such op) against numpy: time-major and batch-major, run-time lengths
rng = np.random.default_rng(3)
for name, ta, ba, shape in [("revseq_time", 0, 1, (6, 4, 5)), ("revseq_batch", 1, 0, (4, 6, 3, 2))]:
    x = rng.standard_normal(shape).astype(np.float32)
    lens = np.array([6, 3, 1, 0], np.int64)
    ref = x.copy()
    for bi, L in enumerate(lens):
        src = x[:, bi] if ta == 0 else x[bi]
        dst = ref[:, bi] if ta == 0 else ref[bi]
        dst[:L] = src[:L][::-1]
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], time_axis=ta, batch_axis=ba)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TP.FLOAT, shape),
                                         helper.make_tensor_value_info("lens", TP.INT64, [4])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/{name}.onnx")
    np.save(f"{d}/{name}.x.npy", x)
    np.save(f"{d}/{name}.lens.npy", lens)
    np.save(f"{d}/{name}.ref.y.npy", ref)
    print(f"{name}|x lens|y")
# an activation tern does not know
node = helper.make_node("RNN", ["x", "W", "R"], ["y"], hidden_size=4, activations=["Swish"])
g = helper.make_graph([node], "bad", [helper.make_tensor_value_info("x", TP.FLOAT, [3, 1, 2])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                      [numpy_helper.from_array(np.ones((1, 4, 2), np.float32), "W"),
                       numpy_helper.from_array(np.ones((1, 4, 4), np.float32), "R")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), f"{d}/bad_act.onnx")
PY

# compares every listed output of model NAME (run outputs in $tmp/o_NAME) with torch's
compare() {
    local o good=1
    for o in $2; do
        close_to_ref "$1.$o" "$tmp/$1.ref.$o.npy" "$tmp/o_$1/$o.npy" || good=0
    done
    if [ "$good" -eq 1 ]; then ok; else bad "$1 differs from PyTorch"; fi
}

while IFS='|' read -r name ins outs; do
    args=()
    for i in $ins; do args+=(--input "$i=$tmp/$name.$i.npy"); done
    expect 0 "$TERN" run "$tmp/$name.onnx" --dtype fp32 "${args[@]}" --output-dir "$tmp/o_$name"
    compare "$name" "$outs"
done < <(grep '^[a-z0-9_]*|' "$tmp/gen.log")

# an unknown activation: refused, naming the node and the activation
expect 1 "$TERN" run "$tmp/bad_act.onnx"
contains "$tmp/err" 'RNN'
contains "$tmp/err" 'activation "Swish" is not supported'

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
