"""synperf: predict how fast an LLM kernel runs on a GPU, seen or unseen.

The method follows SynPerf / PipeWeave (arXiv 2601.14910): decompose a kernel
launch into tasks, place them on SMs, derive per-pipeline demands and a
theoretical time, and let one small MLP per kernel family predict the
efficiency ``theoretical_time / measured_latency``.

Modules
-------
``schema``     the canonical measurement table (one place documents every column)
``hardware``   GPU spec registry (``config/gpus.yaml``)
``ingest``     one adapter per public data format
``kernels``    one module per kernel family (parameters, FLOPs, bytes)
``features``   feature sets (v1: FLOPs / bytes / roofline)
``estimator``  per-family efficiency MLP
``split``      seen / unseen GPU and held-out-shape assignment
``evaluate``   predictions and MAPE tables
``report``     Markdown report and figures
``api``        ``predict(kernel, params, gpu)`` for bulk callers
"""

__version__ = "0.1.0"
