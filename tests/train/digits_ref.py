"""Reference run for tests/train/test_train_digits.sh: the scikit-learn digits data set (8x8 images, 10 classes,
shipped by Debian's python3-sklearn), a small MLP in PyTorch exported to ONNX with its initial weights, and the
same training run in PyTorch fp32 (same initialisation, data order, optimizer and hyper-parameters as the tern
run): the per-step losses and the final test accuracy, written next to the model for the shell test to compare.

usage: digits_ref.py OUTDIR STEPS BATCH OPTIMIZER LR [extra]
extra: comma-separated: gelu-ln or cnn (the model; else the ReLU/Tanh MLP), linear:W or cosine:W (the learning-rate
schedule with W warm-up steps, docs/training.md), accum:K (K micro-batches of BATCH rows per step), ddp:N (PyTorch
DistributedDataParallel's default simulated with N replicas: each micro-batch split into N consecutive chunks, replica
r runs chunk r (BatchNorm with its own chunk's statistics), the gradients averaged, replica 0's buffers kept and
broadcast, as DDP's broadcast_buffers). OPTIMIZER lamb is written out here (torch.optim has none)."""
import copy
import math
import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from digits_models import MaskDropout, build, tern_dropout_mask  # noqa: E402 (next to this file)
from sklearn.datasets import load_digits


out, steps, batch, opt_name, lr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
extras = (sys.argv[6] if len(sys.argv) > 6 else "").split(",")
extra = next((e for e in extras if e in ("gelu-ln", "cnn", "dropout", "cnn-bn")), "")
sched, warm, accum, ddp = "constant", 0, 1, 1
for e in extras:
    if e.startswith("accum:"):
        accum = int(e.split(":")[1])
    elif e.startswith("ddp:"):
        ddp = int(e.split(":")[1])
    elif ":" in e:
        sched, warm = e.split(":")[0], int(e.split(":")[1])


def lr_at(t):  # t is 1-based, as tern_train_lr
    if warm > 0 and t < warm:
        return lr * t / warm
    if sched == "constant" or steps <= warm:
        return lr
    frac = min(1.0, (t - warm) / (steps - warm))
    return lr * (1 - frac) if sched == "linear" else lr * 0.5 * (1 + math.cos(math.pi * frac))


torch.manual_seed(0)
torch.set_num_threads(1)

d = load_digits()
x = (d.data / 16.0).astype(np.float32)
y = d.target.astype(np.int64)
# a fixed split: every fifth sample is a test sample
test = np.arange(len(x)) % 5 == 0
xtr, ytr, xte, yte = x[~test], y[~test], x[test], y[test]
np.save(f"{out}/x.npy", xtr)
np.save(f"{out}/y.npy", ytr)
np.save(f"{out}/x_test.npy", xte)
np.save(f"{out}/y_test.npy", yte)

model = build(extra)
torch.onnx.export(model, torch.zeros(batch, 64), f"{out}/mlp.onnx", input_names=["pixels"], output_names=["logits"],
                  dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING if extra in ("dropout", "cnn-bn")
                  else torch.onnx.TrainingMode.EVAL)
if extra == "cnn-bn":  # BatchNorm exported in training mode; the export's trace ran a forward: start from its stats
    import onnx
    from onnx import numpy_helper
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(f"{out}/mlp.onnx").graph.initializer}
    with torch.no_grad():
        for k, b in model.named_buffers():
            if k in inits:
                b.copy_(torch.from_numpy(inits[k].copy()))
if extra == "dropout":  # the same run with tern's masks (seed 0, the one Dropout: k = 0)
    model[2] = MaskDropout()
assert batch % ddp == 0 and not (ddp > 1 and extra == "dropout")
replicas = [model] + [copy.deepcopy(model) for _ in range(ddp - 1)]  # ddp:N: replica 0 is the model

if opt_name == "adamw":
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, foreach=False)
elif opt_name == "adam":
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=False)
elif opt_name == "lamb":
    opt = None
    lamb_state = [(torch.zeros_like(p), torch.zeros_like(p)) for p in model.parameters()]
else:
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-4, foreach=False)
losses, norms = [], []
n, pos = len(xtr), 0
for s in range(steps):
    model.zero_grad()
    loss = 0.0
    for mb in range(accum):  # micro-batches of `batch` consecutive rows; loss / accum each, gradients summed
        idx = [(pos + b) % n for b in range(batch)]  # consecutive rows, wrapping at the end (tern train's order)
        pos = (pos + batch) % n
        xb, yb = torch.from_numpy(xtr[idx]), torch.from_numpy(ytr[idx])
        if extra == "dropout":
            model[2].mask = torch.from_numpy(tern_dropout_mask(0, s + 1, 0, 0.2, batch * 64).reshape(batch, 64))
        if ddp > 1:  # DDP: replica r gets rank 0's parameters and buffers, runs chunk r; the mean of the local losses
            c = batch // ddp
            lmb = 0.0
            for r, rep in enumerate(replicas):
                if r > 0:
                    with torch.no_grad():
                        for q, p in zip(rep.parameters(), model.parameters()):
                            q.copy_(p)
                        for q, p in zip(rep.buffers(), model.buffers()):
                            q.copy_(p)
                lr_ = torch.nn.functional.cross_entropy(rep(xb[r * c:(r + 1) * c]), yb[r * c:(r + 1) * c])
                (lr_ / accum).backward()
                lmb += float(lr_) / ddp
            loss += lmb / accum
            continue
        lmb = torch.nn.functional.cross_entropy(model(xb), yb, label_smoothing=0.1 if extra == "gelu-ln" else 0.0)
        (lmb / accum).backward()
        loss += float(lmb) / accum
    if ddp > 1:  # the all-reduce (DDP's, after the local accumulation): the replicas' gradients averaged, on replica 0
        with torch.no_grad():
            grads = [[p.grad.clone() for p in rep.parameters()] for rep in replicas]
            for k, p in enumerate(model.parameters()):
                p.grad = sum(g[k] for g in grads) / ddp
            for rep in replicas[1:]:
                rep.zero_grad()
    norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
    step_lr = lr_at(s + 1)
    if opt is not None:
        for group in opt.param_groups:
            group["lr"] = step_lr
        opt.step()
    else:  # LAMB, the operation order of tern's update
        t = s + 1
        bc1, bc2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        with torch.no_grad():
            for p, (m, v) in zip(model.parameters(), lamb_state):
                g = p.grad
                m.mul_(0.9).add_(g * (1 - 0.9))
                v.mul_(0.999).add_((g * g) * (1 - 0.999))
                r = (m / bc1) / (v.sqrt() / math.sqrt(bc2) + 1e-8) + p * 0.01
                wn, rn = p.pow(2).sum().sqrt(), r.pow(2).sum().sqrt()
                trust = wn / rn if float(wn * rn) > 0 else torch.tensor(1.0)
                p.sub_(r * (trust * step_lr))
    losses.append(float(loss))
if extra == "dropout":
    model[2] = torch.nn.Identity()  # inference
bn_stats = {k: b.numpy().reshape(-1).tolist() for k, b in model.named_buffers() if "running" in k}
model.eval()  # BatchNorm: the running statistics (the trained ONNX's BatchNormalization is in inference mode)
with torch.no_grad():
    acc = float((model(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean())
json.dump({"losses": losses, "grad_norms": norms, "test_accuracy": acc, "bn_stats": bn_stats}, open(f"{out}/ref.json", "w"))
print(f"pytorch: loss {losses[0]:.6f} -> {losses[-1]:.6f}, test accuracy {acc * 100:.2f}%")
