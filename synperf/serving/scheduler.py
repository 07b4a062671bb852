"""vLLM V1's scheduler as a token-level loop: which tokens of which request run in each iteration.

Source of every rule: ``vllm/v1/core/sched/scheduler.py`` (``Scheduler.schedule``) of github.com/vllm-project/vllm,
read at commit ``00024d314514900f361ad072af6931e403b7f589``; defaults from ``EngineArgs.get_batch_defaults`` in
``vllm/engine/arg_utils.py`` (same repository). Rules modelled, per iteration:

1. There is no prefill or decode phase: each request has ``num_computed_tokens`` (``c``) and ``num_tokens`` (prompt
   plus sampled outputs); a step gives it ``min(num_tokens - c, token_budget)`` tokens (chunked prefill: a prompt
   longer than the budget runs over several iterations; ``long_prefill_token_threshold`` = 0, vLLM's default).
2. The token budget is ``max_num_batched_tokens``; RUNNING requests are scheduled first, in admission order (a
   request still in its prefill keeps its place among the decodes), then WAITING requests, first come first
   served, while budget is left and fewer than ``max_num_seqs`` run. Iterations are therefore mixed: decodes and
   prefill chunks share one forward pass.
3. KV cache: blocks of ``block_size`` tokens; a request holds ``ceil(c / block_size)`` blocks. A RUNNING request
   that cannot get its blocks preempts the last RUNNING request (FCFS policy: ``self.running.pop()``), whose blocks
   are freed and whose computed tokens restart from 0 (recomputation; it returns to the head of WAITING, its
   sampled tokens kept and recomputed as prompt); if it is itself the last, it is not scheduled this step. A
   WAITING request whose blocks do not fit is not admitted, nor anyone after it; no WAITING request is admitted in a
   step that preempted.
4. A step that completes a request's ``num_tokens`` samples one token (the first one is its time to first token);
   a request is done when it has sampled ``output_tokens``; a partial prefill chunk samples nothing.
5. Closed loop at ``concurrency``: each finished request is replaced by the next one of the trace, arriving at the
   end of the iteration that finished it, until the trace is served. The first ``concurrency`` requests (the first
   wave) arrive either all at time 0 (``start="burst"``: a benchmark client that sends them at once) or spread
   evenly over one request lifetime (``start="steady"``: request ``j`` of the first wave arrives before iteration
   ``round(j * mean_output / concurrency)``) or at seeded uniform random iterations over that lifetime
   (``start="random"``), which starts the loop in its steady state, where requests finish and
   are replaced one by one rather than in synchronised waves. ``steady`` is the default, and
   :attr:`Schedule.measured` marks the requests after the first wave (the warm-up), the ones the steady state's
   TTFT/TPOT summaries use (:func:`synperf.serving.simulate.serve` adds a benchmark's burst wave apart). With
   ``client_delay``, a replacement first runs in the second iteration after its predecessor's finish (its arrival
   time stays the end of that iteration): the client's round trip is longer than the engine's turn between two
   steps, so the step already under way when it arrives does not hold it (when nothing runs, the engine waits for
   it at no cost).

Not modelled: prefix caching (on by default in V1; the benchmark prompts are random, so a fresh request has no
hits; a preempted request re-computes instead of re-using its freed blocks), speculative decoding, async
scheduling, priorities, the client's own latency.

The schedule does not depend on time (a closed loop's arrivals are tied to iterations), so it is computed once,
then priced (:mod:`.price`): iterations are recorded as arrays, and runs of identical pure-decode steps (no prefill
waiting that could be admitted, no finish, no KV cache shortage) are skipped in one event.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from ._deps import InputError

#: ``EngineArgs.get_batch_defaults`` for the OpenAI API server on a GPU with >= 70 GiB that is not an A100 (H100,
#: H200, B200, GB200): 8192 tokens per iteration and 1024 sequences; else 2048 and 256
#: (:func:`synperf.serving.metrics.vllm_batch_defaults` picks by GPU)
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 1024
SMALL_GPU_MAX_NUM_BATCHED_TOKENS = 2048
SMALL_GPU_MAX_NUM_SEQS = 256
#: vLLM's default KV-cache block size on CUDA (tokens)
BLOCK_SIZE = 16


class KVCapacityError(InputError):
    """The KV cache cannot serve the workload: the weights leave no block, or one request needs more blocks than
    the cache holds. A configuration error of the deployment, not of the input files."""


@dataclass(frozen=True)
class SchedulerConfig:
    """vLLM scheduler limits: ``max_num_batched_tokens`` (token budget per iteration), ``max_num_seqs`` (running
    requests), ``block_size`` (tokens per KV block) and ``kv_cache_tokens`` (KV-cache capacity in tokens per GPU;
    None = unlimited).

    Raises:
        InputError: a limit below 1, or ``max_num_batched_tokens`` below ``max_num_seqs`` (vLLM's
            ``SchedulerConfig._verify_args``, vllm/config/scheduler.py, refuses to start: every running sequence
            gets at least one token per step).
        KVCapacityError: ``kv_cache_tokens`` holds no block.
    """

    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    block_size: int = BLOCK_SIZE
    kv_cache_tokens: int | None = None

    def __post_init__(self):
        for k in ("max_num_batched_tokens", "max_num_seqs", "block_size"):
            if int(getattr(self, k)) < 1:
                raise InputError(f"scheduler: {k} must be >= 1, got {getattr(self, k)}")
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise InputError(f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be greater than or equal "
                             f"to max_num_seqs ({self.max_num_seqs}), as vLLM requires (every running sequence gets at "
                             "least one token per step)")
        if self.kv_cache_tokens is not None and self.kv_cache_tokens < self.block_size:
            raise KVCapacityError(f"scheduler: kv_cache_tokens = {self.kv_cache_tokens} holds no KV block of "
                             f"{self.block_size} tokens (the model's weights leave no room?)")

    @property
    def kv_blocks(self) -> float:
        return math.inf if self.kv_cache_tokens is None else self.kv_cache_tokens // self.block_size


class _Req:
    __slots__ = ("rid", "prompt", "osl", "c", "g", "blocks", "first", "done", "arrival", "preemptions")

    def __init__(self, rid: int, prompt: int, osl: int, arrival: int):
        self.rid, self.prompt, self.osl, self.arrival = rid, prompt, osl, arrival
        self.c = self.g = self.blocks = self.preemptions = 0
        self.first = self.done = -1

    @property
    def num_tokens(self) -> int:
        return self.prompt + self.g


@dataclass
class Schedule:
    """A served trace, iteration by iteration (0-based iteration index ``i``).

    Attributes:
        num_tokens, num_seqs: per iteration, tokens and requests scheduled (int arrays).
        num_decode, decode_kv_sum: per iteration, requests scheduled with one token whose KV cache already holds
            the rest (decodes), and the sum of their KV lengths after the step (tokens).
        chunks: prefill chunks, one row per (iteration, request): ``[iteration, q_tokens, kv_tokens]`` (kv = the
            request's computed tokens after the chunk), int array of shape (n, 3).
        arrival, first_token, finish: per request of the trace, the iteration at whose end it arrived (-1 = at
            time 0), produced its first token, and finished.
        measured: per request, True for the requests after the first wave (the warm-up; all requests when the trace
            has no more than one wave).
        preemptions: per request, how often it was preempted.
    """

    num_tokens: np.ndarray
    num_seqs: np.ndarray
    num_decode: np.ndarray
    decode_kv_sum: np.ndarray
    chunks: np.ndarray
    arrival: np.ndarray
    measured: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    output_tokens: np.ndarray
    preemptions: np.ndarray

    @property
    def iterations(self) -> int:
        return len(self.num_tokens)


class _Recorder:
    """Iteration records: single steps and runs of pure-decode steps, expanded to arrays at the end."""

    def __init__(self):
        self.steps: list[tuple[int, int, int, int]] = []   # (T, B, n_decode, decode_kv_sum)
        self.runs: list[tuple[int, int, int, int]] = []    # (start iteration, k steps, n_decode, kv_sum of step 1)
        self.chunks: list[tuple[int, int, int]] = []
        self.n = 0
        self._order: list[tuple[str, int]] = []

    def step(self, T, B, nd, kv, chunks):
        self._order.append(("s", len(self.steps)))
        self.steps.append((T, B, nd, kv))
        self.chunks += [(self.n, q, k) for q, k in chunks]
        self.n += 1

    def idle(self, k):
        """``k`` empty iterations (the engine waits for a first-wave arrival; priced at zero)."""
        self._order.append(("r", len(self.runs)))
        self.runs.append((self.n, k, 0, 0))
        self.n += k

    def run(self, k, nd, kv1):
        self._order.append(("r", len(self.runs)))
        self.runs.append((self.n, k, nd, kv1))
        self.n += k

    def arrays(self):
        T, B, D, K = (np.zeros(self.n, dtype="int64") for _ in range(4))
        i = 0
        for kind, j in self._order:
            if kind == "s":
                T[i], B[i], D[i], K[i] = self.steps[j]
                i += 1
            else:
                _, k, nd, kv1 = self.runs[j]
                T[i:i + k] = B[i:i + k] = D[i:i + k] = nd
                K[i:i + k] = kv1 + nd * np.arange(k)
                i += k
        ch = np.array(self.chunks, dtype="int64").reshape(-1, 3)
        return T, B, D, K, ch


START = ("steady", "random", "burst")


def simulate(prompt_tokens, output_tokens, concurrency: int, config: SchedulerConfig = SchedulerConfig(),
             start: str = "steady", client_delay: bool = False, seed: int = 0,
             max_iterations: int = 50_000_000) -> Schedule:
    """Serve the trace (``prompt_tokens[i]``, ``output_tokens[i]``, tokens) in a closed loop at ``concurrency``
    with vLLM V1's scheduling rules (module docstring); ``start`` is how the first wave arrives (rule 5);
    ``client_delay``: a replacement misses the iteration right after its predecessor's (rule 5).

    Raises:
        InputError: lengths differ, an empty trace, a token count < 1, ``concurrency`` < 1, a request whose prompt
            plus output exceeds the KV cache on its own, or more than ``max_iterations`` iterations.
    """
    p = np.asarray(prompt_tokens, dtype="int64")
    o = np.asarray(output_tokens, dtype="int64")
    if p.shape != o.shape or p.ndim != 1 or len(p) == 0:
        raise InputError(f"simulate: prompt and output token arrays must be 1-d, equal and non-empty "
                         f"({p.shape}, {o.shape})")
    if (p < 1).any() or (o < 1).any():
        raise InputError("simulate: every prompt and output must be >= 1 token")
    if int(concurrency) < 1:
        raise InputError(f"simulate: concurrency must be >= 1, got {concurrency}")
    if start not in START:
        raise InputError(f"simulate: start must be one of {START}, got {start!r}")
    bs, cap, budget0 = config.block_size, config.kv_blocks, config.max_num_batched_tokens
    worst = int((p + o).max())
    if -(-worst // bs) > cap:
        raise KVCapacityError(f"simulate: a request of {worst} tokens needs {-(-worst // bs)} KV blocks; the cache "
                              f"holds {cap}")
    n = len(p)
    reqs = [None] * n
    waiting: deque = deque()
    running: list = []
    wave = min(int(concurrency), n)
    life = float(o[:wave].mean())
    if start == "random":   # seeded uniform phases over one lifetime, sorted
        first = np.sort(np.random.default_rng(seed).integers(0, max(1, round(life)), wave))
        first[0] = 0
    else:
        first = np.array([round(j * life / wave) if start == "steady" else 0 for j in range(wave)])
    pending = [(int(a), j) for j, a in enumerate(first)]   # sorted (first iteration it can run in, request)
    for a, j in pending:
        reqs[j] = _Req(j, int(p[j]), int(o[j]), a - 1)
    nxt = wave
    free = cap
    rec = _Recorder()
    finished = 0
    while finished < n:
        if rec.n > max_iterations:
            raise InputError(f"simulate: more than {max_iterations} iterations")
        while pending and pending[0][0] <= rec.n:
            waiting.append(reqs[pending.pop(0)[1]])
        if not running and not waiting:   # idle until the next first-wave arrival
            rec.idle(pending[0][0] - rec.n)
            continue
        # fast path: every running request decodes and nothing waiting can be admitted
        if running and all(r.g > 0 and r.num_tokens - r.c == 1 for r in running) and len(running) <= budget0 and \
                not _can_admit(waiting, running, free, bs, budget0 - len(running), config.max_num_seqs):
            k = min(r.osl - r.g for r in running)
            c0 = np.array([r.c for r in running], dtype="int64")
            held = sum(r.blocks for r in running)
            k = _steps_that_fit(c0, k, free + held, bs)
            if pending:
                k = min(k, pending[0][0] - rec.n + 1)
            if k >= 2:
                k -= 1   # the last step goes through the general path (it finishes a request or is followed by one)
                nd = len(running)
                rec.run(k, nd, int(c0.sum()) + nd)
                for r in running:
                    r.c += k
                    r.g += k
                    nb = -(-r.c // bs)
                    free -= nb - r.blocks
                    r.blocks = nb
                continue
        # general step
        budget, sched, preempted = budget0, [], False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            m = min(r.num_tokens - r.c, budget)
            need = -(-(r.c + m) // bs) - r.blocks
            ok = True
            while need > free:
                v = running.pop()
                free += v.blocks
                v.blocks, v.c = 0, 0
                v.preemptions += 1
                waiting.appendleft(v)
                preempted = True
                if v is r:
                    ok = False
                    break
            if not ok:
                break
            free -= need
            r.blocks += need
            sched.append((r, m))
            budget -= m
            i += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < config.max_num_seqs:
                r = waiting[0]
                m = min(r.num_tokens - r.c, budget)
                need = -(-(r.c + m) // bs) - r.blocks
                if need > free:
                    break
                waiting.popleft()
                running.append(r)
                free -= need
                r.blocks += need
                sched.append((r, m))
                budget -= m
        if not sched:
            raise KVCapacityError("simulate: no request could be scheduled (KV cache too small for one chunk)")
        it = rec.n
        T = nd = kv = 0
        chunks = []
        done = []
        for r, m in sched:
            is_decode = m == 1 and r.g > 0 and r.num_tokens - r.c == 1
            r.c += m
            T += m
            if is_decode:
                nd += 1
                kv += r.c
            else:
                chunks.append((m, r.c))
            if r.c == r.num_tokens:
                r.g += 1
                if r.first < 0:
                    r.first = it
                if r.g >= r.osl:
                    r.done = it
                    done.append(r)
        rec.step(T, len(sched), nd, kv, chunks)
        for r in done:
            running.remove(r)
            free += r.blocks
            r.blocks = 0
            finished += 1
            if nxt < n:
                reqs[nxt] = _Req(nxt, int(p[nxt]), int(o[nxt]), it)
                if client_delay:
                    bisect.insort(pending, (it + 2, nxt))
                else:
                    waiting.append(reqs[nxt])
                nxt += 1
    T, B, D, K, ch = rec.arrays()
    measured = np.arange(n) >= wave if n > wave else np.ones(n, dtype=bool)
    return Schedule(T, B, D, K, ch, np.array([r.arrival for r in reqs]), measured, np.array([r.first for r in reqs]),
                    np.array([r.done for r in reqs]), o.copy(), np.array([r.preemptions for r in reqs]))


def _can_admit(waiting, running, free, bs, budget, max_num_seqs) -> bool:
    """Whether the head of WAITING would be admitted in a step whose running requests all decode (rule 3)."""
    if not waiting or budget <= 0 or len(running) >= max_num_seqs:
        return False
    r = waiting[0]
    m = min(r.num_tokens - r.c, budget)
    need_running = sum(-(-(x.c + 1) // bs) - x.blocks for x in running)
    return -(-(r.c + m) // bs) - r.blocks <= free - need_running


def _steps_that_fit(c0: np.ndarray, k: int, blocks: float, bs: int) -> int:
    """The largest ``j <= k`` such that the running requests (computed tokens ``c0``) hold their KV blocks after
    ``j`` more decode steps: ``sum ceil((c0 + j) / bs) <= blocks`` (binary search; the sum grows with ``j``)."""
    if math.isinf(blocks):
        return k

    def fits(j):
        return int((-(-(c0 + j) // bs)).sum()) <= blocks

    if fits(k):
        return k
    lo, hi = 0, k   # fits(lo), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
