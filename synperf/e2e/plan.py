"""Which GPU and parallelism serve a workload fastest: one :func:`synperf.e2e.compose.compose` per (GPU, TP, PP).

:func:`plan` prices every configuration that fits in memory with the same path as ``synperf e2e``
(:func:`~.workload.generate` then :func:`~.compose.compose`) and returns one row per configuration, sorted by the
predicted total latency; configurations that do not fit, or that the model cannot be sharded into, are listed
after them with the reason and no latency.

Memory per GPU (GB = 1e9 bytes), :func:`memory_need`:

* weights = (``L_stage`` x per-layer parameters / TP + 2 x vocab x hidden / TP) x dtype bytes, where ``L_stage``
  is the largest pipeline stage's layer count, a layer's parameters are the QKV, output, MLP (or router + experts
  + shared expert) matrices and two RMSNorm weights, and the embedding and LM head are untied and vocab-parallel
  over TP (vLLM's ``VocabParallelEmbedding``/``ParallelLMHead``), both counted on the one GPU;
* KV cache = tokens x 2 (K and V) x ``L_stage`` x ``max(1, kv_heads / TP)`` x head_dim x dtype bytes for every
  token the largest batch holds at its end (the sum of prompt + output tokens of its requests);
* activations: the fixed allowance :data:`ACTIVATION_GB` (CUDA context, activations, CUDA graphs, NCCL buffers);

against ``gpu_memory_utilization`` x the memory CUDA reports (``memory_usable_gb``, :func:`usable_memory_gb`, from
the registry's datasheet ``memory_gb`` by memory family, :data:`MEMORY_UNIT_BYTES`): vLLM pre-allocates that
share of the GPU's memory and leaves the rest to other processes and fragmentation (``EngineArgs
.gpu_memory_utilization = 0.90`` in ``vllm/engine/arg_utils.py``; docs.vllm.ai, engine arguments,
``--gpu-memory-utilization``: "the fraction of GPU memory to be used for the model executor", default 0.9), so a
configuration that fits only in all of the memory is reported as not fitting. :data:`GPU_MEMORY_UTILIZATION` is
the default, ``synperf plan --gpu-memory-utilization`` sets it.

Intervals: ``prefill_low_ms`` ... ``total_high_s`` bound an 80% interval propagated from the kernel predictions'
per-launch intervals by the rule of :mod:`synperf.e2e.intervals` (errors fully correlated within a kernel family,
independent across families), widened by the overhead's composition error when it has one
(:attr:`~.compose.Overhead.composition`, measured by the end-to-end evaluation); NaN where the predictor returns no
interval and the overhead has no composition error.

Flags: ``flag_<family>`` is ``trained`` where the GPU is one of the training GPUs of the family's model
(``attrs["training_gpus"]`` of :func:`synperf.api.predict`, else ``train_gpus`` of its ``meta.json``), else
``unseen`` (predicted for a GPU the model never trained on: its interval is the leave-one-seen-GPU-out one).
:func:`synperf.api.predict` serves no few-shot calibrated model, so no row is flagged few-shot. ``model_set``
names the model sets that answered (``deploy``: trained on every measured GPU; ``evaluation``: the evaluation
models, :func:`synperf.api.predict`'s ``models``). ``collectives`` says which collectives come from another GPU's
NCCL table (a proxy, its bandwidth part scaled: :meth:`~.collectives.CollectiveModel.describe`); empty where the
GPU's own tables priced them, and the text table adds it to the status.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ._deps import InputError, Registry, atomic_path, launch_table, predict
from .collectives import CollectiveModel
from .compose import COLLECTIVES, KERNEL_FAMILIES, Overhead, attention_path, compose, training_gpus_of
from .model_config import ModelConfig, load_model_config
from .workload import DTYPE_BYTES, POLICIES, Request, generate, run_requests

#: per-GPU memory allowed for everything but weights and KV cache (GB): CUDA context (~0.5-1 GB), the largest
#: activation of a forward pass, CUDA graphs and NCCL buffers; a round figure, not a measurement
ACTIVATION_GB = 4.0
#: share of a GPU's memory the serving engine may use: vLLM's default ``gpu_memory_utilization``
GPU_MEMORY_UTILIZATION = 0.9
GB = 1e9
#: bytes CUDA reports per unit of the registry's datasheet ``memory_gb``, by memory family. HBM parts: a GiB (an
#: "80 GB" H100 SXM shows 81,559 MiB in nvidia-smi, 99.6% of 80 GiB; A100 80GB 81,920 MiB). GDDR datacenter parts
#: run with ECC on, which keeps 1/16 of the memory: A40, L40S and L20 show 46,068 MiB of "48 GB" (48.3e9 bytes), so
#: 1e9 bytes per GB, slightly below what they report (and 7% below a GeForce part without ECC)
MEMORY_UNIT_BYTES = {"HBM": 2 ** 30, "GDDR": 1e9}
#: columns of :func:`plan`'s table, before the per-family ``flag_<family>`` columns
PLAN_COLUMNS = ["gpu", "tp", "pp", "gpus", "status", "prefill_ms", "prefill_low_ms", "prefill_high_ms",
                "decode_step_ms", "decode_step_low_ms", "decode_step_high_ms", "total_s", "total_low_s",
                "total_high_s", "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high", "tokens_per_s_per_gpu",
                "weights_gb",
                "kv_cache_gb", "activation_gb", "memory_need_gb", "memory_usable_gb", "memory_gb",
                "gpu_memory_utilization", "usd_per_hour", "usd_per_m_output_tokens", "model_set", "collectives"]


def resolve_model(arg: str, examples: str | os.PathLike, experiments: dict | None = None) -> ModelConfig:
    """The model of ``--model``: a ``config.json`` path, else the name of an example config in the folder
    ``examples`` (``<name>.json``, e.g. ``llama-3.1-70b``; the CLI passes the checkout's ``examples/models/``).
    With ``experiments`` (the pipeline config's block), the model's dtypes are checked against them
    (:func:`check_model_dtypes`).

    Raises:
        InputError: neither a file nor an example name (the message lists the examples); a dtype no model was
            trained on.
    """
    p = Path(arg)
    if not p.is_file():
        p = Path(examples) / f"{arg.lower()}.json"
        if not p.is_file():
            names = sorted(f.stem for f in Path(examples).glob("*.json"))
            raise InputError(f"--model {arg}: not a file nor a shipped example; examples: {names}")
    model = load_model_config(p)
    if experiments is not None:
        check_model_dtypes(model, experiments, str(p))
    return model


def check_model_dtypes(model: ModelConfig, experiments: dict, where: str) -> None:
    """Refuse a model priced in a dtype that no experiment of a family it needs was trained on
    (:func:`synperf.api.route_experiment`): the linear layers, attention, RMSNorm and SiLU&Mul in ``model.dtype``
    (``torch_dtype``); the routed experts of an MoE model in ``model.moe_dtype`` (``quantization_config``) or
    ``model.dtype``. ``experiments`` is the pipeline config's block; ``where`` (the config file) starts the message.

    Raises:
        InputError: naming the config field, the family and the dtypes its experiments were trained on.
    """
    import pandas as pd

    from synperf.api import route_experiment

    field = model.dtype_field or "torch_dtype (absent: the default)"
    uses = [(f, field, model.dtype) for f in ("gemm", "attention_prefill", "attention_decode", "rmsnorm", "silu_mul")]
    if model.num_experts:
        uses.append(("fused_moe", "quantization_config" if model.moe_dtype else field, model.moe_dtype or model.dtype))
    for family, field, dtype in uses:
        try:
            route_experiment(family, pd.Series([dtype]), None, experiments)
        except InputError:
            trained = sorted({str(d) for e in experiments.values() if isinstance(e, dict)
                              and e.get("kernel") == family for d in (e.get("dtypes") or [])})
            raise InputError(f"{where}: {field} {dtype}: no {family} model was trained on {dtype} (trained: "
                             f"{', '.join(trained)}); the composer prices the model in its config's dtype") from None


def dtype_note(model: ModelConfig) -> str | None:
    """A line for stderr where the model is priced in another dtype than its config names, or names none
    (:attr:`ModelConfig.dtype`: vLLM's ``--dtype auto``)."""
    if model.config_dtype == model.dtype:
        return None
    says = (f"the config's {model.dtype_field} is {model.config_dtype}" if model.config_dtype
            else "the config names no torch_dtype")
    experts = f" (the routed experts in {model.moe_dtype}, from quantization_config)" if model.moe_dtype else ""
    return (f"synperf: note: {model.name}: {says}; priced in {model.dtype}{experts}, as vLLM's --dtype auto serves "
            "it on sm_80 and later GPUs")


def layer_params(m: ModelConfig) -> int:
    """Parameters of one decoder layer (elements, unsharded): Q/K/V and output projections, the gated MLP (or
    router + experts + shared expert) and the two RMSNorm weights."""
    attn = m.hidden_size * (m.num_heads + 2 * m.num_kv_heads) * m.head_dim + m.num_heads * m.head_dim * m.hidden_size
    if m.is_moe:
        mlp = (m.hidden_size * m.num_experts + m.num_experts * 3 * m.hidden_size * m.moe_intermediate_size
               + 3 * m.hidden_size * m.shared_expert_intermediate_size)
    else:
        mlp = 3 * m.hidden_size * m.intermediate_size
    return attn + mlp + 2 * m.hidden_size


def usable_memory_gb(registry, gpu: str, utilization: float = GPU_MEMORY_UTILIZATION) -> float:
    """GB (1e9 bytes) of ``gpu``'s memory a serving engine may use: ``utilization`` x the registry's ``memory_gb``
    in the bytes CUDA reports for its memory family (:data:`MEMORY_UNIT_BYTES`). The one capacity :func:`plan`,
    ``synperf e2e`` and the serving KV cache (:func:`synperf.serving.metrics.kv_cache_tokens`) check against.

    Raises:
        InputError: ``gpu`` is not in the registry.
    """
    spec = registry[gpu]
    return utilization * float(spec.datasheet().memory_gb) * MEMORY_UNIT_BYTES[spec.memory_family] / GB


def weight_bytes(m: ModelConfig, tp: int, pp: int = 1, linear_bytes: float | None = None,
                 embedding_bytes: float | None = None) -> float:
    """Weight bytes per GPU of ``m`` at ``tp`` x ``pp`` (the stage with the most layers): the layers' linear
    weights (:func:`layer_params`) at ``linear_bytes`` and the vocab-parallel embedding and LM head at
    ``embedding_bytes`` (each default the model dtype's bytes), over ``tp``. All experts count (no expert
    parallelism); an FP8 MoE checkpoint's routed experts (``moe_dtype``) at 1 byte per weight whatever
    ``linear_bytes`` (the block scales, 1/16384 of them, are left out).

    Raises:
        InputError: the model cannot be sharded so (:meth:`ModelConfig.shard`).
    """
    nbytes = DTYPE_BYTES.get(m.dtype, 2)
    linear_bytes = nbytes if linear_bytes is None else linear_bytes
    embedding_bytes = nbytes if embedding_bytes is None else embedding_bytes
    layers = max(m.shard(tp, pp).layers_per_stage)
    weights = layers * layer_params(m) * linear_bytes + 2 * m.vocab_size * m.hidden_size * embedding_bytes
    if m.is_moe and m.moe_dtype:  # FP8 experts (every expert on every GPU): 1 byte per routed-expert weight
        weights -= layers * m.num_experts * 3 * m.hidden_size * m.moe_intermediate_size * (linear_bytes - 1)
    return weights / tp


def memory_need(m: ModelConfig, tp: int, pp: int, kv_tokens: int) -> dict:
    """Per-GPU memory of ``m`` at ``tp`` x ``pp`` holding ``kv_tokens`` tokens of KV cache, in GB (1e9 bytes):
    ``weights_gb`` (:func:`weight_bytes` at the model dtype: an FP8 MoE checkpoint's other weights at ``dtype``
    bytes, an overestimate, as those checkpoints store the attention projections in FP8 too), ``kv_cache_gb``,
    ``activation_gb`` and their sum ``memory_need_gb`` (module docstring).

    Raises:
        InputError: the model cannot be sharded so (:meth:`ModelConfig.shard`).
    """
    sm = m.shard(tp, pp)
    nbytes = DTYPE_BYTES.get(m.dtype, 2)
    layers = max(sm.layers_per_stage)
    weights = weight_bytes(m, tp, pp)
    kv = kv_tokens * 2 * layers * sm.num_kv_heads * m.head_dim * nbytes
    return {"weights_gb": weights / GB, "kv_cache_gb": kv / GB, "activation_gb": ACTIVATION_GB,
            "memory_need_gb": weights / GB + kv / GB + ACTIVATION_GB}


def kv_tokens(requests: list[Request], max_batch: int | None) -> int:
    """Tokens in the KV cache at the end of the largest batch (static batching in trace order, groups of
    ``max_batch``): the largest group sum of prompt + output tokens."""
    b = max_batch or len(requests)
    return max(sum(r.prompt_tokens + r.output_tokens for r in requests[i:i + b]) for i in range(0, len(requests), b))


#: the highest ``--price`` taken, USD per GPU-hour: two orders of magnitude above any cloud rate of a single GPU, so
#: a price above it is a typo (a per-node or per-month figure, a missing decimal point), not a rate
MAX_USD_PER_HOUR = 1000.0


def parse_prices(items: list[str] | None, registry: Registry) -> dict[str, float]:
    """``GPU=USD_PER_HOUR`` strings as ``{gpu: usd}`` (per GPU, per hour).

    Raises:
        InputError: no ``=``, a price that is not a number in (0, :data:`MAX_USD_PER_HOUR`], a GPU priced twice, or
            an unknown GPU id (named).
    """
    out = {}
    for it in items or []:
        gpu, sep, val = it.partition("=")
        try:
            usd = float(val)
        except ValueError:
            usd = float("nan")
        if not sep or not (0 < usd <= MAX_USD_PER_HOUR):
            raise InputError(f"--price {it}: expected GPU=USD_PER_HOUR with a price above 0 and at most "
                             f"{MAX_USD_PER_HOUR:g} per GPU-hour, e.g. h100_sxm=2.5")
        registry[gpu.strip()]
        if gpu.strip() in out:
            raise InputError(f"--price {it}: {gpu.strip()} priced twice")
        out[gpu.strip()] = usd
    return out


class _Recorder:
    """A ``predict_fn`` that answers with ``inner``'s predictions and keeps each family's result, for the
    per-family flags and the model set."""

    def __init__(self, inner: Callable):
        self.inner, self.outs = inner, {}

    def __call__(self, family, params, gpu, **kw):
        out = self.inner(family, params, gpu, **kw)
        self.outs[family] = out
        return out

    def training_gpus(self, family: str) -> set[str]:
        """The training GPUs of ``family``'s model: ``attrs["training_gpus"]`` of the prediction (the
        fingerprint predictor's, :func:`synperf.api.predict`), else ``train_gpus`` of ``meta.json`` in
        ``attrs["model_dir"]`` (an MLP folder), else none."""
        return set(training_gpus_of(self.outs[family]) or ())

    def model_sets(self) -> str:
        """The model sets that answered (``attrs["model_set"]`` of each family's prediction), ``+``-joined;
        ``unknown`` for a predictor that does not say."""
        return "+".join(sorted({str(o.attrs.get("model_set", "unknown")) for o in self.outs.values()}))


def price(model: ModelConfig, requests: list[Request], gpu: str, tp: int, pp: int, *, registry: Registry,
          max_batch: int | None = None, policy: str = "static", collectives: CollectiveModel | None = None,
          overhead: Overhead = Overhead(), models_dir: str | os.PathLike | None = None,
          predict_fn: Callable | None = None) -> dict:
    """One priced configuration: the ``synperf e2e`` prediction (``generate`` + ``compose``), its 80% bounds
    (:meth:`~.compose.E2EResult.intervals`), ``model_set`` and the per-family ``flag_<family>`` (module docstring).
    Times in ms (prefill, decode step) and s (total).

    Raises:
        InputError: from :func:`~.workload.generate` or :func:`~.compose.compose`.
    """
    wl = generate(model, requests, tp=tp, pp=pp, max_batch=max_batch, policy=policy,
                  prefill_impl=attention_path(gpu, registry))
    rec = _Recorder(predict_fn or predict)
    res = compose(wl, gpu, predict_fn=rec, models_dir=models_dir, registry=registry, collectives=collectives,
                  overhead=overhead)
    iv = res.intervals()
    row = {"prefill_ms": res.prefill_s * 1e3, "decode_step_ms": res.decode_step_s * 1e3, "total_s": res.total_s,
           "prefill_low_ms": iv["prefill_low_s"] * 1e3, "prefill_high_ms": iv["prefill_high_s"] * 1e3,
           "decode_step_low_ms": iv["decode_step_low_s"] * 1e3, "decode_step_high_ms": iv["decode_step_high_s"] * 1e3,
           "total_low_s": iv["total_low_s"], "total_high_s": iv["total_high_s"], "model_set": rec.model_sets()}
    for fam in KERNEL_FAMILIES:
        if fam in rec.outs:
            row[f"flag_{fam}"] = "trained" if gpu in rec.training_gpus(fam) else "unseen"
    # collectives not from the GPU's own NCCL table (a proxy GPU's, bandwidth-scaled; :meth:`CollectiveModel.describe`)
    comm = res.models[res.models["family"].isin(COLLECTIVES) & ~res.models["path"].str.startswith("measured table")]
    row["collectives"] = "; ".join(dict.fromkeys(f"{m.family}: {m.path}" for m in comm.itertuples()))
    return row


def plan(model: ModelConfig, requests: list[Request], gpus: list[str], tps: list[int], pps: list[int], *,
         registry: Registry, max_batch: int | None = None, policy: str = "static",
         collectives: CollectiveModel | None = None, overhead: Overhead = Overhead(),
         models_dir: str | os.PathLike | None = None, prices: dict[str, float] | None = None,
         predict_fn: Callable | None = None, gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
         progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """One row per (GPU, TP, PP) (:data:`PLAN_COLUMNS` plus ``flag_<family>``, module docstring); the memory
    columns on every row that can be sharded, the latency, interval and flag columns on the priced ones.
    ``status`` is ``ok`` for a priced row, else ``does not fit: needs X GB of Y GB usable`` (``memory_need_gb`` above
    ``memory_usable_gb``, :func:`usable_memory_gb`; ``memory_gb`` is the datasheet figure), ``not modelled: TP <n>
    all-reduces across nodes`` (more GPUs
    than the collective tables measure, :meth:`~.collectives.CollectiveModel.spans_nodes`), ``not modelled: TP <n> x
    PP <m> spans nodes`` (:meth:`~.collectives.CollectiveModel.pipeline_spans_nodes`), ``cannot run
    <dtype>`` (the
    GPU has no Tensor Core peak for the model's dtype, as :func:`synperf.data.launches.check_launches` refuses) or
    ``cannot shard: <why>``; priced rows first, by ``total_s``. ``tokens_per_s`` = output tokens / total;
    ``usd_per_m_output_tokens`` = price per GPU-hour x GPUs x total /
    3600 / output tokens x 1e6 (where ``prices`` names the GPU). ``progress(done, total)`` is called after each
    (GPU, TP, PP) configuration (:func:`synperf.api.progress_reporter` draws a bar).

    Raises:
        InputError: an unknown GPU id, a policy not in :data:`~.workload.POLICIES`, TP or PP < 1,
            ``gpu_memory_utilization`` outside (0, 1], TP/PP > 1
            without ``collectives``, or a predictor error (no trained model, ...).
    """
    if policy not in POLICIES:
        raise InputError(f"unknown batching policy {policy!r}; expected one of {POLICIES}")
    for g in gpus:
        registry[g]
    if any(t < 1 for t in tps) or any(p < 1 for p in pps):
        raise InputError(f"--tp and --pp must be >= 1 (got {tps}, {pps})")
    if collectives is None and (max(tps) > 1 or max(pps) > 1):
        raise InputError("TP/PP > 1 needs the collective tables: pass --collectives "
                         "PUBLIC_DATA/pipeweave/dataset/collective")
    if not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization {gpu_memory_utilization}: expected a fraction in (0, 1]")
    prices = prices or {}
    run = run_requests(requests, policy)   # merged: one sequence, generating its longest output only
    out_tokens = sum(r.output_tokens for r in run)
    tokens = kv_tokens(run, max_batch if policy != "merged" else None)
    rows = []
    n_configs = len(gpus) * len(tps) * len(pps)
    for gpu in gpus:
        cap = float(registry[gpu].datasheet().memory_gb)
        usable = usable_memory_gb(registry, gpu, gpu_memory_utilization)
        try:   # a GEMM in the model's dtype: refused where the GPU has no Tensor Core peak for it
            launch_table("gemm", {"m": 1, "n": 1, "k": 1, "dtype": model.dtype}, gpu, registry)
            runs = True
        except InputError:
            runs = False
        for tp in tps:
            for pp in pps:
                if progress is not None and rows:
                    progress(len(rows), n_configs)
                row = {"gpu": gpu, "tp": tp, "pp": pp, "gpus": tp * pp, "memory_gb": cap,
                       "memory_usable_gb": usable, "gpu_memory_utilization": gpu_memory_utilization,
                       "usd_per_hour": prices.get(gpu, math.nan)}
                try:
                    row.update(memory_need(model, tp, pp, tokens))
                except InputError as e:
                    rows.append({**row, "status": f"cannot shard: {e}"})
                    continue
                if not runs:
                    rows.append({**row, "status": f"cannot run {model.dtype}: no Tensor Core peak for it in the "
                                                  "registry"})
                    continue
                if row["memory_need_gb"] > usable:
                    rows.append({**row, "status": f"does not fit: needs {row['memory_need_gb']:.1f} GB of "
                                                  f"{usable:.1f} GB usable"})
                    continue
                if collectives is not None and collectives.spans_nodes("all_reduce", tp):
                    rows.append({**row, "status": f"not modelled: TP {tp} all-reduces across nodes (the NCCL "
                                                  f"tables measure at most {collectives.max_workers('all_reduce')} "
                                                  "GPUs)"})
                    continue
                if collectives is not None and collectives.pipeline_spans_nodes(tp, pp):
                    rows.append({**row, "status": f"not modelled: TP {tp} x PP {pp} spans nodes (the NCCL tables "
                                                  f"measure one node, at most {collectives.max_workers('all_reduce')} "
                                                  "GPUs)"})
                    continue
                row.update(price(model, requests, gpu, tp, pp, registry=registry, max_batch=max_batch,
                                 policy=policy, collectives=collectives, overhead=overhead, models_dir=models_dir,
                                 predict_fn=predict_fn))
                row["status"] = "ok"
                row["tokens_per_s"] = out_tokens / row["total_s"]
                row["tokens_per_s_low"] = out_tokens / row["total_high_s"]
                row["tokens_per_s_high"] = out_tokens / row["total_low_s"]
                row["tokens_per_s_per_gpu"] = row["tokens_per_s"] / (tp * pp)
                row["usd_per_m_output_tokens"] = row["usd_per_hour"] * tp * pp * row["total_s"] / 3600 \
                    / out_tokens * 1e6
                rows.append(row)
    if progress is not None:
        progress(len(rows), n_configs)
    df = pd.DataFrame(rows)
    fams = [f"flag_{f}" for f in KERNEL_FAMILIES if f"flag_{f}" in df.columns]
    df = df.reindex(columns=PLAN_COLUMNS + fams)
    df["_ok"] = df["status"] != "ok"
    return df.sort_values(["_ok", "total_s", "gpu", "tp", "pp"], kind="stable").drop(columns="_ok") \
        .reset_index(drop=True)


#: ``synperf plan --sort`` keys: the column a configuration is ranked by and whether lower is better
SORT_KEYS = {"total": ("total_s", True), "tokens-per-gpu": ("tokens_per_s_per_gpu", False),
             "cost": ("usd_per_m_output_tokens", True), "ttft": ("ttft_ms", True), "tpot": ("tpot_ms", True)}


def sort_plan(df: pd.DataFrame, key: str) -> pd.DataFrame:
    """``df`` of :func:`plan` ranked by :data:`SORT_KEYS` ``key``: priced rows with a value first, best first
    (ties by total, GPU, TP, PP), then priced rows without one (e.g. no ``--price`` for that GPU), then the rest.

    Raises:
        InputError: an unknown key, or a key whose column no priced row has (cost without prices, TTFT/TPOT
            without ``--concurrency``).
    """
    if key not in SORT_KEYS:
        raise InputError(f"--sort {key}: expected one of {list(SORT_KEYS)}")
    col, ascending = SORT_KEYS[key]
    values = df[col] if col in df.columns else pd.Series(np.nan, index=df.index)
    # a server's TTFT/TPOT ranks every served row, also one whose static batch does not fit
    priced = (df["status"] == "ok") | (values.notna() if key in ("ttft", "tpot") else False)
    if priced.any() and values[priced].isna().all():
        need = {"cost": "pass --price GPU=USD_PER_HOUR", "ttft": "pass --concurrency",
                "tpot": "pass --concurrency"}.get(key, "")
        if key in ("ttft", "tpot") and col in df.columns:
            need = ("no configuration was served; see serving_status" if key == "ttft"
                    else "none was served with more than one output token per request; see serving_status")
        raise InputError(f"--sort {key}: no configuration has {col}" + (f" ({need})" if need else ""))
    rank = values if ascending else -values
    order = pd.DataFrame({"_bad": ~priced, "_none": values.isna(), "_rank": rank})
    order = pd.concat([order, df[["total_s", "gpu", "tp", "pp"]]], axis=1)
    idx = order.sort_values(["_bad", "_none", "_rank", "total_s", "gpu", "tp", "pp"], kind="stable").index
    return df.loc[idx].reset_index(drop=True)


def format_table(df: pd.DataFrame) -> str:
    """``df`` of :func:`plan` as aligned text: latencies and tokens/s with their 80% interval where there is one,
    memory need of the usable memory (GB), cost, and the kernel families whose model never trained on the GPU
    (``unseen: ...``, else ``trained: every family``)."""
    def iv(v, lo, hi, fmt):
        if pd.isna(v):
            return "-"
        return fmt.format(v) + (f" [{fmt.format(lo)}-{fmt.format(hi)}]" if pd.notna(lo) else "")

    fams = [c for c in df.columns if c.startswith("flag_")]
    lines = []
    for r in df.to_dict("records"):
        unseen = [c[len("flag_"):] for c in fams if r.get(c) == "unseen"]
        lines.append({
            "gpu": r["gpu"], "tp": str(r["tp"]), "pp": str(r["pp"]),
            "prefill ms": iv(r["prefill_ms"], r["prefill_low_ms"], r["prefill_high_ms"], "{:.1f}"),
            "decode step ms": iv(r["decode_step_ms"], r["decode_step_low_ms"], r["decode_step_high_ms"], "{:.2f}"),
            "total s": iv(r["total_s"], r["total_low_s"], r["total_high_s"], "{:.3f}"),
            "tokens/s": iv(r["tokens_per_s"], r["tokens_per_s_low"], r["tokens_per_s_high"], "{:.0f}"),
            "tok/s/GPU": "-" if pd.isna(r.get("tokens_per_s_per_gpu")) else f"{r['tokens_per_s_per_gpu']:.0f}",
            "memory GB": "-" if pd.isna(r["memory_need_gb"]) else
            f"{r['memory_need_gb']:.1f}/{r['memory_usable_gb']:.1f}",
            "$/M out tok": "-" if pd.isna(r["usd_per_m_output_tokens"]) else f"{r['usd_per_m_output_tokens']:.2f}",
            "status": r["status"] if r["status"] != "ok" else
            ("unseen: " + ", ".join(unseen) if unseen else "trained: every family")
            + (f"; {r['collectives']}" if isinstance(r.get("collectives"), str) and r["collectives"] else "")})
    if not lines:
        return ""
    cols = list(lines[0])
    w = {c: max(len(c), *(len(x[c]) for x in lines)) for c in cols}
    return "\n".join("  ".join(f"{v:<{w[c]}}" for c, v in zip(cols, row)).rstrip()
                     for row in [cols] + [[x[c] for c in cols] for x in lines])


def plot(df: pd.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """A bar chart of the priced rows' total latency (s) per configuration, with the interval as whiskers where
    there is one, written to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = df[df["status"] == "ok"]
    labels = [f"{r.gpu} tp{r.tp} pp{r.pp}" for r in ok.itertuples()]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(ok) + 2), 4))
    tot = ok["total_s"].to_numpy(dtype=float)
    err = None
    if ok["total_low_s"].notna().any():
        lo = np.where(ok["total_low_s"].notna(), ok["total_low_s"], tot)
        hi = np.where(ok["total_high_s"].notna(), ok["total_high_s"], tot)
        err = np.vstack([tot - lo, hi - tot])
    ax.bar(range(len(ok)), tot, yerr=err, capsize=3, color="tab:blue")
    ax.set_xticks(range(len(ok)), labels, rotation=45, ha="right")
    ax.set_ylabel("predicted total latency (s)")
    ax.set_title(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:   # no half-written figure
        fig.savefig(tmp, dpi=120, format=Path(path).suffix.lstrip(".").lower() or None)
    plt.close(fig)


def check_fits(model, reqs, gpu: str, tp: int, pp: int, max_batch: int | None, registry) -> None:
    """Refuse a configuration whose weights, KV cache and activations do not fit the GPU's usable memory, as
    ``synperf plan`` marks it (:func:`memory_need` against vLLM's default
    ``gpu_memory_utilization`` of the GPU's memory, :func:`usable_memory_gb`).

    Raises:
        InputError: the memory needed and usable, in GB; or the model cannot be sharded so.
    """
    need = memory_need(model, tp, pp, kv_tokens(reqs, max_batch))["memory_need_gb"]
    usable = usable_memory_gb(registry, gpu)
    if need > usable:
        raise InputError(f"{model.name} at tp={tp} pp={pp} does not fit {gpu}: needs {need:.1f} GB per GPU of "
                         f"{usable:.1f} GB usable (synperf plan lists the configurations that fit)")
