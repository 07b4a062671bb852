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

import os as _os

__version__ = "0.1.0"

#: CPU code paths of the math libraries, pinned so that one commit trains the same models on every x86-64 CPU with
#: AVX2: MKL's conditional numerical reproducibility (Intel's ``MKL_CBWR``: the AVX2 kernels whatever the CPU
#: offers) and ATen's vectorised kernels (``ATEN_CPU_CAPABILITY``). Without them MKL and ATen pick kernels by the CPU
#: (AVX-512 or not, vendor), whose different rounding moves a trained model's MAPE by up to several points between
#: machines (``tests/expected/README.md``, "What still differs between CPUs"). Read by the libraries at their first
#: call, so set here, before any synperf module trains; a value already in the environment is kept.
PINNED_CPU_KERNELS = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
for _name, _value in PINNED_CPU_KERNELS.items():
    _os.environ.setdefault(_name, _value)
