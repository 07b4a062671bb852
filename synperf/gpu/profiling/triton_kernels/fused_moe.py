"""Fused mixture-of-experts (MoE) layer in Triton, the structure of vLLM's ``fused_experts``.

For ``T`` tokens of hidden size ``H``, each routed to ``topk`` of ``E`` experts (of which this GPU
holds ``E_local``, experts ``[expert_offset, expert_offset + E_local)``, each with intermediate size
``I`` after tensor parallelism):

1. **routing** (:func:`route`): ``topk_ids`` [T, topk] and ``topk_weights`` [T, topk] from a routing
   distribution (balanced, power law, random softmax);
2. **sort and pad** (:func:`moe_align_block_size`): the (token, expert) *pairs* ``p = t * topk + j`` that
   go to a local expert are grouped by expert and each expert's group is padded to a multiple of
   ``BLOCK_SIZE_M``, so every ``BLOCK_SIZE_M``-row block of the sorted list belongs to one expert
   (``expert_ids`` has one entry per block); padding entries hold the sentinel ``T * topk``;
3. **w13 grouped GEMM** (:func:`grouped_gemm`): ``cache1[p] = x[p // topk] @ w13[e]^T``, w13 is
   [E_local, 2I, H] (gate and up projections stacked);
4. **SiLU&Mul**: ``cache2[p] = silu(cache1[p, :I]) * cache1[p, I:]`` (:mod:`.silu_mul`);
5. **w2 grouped GEMM** with the routing weight: ``cache3[p] = weight[p] * cache2[p] @ w2[e]^T``, w2 is
   [E_local, H, I];
6. **top-k sum**: ``out[t] = sum_j cache3[t * topk + j]``.

Steps 1 and 2 are host-side preparation (done once per shape, outside the timed region, as a
serving engine reuses the router's output); :func:`fused_moe` runs steps 3 to 6.

The grouped GEMM kernel is a tiled GEMM over a 1-D grid of ``ceil(EM / BLOCK_SIZE_M) *
ceil(N / BLOCK_SIZE_N)`` programs (CTAs), ``EM`` the padded pair count; programs are visited in groups
of ``GROUP_SIZE_M`` row blocks that sweep the same column blocks, so a tile of the expert weight is
reused from L2 by neighbouring CTAs ("grouped ordering", Triton tutorial ``03-matrix-multiplication``).
Parameters: ``BLOCK_SIZE_M/N/K`` (tile), ``GROUP_SIZE_M``, ``num_warps`` (warps per CTA),
``num_stages`` (software pipelining depth of the K loop).

:func:`default_config` is the documented default when a sweep point names no config.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from synperf.gpu.profiling.triton_kernels.silu_mul import silu_mul

#: the config keys, in the order of the canonical columns block_size_m/n/k, group_size_m, num_warps, num_stages
CONFIG_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def default_config(num_tokens: int, num_local_experts: int) -> dict[str, int]:
    """Default tile config of the fused-MoE GEMMs for a layer of ``num_tokens`` tokens.

    Modelled on vLLM's ``get_default_config`` (``vllm/model_executor/layers/fused_moe/fused_moe.py``,
    commit 000d145, unquantized branch), which vLLM uses when it has no tuned JSON config for the
    device: small batches (``M <= E``, fewer tokens than local experts, so most experts get at most a
    token or two) take short, deep tiles; larger batches square 64x64 tiles with grouped ordering::

        M <= E:  BLOCK_SIZE_M=16, BLOCK_SIZE_N=32, BLOCK_SIZE_K=64, GROUP_SIZE_M=1
        else:    BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8

    vLLM leaves ``num_warps`` and ``num_stages`` unset there, so Triton's launch defaults on NVIDIA GPUs
    apply: ``num_warps=4``, ``num_stages=3``; they are written out here so every row records them.
    """
    if num_tokens <= num_local_experts:
        cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    else:
        cfg = {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    return {**cfg, "num_warps": 4, "num_stages": 3}


def check_config(cfg: dict) -> dict[str, int]:
    """Return ``cfg`` with every key of :data:`CONFIG_KEYS` as int; block sizes must be powers of two
    >= 16 (``tl.dot`` needs 16 x 16 tiles at least).

    Raises:
        ValueError: a missing key or an invalid value.
    """
    out = {}
    for key in CONFIG_KEYS:
        if key not in cfg:
            raise ValueError(f"fused-MoE config lacks {key!r}: {cfg}")
        out[key] = int(cfg[key])
    for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        v = out[key]
        if v < 16 or v & (v - 1):
            raise ValueError(f"fused-MoE config {key}={v}: must be a power of two >= 16")
    if out["GROUP_SIZE_M"] < 1 or out["num_warps"] < 1 or out["num_stages"] < 1:
        raise ValueError(f"fused-MoE config: GROUP_SIZE_M, num_warps, num_stages must be >= 1: {cfg}")
    return out


# ------------------------------------------------------------------------------------------------
# routing and alignment (host-side preparation, plain torch)
# ------------------------------------------------------------------------------------------------

def route(num_tokens: int, num_experts: int, topk: int, distribution: str, generator: torch.Generator,
          device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k expert choice per token: ``topk_ids`` [T, topk] int32 (distinct experts per token) and
    ``topk_weights`` [T, topk] float32 (softmax over the chosen experts' random logits, summing to 1).

    Distributions (the ``distribution`` column):

    * ``balanced``: token ``t`` takes experts ``(t * topk + j) mod E``: every expert gets the same load
      (within one) - the best case;
    * ``power_law_<alpha>``: expert popularity proportional to ``rank^-alpha`` over a random expert order,
      experts drawn without replacement per token (aiconfigurator's collector models skewed routing the
      same way);
    * ``random``: top-k of random normal router logits (vLLM's ``benchmark_moe.py``).

    Raises:
        ValueError: unknown distribution or ``topk > num_experts``.
    """
    if topk > num_experts:
        raise ValueError(f"topk {topk} > num_experts {num_experts}")
    gdev = generator.device
    if distribution == "balanced":
        ids = (torch.arange(num_tokens * topk, device=gdev) % num_experts).view(num_tokens, topk)
    elif distribution == "random":
        logits = torch.randn(num_tokens, num_experts, generator=generator, device=gdev)
        ids = torch.topk(logits, topk, dim=1).indices
    elif distribution.startswith("power_law_"):
        try:
            alpha = float(distribution[len("power_law_"):])
        except ValueError:
            raise ValueError(f"distribution {distribution!r}: expected power_law_<alpha>") from None
        order = torch.randperm(num_experts, generator=generator, device=gdev)
        popularity = torch.empty(num_experts, device=gdev)
        popularity[order] = torch.arange(1, num_experts + 1, device=gdev, dtype=torch.float32) ** (-alpha)
        ids = torch.multinomial(popularity.expand(num_tokens, num_experts).contiguous(), topk, replacement=False,
                                generator=generator)
    else:
        raise ValueError(f"unknown routing distribution {distribution!r}: expected balanced, random or "
                         "power_law_<alpha>")
    logits = torch.randn(num_tokens, topk, generator=generator, device=gdev)
    weights = torch.softmax(logits, dim=1)
    device = device if device is not None else gdev
    return ids.to(device=device, dtype=torch.int32), weights.to(device=device, dtype=torch.float32)


