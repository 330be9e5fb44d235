#!/usr/bin/python3
"""IEEE special values through every elementwise op and activation tern supports, on the device and in the host
evaluator, checked against numpy expressions of the ONNX operator definitions.

    /usr/bin/python3 scripts/gen_special_values.py gen DIR     # models, inputs, expected outputs
    /usr/bin/python3 scripts/gen_special_values.py check DIR   # compares DIR/dev/*.npy and DIR/host/*.npy

`gen` writes two models with the same nodes, one output per op instance:
  dev.onnx   reads graph inputs x (unary ops) and a, b (binary ops: every pair of the test values), so
             `tern run dev.onnx --dtype fp32` computes every node on the simulated device;
  host.onnx  holds x, a, b as initializers, so tern's constant folding computes every node with the host
             evaluator (src/graph/eval*.c) and `tern run host.onnx` writes the folded values.
and x.npy, a.npy, b.npy, and expect.npz with the reference of each output.

The test values: +-0, +-inf, NaN (both signs), the smallest and largest fp32 subnormals, the smallest normal, the
largest finite values, values next to each op's thresholds and ordinary values.

Comparison rules, per op (the class is printed with every mismatch):
  exact   bit for bit: NaN as NaN-ness (any payload), zeros with their sign. The op is IEEE-exact in fp32
          (negation, abs, comparisons, select, min/max, +-*/ with one rounding, floor/ceil/round).
  exact0  bit for bit, but the sign of a zero result is not checked: the ONNX definition is a max/min of
          values that compare equal (max(0, -0)), where numpy's and IEEE 754's choices differ.
  ulpN    transcendental ops: the reference is the function evaluated in float64 and rounded to fp32; a finite
          result may differ by N units in the last place of the reference or by the op's absolute tolerance
          (stated in OPS below; needed where tern's lowering is a documented composition that cancels, e.g.
          sinh from exp, or reduces the argument with an fp32 pi); inf, -inf and NaN must match exactly, and
          a reference of +-0 needs a result within the absolute tolerance.
A "domain" column lists inputs for which the device is documented to approximate (ScalarE's sin on large
arguments); those inputs are compared on the host only.
"""
import os
import sys

import numpy as np

F32 = np.float32


def f32(v):
    return np.array(v, dtype=np.float32)


def bits(u):
    return np.array([u], dtype=np.uint32).view(np.float32)[0]


MIN_SUB, MAX_SUB, MIN_NORM, MAX_F = bits(1), bits(0x007FFFFF), bits(0x00800000), bits(0x7F7FFFFF)
NEG_NAN = bits(0xFFC00000)

X = f32([0.0, -0.0, np.inf, -np.inf, np.nan, NEG_NAN,
         MIN_SUB, -MIN_SUB, MAX_SUB, -MAX_SUB, MIN_NORM, -MIN_NORM, MAX_F, -MAX_F,
         0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 2.5, -2.5, 0.3, -0.3, 0.999, -0.999, 3.0, -3.0,
         10.0, -10.0, 100.0, -100.0, 1e-3, -1e-3, 1e30, -1e30, 88.5, -88.5, 1e-20, 0.6, 2.0])
# binary ops: every pair of a subset (the specials and a few ordinary values)
PAIR = f32([0.0, -0.0, np.inf, -np.inf, np.nan, MIN_SUB, -MAX_SUB, MAX_F, -MAX_F, 0.5, -1.0, 1.0, 2.0, -2.5, 3.0])
A = np.repeat(PAIR, len(PAIR)).astype(F32)
B = np.tile(PAIR, len(PAIR)).astype(F32)

err_state = dict(all="ignore")


def d64(f):
    """A float64 evaluation of a reference, rounded once to fp32."""
    def g(x):
        with np.errstate(**err_state):
            return f(x.astype(np.float64)).astype(F32)
    return g


def e32(f):
    """A reference evaluated in fp32 numpy arithmetic (the IEEE-exact ops)."""
    def g(*xs):
        with np.errstate(**err_state):
            return np.asarray(f(*xs))
    return g


def where(c, a, b):
    return np.where(c, a, b)


def softplus64(x):
    return np.logaddexp(0.0, x)


def gelu64(x):  # 0.5 x (1 + erf(x / sqrt 2)), written with erfc so that it does not cancel for x << 0
    from math import erfc
    return 0.5 * x * np.vectorize(lambda v: erfc(-v / np.sqrt(2.0)) if not np.isnan(v) else np.nan,
                                  otypes=[np.float64])(x)


