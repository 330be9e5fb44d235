#!/usr/bin/python3
"""Wall time of PyTorch CPU inference (fp32, its default, all host threads) of a model from gen_models.py, for
the benchmarks' sim_over_torch ratio: best of N runs after a warm-up.

    /usr/bin/python3 scripts/torch_time.py NAME [RUNS]      prints `seconds: S`
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models  # noqa: E402


def main():
    name = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.manual_seed(0)
    make, sample, _ = gen_models.models()[name]
    m = make().eval()
    x = sample()
    best = float("inf")
    with torch.no_grad():
        m(x)
        for _ in range(runs):
            t = time.perf_counter()
            m(x)
            best = min(best, time.perf_counter() - t)
    print(f"seconds: {best:.6f}")


if __name__ == "__main__":
    main()
