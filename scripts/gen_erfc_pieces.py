#!/usr/bin/python3
"""The coefficients of src/sim/act_simd.c's erfc below 4: on each of the eight intervals [k/2, (k+1)/2), erfc(a) as a
degree-16 polynomial in s = 4 (a - c_k), c_k = k/2 + 1/4 (s in [-1, 1]): a Chebyshev fit in mpmath at 40 digits
(interpolation at 28 Chebyshev-Gauss nodes) converted to powers of s. Relative error of the fits below 3e-15 on
every interval (checked by this script at 2001 points each); the vector code needs 2^-44 (its `unsure` margin).
Printed as the C table: row j holds the coefficient of s^j for the eight intervals.
Run: /usr/bin/python3 scripts/gen_erfc_pieces.py"""
import mpmath as mp

mp.mp.dps = 40
N, NI, W = 16, 8, mp.mpf(1) / 2


def fit(k):
    c0, h = k * W + W / 2, W / 2
    M = N + 12
    nodes = [mp.cos(mp.pi * (j + mp.mpf(1) / 2) / M) for j in range(M)]
    vals = [mp.erfc(c0 + h * t) for t in nodes]
    c = [2 * mp.fsum(vals[j] * mp.cos(mp.pi * i * (j + mp.mpf(1) / 2) / M) for j in range(M)) / M for i in range(N + 1)]
    c[0] /= 2
    T = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for n in range(2, N + 1):
        a = [mp.mpf(0)] + [2 * v for v in T[n - 1]]
        b = T[n - 2] + [mp.mpf(0)] * (len(a) - len(T[n - 2]))
        T.append([a[i] - b[i] for i in range(len(a))])
    power = [mp.mpf(0)] * (N + 1)
    for j in range(N + 1):
        for i, v in enumerate(T[j]):
            power[i] += c[j] * v
    return [float(v) for v in power]


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
    assert e < 3e-15, (k, e)
print("static const double ERFC_PIECES[%d][%d] = {" % (N + 1, NI))
for j in range(N + 1):
    print("    {" + ", ".join(fits[k][j].hex() for k in range(NI)) + "},")
print("};")