def gelu_tanh64(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def erf64(x):
    from math import erf
    return np.vectorize(lambda v: erf(v) if not np.isnan(v) else np.nan, otypes=[np.float64])(x)


def round_half_even(x):
    return np.round(x)  # numpy rounds half to even, as ONNX Round does


def hardsigmoid(x, a, b):
    return np.maximum(F32(0), np.minimum(F32(1), x * F32(a) + F32(b)))


# (name, op, attrs, class, reference, abs tolerance, inputs the device is documented to approximate)
# References follow the ONNX operator definitions; where a definition is piecewise, the last branch
# ("otherwise" / "for x >= 0") is np.where's else branch, so NaN takes it, as in ONNX's own function bodies.
# Sin, Cos and Tan on the device: ScalarE's sin is specified on [-pi, pi] only, so Cos and Tan reduce the argument
# with an fp32 2 pi first (src/compiler/lower_elementwise.c sin_any); the reduced argument's error grows as |x| 2^-24,
# so finite inputs beyond |x| = 10 are compared on the host only (inf and NaN are still checked on the device).
LARGE = lambda x: np.isfinite(x) & (np.abs(x) > 10.0)  # noqa: E731
UNARY = [
    ("neg", "Neg", {}, "exact", e32(lambda x: -x), 0, None),
    ("abs", "Abs", {}, "exact", e32(np.abs), 0, None),
    ("relu", "Relu", {}, "exact0", e32(lambda x: np.maximum(F32(0), x)), 0, None),
    ("identity", "Identity", {}, "exact", e32(lambda x: x), 0, None),
    ("sign", "Sign", {}, "exact", e32(np.sign), 0, None),
    ("floor", "Floor", {}, "exact", e32(np.floor), 0, None),
    ("ceil", "Ceil", {}, "exact", e32(np.ceil), 0, None),
    ("round", "Round", {}, "exact", e32(round_half_even), 0, None),
    ("clip", "Clip", {}, "exact0", e32(lambda x: np.minimum(np.maximum(x, F32(-1)), F32(2))), 0,
     None),
    ("leakyrelu", "LeakyRelu", {}, "exact", e32(lambda x: where(x < 0, F32(0.01) * x, x)), 0, None),
    ("leakyrelu_a", "LeakyRelu", {"alpha": 0.25}, "exact", e32(lambda x: where(x < 0, F32(0.25) * x, x)), 0, None),
    ("thresholdedrelu", "ThresholdedRelu", {}, "exact", e32(lambda x: where(x > F32(1), x, F32(0))), 0, None),
    ("thresholdedrelu_a", "ThresholdedRelu", {"alpha": -0.5}, "exact",
     e32(lambda x: where(x > F32(-0.5), x, F32(0))), 0, None),
    ("shrink", "Shrink", {}, "exact",
     e32(lambda x: where(x < F32(-0.5), x + F32(0), where(x > F32(0.5), x - F32(0), F32(0)))), 0, None),
    ("shrink_b", "Shrink", {"lambd": 1.5, "bias": 1.0}, "exact",
     e32(lambda x: where(x < F32(-1.5), x + F32(1), where(x > F32(1.5), x - F32(1), F32(0)))), 0, None),
    ("hardsigmoid", "HardSigmoid", {}, "exact0", e32(lambda x: hardsigmoid(x, 0.2, 0.5)), 0, None),
    ("hardsigmoid_ab", "HardSigmoid", {"alpha": 0.5, "beta": 0.6}, "exact0", e32(lambda x: hardsigmoid(x, 0.5, 0.6)),
     0, None),
    ("hardswish", "HardSwish", {}, "exact0", e32(lambda x: x * hardsigmoid(x, 1 / 6, 0.5)), 0, None),
    ("isnan", "IsNaN", {}, "exact", e32(np.isnan), 0, None),
    ("isinf", "IsInf", {}, "exact", e32(np.isinf), 0, None),
    ("isinf_pos", "IsInf", {"detect_negative": 0}, "exact", e32(lambda x: np.isposinf(x)), 0, None),
    ("isinf_neg", "IsInf", {"detect_positive": 0}, "exact", e32(lambda x: np.isneginf(x)), 0, None),
    ("softsign", "Softsign", {}, "ulp1", d64(lambda x: x / (1 + np.abs(x))), 0, None),
    ("sqrt", "Sqrt", {}, "ulp1", d64(np.sqrt), 0, None),
    ("reciprocal", "Reciprocal", {}, "ulp1", d64(lambda x: 1 / x), 0, None),
    ("exp", "Exp", {}, "ulp2", d64(np.exp), 0, None),
    ("log", "Log", {}, "ulp2", d64(np.log), 0, None),
    ("tanh", "Tanh", {}, "ulp2", d64(np.tanh), 0, None),
    ("sigmoid", "Sigmoid", {}, "ulp2", d64(lambda x: 1 / (1 + np.exp(-x))), 0, None),
    ("erf", "Erf", {}, "ulp2", d64(erf64), 0, None),
    ("softplus", "Softplus", {}, "ulp2", d64(softplus64), 0, None),
    ("gelu", "Gelu", {}, "ulp4", d64(gelu64), 1e-30, None),
    ("gelu_tanh", "Gelu", {"approximate": "tanh"}, "ulp4", d64(gelu_tanh64), 1e-30, None),
    ("elu", "Elu", {}, "ulp4", d64(lambda x: where(x < 0, 1.0 * (np.exp(x) - 1), x)), 1e-7, None),
    ("elu_a", "Elu", {"alpha": 0.5}, "ulp4", d64(lambda x: where(x < 0, 0.5 * (np.exp(x) - 1), x)), 1e-7, None),
    ("celu", "Celu", {}, "ulp4",
     d64(lambda x: np.maximum(0.0, x) + np.minimum(0.0, 1.0 * (np.exp(x / 1.0) - 1))), 1e-7, None),
    ("celu_a", "Celu", {"alpha": 2.0}, "ulp4",
     d64(lambda x: np.maximum(0.0, x) + np.minimum(0.0, 2.0 * (np.exp(x / 2.0) - 1))), 1e-7, None),
    ("selu", "Selu", {}, "ulp4",
     d64(lambda x: where(x <= 0, F32(1.05070102214813232421875) * (F32(1.67326319217681884765625) * np.exp(x)
                                                                   - F32(1.67326319217681884765625)),
                         F32(1.05070102214813232421875) * x)), 1e-7, None),
    ("sin", "Sin", {}, "ulp2", d64(np.sin), 1e-6, LARGE),
    ("cos", "Cos", {}, "ulp2", d64(np.cos), 1e-6, LARGE),
    # tan near pi/2 multiplies the reduced argument's error by 1 + tan^2 (~200 at x = 1.5): 32 ulps
    ("tan", "Tan", {}, "ulp32", d64(np.tan), 1e-6, LARGE),
    ("asin", "Asin", {}, "ulp4", d64(np.arcsin), 1e-6, None),
    ("acos", "Acos", {}, "ulp4", d64(np.arccos), 1e-6, None),
    ("atan", "Atan", {}, "ulp4", d64(np.arctan), 1e-6, None),
    ("sinh", "Sinh", {}, "ulp4", d64(np.sinh), 1e-7, None),
    ("cosh", "Cosh", {}, "ulp4", d64(np.cosh), 1e-7, None),
    ("asinh", "Asinh", {}, "ulp4", d64(np.arcsinh), 1e-7, None),
    ("acosh", "Acosh", {}, "ulp4", d64(np.arccosh), 1e-7, None),
    ("atanh", "Atanh", {}, "ulp4", d64(np.arctanh), 1e-7, None),
    ("mish", "Mish", {}, "ulp4", d64(lambda x: x * np.tanh(softplus64(x))), 1e-30, None),
]


def ge(a, b):
    return a >= b


BINARY = [
    ("add", "Add", {}, "exact", e32(lambda a, b: a + b)),
    ("sub", "Sub", {}, "exact", e32(lambda a, b: a - b)),
    ("mul", "Mul", {}, "exact", e32(lambda a, b: a * b)),
    ("div", "Div", {}, "exact", e32(lambda a, b: a / b)),
    ("max", "Max", {}, "exact0", e32(np.maximum)),
    ("min", "Min", {}, "exact0", e32(np.minimum)),
    ("sum", "Sum", {}, "exact", e32(lambda a, b: a + b)),
    ("mean", "Mean", {}, "exact", e32(lambda a, b: (a + b) / F32(2))),  # fp32: a + b may overflow first
    ("prelu", "PRelu", {}, "exact", e32(lambda a, b: where(a < 0, b * a, a))),
    ("mod", "Mod", {"fmod": 1}, "exact", e32(np.fmod)),
    ("pow", "Pow", {}, "ulp2", e32(lambda a, b: np.power(a.astype(np.float64), b).astype(F32))),
    ("equal", "Equal", {}, "exact", e32(lambda a, b: a == b)),
    ("less", "Less", {}, "exact", e32(lambda a, b: a < b)),
    ("greater", "Greater", {}, "exact", e32(lambda a, b: a > b)),
    ("less_equal", "LessOrEqual", {}, "exact", e32(lambda a, b: a <= b)),
    ("greater_equal", "GreaterOrEqual", {}, "exact", e32(ge)),
]

# Ops the device compiler does not lower (checked in the host evaluator only), with the reason.
DEVICE_UNSUPPORTED = {"mish": "Mish has no device lowering (tern compile reports it unsupported)"}

OPSET = 17


def write(d):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(d, exist_ok=True)
    vi = helper.make_tensor_value_info
    boolish = {"isnan", "isinf", "isinf_pos", "isinf_neg", "equal", "less", "greater", "less_equal", "greater_equal"}

    def out_vi(name, n):
        return vi(name, TensorProto.BOOL if name in boolish else TensorProto.FLOAT, [n])

    expect = {}
    for name, op, attrs, cls, ref, atol, dom in UNARY:
        expect[name] = ref(X)
    for name, op, attrs, cls, ref in BINARY:
        expect[name] = ref(A, B)
    for kind in ("dev", "host"):
        nodes, outs = [], []
        for name, op, attrs, *_ in UNARY:
            if kind == "dev" and name in DEVICE_UNSUPPORTED:
                continue
            ins_ = ["x", "clip_lo", "clip_hi"] if op == "Clip" else ["x"]  # opset 11+: bounds are inputs
            nodes.append(helper.make_node(op, ins_, [name], name=name, **attrs))
            outs.append(out_vi(name, len(X)))
        for name, op, attrs, *_ in BINARY:
            nodes.append(helper.make_node(op, ["a", "b"], [name], name=name, **attrs))
            outs.append(out_vi(name, len(A)))
        tensors = {"x": X, "a": A, "b": B}
        if kind == "dev":
            ins, inits = [vi(k, TensorProto.FLOAT, [len(v)]) for k, v in tensors.items()], []
        else:
            ins, inits = [], [numpy_helper.from_array(v, k) for k, v in tensors.items()]
        inits += [numpy_helper.from_array(f32(-1.0), "clip_lo"), numpy_helper.from_array(f32(2.0), "clip_hi")]
        g = helper.make_graph(nodes, "special_values_" + kind, ins, outs, initializer=inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        # no onnx.checker: Debian's onnx predates Gelu (opset 20); tern's importer is what reads the file
        onnx.save(m, os.path.join(d, kind + ".onnx"))
    for k, v in (("x", X), ("a", A), ("b", B)):
        np.save(os.path.join(d, k + ".npy"), v)
    np.savez(os.path.join(d, "expect.npz"), **expect)


def ulp(w):
    """The spacing of fp32 values just below |w| toward zero (the smaller of its two neighbours' gaps)."""
    w = abs(F32(w))
    if w == 0:
        return float(MIN_SUB)
    return float(w) - float(np.nextafter(w, F32(0)))


def compare(name, cls, got, want, inputs, atol, skip):
    """Returns a list of (index, input text, got, want) mismatches."""
    bad = []
    got = np.asarray(got)
    if got.shape != want.shape:
        return [(-1, "shape", got.shape, want.shape)]
    for i in range(want.size):
        if skip is not None and skip[i]:
            continue
        g, w = got.flat[i], want.flat[i]
        if want.dtype == np.bool_ or got.dtype == np.bool_:
            ok = bool(g) == bool(w)
        else:
            g, w = F32(g), F32(w)
            if np.isnan(w) or np.isnan(g):
                ok = bool(np.isnan(w) and np.isnan(g))
            elif np.isinf(w) or np.isinf(g):
                ok = g == w
            elif cls in ("exact", "exact0"):
                ok = g == w and (cls == "exact0" or w != 0 or np.signbit(g) == np.signbit(w))
            else:
                n = int(cls[3:])
                ok = abs(float(g) - float(w)) <= max(n * ulp(w), atol)
        if not ok:
            bad.append((i, inputs(i), g, w))
    return bad


def check(d):
    exp = np.load(os.path.join(d, "expect.npz"))
    rows = [(n, c, a, dom, (lambda i: f"x={X[i]!r}")) for n, _, _, c, _, a, dom in UNARY]
    rows += [(n, c, 0, None, (lambda i: f"a={A[i]!r} b={B[i]!r}")) for n, _, _, c, _ in BINARY]
    failed = checked = 0
    for side in ("dev", "host"):
        for name, cls, atol, dom, txt in rows:
            if side == "dev" and name in DEVICE_UNSUPPORTED:
                print(f"skip dev {name}: {DEVICE_UNSUPPORTED[name]}")
                continue
            path = os.path.join(d, side, name + ".npy")
            if not os.path.exists(path):
                print(f"NOT OK {side} {name}: no output {path}")
                failed += 1
                checked += 1
                continue
            want = exp[name]
            skip = dom(X) if (dom is not None and side == "dev") else None
            bad = compare(name, cls, np.load(path), want, txt, atol, skip)
            checked += 1
            if bad:
                failed += 1
                shown = "; ".join(f"{t}: got {g!r}, want {w!r}" for _, t, g, w in bad[:6])
                more = f" (+{len(bad) - 6} more)" if len(bad) > 6 else ""
                print(f"NOT OK {side} {name} [{cls}]: {len(bad)} mismatches: {shown}{more}")
    print(f"special values: {checked - failed} of {checked} op outputs match, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "check"):
        sys.exit(__doc__)
    if sys.argv[1] == "gen":
        write(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2]))
