"""Benchmark: what the KV cache's dtype does to the serving scores of the silicon sample's fp8 dense rows.

    python3 benchmarks/serving_kv_dtype.py [--public-data ../shared/public-data] [--models-dir models]
                                           [--gpus h100_sxm,h200_sxm,b200] [--models llama-3.1-70b,qwen3-32b]

The silicon sample (``aiconfigurator/silicon_sample_public.csv``) does not record the KV cache's dtype of its
runs. Its priced vLLM rows with fp8 linear layers of the named models and GPUs (:func:`synperf.serving.silicon.
read_silicon`, duplicates and unmodelled rows left out as there) are scored by
:func:`synperf.serving.score.score_rows` twice, with the evaluation models and nothing refitted: with the fp8
cache the scores use (:data:`synperf.serving.price.KV_CACHE_DTYPES`) and with vLLM's ``auto`` cache of a bf16
checkpoint (bf16). Printed: TTFT and TPOT MAPE (%) per (model, GPU) and cache dtype. A few minutes on one core.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from synperf.serving.score import score_rows  # noqa: E402
from synperf.serving.silicon import public_inputs, read_silicon  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--public-data", default=str(REPO.parent / "shared" / "public-data"))
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--gpus", default="h100_sxm,h200_sxm,b200")
    ap.add_argument("--models", default="llama-3.1-70b,qwen3-32b")
    args = ap.parse_args()
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    registry, collectives, silicon = public_inputs(REPO / "config" / "gpus.yaml", REPO / "data" / "hardware",
                                                   args.public_data, cfg["e2e"].get("collective_gpu_map"))
    rows = read_silicon(silicon)
    rows = rows[rows["model"].isin(args.models.split(",")) & rows["gpu"].isin(args.gpus.split(","))
                & (rows["gemm_dtype"] == "fp8")]
    out = []
    for kv in ("fp8", "bfloat16"):
        s = score_rows(rows, REPO / "examples" / "models", registry=registry, collectives=collectives,
                       models_dir=args.models_dir, kv_cache_dtype=kv)
        for m in ("ttft", "tpot"):
            s[f"{m}_ape_pct"] = (s[f"{m}_mean_ms"] / s[f"measured_{m}_ms"] - 1.0).abs() * 100.0
        out.append(s.groupby(["model", "gpu"]).agg(rows=("tp", "size"), ttft_mape_pct=("ttft_ape_pct", "mean"),
                                                   tpot_mape_pct=("tpot_ape_pct", "mean")).assign(kv_cache_dtype=kv))
    table = pd.concat(out).reset_index().set_index(["model", "gpu", "kv_cache_dtype"]).sort_index()
    print(table.round(2).to_string())


if __name__ == "__main__":
    main()
