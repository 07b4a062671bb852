"""The fast batch-predict path gives the same numbers as straightforward per-row references: the column-wise fused-MoE
decomposition against the explicit task set of each launch, the sibling lookup against a brute-force search, and
a recorded path's predictions (cold and cached transfer sources) against building everything afresh."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from synperf.data.schema import KERNEL_PARAMS
from synperf.evaluation import path_selection as S
from synperf.evaluation.split import SHAPE_COLUMNS
from synperf.model.estimator import TrainConfig, TrainedModel
from synperf.model.features.v1 import CUDA_CORE_KERNELS
from synperf.model.kernels import fused_moe
from synperf.model.paths import BASE, TRANSFER, PhysicalModel, transfer_sources, with_spec_columns

TRAIN = TrainConfig(hidden_sizes=[32, 16], max_epochs=4, early_stopping_patience=3, batch_size=256)


def _moe_rows(n: int, seed: int = 0) -> pd.DataFrame:
    """Fused-MoE launches over every stage, dtype and routing, with and without their own config (some given
    as text or float, some missing)."""
    rng = np.random.default_rng(seed)
    pick = lambda xs: [xs[i] for i in rng.integers(0, len(xs), n)]  # noqa: E731
    cfg = pd.array(pick([None, 16, 32, 64, 128]), dtype="Int64")
    return pd.DataFrame({
        "gpu": pick(["h100_sxm", "a100_sxm4_80gb", "b200", "l40s"]),
        "num_tokens": rng.integers(1, 9000, n), "hidden_size": pick([2048, 4096, 7168]),
        "inter_size": pick([1408, 2048, 14336]), "topk": pick([1, 2, 8]), "num_experts": pick([8, 64, 256]),
        "moe_tp_size": pick([1, 2, 4]), "moe_ep_size": pick([1, 2, 8]),
        "distribution": pick(["balanced", "random", "power_law_1.2", "power_law_0.5", None, ""]),
        "moe_stage": pick(["full", "w13", "w2", None]), "dtype": pick(["bfloat16", "fp8", "fp8_block", "float16"]),
        "block_size_m": cfg, "block_size_n": pick([None, 64.0, float("nan"), 128.0]),
        "block_size_k": pick([None, "64", "x", 128]), "group_size_m": pick([None, 8]),
        "num_warps": pd.array(pick([None, 4, 8]), dtype="Int64"), "num_stages": pick([None, 2, 3, 4]),
    })


def test_columnwise_fused_moe_equals_the_explicit_task_set_of_every_launch(registry):
    rows = _moe_rows(600)
    got = fused_moe.summary_table(rows, registry)
    ref = []
    for r in rows.itertuples(index=False):
        d = dict(zip(fused_moe.DECOMPOSE_COLUMNS, r))
        d = {k: (None if (v is pd.NA or (isinstance(v, float) and np.isnan(v))) else v) for k, v in d.items()}
        ref.append(fused_moe.summary(d, registry[d["gpu"]]))
    ref = pd.DataFrame(ref, index=rows.index)
    assert list(got.columns) == list(ref.columns) == fused_moe.DECOMPOSE_OUTPUT
    np.testing.assert_array_equal(got.to_numpy(), ref.to_numpy())  # bit for bit
    # decompose: one summary per distinct launch, spread back over duplicates in the caller's row order
    order = np.r_[np.arange(len(rows)), np.arange(0, len(rows), 3)][::-1]
    dup = rows.iloc[order].reset_index(drop=True)
    np.testing.assert_array_equal(fused_moe.decompose(dup, registry).to_numpy(), ref.to_numpy()[order])
    with pytest.raises(ValueError, match="moe_stage"):
        fused_moe.summary_table(rows.head(3).assign(moe_stage="w3"), registry)


def _brute_force_sources(train: pd.DataFrame, test: pd.DataFrame, registry) -> tuple[np.ndarray, list]:
    """Per test row, the first train row of the nearest other GPU measuring the same shape (other families'
    parameters ignored): same GPU class first, then the (ln peak, ln DRAM B/s) distance, then the GPU id."""
    foreign = {c for ps in KERNEL_PARAMS.values() for c in ps}

    def shape(r):
        own = set(KERNEL_PARAMS.get(str(r["kernel"]), ()))
        return tuple("<NA>" if (c in foreign and c not in own) or pd.isna(r[c]) else str(r[c])
                     for c in SHAPE_COLUMNS if c in r.index)

    def rates(gpu, dtype, kernel):
        s = registry[gpu]
        peak = s.fp32_tflops if kernel in CUDA_CORE_KERNELS else s.peak_tflops(dtype)
        return np.log(peak * 1e12), np.log(s.dram_bw_gbps * 1e9)

    first = {}
    for pos, (_, r) in enumerate(train.iterrows()):
        first.setdefault((shape(r), str(r["gpu"])), pos)
    out_pos, out_gpu = np.full(len(test), -1), [None] * len(test)
    for i, (_, r) in enumerate(test.iterrows()):
        key, g, dt, k = shape(r), str(r["gpu"]), str(r["dtype"]), str(r["kernel"])
        cands = [(not registry[g].same_class(registry[sg]),
                  float(np.hypot(*np.subtract(rates(g, dt, k), rates(sg, dt, k)))), sg, pos)
                 for (sk, sg), pos in first.items() if sk == key and sg != g]
        if cands:
            best = min(cands)
            out_pos[i], out_gpu[i] = best[3], best[2]
    return out_pos, out_gpu


def test_sibling_lookup_equals_a_brute_force_search(vidur_gemm, registry):
    table, _ = vidur_gemm
    train = table[table.split == "train"].reset_index(drop=True)
    test = table.sample(300, random_state=0)
    # repeated launches (each distinct one is matched once) in a shuffled order
    test = pd.concat([test, test.iloc[::3]]).sample(frac=1, random_state=1).reset_index(drop=True)
    got = transfer_sources(train, test, registry)
    pos, gpu = _brute_force_sources(train, test, registry)
    assert (got["src_pos"].to_numpy() >= 0).any() and (got["src_pos"].to_numpy() < 0).any()
    np.testing.assert_array_equal(got["src_pos"].to_numpy(), pos)
    assert [None if pd.isna(v) else v for v in got["src_gpu"]] == gpu


def _reference_predict_with_choice(choice, directory, rows, registry, mlp) -> pd.DataFrame:
    """The recorded path built afresh: features of the launches and of every source row, the base model on all
    sources, the sibling lookup inside :func:`S.predict_path`."""
    path, fs = choice["path"], choice.get("feature_set", "v2")
    fallback = choice.get("fallback") or BASE[path]
    rows, meta = S._with_features(rows, registry, fs)
    fitted = S.FittedPaths(rows.iloc[:0], meta, mlp=mlp)
    if "physical" in (BASE[path], fallback):
        fitted.physical = PhysicalModel.from_dict(choice["physical"])
    if TRANSFER[path]:
        src = pd.read_parquet(os.path.join(directory, choice["sources"]))
        fitted.train = with_spec_columns(S._with_features(src, registry, fs)[0], registry)
        fitted.base_train[BASE[path]] = fitted.base_predict(BASE[path], fitted.train, registry)
    return S.predict_path(fitted, path, with_spec_columns(rows, registry), registry, fallback=fallback)


@pytest.mark.parametrize("path,fallback", [("transfer+mlp", None), ("shift+physical", "mlp"), ("physical", None),
                                           ("mlp", None)])
def test_recorded_path_predicts_as_the_fresh_reference_cold_and_cached(vidur_gemm, registry, tmp_path, path,
                                                                       fallback):
    from synperf.api import launch_table, predict

    table, meta = vidur_gemm
    tr = table[table.split == "train"].reset_index(drop=True)
    exp_dir = tmp_path / "gemm_fp16_vidur"
    mlp = S.fit_mlp(tr, meta, TRAIN)
    mlp.meta["feature_set"] = "v2"
    mlp.save(exp_dir / "v2-all")
    S.save_choice(exp_dir, path, tr, registry, mlp_dir="v2-all", feature_set="v2", fallback=fallback)
    launches = table.sample(250, random_state=1).reset_index(drop=True)
    params, gpus = launches[["implementation", "dtype", "m", "n", "k", "batch"]], launches["gpu"].astype(str).tolist()
    choice = S.load_choice(exp_dir)
    loaded = TrainedModel.load(str(exp_dir / "v2-all"))
    ref = _reference_predict_with_choice(choice, exp_dir, launch_table("gemm", params, gpus, registry), registry,
                                         loaded)
    S._SOURCE_CACHE.clear()
    for _ in range(2):  # cold, then with the transfer sources cached
        out = predict("gemm", params, gpus, experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
        np.testing.assert_allclose(out["predicted_latency_us"], ref["predicted_latency_us"], rtol=1e-9, atol=0)
        assert out["prediction_path"].tolist() == ref["prediction_path"].tolist()
        assert out["source_gpu"].isna().tolist() == ref["source_gpu"].isna().tolist()
        assert out["source_gpu"].dropna().tolist() == ref["source_gpu"].dropna().tolist()
    if TRANSFER[path]:
        assert set(ref["prediction_path"]) == {path, choice["fallback"]}
        assert len(S._SOURCE_CACHE) == 1
        # a rewritten sources file is read again: doubled source latencies double the transferred ratios
        f = exp_dir / choice["sources"]
        src = pd.read_parquet(f)
        src["latency_us"] *= 2.0
        src.to_parquet(f)
        os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
        again = predict("gemm", params, gpus, experiment="gemm_fp16_vidur", models_dir=tmp_path, registry=registry)
        ref2 = _reference_predict_with_choice(choice, exp_dir, launch_table("gemm", params, gpus, registry), registry,
                                              loaded)
        np.testing.assert_allclose(again["predicted_latency_us"], ref2["predicted_latency_us"], rtol=1e-9, atol=0)
        covered = ref["source_gpu"].notna().to_numpy()
        assert not np.allclose(again["predicted_latency_us"][covered], out["predicted_latency_us"][covered])


def test_registry_key_tells_registries_apart(registry):
    from dataclasses import replace

    from synperf.data.hardware import Registry

    same = Registry(dict(registry.gpus), registry.path)
    assert S.registry_key(same) == S.registry_key(registry)
    gid, spec = next(iter(sorted(registry.gpus.items())))
    other = Registry({**registry.gpus, gid: replace(spec, dram_bw_gbps=spec.dram_bw_gbps * 2)}, registry.path)
    assert S.registry_key(other) != S.registry_key(registry)
    raw = Registry({**registry.gpus, gid: replace(spec, raw={**spec.raw, "tensor_cores_per_sm": 0})}, registry.path)
    assert S.registry_key(raw) != S.registry_key(registry)

