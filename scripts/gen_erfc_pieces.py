#!/usr/bin/python3
"""The coefficients of src/sim/act_simd.c's erfc below 4: on each of the sixteen intervals [k/4, (k+1)/4), erfc(a) as a
degree-11 polynomial in s = 8 (a - c_k), c_k = k/4 + 1/8 (s in [-1, 1]): a Chebyshev fit in mpmath at 40 digits
(interpolation at 23 Chebyshev-Gauss nodes, gen_erfc_poly.cheb_power) converted to powers of s. Relative error of
the fits below 1e-13 (6.2e-14 = 2^-43.9 at worst, near 4; checked by this script at 2001 points each); the vector
code's `unsure` margin is 2^12 double ulps, 2^-40. Printed as the C table: row j holds the coefficient of s^j for the sixteen intervals.
Run: /usr/bin/python3 scripts/gen_erfc_pieces.py"""
import os
import sys

import mpmath as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_erfc_poly import cheb_power  # noqa: E402

mp.mp.dps = 40
N, NI, W = 11, 16, mp.mpf(1) / 4


def fit(k):
    c0, h = k * W + W / 2, W / 2
    return [float(v) for v in cheb_power(lambda t: mp.erfc(c0 + h * t), N, N + 12)]


def worst(k, coef):
    c0, h = float(k * W + W / 2), float(W / 2)
    w = 0
    for i in range(2001):
        a = float(k * W) + float(W) * i / 2000
        s = (a - c0) / h
        p = coef[-1]
        for cc in reversed(coef[:-1]):
            p = float(mp.mpf(p) * s + cc)  # one rounding per step, as the fma does
        ref = mp.erfc(mp.mpf(a))
        w = max(w, abs((mp.mpf(p) - ref) / ref))
    return w


fits = [fit(k) for k in range(NI)]
for k in range(NI):
    e = worst(k, fits[k])
    assert e < 1e-13, (k, e)
print("static const double ERFC_PIECES[%d][%d] = {" % (N + 1, NI))
for j in range(N + 1):
    print("    {" + ", ".join(fits[k][j].hex() for k in range(NI)) + "},")
print("};")
