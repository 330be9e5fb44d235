#!/usr/bin/python3
"""Wall time of PyTorch CPU inference (fp32) of a model from gen_models.py, for the benchmarks' sim_over_torch
ratio: best of N runs after a warm-up, at PyTorch's best configuration on this host, chosen by measurement.

    /usr/bin/python3 scripts/torch_time.py NAME [RUNS]                   search, then print the best
    /usr/bin/python3 scripts/torch_time.py NAME RUNS --core C --threads T  time one configuration
    /usr/bin/python3 scripts/torch_time.py --cpu-core                     the OpenBLAS kernel for this CPU

It prints `seconds: S`, `torch_openblas_core: C` (the OpenBLAS kernel in use, as OpenBLAS names it),
`torch_threads: T` (torch's intra-op threads) and `torch_blas_threads: B`.

Why a search: Debian's PyTorch sends fp32 matmuls through Debian's OpenBLAS 0.3.21, which does not recognise
every current CPU and then falls back to its SSE3 "Prescott" kernels; OPENBLAS_CORETYPE must be set before the
library loads, so each configuration runs in a fresh process. The kernel is the one matching this CPU's
instruction set (cpu_core() below). Torch's OpenMP threads and OpenBLAS's own threads oversubscribe the cores
when both are above 1, so the candidates are torch at 1 and at all threads, each with OpenBLAS at 1 and all
threads; the fastest is kept. The environment is set for the PyTorch process alone, never for tern.
"""
import os
import subprocess
import sys
import time


def cpu_core():
    """The OpenBLAS 0.3.21 kernel name that matches this CPU, from /proc/cpuinfo's flags and vendor."""
    flags, vendor = set(), ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
                elif line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
    except OSError:
        return ""
    if "avx512_bf16" in flags:
        return "Cooperlake"
    if "avx512f" in flags and "avx512vl" in flags:
        return "SkylakeX"
    if "avx2" in flags:
        return "Zen" if vendor == "AuthenticAMD" else "Haswell"
    if "avx" in flags:
        return "Sandybridge"
    return ""


def openblas_corename():
    """The kernel the loaded OpenBLAS reports (the library PyTorch's BLAS calls go to), or '?'."""
    import ctypes
    for lib in ("libblas.so.3", "libopenblas.so.0"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        f.restype = ctypes.c_char_p
        return f().decode()
    return "?"


def time_one(name, runs, threads):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gen_models  # noqa: E402
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    make, sample, _ = gen_models.models()[name]
    m = make().eval()
    x = sample()
    xs = x if isinstance(x, tuple) else (x,)
    best = float("inf")
    with torch.no_grad():
        m(*xs)
        for _ in range(runs):
            t = time.perf_counter()
            m(*xs)
            best = min(best, time.perf_counter() - t)
    return best


def run_config(name, runs, core, threads, blas_threads):
    env = dict(os.environ)
    if core:
        env["OPENBLAS_CORETYPE"] = core
    env["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    env["OMP_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), name, str(runs), "--core", core, "--threads",
                          str(threads)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        return None
    res = {}
    for line in out.stdout.splitlines():
        k, _, v = line.partition(":")
        res[k.strip()] = v.strip()
    return res


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if args[0] == "--cpu-core":  # the one place that maps this CPU to its kernel (bench_sim asks it too)
        print(cpu_core() or "default")
        return
    name = args[0]
    runs = int(args[1]) if len(args) > 1 and not args[1].startswith("--") else 5
    if "--threads" in args:  # one configuration, in this process (the environment was set by the caller)
        threads = int(args[args.index("--threads") + 1])
        s = time_one(name, runs, threads)
        print(f"seconds: {s:.6f}")
        print(f"torch_openblas_core: {openblas_corename()}")
        print(f"torch_threads: {threads}")
        print(f"torch_blas_threads: {os.environ.get('OPENBLAS_NUM_THREADS', '?')}")
        return
    core = cpu_core()
    n = os.cpu_count() or 1
    cands = sorted({(t, b) for t in (1, n) for b in (1, n)})
    best = None
    for t, b in cands:
        r = run_config(name, runs, core, t, b)
        if r and (best is None or float(r["seconds"]) < float(best["seconds"])):
            best = r
    if best is None:
        sys.exit(1)
    for k in ("seconds", "torch_openblas_core", "torch_threads", "torch_blas_threads"):
        print(f"{k}: {best[k]}")


if __name__ == "__main__":
    main()
