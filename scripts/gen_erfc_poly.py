#!/usr/bin/python3
"""The coefficients of src/sim/act_simd.c's vector erfc: P(t) ~ (1 + 2a) exp(a^2) erfc(a) with a = 3.75 (1 + t) / (1 - t),
t in [-1, 1] (Shepherd and Laframboise's mapping, Math. Comp. 36 (1981) 249-253). A degree-24 Chebyshev fit in
mpmath at 50 digits (interpolation at 40 Chebyshev-Gauss nodes), converted to powers of t and printed as C hex
doubles, lowest power first. Run: /usr/bin/python3 scripts/gen_erfc_poly.py
cheb_power is also scripts/gen_erfc_pieces.py's fit."""
import mpmath as mp


def cheb_power(g, n, m):
    """g on [-1, 1] interpolated at m Chebyshev-Gauss nodes by a degree-n Chebyshev sum, as powers of t (lowest
    first, mpmath numbers at the caller's precision)."""
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / m) for k in range(m)]
    vals = [g(t) for t in nodes]
    c = [2 * mp.fsum(vals[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / m) for k in range(m)) / m for j in range(n + 1)]
    c[0] /= 2
    # T_n(t) as power coefficients: T_{n} = 2 t T_{n-1} - T_{n-2}
    T = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for j in range(2, n + 1):
        a = [mp.mpf(0)] + [2 * v for v in T[j - 1]]
        b = T[j - 2] + [mp.mpf(0)] * (len(a) - len(T[j - 2]))
        T.append([a[i] - b[i] for i in range(len(a))])
    power = [mp.mpf(0)] * (n + 1)
    for j in range(n + 1):
        for i, v in enumerate(T[j]):
            power[i] += c[j] * v
    return power


def main():
    mp.mp.dps = 50
    K = mp.mpf("3.75")
    N = 24

    def f(t):
        if t == 1:
            return 2 / mp.sqrt(mp.pi)
        a = K * (1 + t) / (1 - t)
        return (1 + 2 * a) * mp.exp(a * a) * mp.erfc(a)

    print(", ".join(float(v).hex() for v in cheb_power(f, N, N + 16)))


if __name__ == "__main__":
    main()
