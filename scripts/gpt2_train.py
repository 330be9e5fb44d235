#!/usr/bin/python3
"""GPT-2 124M training in PyTorch, for `tern train`'s checks and benchmarks: scripts/gen_models.py's GPT (vocab
50,257, width 768, 12 heads, 12 layers) with GPT-2's initialisation (weights N(0, 0.02)), tied embeddings, one
sequence per step, next-token cross-entropy, AdamW.

    /usr/bin/python3 scripts/gpt2_train.py export OUTDIR SEQ [ROWS]     model (ONNX) and token data
    /usr/bin/python3 scripts/gpt2_train.py ref OUTDIR SEQ STEPS LR      PyTorch's losses of the same run (ref.json)
    /usr/bin/python3 scripts/gpt2_train.py time SEQ [RUNS]              best training-step time, best configuration
    /usr/bin/python3 scripts/gpt2_train.py time SEQ RUNS --threads T    one configuration (environment set)

export writes OUTDIR/gpt2.onnx (do_constant_folding=False keeps the tied output projection one initializer;
LayerNorm parameters are perturbed so that the exporter does not merge the equal ones into one shared tensor),
OUTDIR/x.npy and OUTDIR/y.npy (ROWS seeded random token rows, default 4, and their next tokens). ref replays
`tern train --batch 1 --optimizer adamw --lr LR --clip-norm 1` on them (weight decay 0.01, as tern's default) and
writes the per-step losses. time measures one training step (forward, backward, AdamW step) at batch 1 the way
scripts/torch_time.py measures inference: best of RUNS after a warm-up, OPENBLAS_CORETYPE set to the kernel of
this CPU for the PyTorch process alone, torch at 1 and all threads with OpenBLAS at 1 and all, the fastest kept;
it prints seconds, torch_openblas_core, torch_threads, torch_blas_threads."""
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
V, D, H, L = 50257, 768, 12, 12


def model(seq):
    import torch
    from gen_models import GPT
    torch.manual_seed(0)
    m = GPT(V, D, H, L, seq)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif "ln" in name:
                p.add_(torch.randn_like(p) * 0.02)
    return m


def export(out, seq, rows):
    import torch
    m = model(seq)
    torch.onnx.export(m, torch.zeros(1, seq, dtype=torch.int64), os.path.join(out, "gpt2.onnx"),
                      input_names=["input_ids"], output_names=["logits"], opset_version=14,
                      do_constant_folding=False)
    rng = np.random.default_rng(7)
    toks = rng.integers(0, V, rows * seq + 1)
    toks[::5] = 1234  # a repeated token: its rows of the embedding gradient are summed
    np.save(os.path.join(out, "x.npy"), toks[:-1].reshape(rows, seq).astype(np.int64))
    np.save(os.path.join(out, "y.npy"), toks[1:].reshape(rows, seq).astype(np.int64))


def step_fn(m, opt):
    import torch
    F = torch.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return float(loss)
    return step


def ref(out, seq, steps, lr):
    import torch
    torch.set_num_threads(1)
    m = model(seq)
    opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01, foreach=False)
    step = step_fn(m, opt)
    x, y = np.load(os.path.join(out, "x.npy")), np.load(os.path.join(out, "y.npy"))
    losses = [step(torch.from_numpy(x[s % len(x)][None]), torch.from_numpy(y[s % len(y)][None]))
              for s in range(steps)]
    json.dump({"losses": losses}, open(os.path.join(out, "ref.json"), "w"))


def time_one(seq, runs, threads):
    import torch
    torch.set_num_threads(threads)
    m = model(seq)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    step = step_fn(m, opt)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, V, (1, seq)))
    y = torch.from_numpy(rng.integers(0, V, (1, seq)))
    step(x, y)
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        step(x, y)
        best = min(best, time.perf_counter() - t)
    return best


def time_search(seq, runs):
    import torch_time
    core, n = torch_time.cpu_core(), os.cpu_count() or 1
    best = None
    for t, b in sorted({(t, b) for t in (1, n) for b in (1, n)}):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(b), OMP_NUM_THREADS=str(t))
        if core:
            env["OPENBLAS_CORETYPE"] = core
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "time", str(seq), str(runs), "--threads",
                            str(t)], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            continue
        res = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
        if best is None or float(res["seconds"]) < float(best["seconds"]):
            best = res
    if best is None:
        sys.exit(1)
    for k in ("seconds", "torch_openblas_core", "torch_threads", "torch_blas_threads"):
        print(f"{k}: {best[k]}")


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if a[0] == "export":
        export(a[1], int(a[2]), int(a[3]) if len(a) > 3 else 4)
    elif a[0] == "ref":
        ref(a[1], int(a[2]), int(a[3]), float(a[4]))
    elif a[0] == "time" and "--threads" in a:
        import torch_time
        t = int(a[a.index("--threads") + 1])
        print(f"seconds: {time_one(int(a[1]), int(a[2]), t):.6f}")
        print(f"torch_openblas_core: {torch_time.openblas_corename()}")
        print(f"torch_threads: {t}")
        print(f"torch_blas_threads: {os.environ.get('OPENBLAS_NUM_THREADS', '?')}")
    elif a[0] == "time":
        time_search(int(a[1]), int(a[2]) if len(a) > 2 else 3)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
