"""End-to-end inference latency: workload generator, collectives, composition and evaluation.

Modules (one concern each): :mod:`.model_config` (Hugging Face config -> sharded model shape),
:mod:`.workload` (trace -> kernel launches per scheduler iteration), :mod:`.collectives` (NCCL timing model),
:mod:`.compose` (predicted kernel + collective + framework-overhead latency per iteration),
:mod:`.evaluate` (scores against the authors' real serving runs); ``synperf e2e`` is in :mod:`synperf.cli`.
Everything from the rest of synperf is imported through :mod:`._deps`.
"""
