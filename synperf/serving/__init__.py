"""Serving-level latency: vLLM's continuous-batching scheduler (:mod:`.scheduler`), each iteration priced by the
kernel predictors (:mod:`.price`), TTFT/TPOT per request (:mod:`.metrics`), scored against measured serving runs
(:mod:`.silicon`, :mod:`.score`). See docs/serving.md."""
