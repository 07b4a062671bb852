"""End-to-end 80% intervals from per-launch intervals: correlated within a family, in quadrature across families."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synperf.e2e.intervals import conformal_half_width, family_deltas, needed_half_width, phase_intervals, widen


def _launches() -> pd.DataFrame:
    # iteration 0 prefill, 1-3 decode; gemm (interval [0.5, 2] x) and rmsnorm ([0.9, 1.2] x), one launch each
    rows = []
    for it, g, r in ((0, 100.0, 10.0), (1, 10.0, 1.0), (2, 20.0, 1.0), (3, 30.0, 1.0)):
        rows.append({"iteration": it, "family": "gemm", "count": 2, "latency_us": g, "latency_low_us": 0.5 * g,
                     "latency_high_us": 2 * g})
        rows.append({"iteration": it, "family": "rmsnorm", "count": 1, "latency_us": r, "latency_low_us": 0.9 * r,
                     "latency_high_us": 1.2 * r})
    return pd.DataFrame(rows)


def test_families_add_in_quadrature_and_the_decode_step_is_a_median():
    lau = _launches()
    its = pd.DataFrame({"iteration": [0, 1, 2, 3], "phase": ["prefill", "decode", "decode", "decode"]})
    its["latency_s"] = (lau["count"] * lau["latency_us"] / 1e6).groupby(lau["iteration"]).sum().to_numpy() + 1e-6
    d = family_deltas(lau, ["gemm", "rmsnorm", "silu_mul"])
    assert list(d.columns) == ["iteration", "gemm_low_s", "gemm_high_s", "rmsnorm_low_s", "rmsnorm_high_s"]
    iv = phase_intervals(its, d)
    # prefill: gemm 200 us -> [100, 400], rmsnorm 10 us -> [9, 12]; overhead 1 us stays
    assert iv["prefill_low_s"] * 1e6 == pytest.approx(211 - np.hypot(100, 1))
    assert iv["prefill_high_s"] * 1e6 == pytest.approx(211 + np.hypot(200, 2))
    # decode median = iteration 2 (42 us) under each family's shift alone
    assert iv["decode_step_low_s"] * 1e6 == pytest.approx(42 - np.hypot(20, 0.1))
    assert iv["decode_step_high_s"] * 1e6 == pytest.approx(42 + np.hypot(40, 0.2))
    total = its["latency_s"].sum() * 1e6
    assert iv["total_high_s"] * 1e6 == pytest.approx(total + np.hypot(2 * 160, 0.2 * 13))
    # narrower than every launch at its bound at once
    assert iv["total_high_s"] * 1e6 < total + 320 + 2.6


def test_no_interval_gives_nan_bounds():
    lau = _launches().assign(latency_low_us=np.nan, latency_high_us=np.nan)
    its = pd.DataFrame({"iteration": [0, 1, 2, 3], "phase": ["prefill"] + ["decode"] * 3, "latency_s": 1.0})
    assert family_deltas(lau, ["gemm"]) is None
    assert all(np.isnan(v) for v in phase_intervals(its, None).values())


def test_composition_error_is_the_conformal_quantile_of_what_each_run_needs_beyond_its_kernel_bounds():
    # residuals (log): inside the kernel bounds, above by 0.5 with h = 0.3, below by 0.5 with l = 0.4, no bounds,
    # below an unbounded low (<= 0), a missing measurement and a measured 0
    e = np.exp
    need = needed_half_width([1.0] * 7, [e(0.1), e(0.5), e(-0.5), e(-0.2), e(-3.0), np.nan, 0.0],
                             [e(-0.2), e(-0.1), e(-0.4), np.nan, -0.5, e(-0.1), e(-0.1)],
                             [e(0.2), e(0.3), e(0.1), np.nan, e(0.1), e(0.1), e(0.1)])
    assert need[:5] == pytest.approx([0.0, 0.4, 0.3, 0.2, 0.0]) and np.isnan(need[5]) and need[6] == np.inf
    # rank ceil((n + 1) 0.8): 4 of 4 for n = 4; with n = 3 the rank 4 exceeds n (unbounded)
    assert conformal_half_width(need[:4]) == pytest.approx(0.4)
    assert conformal_half_width(need[:3]) == np.inf
    assert conformal_half_width(np.arange(10.0)) == pytest.approx(8.0)
    assert np.isnan(conformal_half_width([]))
    # NaN left out, inf kept: a run no width holds raises the quantile instead of shrinking the sample
    assert conformal_half_width([0.1, 0.2, 0.3, 0.4, np.nan]) == pytest.approx(0.4)
    assert conformal_half_width([0.1, 0.2, 0.3, 0.4, np.inf]) == np.inf
    assert conformal_half_width([0.1, 0.2, 0.3, 0.4, 0.45, 0.5, np.inf, 0.05, 0.6]) == pytest.approx(0.6)
    # the needed half-width is exactly enough: widened, the run's measured value lies on the bound
    lo, hi = widen(1.0, np.exp(-0.1), np.exp(0.3), 0.4)
    assert hi == pytest.approx(np.exp(0.5)) and lo == pytest.approx(np.exp(-np.hypot(0.1, 0.4)))
    assert widen(2.0, np.nan, np.nan, 0.1) == pytest.approx((2 * np.exp(-0.1), 2 * np.exp(0.1)))
    assert widen(2.0, 1.5, 3.0, 0.0) == (1.5, 3.0)
    # an unbounded low stays unbounded (never narrowed), the high side still widens
    assert widen(1.0, 0.0, 2.0, 0.1) == pytest.approx((0.0, np.exp(np.hypot(np.log(2), 0.1))))
    assert widen(1.0, -0.3, 2.0, 0.1)[0] == -0.3
