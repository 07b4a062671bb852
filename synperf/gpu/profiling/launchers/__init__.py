"""One launcher module per kernel family: build a sweep point's inputs, run the kernel, check it once.

Every module exposes ``prepare(point, ctx) -> Case``. A :class:`Case` holds ``fn`` (one launch of the
kernel on preallocated inputs and outputs, no host synchronisation), the ``implementation`` that
runs (the canonical column), its ``config`` (canonical config columns, e.g. the fused-MoE tile) and
``details`` (everything else worth recording: backend, library call, fallback reason), a ``check``
that runs the kernel once and compares it with a torch reference in fp32 (raising
:class:`ReferenceMismatch`), and optionally ``rotate(n)`` (n independent input copies, for CUDA-graph
timing with a cold L2).

Modules: :mod:`.gemm` (gemm, gemm_fp8), :mod:`.attention` (attention_prefill, attention_decode),
:mod:`.rmsnorm`, :mod:`.silu_mul`, :mod:`.fused_moe`. GPU-only libraries are imported inside
``prepare`` so this package imports on a CPU.
"""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from synperf.gpu.profiling import LAUNCHER_MODULE


class ReferenceMismatch(AssertionError):
    """The kernel's output differs from the torch reference beyond the tolerance: never timed."""


class Unsupported(RuntimeError):
    """The point cannot run here (missing library, dtype or feature); recorded as skipped."""


@dataclass
class Context:
    """What launchers need to know about where they run.

    Attributes:
        device: ``torch.device`` (``cuda:N``; ``cpu`` in tests, where Triton runs interpreted).
        capability: compute capability (SM version) ``(major, minor)``; ``(0, 0)`` on CPU.
        l2_bytes: L2 cache size, bytes.
        flashinfer: the imported ``flashinfer`` module, or None.
        flashinfer_error: why FlashInfer is unavailable.
        seed: base seed; every point derives its own from its key.
        cache: launcher-owned cache of large inputs reused by adjacent points (MoE weights).
    """

    device: Any
    capability: tuple[int, int] = (0, 0)
    l2_bytes: int = 50 << 20
    flashinfer: Any = None
    flashinfer_error: str = "not looked for"
    seed: int = 0
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def is_cuda(self) -> bool:
        return getattr(self.device, "type", "") == "cuda"


@dataclass
class Case:
    """One prepared sweep point (see the package docstring)."""

    fn: Callable[[], Any]
    implementation: str
    check: Callable[[], None] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    rotate: Callable[[int], list[Callable[[], Any]]] | None = None
    input_bytes: int = 0


def get_launcher(kernel: str):
    """The launcher module of a profiled kernel."""
    return importlib.import_module(f"{__name__}.{LAUNCHER_MODULE[kernel]}")


def load_flashinfer() -> tuple[Any, str]:
    """``(flashinfer module, "")`` or ``(None, reason)``."""
    try:
        import flashinfer
    except Exception as exc:  # ImportError, or a build that fails on import
        return None, f"flashinfer is not importable ({type(exc).__name__}: {exc})"
    return flashinfer, ""


def torch_dtype(name: str):
    """Canonical dtype name -> torch dtype (``fp8`` is ``float8_e4m3fn``)."""
    import torch

    table = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32,
             "fp8": torch.float8_e4m3fn}
    try:
        return table[name]
    except KeyError:
        raise Unsupported(f"dtype {name!r} is not supported by the profiler") from None


def generator(ctx: Context, point_key: str):
    """A torch generator on the context's device, seeded from the base seed and the point key
    (the same point gets the same inputs on every run)."""
    import torch

    g = torch.Generator(device=ctx.device)
    g.manual_seed((ctx.seed * 1_000_003 + zlib.crc32(point_key.encode())) % (2**63))
    return g


#: elements generated at a time by :func:`randn` (256 MiB of fp32)
RANDN_CHUNK = 1 << 26


def randn(shape, dtype, ctx: Context, gen, scale: float = 1.0):
    """N(0, scale^2) tensor on the context's device in ``dtype`` (fp8 included), generated in fp32 chunks of
    :data:`RANDN_CHUNK` elements so a 15 GB expert-weight tensor does not need 30 GB of fp32 first."""
    import torch

    out = torch.empty(tuple(shape), dtype=dtype, device=ctx.device)
    flat = out.view(-1)
    for start in range(0, flat.numel(), RANDN_CHUNK):
        n = min(RANDN_CHUNK, flat.numel() - start)
        t = torch.randn(n, generator=gen, device=ctx.device, dtype=torch.float32)
        if scale != 1.0:
            t.mul_(scale)
        flat[start:start + n].copy_(t)
    return out


def assert_close(out, ref, *, rtol: float, atol: float, what: str) -> None:
    """Raise :class:`ReferenceMismatch` unless ``|out - ref| <= atol + rtol * |ref|`` everywhere (fp32),
    naming the kernel, the worst element and the tolerance."""
    import torch

    out = out.float()
    ref = ref.float()
    if out.shape != ref.shape:
        raise ReferenceMismatch(f"{what}: output shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not torch.isfinite(out).all():
        raise ReferenceMismatch(f"{what}: output has non-finite values")
    err = (out - ref).abs()
    bound = atol + rtol * ref.abs()
    bad = err > bound
    if bad.any():
        i = int(torch.argmax((err - bound).flatten()).item())
        raise ReferenceMismatch(
            f"{what}: {int(bad.sum().item())} of {out.numel()} elements off the fp32 reference; worst "
            f"{out.flatten()[i].item():.5g} vs {ref.flatten()[i].item():.5g} (atol {atol}, rtol {rtol})")


def sample_rows(n: int, k: int, device) -> Any:
    """Up to ``k`` row indices spread evenly over ``range(n)``, first and last included."""
    import torch

    if n <= k:
        return torch.arange(n, device=device)
    return torch.unique(torch.linspace(0, n - 1, k, device=device).round().long())


def check_first(case_fn: Callable[[], Any], compare: Callable[[], None]) -> Callable[[], None]:
    """A check that runs the kernel once, synchronises, then compares."""

    def run() -> None:
        case_fn()
        _sync()
        compare()

    return run


def _sync() -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
