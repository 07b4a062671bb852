"""`predict` in chunks of rows gives the same output, bit for bit, as one chunk: on the trained models of
`models/` (skipped without them, failed under SYNPERF_REQUIRE_OUTPUTS=1, like tests/test_outputs.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import need_output

from synperf.api import MLP_BLOCK_ROWS, check_chunk_rows, predict
from synperf.data.io import InputError
from synperf.data.schema import KERNEL_PARAMS

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
GPUS = ["h100_sxm", "a100_sxm4_80gb", "b200", "h200_sxm", "l40s", "gb200"]  # training and unseen GPUs


def launches(kernel: str, n: int, seed: int = 0) -> tuple[pd.DataFrame, list[str]]:
    """``n`` bfloat16/float16 launches of ``kernel``: shapes of the experiment's training rows, half of them moved off
    the measured shape, on random training and unseen GPUs."""
    rng = np.random.default_rng(seed)
    need_output(MODELS / kernel / "fingerprint.joblib")
    src = pd.read_parquet(need_output(REPO / "results" / "features" / "v2" / f"{kernel}.parquet"))
    src = src[(src["split"].astype(str) == "train") & src["dtype"].astype(str).isin(["bfloat16", "float16"])]
    cols = [c for c in KERNEL_PARAMS[kernel] if src[c].notna().all()] + ["dtype"]
    df = src[cols].iloc[rng.integers(0, len(src), n)].reset_index(drop=True)
    df = df.astype({c: "int64" for c in cols if c not in ("dtype", "moe_stage", "kv_cache_dtype")})
    moved = rng.random(n) < 0.5
    for c in [c for c in ("m", "num_tokens", "kv_len") if c in cols]:
        df.loc[moved, c] = df.loc[moved, c] + rng.integers(0, 3, moved.sum())
    return df, [GPUS[i] for i in rng.integers(0, len(GPUS), n)]


@pytest.mark.parametrize("predictor", ["mlp", "fingerprint"])
@pytest.mark.parametrize("kernel", ["gemm", "attention_decode", "fused_moe"])
def test_chunked_predict_equals_one_chunk_bit_for_bit(kernel, predictor, registry):
    params, gpus = launches(kernel, 2 * MLP_BLOCK_ROWS + 404)
    whole = predict(kernel, params, gpus, models_dir=MODELS, registry=registry, chunk_rows=10**9,
                    predictor=predictor)
    calls = []
    chunked = predict(kernel, params, gpus, models_dir=MODELS, registry=registry, chunk_rows=333,
                      progress=lambda done, total: calls.append((done, total)), predictor=predictor)
    n = len(params)
    assert calls == [(MLP_BLOCK_ROWS, n), (2 * MLP_BLOCK_ROWS, n), (n, n)]  # three chunks
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)
    assert chunked.attrs == whole.attrs
    # the comparison covers seen and unseen GPUs and the fingerprint's intervals
    if predictor == "mlp":
        assert whole["prediction_path"].str.startswith("mlp:").all() and whole["predicted_latency_us"].gt(0).all()
    else:
        assert whole["predicted_latency_low_us"].notna().all() and whole["predicted_latency_high_us"].notna().all()
        assert (whole["prediction_path"] == "fingerprint").all()
        assert whole["gpu_constants"].str.startswith("fitted on").any()
        assert whole["gpu_constants"].str.startswith("predicted").any()


def test_chunk_rows_are_whole_mlp_blocks_and_must_be_positive_integers(tmp_path):
    assert check_chunk_rows(None) % MLP_BLOCK_ROWS == 0
    assert check_chunk_rows(333) == check_chunk_rows(MLP_BLOCK_ROWS) == MLP_BLOCK_ROWS
    assert check_chunk_rows(MLP_BLOCK_ROWS + 1) == 2 * MLP_BLOCK_ROWS
    for bad in (0, -5, 2.5, True, "100"):
        with pytest.raises(InputError, match=rf"^chunk_rows = {bad!r}; expected an integer >= 1$"):
            predict("gemm", {"m": 16, "n": 4096, "k": 4096, "dtype": "bfloat16"}, "h100_sxm", models_dir=tmp_path,
                    chunk_rows=bad)
