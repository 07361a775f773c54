"""Writes the seeded input sequences the drift detectors are checked on.

Each line is one sequence: "<name> <x_1> <x_2> ...": binary values as 0 and
1, real values rounded to 4 decimals, so that every reader (Java's
Double.parseDouble, Python's float, Go's strconv.ParseFloat) gets the same
float64s.

    python3 sequences.py > sequences.txt
"""
import math
import random


def bern(r, p):
    return 1.0 if r.random() < p else 0.0


def binary(r, rate, n):
    return [bern(r, rate(t)) for t in range(n)]


def real(r, mean, n, sd=0.1):
    return [min(1.0, max(0.0, r.gauss(mean(t), sd))) for t in range(n)]


def score(r, margin, n):
    # the service's label-free score signal: 1/(1+|score|)
    return [1.0 / (1.0 + abs(r.gauss(margin(t), 1.0))) for t in range(n)]


def scenarios():
    n = 3000
    out = []
    for p in (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0):
        out.append((f"stationary-p{p}", lambda r, p=p: binary(r, lambda t: p, n)))
    for p1, p2 in ((0.05, 0.3), (0.1, 0.2), (0.2, 0.5), (0.1, 0.6), (0.0, 0.2)):
        out.append((f"rise-{p1}-{p2}", lambda r, a=p1, b=p2: binary(r, lambda t: a if t < n // 2 else b, n)))
        out.append((f"fall-{p2}-{p1}", lambda r, a=p1, b=p2: binary(r, lambda t: b if t < n // 2 else a, n)))
        out.append((f"ramp-up-{p1}-{p2}", lambda r, a=p1, b=p2: binary(r, lambda t: a + (b - a) * min(1, max(0, (t - 1000) / 1000)), n)))
        out.append((f"ramp-down-{p2}-{p1}", lambda r, a=p1, b=p2: binary(r, lambda t: b - (b - a) * min(1, max(0, (t - 1000) / 1000)), n)))
    for tau in (100, 300, 1000):
        out.append((f"learning-curve-tau{tau}", lambda r, tau=tau: binary(r, lambda t: 0.1 + 0.4 * math.exp(-t / tau), n)))
    out.append(("recurring-0.1-0.4", lambda r: binary(r, lambda t: 0.1 if (t // 500) % 2 == 0 else 0.4, n)))
    for m1, m2 in ((0.3, 0.6), (0.5, 0.55), (0.2, 0.8)):
        out.append((f"real-rise-{m1}-{m2}", lambda r, a=m1, b=m2: real(r, lambda t: a if t < n // 2 else b, n)))
        out.append((f"real-fall-{m2}-{m1}", lambda r, a=m1, b=m2: real(r, lambda t: b if t < n // 2 else a, n)))
    out.append(("real-stationary-0.4", lambda r: real(r, lambda t: 0.4, n)))
    out.append(("score-margin-falls-2-0.5", lambda r: score(r, lambda t: 2.0 if t < n // 2 else 0.5, n)))
    out.append(("score-margin-grows-0.5-2", lambda r: score(r, lambda t: 0.5 if t < n // 2 else 2.0, n)))
    return out


def fmt(x):
    if x in (0.0, 1.0):
        return str(int(x))
    return f"{x:.4f}"


def main():
    for name, make in scenarios():
        for seed in range(8):
            r = random.Random(f"{name}/{seed}")
            xs = make(r)
            print(f"{name}/{seed} " + " ".join(fmt(x) for x in xs))


if __name__ == "__main__":
    main()
