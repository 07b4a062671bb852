"""Workload generator: (model config, request trace, TP, PP, batch, batching policy) -> the kernel launches of
every scheduler iteration.

The rules below reproduce the SynPerf/PipeWeave authors' own operator lists
(``pipeweave/e2e/workload/*.json``, github.com/zksainx/pipeweave @ 55e0317) exactly for all 25 files
(``tests/test_e2e_workload.py``):

Scheduling (policy ``"static"``, the authors' default): requests are taken in trace order in groups of
``max_batch`` (default: the whole trace, which is what every oracle file and real run uses: the trace name's
number is its request count, e.g. ``arxiv_16`` = 16 requests). A group runs one prefill iteration with all its
prompts at once (ragged query lengths, no chunking, no token budget: the oracles have up to 60,296 tokens in one
prefill), then decode steps with one query token per request and the KV length growing by one per step. The
prefill produces the first output token, so a request with ``output_tokens`` = n takes n - 1 decode steps; a
request that is done leaves the batch. The next group starts when the previous one is done.

Policy ``"merged"`` (the authors' ``vllm_a8``, ``vllm_a16`` and ``vllm_s32`` files): the whole trace as ONE
sequence whose prompt is the sum of all prompts and whose output is the longest output (batch 1); those three
files are ``arxiv_8``, ``arxiv_16`` and ``splitwise_32`` treated this way.

Operators per forward pass (counts over the WHOLE model: with PP > 1 the stages run one after the other for one
batch, so the iteration is the sum over stages; the per-stage layer split is ``ShardedModel.layers_per_stage``):

============  ===========================  =====================================  =========
operator      kernel family                shape (per GPU, T = tokens in the pass)  count
============  ===========================  =====================================  =========
qkv_proj      gemm                         M=T, N=(H/tp + 2·max(1,Hkv/tp))·D, K=h  L
o_proj        gemm                         M=T, N=h, K=(H/tp)·D                     L
gate_up_proj  gemm                         M=T, N=2·I/tp, K=h                       L
down_proj     gemm                         M=T, N=h, K=I/tp                         L
lm_head       gemm                         M=sequences, N=vocab (not sharded), K=h  1
attention     attention_prefill / _decode  heads H/tp, KV heads max(1,Hkv/tp), D    L
rmsnorm       rmsnorm                      seq=T, dim=h                              2·L + 1
siluandmul    silu_mul                     seq=T, dim=2·I/tp (input width)          L
all_reduce    collective (tp > 1)          T·h·2 bytes                               2·L
send_recv     p2p (pp > 1)                 2·T·h·2 bytes (hidden + residual)         pp - 1
============  ===========================  =====================================  =========

(no embedding, no sampling: the authors' lists have none). Qwen3's per-head q/k RMSNorms are generated with
their true shapes (``qk_norm`` ops: rows = T x heads, width = head_dim, L each); the authors' files disagree on
them: ``Qwen3-32B_{arxiv_12,splitwise_48}_*`` omit them (rmsnorm count 2 L + 1) and
``Qwen3-32B_{arxiv_16,splitwise_64}_*`` count them as two more full-width rmsnorm calls per layer
(4 L + 1); :func:`to_oracle_format` renders either.

Context limit: like vLLM (``max_model_len`` = ``max_position_embeddings``), a prompt is truncated to
``max_model_len - output_tokens`` tokens. This only bites on the merged sequence of ``vllm_s32``
(Qwen2.5-14B, 32,768 positions: 33,950 prompt tokens -> 32,720 = 32,768 - 48). The attention type is
``<fa2|fa3>_ragged`` in prefill and ``fa2_paged`` in every decode step, whatever the prefill implementation.
MoE models (not in the oracles) replace gate_up/siluandmul/down by a router GEMM (``gate``: N = experts) and one
``fused_moe`` launch (experts tensor-parallel inside each expert), plus the shared expert's dense GEMMs when the
config has one.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from ._deps import InputError, read_user_csv
from .model_config import ModelConfig, ShardedModel

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1}
POLICIES = ("static", "merged")


@dataclass(frozen=True)
class Request:
    """One request of a trace: prompt tokens and output tokens (the first comes from the prefill)."""

    prompt_tokens: int
    output_tokens: int


@dataclass
class Op:
    """One operator of a forward pass: ``kind`` is ``gemm``, ``attention``, ``rmsnorm``, ``siluandmul``,
    ``fused_moe``, ``all_reduce`` or ``send_recv``; ``params`` its shape (GEMM ``M``/``N``/``K``; attention
    ``nh``/``nkv``/``hd``/``attention_type``; norm/act ``seq``/``dim``; collectives ``volume_bytes``);
    ``count`` launches per forward pass."""

    kind: str
    name: str
    params: dict
    count: int


@dataclass
class Iteration:
    """One scheduler iteration (1-based ``index``): ``phase`` prefill/decode, per-sequence query and KV lengths
    (tokens), and its operators."""

    index: int
    phase: str
    q_lengths: tuple[int, ...]
    kv_lengths: tuple[int, ...]
    ops: list[Op] = field(default_factory=list)

    @property
    def batch_size(self) -> int:
        return len(self.q_lengths)

    @property
    def num_tokens(self) -> int:
        return int(sum(self.q_lengths))


@dataclass
class Workload:
    """The iterations of one configuration plus what generated them."""

    model: ShardedModel
    iterations: list[Iteration]
    policy: str
    max_batch: int
    prefill_impl: str


def read_trace(path: str | os.PathLike) -> list[Request]:
    """Read a request trace CSV with columns ``num_prefill_tokens`` and ``output_tokens`` (tokens; other columns,
    e.g. ``num_decode_tokens``, are ignored: the authors' generator uses ``output_tokens``).

    Raises:
        InputError: unreadable file (not UTF-8 text, a line with more fields than the header:
            :func:`synperf.data.io.read_user_csv`), missing column, a non-integer, a prompt < 1 or an output < 1
            (row named).
    """
    p = Path(path)
    df = read_user_csv(p, f"{p}: trace")
    for col in ("num_prefill_tokens", "output_tokens"):
        if col not in df.columns:
            raise InputError(f"{p}: trace needs column {col!r} (has {list(df.columns)})")
    out = []
    raw = df[["num_prefill_tokens", "output_tokens"]]
    nums = raw.apply(pd.to_numeric, errors="coerce").to_numpy(dtype="float64")
    for i, (row, (a, b)) in enumerate(zip(raw.itertuples(index=False), nums), start=2):
        if not (np.isfinite(a) and np.isfinite(b) and a.is_integer() and b.is_integer()):
            raise InputError(f"{p}: line {i}: token counts must be integers, got {tuple(row)}")
        pr, ou = int(a), int(b)
        if pr < 1 or ou < 1:
            raise InputError(f"{p}: line {i}: num_prefill_tokens and output_tokens must be >= 1, got {pr}, {ou}")
        out.append(Request(pr, ou))
    if not out:
        raise InputError(f"{p}: trace has no requests")
    return out


def schedule(requests: list[Request], max_batch: int | None = None, policy: str = "static",
             max_model_len: int | None = None) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """The scheduler's iterations as ``(phase, q_lengths, kv_lengths)`` (tokens); see the module docstring.

    ``max_model_len`` (tokens; None = no limit) truncates a prompt to ``max_model_len - output_tokens``.

    Raises:
        InputError: unknown policy, ``max_batch`` < 1, no requests, an output that alone exceeds
            ``max_model_len``.
    """
    return list(iter_schedule(requests, max_batch, policy, max_model_len))


def run_requests(requests: list[Request], policy: str) -> list[Request]:
    """The requests a batching ``policy`` runs: ``requests`` as they are, or for ``"merged"`` one sequence of all
    their prompt tokens and the longest output (module docstring); the output tokens a run generates are theirs."""
    if policy == "merged" and requests:
        return [Request(sum(r.prompt_tokens for r in requests), max(r.output_tokens for r in requests))]
    return list(requests)


def _scheduled_requests(requests: list[Request], max_batch: int | None, policy: str,
                        max_model_len: int | None) -> tuple[list[Request], int]:
    """The requests the scheduler runs (merged, truncated) and the batch size; raises as :func:`schedule`."""
    if policy not in POLICIES:
        raise InputError(f"unknown batching policy {policy!r}; expected one of {POLICIES}")
    if not requests:
        raise InputError("no requests")
    requests = run_requests(requests, policy)
    if max_model_len is not None:
        if any(r.output_tokens >= max_model_len for r in requests):
            raise InputError(f"an output of {max(r.output_tokens for r in requests)} tokens does not fit "
                             f"max_model_len={max_model_len}")
        requests = [Request(min(r.prompt_tokens, max_model_len - r.output_tokens), r.output_tokens)
                    for r in requests]
    max_batch = len(requests) if max_batch is None else int(max_batch)
    if max_batch < 1:
        raise InputError(f"max_batch must be >= 1, got {max_batch}")
    return requests, max_batch


def iter_schedule(requests: list[Request], max_batch: int | None = None, policy: str = "static",
                  max_model_len: int | None = None) -> Iterator[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """:func:`schedule`'s iterations one at a time (the arguments are checked on the call, before the first).

    Raises:
        InputError: as :func:`schedule`.
    """
    requests, max_batch = _scheduled_requests(requests, max_batch, policy, max_model_len)

    def its():
        for start in range(0, len(requests), max_batch):
            group = requests[start:start + max_batch]
            prompts = tuple(r.prompt_tokens for r in group)
            yield "prefill", prompts, prompts
            for step in range(1, max(r.output_tokens for r in group)):
                live = [r for r in group if r.output_tokens - 1 >= step]
                yield "decode", (1,) * len(live), tuple(r.prompt_tokens + step for r in live)
    return its()


def iteration_count(requests: list[Request], max_batch: int | None = None, policy: str = "static") -> int:
    """How many iterations :func:`schedule` gives (one prefill per group of ``max_batch`` requests plus its
    longest output - 1 decode steps), without building them.

    Raises:
        InputError: as :func:`schedule`.
    """
    requests, max_batch = _scheduled_requests(requests, max_batch, policy, None)
    return sum(max(r.output_tokens for r in requests[s:s + max_batch]) for s in range(0, len(requests), max_batch))


def forward_ops(sm: ShardedModel, phase: str, q_lengths: tuple[int, ...], prefill_impl: str = "fa2") -> list[Op]:
    """The operators of one forward pass of the whole model (all PP stages) on one GPU; see the module table."""
    m = sm.model
    T, B, L, h = int(sum(q_lengths)), len(q_lengths), m.num_layers, m.hidden_size
    nbytes = DTYPE_BYTES.get(m.dtype, 2)
    g = lambda name, typ, M, N, K, count: Op("gemm", name, {"type": typ, "M": M, "N": N, "K": K}, count)  # noqa: E731
    ops = [g("qkv_proj", "ColumnParallelLinear", T, sm.qkv_out, h, L),
           g("o_proj", "RowParallelLinear", T, h, sm.attn_out, L)]
    if m.is_moe:
        ops.append(g("gate", "ReplicatedLinear", T, m.num_experts, h, L))
        if sm.shared_expert_intermediate_size:
            si = sm.shared_expert_intermediate_size
            ops += [g("shared_gate_up_proj", "MergedColumnParallelLinear", T, 2 * si, h, L),
                    g("shared_down_proj", "RowParallelLinear", T, h, si, L)]
    else:
        ops += [g("gate_up_proj", "MergedColumnParallelLinear", T, 2 * sm.intermediate_size, h, L),
                g("down_proj", "RowParallelLinear", T, h, sm.intermediate_size, L)]
    ops.append(g("lm_head", "Linear", B, m.vocab_size, h, 1))
    attn_type = f"{prefill_impl}_ragged" if phase == "prefill" else "fa2_paged"
    ops.append(Op("attention", "attention", {"attention_type": attn_type, "nh": sm.num_heads,
                                             "nkv": sm.num_kv_heads, "hd": m.head_dim}, L))
    ops.append(Op("rmsnorm", "rmsnorm", {"seq": T, "dim": h}, 2 * L + 1))
    if m.qk_norm and m.qk_norm_type == "per_layer":  # MiniMax-M2: one RMSNorm over all local query (key) heads
        ops.append(Op("qk_norm", "q_norm", {"seq": T, "dim": sm.num_heads * m.head_dim}, L))
        ops.append(Op("qk_norm", "k_norm", {"seq": T, "dim": sm.num_kv_heads * m.head_dim}, L))
    elif m.qk_norm:  # Qwen3: RMSNorm over each query head and each key head (rows = tokens x heads, width head_dim)
        ops.append(Op("qk_norm", "q_norm", {"seq": T * sm.num_heads, "dim": m.head_dim}, L))
        ops.append(Op("qk_norm", "k_norm", {"seq": T * sm.num_kv_heads, "dim": m.head_dim}, L))
    if m.is_moe:
        ops.append(Op("fused_moe", "experts", {"num_tokens": T, "hidden_size": h,
                                               "inter_size": m.moe_intermediate_size, "topk": m.num_experts_per_tok,
                                               "num_experts": m.num_experts, "moe_tp_size": sm.tp}, L))
        if sm.shared_expert_intermediate_size:
            ops.append(Op("siluandmul", "siluandmul", {"seq": T, "dim": 2 * sm.shared_expert_intermediate_size}, L))
    else:
        ops.append(Op("siluandmul", "siluandmul", {"seq": T, "dim": 2 * sm.intermediate_size}, L))
    if sm.tp > 1:
        ops.append(Op("all_reduce", "all_reduce", {"volume_bytes": T * h * nbytes, "workers": sm.tp}, 2 * L))
    if sm.pp > 1:
        ops.append(Op("send_recv", "send_recv", {"volume_bytes": 2 * T * h * nbytes, "workers": 2}, sm.pp - 1))
    return ops


def generate(model: ModelConfig, requests: list[Request], tp: int = 1, pp: int = 1, max_batch: int | None = None,
             policy: str = "static", prefill_impl: str = "fa2", max_model_len: int | None = -1) -> Workload:
    """Every iteration's operators for ``requests`` served by ``model`` on ``tp`` x ``pp`` GPUs.

    Args:
        prefill_impl: ``fa2`` or ``fa3``: only names the prefill attention type (``fa2_ragged``/``fa3_ragged``);
            which kernel path is predicted is decided by the GPU (see :mod:`.compose`).
        max_model_len: context limit in tokens (prompts are truncated to ``max_model_len - output_tokens``);
            default (-1) the model's ``max_position_embeddings`` like vLLM; None for no limit.

    Raises:
        InputError: bad sharding (:meth:`ModelConfig.shard`), policy or batch (:func:`schedule`).
    """
    if prefill_impl not in ("fa2", "fa3"):
        raise InputError(f"prefill_impl must be 'fa2' or 'fa3', got {prefill_impl!r}")
    sm = model.shard(tp, pp)
    limit = model.max_position_embeddings if max_model_len == -1 else max_model_len
    its = [Iteration(i, phase, q, kv, forward_ops(sm, phase, q, prefill_impl))
           for i, (phase, q, kv) in enumerate(schedule(requests, max_batch, policy, limit), start=1)]
    return Workload(sm, its, policy, max_batch or len(requests), prefill_impl)


#: iterations per :class:`Workload` that :func:`generate_groups` yields unless told
GROUP_ITERATIONS = 20_000


def generate_groups(model: ModelConfig, requests: list[Request], tp: int = 1, pp: int = 1,
                    max_batch: int | None = None, policy: str = "static", prefill_impl: str = "fa2",
                    max_model_len: int | None = -1, group_iterations: int = GROUP_ITERATIONS) -> Iterator[Workload]:
    """:func:`generate`'s iterations as consecutive workloads of at most ``group_iterations`` iterations each
    (indices continue across them), built one workload at a time, so that a long trace never holds every
    iteration at once. The arguments are checked on the call.

    Raises:
        InputError: as :func:`generate`, or ``group_iterations`` not an integer >= 1.
    """
    if prefill_impl not in ("fa2", "fa3"):
        raise InputError(f"prefill_impl must be 'fa2' or 'fa3', got {prefill_impl!r}")
    if isinstance(group_iterations, bool) or not isinstance(group_iterations, int) or group_iterations < 1:
        raise InputError(f"group_iterations = {group_iterations!r}; expected an integer >= 1")
    sm = model.shard(tp, pp)
    limit = model.max_position_embeddings if max_model_len == -1 else max_model_len
    sched = iter_schedule(requests, max_batch, policy, limit)

    def groups():
        its = []
        for i, (phase, q, kv) in enumerate(sched, start=1):
            its.append(Iteration(i, phase, q, kv, forward_ops(sm, phase, q, prefill_impl)))
            if len(its) == group_iterations:
                yield Workload(sm, its, policy, max_batch or len(requests), prefill_impl)
                its = []
        if its:
            yield Workload(sm, its, policy, max_batch or len(requests), prefill_impl)
    return groups()


def to_oracle_format(it: Iteration, qk_norm: str = "omit") -> dict:
    """An iteration in the layout of the authors' ``e2e/workload/*.json`` iterations (for comparison).

    ``qk_norm``: how the authors' file lists Qwen3's per-head q/k RMSNorms: ``omit`` (their files for arxiv_12 and
    splitwise_48) or ``lump`` (two more full-width ``rmsnorm`` calls per layer: count ``4 L + 1``, their files for
    arxiv_16 and splitwise_64). Their two file versions disagree; the generator itself keeps the true shapes.
    """
    if qk_norm not in ("omit", "lump"):
        raise InputError(f"qk_norm must be 'omit' or 'lump', got {qk_norm!r}")
    ops: dict = {"gemm": []}
    comm = []
    lumped = sum(op.count for op in it.ops if op.kind == "qk_norm") if qk_norm == "lump" else 0
    for op in it.ops:
        if op.kind == "qk_norm":
            continue
        if op.kind == "rmsnorm":
            ops["rmsnorm"] = {**op.params, "count": op.count + lumped}
            continue
        if op.kind == "gemm":
            ops["gemm"].append({"name": op.name, **op.params, "count": op.count})
        elif op.kind == "attention":
            ops["attention"] = {"attention_type": op.params["attention_type"], "bs": it.batch_size,
                                "q_lengths": list(it.q_lengths), "kv_lengths": list(it.kv_lengths),
                                "nh": op.params["nh"], "nkv": op.params["nkv"], "hd": op.params["hd"],
                                "count": op.count}
        elif op.kind in ("rmsnorm", "siluandmul", "fused_moe"):
            ops[op.kind] = {**op.params, "count": op.count}
        else:
            comm.append({"name": op.name, "type": "collective" if op.kind == "all_reduce" else "p2p",
                         "volume_bytes": op.params["volume_bytes"], "count": op.count})
    ops["communication"] = comm
    return {"iteration": it.index, "phase": it.phase, "batch_size": it.batch_size, "q_lengths": list(it.q_lengths),
            "kv_lengths": list(it.kv_lengths), "num_tokens": it.num_tokens, "operators": ops}


def equivalent_prefill_len(q_lengths) -> int:
    """Uniform query length with the same causal work as a ragged prefill batch:
    ``round(sqrt(mean(q^2)))`` so that ``B * S^2 = sum(q^2)`` (tokens). The attention models take one
    ``seq_len`` per launch; this keeps the batch's attention FLOPs."""
    return max(1, round(math.sqrt(sum(q * q for q in q_lengths) / len(q_lengths))))


def equivalent_decode_kv(kv_lengths) -> int:
    """Uniform KV length with the same KV-cache bytes as a ragged decode batch: ``round(mean(kv))`` (tokens)."""
    return max(1, round(sum(kv_lengths) / len(kv_lengths)))


def check_context(model, reqs, source: str, policy: str = "static") -> None:
    """Refuse a request whose prompt plus output tokens exceed the config's ``max_position_embeddings``, naming
    ``source`` (file or flags). With ``policy`` merged the one merged sequence is cut to the context as the
    authors' merged runs were (``vllm_s32``), and a note on stderr says so.

    Raises:
        InputError: the first such request (static policy), with its token counts and the limit."""
    limit = model.max_position_embeddings
    for i, r in enumerate(run_requests(reqs, policy) if limit else []):
        if r.prompt_tokens + r.output_tokens <= limit:
            continue
        if policy == "merged":
            print(f"synperf: note: {source}: the merged sequence (--policy merged) of {r.prompt_tokens} prompt "
                  f"tokens is cut to {limit - r.output_tokens} ({model.name}'s context of {limit} minus "
                  f"{r.output_tokens} output tokens)", file=sys.stderr)
            return
        raise InputError(f"{source}: request {i + 1} has {r.prompt_tokens} prompt + {r.output_tokens} output "
                         f"tokens, above {model.name}'s context of {limit} (max_position_embeddings)")
