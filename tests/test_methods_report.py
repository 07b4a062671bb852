"""The methods-comparison section of the report: averages, paired comparison, FP8 paper table, figures."""

import numpy as np
import pandas as pd
import pytest

from synperf.reporting import methods_report as R


def table():
    """Two experiments; configured (1 fold) and logo (2 folds); MLP and nearest-GPU (b), with a paired scope."""
    rows = []

    def add(exp, proto, fold, method, gpu, split, mape, cov=1.0, scope="all"):
        rows.append({"experiment": exp, "kernel": exp, "protocol": proto, "fold": fold, "method": method, "gpu": gpu,
                     "split": split, "n_rows": 100, "n_total": 100, "coverage": cov, "mape_pct": mape,
                     "median_ape_pct": mape / 2, "p90_ape_pct": mape * 2, "fit_seconds": 1.0, "scope": scope})

    for exp, (mlp, nb) in {"gemm_fp8": (4.0, 6.0), "rmsnorm": (30.0, 10.0)}.items():
        for gpu in ("ALL", "h100_sxm"):
            add(exp, "configured", "configured", "synperf_mlp", gpu, "unseen", mlp)
            add(exp, "configured", "configured", "synperf_mlp", gpu, "test_seen", 2.0)
            add(exp, "configured", "configured", "nearest_gpu_roofline", gpu, "unseen", nb, cov=0.8)
            add(exp, "configured", "configured", "synperf_mlp", gpu, "unseen", mlp + 1, scope="nearest_covered")
            add(exp, "configured", "configured", "nearest_gpu_roofline", gpu, "unseen", nb, scope="nearest_covered")
        for fold, m in (("logo:a", 10.0), ("logo:b", 20.0)):
            add(exp, "logo", fold, "synperf_mlp", "ALL", "unseen", m)
            add(exp, "logo", fold, "synperf_mlp", fold[-1], "unseen", m)
            add(exp, "logo", fold, "nearest_gpu_roofline", "ALL", "unseen", m / 2, cov=0.5)
    add("other", "configured", "configured", "synperf_mlp", "ALL", "unseen", 99.0)
    return pd.DataFrame(rows)


def test_means_average_folds_and_core_experiments_only():
    m = R.method_means(table(), ["gemm_fp8", "rmsnorm"]).set_index(["protocol", "split", "method"])
    assert m.loc[("configured", "unseen", "synperf_mlp"), "mape_pct"] == pytest.approx(17.0)   # (4 + 30) / 2, not 99
    assert m.loc[("logo", "unseen", "synperf_mlp"), "mape_pct"] == pytest.approx(15.0)
    assert m.loc[("logo", "unseen", "synperf_mlp"), "folds"] == 4
    assert m.loc[("logo", "unseen", "nearest_gpu_roofline"), "coverage"] == pytest.approx(0.5)
    mat = R.means_matrix(m.reset_index()).set_index("method")
    assert mat.loc["nearest GPU (b)", "logo unseen"] == "7.5 (50% rows)"
    assert mat.loc["synperf MLP", "configured seen"] == "2.0"


def test_paired_comparison_names_the_winner_per_family():
    nv = R.nearest_vs_mlp(table(), ["gemm_fp8", "rmsnorm"]).set_index(["protocol", "experiment"])
    assert nv.loc[("configured", "gemm_fp8"), "synperf_mlp_pct"] == 5.0     # the paired scope, not the 4.0
    assert nv.loc[("configured", "gemm_fp8"), "winner"] == "synperf MLP"
    assert nv.loc[("configured", "rmsnorm"), "winner"] == "nearest GPU (b)"
    assert nv.loc[("configured", "rmsnorm"), "coverage"] == pytest.approx(0.8)


def test_fp8_table_sets_the_paper_number_beside_unseen_gpus():
    t = R.fp8_paper_table(table())
    row = t[t.gpu == "h100_sxm"].set_index("split")
    assert row.loc["unseen", "SynPerf paper"] == 4.2 and np.isnan(row.loc["seen, held-out problems", "SynPerf paper"])
    assert row.loc["unseen", "synperf MLP"] == 4.0


def test_section_writes_tables_and_figures(tmp_path):
    t = table()
    cdf = pd.DataFrame([{"experiment": e, "protocol": "logo", "method": m, "split": "unseen", "quantile": q,
                         "ape_pct": 50 * q, "n_rows": 10} for e in ("gemm_fp8", "rmsnorm")
                        for m in ("synperf_mlp", "nearest_gpu_roofline") for q in (0.0, 0.5, 1.0)])
    preds = pd.DataFrame({"experiment": "rmsnorm", "gpu": "a40", "split": "unseen",
                          "latency_us": np.linspace(1, 100, 50), "predicted_latency_us": np.linspace(1.1, 90, 50)})
    out = {k: str(tmp_path / f"{k}") for k in ("s.csv", "g.csv", "m.png", "c.png", "p.png")}
    md = "\n".join(R.methods_section(t, cdf, preds, ["gemm_fp8", "rmsnorm"], *out.values()))
    assert "nearest-GPU (b) beats the MLP on rmsnorm" in md
    assert "4.2" in md and "### Other data sources" in md
    for k in ("m.png", "c.png", "p.png"):
        assert (tmp_path / k).read_bytes()[:4] == b"\x89PNG"
    assert set(pd.read_csv(out["g.csv"])["protocol"]) == {"configured", "logo"}


def test_the_budget_cell_counts_the_options_each_fold_chose_instead_of_repeating_every_text():
    chose = " (chosen by leave-one-training-GPU-out); fingerprints on all rows; correction <= 5000 rows"
    budgets = pd.DataFrame({"experiment": ["gemm", "gemm", "gemm", "rmsnorm"],
                            "fold": ["logo:a", "logo:a", "logo:b", "logo:a"],
                            "budget": ["fingerprint only; rule pooled, interval case 90%" + chose] * 2
                            + ["correction 40x0.7; rule mean, interval distance 0.4" + chose,
                               "fingerprint only; rule pooled, interval distance 0.4" + chose]})
    # one count per fold: gemm's logo:a repeats its text over two rows and counts once
    assert R.budget_cell(budgets) == (
        "chosen per fold by leave-one-training-GPU-out, folds in brackets: fingerprint only with rule pooled (2), "
        "correction 40x0.7 with rule mean (1); interval distance 0.4 (2), case 90% (1); fingerprints on all rows; "
        "correction <= 5000 rows")
    plain = budgets.assign(budget=["<= 5000 rows, 300 boosting iterations"] * 3 + ["<= 20000 rows, closed form"])
    assert R.budget_cell(plain) == "<= 20000 rows, closed form; <= 5000 rows, 300 boosting iterations"