def moe_align_block_size(topk_ids: torch.Tensor, block_size_m: int, num_local_experts: int,
                         expert_offset: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Sort the (token, expert) pairs of local experts by expert and pad each expert's run to a
    multiple of ``block_size_m``.

    Returns:
        ``sorted_pair_ids`` [EM] int32: pair indices ``t * topk + j`` grouped by local expert, padding
        entries equal to the sentinel ``topk_ids.numel()``;
        ``expert_ids`` [EM / block_size_m] int32: the local expert of every block;
        ``EM``: the padded pair count (a Python int; 0 when no pair is local).
    """
    flat = topk_ids.reshape(-1).to(torch.int64) - expert_offset
    sentinel = flat.numel()
    local = (flat >= 0) & (flat < num_local_experts)
    key = torch.where(local, flat, torch.full_like(flat, num_local_experts))
    order = torch.argsort(key, stable=True)
    counts = torch.bincount(key, minlength=num_local_experts + 1)[:num_local_experts]
    padded = (counts + block_size_m - 1) // block_size_m * block_size_m
    em = int(padded.sum().item())
    n_local = int(counts.sum().item())
    dev = topk_ids.device
    sorted_ids = torch.full((em,), sentinel, dtype=torch.int32, device=dev)
    if n_local:
        pairs = order[:n_local]
        expert = key[pairs]
        first_in_run = torch.cumsum(counts, 0) - counts          # start of each expert in the sorted pairs
        run_start = torch.cumsum(padded, 0) - padded              # start of each expert in the padded list
        rank = torch.arange(n_local, device=dev) - first_in_run[expert]
        sorted_ids[run_start[expert] + rank] = pairs.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(num_local_experts, device=dev, dtype=torch.int32),
                                         padded // block_size_m)
    return sorted_ids, expert_ids, em


# ------------------------------------------------------------------------------------------------
# the grouped GEMM kernel
# ------------------------------------------------------------------------------------------------

@triton.jit
def _grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, weight_ptr, sorted_ids_ptr, expert_ids_ptr,
    N, K, EM, num_valid,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    TOP_K: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # program -> (row block, column block) in grouped order for L2 reuse of the weight tiles
    pid = tl.program_id(0)
    blocks_m = tl.cdiv(EM, BLOCK_SIZE_M)
    blocks_n = tl.cdiv(N, BLOCK_SIZE_N)
    per_group = GROUP_SIZE_M * blocks_n
    first_m = (pid // per_group) * GROUP_SIZE_M
    rows_in_group = tl.minimum(blocks_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    pair = tl.load(sorted_ids_ptr + offs_m).to(tl.int64)
    valid = pair < num_valid
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_SIZE_K)

    a_ptrs = a_ptr + (pair // TOP_K)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + expert * stride_be + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_SIZE_K):
        k_ok = offs_k < K - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if MUL_ROUTED_WEIGHT:
        w = tl.load(weight_ptr + pair, mask=valid, other=0.0)
        acc = acc * w[:, None]
    c_ptrs = c_ptr + pair[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])


def grouped_gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, sorted_ids: torch.Tensor,
                 expert_ids: torch.Tensor, em: int, num_valid: int, *, top_k: int, config: dict,
                 weights: torch.Tensor | None = None) -> None:
    """``c[p] = (weights[p] *) a[p // top_k] @ b[expert(p)]^T`` for every valid pair ``p`` of the sorted list.

    Args:
        a: activations [rows, K]; row ``p // top_k`` feeds pair ``p``.
        b: expert weights [E_local, N, K].
        c: output [num_valid, N]; rows of pairs that are not local are left untouched.
        sorted_ids, expert_ids, em: from :func:`moe_align_block_size`.
        num_valid: pair count ``T * topk`` (the sentinel).
        config: tile config (:data:`CONFIG_KEYS`).
        weights: routing weights flattened to [T * topk] float32, multiplied in when given.
    """
    if em == 0:
        return
    n, k = b.shape[1], b.shape[2]
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    grid = (triton.cdiv(em, bm) * triton.cdiv(n, bn),)
    _grouped_gemm_kernel[grid](
        a, b, c, weights if weights is not None else c, sorted_ids, expert_ids,
        n, k, em, num_valid,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), b.stride(2), c.stride(0), c.stride(1),
        TOP_K=top_k, MUL_ROUTED_WEIGHT=weights is not None,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=config["BLOCK_SIZE_K"], GROUP_SIZE_M=config["GROUP_SIZE_M"],
        num_warps=config["num_warps"], num_stages=config["num_stages"],
    )


class MoEWorkspace:
    """Routing, alignment and intermediate buffers of one (shape, routing, config), built once.

    Attributes:
        sorted_ids, expert_ids, em: the alignment (:func:`moe_align_block_size`).
        weights_flat: routing weights [T * topk] float32.
        cache1: w13 output [T * topk, 2I]; cache2: SiLU&Mul output [T * topk, I];
        cache3: w2 output [T * topk, H], zero-initialised so pairs routed to other GPUs add nothing;
        out: layer output [T, H].
    """

    def __init__(self, x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor,
                 topk_weights: torch.Tensor, config: dict, expert_offset: int = 0):
        t, h = x.shape
        self.topk = topk_ids.shape[1]
        self.num_valid = t * self.topk
        inter = w2.shape[2]
        assert w13.shape[1] == 2 * inter and w13.shape[2] == h and w2.shape[1] == h
        self.config = check_config(config)
        self.sorted_ids, self.expert_ids, self.em = moe_align_block_size(
            topk_ids, self.config["BLOCK_SIZE_M"], w13.shape[0], expert_offset)
        self.weights_flat = topk_weights.reshape(-1).to(torch.float32).contiguous()
        self.cache1 = x.new_zeros((self.num_valid, 2 * inter))  # rows of non-local pairs stay 0
        self.cache2 = x.new_empty((self.num_valid, inter))
        self.cache3 = x.new_zeros((self.num_valid, h))
        self.out = x.new_empty((t, h))


def fused_moe(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, ws: MoEWorkspace,
              stage: str = "full") -> torch.Tensor:
    """Run steps 3-6 of the module docstring (``stage="full"``) or one grouped GEMM (``"w13"``: writes
    ``ws.cache1`` from ``x``; ``"w2"``: writes ``ws.cache3`` from ``ws.cache2``). Returns the stage's output."""
    cfg = ws.config
    if stage in ("full", "w13"):
        grouped_gemm(x, w13, ws.cache1, ws.sorted_ids, ws.expert_ids, ws.em, ws.num_valid, top_k=ws.topk,
                     config=cfg)
        if stage == "w13":
            return ws.cache1
        silu_mul(ws.cache1, out=ws.cache2)
    if stage in ("full", "w2"):
        grouped_gemm(ws.cache2, w2, ws.cache3, ws.sorted_ids, ws.expert_ids, ws.em, ws.num_valid, top_k=1,
                     config=cfg, weights=ws.weights_flat)
        if stage == "w2":
            return ws.cache3
        torch.sum(ws.cache3.view(x.shape[0], ws.topk, x.shape[1]), dim=1, out=ws.out)
        return ws.out
    raise ValueError(f"unknown MoE stage {stage!r}: expected full, w13 or w2")


def reference_moe(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor, topk_ids: torch.Tensor,
                  topk_weights: torch.Tensor, tokens: torch.Tensor, expert_offset: int = 0,
                  stage: str = "full", act: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 torch reference for the rows ``tokens`` (full: [len(tokens), H]; w13: [len(tokens), topk, 2I];
    w2: [len(tokens), topk, H] from ``act`` [T * topk, I]); pairs of non-local experts give zeros.

    Loops over the experts those tokens use, converting one expert's weights at a time, so it fits in
    memory for any model size.
    """
    e_local = w13.shape[0]
    inter = w2.shape[2]
    ids = topk_ids[tokens].to(torch.int64) - expert_offset           # [n, topk]
    wts = topk_weights[tokens].to(torch.float32)
    xs = x[tokens].to(torch.float32)
    n, topk = ids.shape
    width = {"full": x.shape[1], "w13": 2 * inter, "w2": x.shape[1]}[stage]
    out = torch.zeros(n, topk, width, dtype=torch.float32, device=x.device)
    for e in torch.unique(ids).tolist():
        if not 0 <= e < e_local:
            continue
        rows, slots = torch.nonzero(ids == e, as_tuple=True)
        if stage == "w2":
            pair = tokens[rows].to(torch.int64) * topk + slots
            out[rows, slots] = wts[rows, slots, None] * (act[pair].float() @ w2[e].float().t())
            continue
        h = xs[rows] @ w13[e].float().t()
        if stage == "w13":
            out[rows, slots] = h
            continue
        a = torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]
        out[rows, slots] = wts[rows, slots, None] * (a @ w2[e].float().t())
    return out.sum(dim=1) if stage == "full" else out


def weight_bytes(num_local_experts: int, hidden_size: int, inter_local: int, elem_bytes: int = 2) -> int:
    """Bytes of the local w13 and w2 weights: ``E_local * 3 * I * H * elem_bytes``."""
    return int(num_local_experts) * 3 * int(inter_local) * int(hidden_size) * int(elem_bytes)

