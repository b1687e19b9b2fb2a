"""The two-sided Mann-Whitney U test, as Google Benchmark's tools/compare.py applies it.

compare.py calls scipy.stats.mannwhitneyu(base_times, contender_times, alternative="two-sided")
on the per-repetition times of each benchmark (at least 2 repetitions each; it warns below 9).
scipy's default method ("auto") is reproduced here without scipy:

- exact, when either sample has at most 8 values and there are no ties: the null distribution of
  U is counted (every split of the pooled ranks equally likely), p = 2 * P(U >= max(U1, U2)),
  capped at 1;
- otherwise the normal approximation with the tie correction of the variance and a continuity
  correction of 0.5: z = (max(U1, U2) - n1*n2/2 - 0.5) / sigma,
  sigma^2 = n1*n2/12 * ((n + 1) - sum(t^3 - t) / (n * (n - 1))), p = 2 * (1 - Phi(z)), capped
  at 1. When every value is tied (sigma = 0) p = 1.

U1 is the statistic of the first sample: the number of pairs (x, y) with x > y, ties counted
one half (= the rank sum of x minus n1(n1+1)/2, with mid-ranks for ties).
"""
from __future__ import annotations

import math
from functools import lru_cache


def ranks(values: list[float]) -> list[float]:
    """1-based mid-ranks (ties get the mean of the ranks they span)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mid = (i + j) / 2 + 1
        for k in range(i, j + 1):
            r[order[k]] = mid
        i = j + 1
    return r


def tie_sizes(values: list[float]) -> list[int]:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return [c for c in counts.values() if c > 1]


def u_statistic(x: list[float], y: list[float]) -> float:
    r = ranks(list(x) + list(y))
    n1 = len(x)
    return sum(r[:n1]) - n1 * (n1 + 1) / 2


@lru_cache(maxsize=None)
def _count_u(n1: int, n2: int) -> tuple:
    """counts[u] = number of arrangements of n1 x's among n1 + n2 positions with statistic u."""
    # c(m, n, u) = c(m - 1, n, u - n) + c(m, n - 1, u): the largest value is an x (it beats all
    # n y's) or a y (it adds nothing)
    if n1 == 0 or n2 == 0:
        return (1,)
    a = _count_u(n1 - 1, n2)
    b = _count_u(n1, n2 - 1)
    out = [0] * (n1 * n2 + 1)
    for u, c in enumerate(a):
        out[u + n2] += c
    for u, c in enumerate(b):
        out[u] += c
    return tuple(out)


def exact_p(u1: float, n1: int, n2: int) -> float:
    counts = _count_u(n1, n2)
    total = sum(counts)
    u = max(u1, n1 * n2 - u1)
    k = int(math.ceil(u - 1e-9))
    tail = sum(counts[k:])
    return min(1.0, 2.0 * tail / total)


def normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def asymptotic_p(u1: float, n1: int, n2: int, ties: list[int]) -> float:
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var <= 0:
        return 1.0
    u = max(u1, n1 * n2 - u1)
    z = (u - mu - 0.5) / math.sqrt(var)
    return min(1.0, 2.0 * normal_sf(z))


def mannwhitneyu(x: list[float], y: list[float], method: str = "auto") -> tuple[float, float, str]:
    """(U1, two-sided p-value, method used: "exact" or "asymptotic")."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("mannwhitneyu: both samples need values")
    u1 = u_statistic(x, y)
    ties = tie_sizes(list(x) + list(y))
    if method == "auto":
        method = "asymptotic" if (n1 > 8 and n2 > 8) or ties else "exact"
    if method == "exact":
        return u1, exact_p(u1, n1, n2), "exact"
    return u1, asymptotic_p(u1, n1, n2, ties), "asymptotic"
