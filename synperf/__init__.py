"""synperf: predict how fast an LLM kernel runs on a GPU, seen or unseen.

The method follows SynPerf / PipeWeave (arXiv 2601.14910): decompose a kernel
launch into tasks, place them on SMs, derive per-pipeline demands and a
theoretical time, and let one small MLP per kernel family predict the
efficiency ``theoretical_time / measured_latency``.

Subpackages (by concern)
------------------------
``data``        the canonical measurement table (``schema``), ``io``, ``ingest`` (one adapter per public data
                format), ``download``, ``hardware`` (GPU registry), ``checks`` (config cross-checks)
``model``       ``kernels`` (one module per family), ``schedule``, ``features`` (feature sets), ``estimator``
``evaluation``  ``split``, ``leak_check``, ``selection``, ``protocols``, ``baselines``, ``metrics``
``reporting``   ``report``, ``methods_report``, ``tables``
``pipeline``    one module per pipeline stage, called by the rule scripts
``gpu``         GPU-only code (``profiling``, ``characterize``); never imported by the others
``api``         ``predict(kernel, params, gpu)`` for bulk callers
``imports``     the synperf modules a file imports (each rule's code inputs)

Configuration (registry, measured-hardware folder, models folder) is passed in by the caller; only
:func:`synperf.api.default_paths` resolves checkout paths, for the user entry point.
"""

__version__ = "0.1.0"
