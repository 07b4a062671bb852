"""The only names :mod:`synperf.serving` takes from the rest of synperf (one place, as :mod:`synperf.e2e._deps`)."""

from synperf.api import route_experiment  # noqa: F401
from synperf.data.io import read_table  # noqa: F401
from synperf.data.schema import KEY_COLUMNS  # noqa: F401
from synperf.e2e._deps import (  # noqa: F401
    InputError,
    Registry,
    default_registry,
    launch_table,
    load_registry,
    predict,
    write_csv,
)
from synperf.e2e.collectives import CollectiveModel  # noqa: F401
from synperf.e2e.compose import (  # noqa: F401
    MAX_LOG_HALF_WIDTH,
    Overhead,
    SharedPredictor,
    attention_path,
    check_keys,
    non_negative_number,
    trained_on,
)
from synperf.e2e.intervals import (  # noqa: F401
    conformal_half_width,
    needed_half_width,
    quadrature_bounds,
    shipped_half_width,
    widen,
)
from synperf.e2e.model_config import ModelConfig, load_model_config  # noqa: F401
from synperf.e2e.plan import (  # noqa: F401
    ACTIVATION_GB,
    GPU_MEMORY_UTILIZATION,
    usable_memory_gb,
    weight_bytes,
)
from synperf.model.twins import canonical_values  # noqa: F401

__all__ = ["InputError", "Registry", "default_registry", "launch_table", "predict", "write_csv", "CollectiveModel",
           "Overhead", "SharedPredictor", "attention_path", "trained_on", "ModelConfig", "load_model_config",
           "ACTIVATION_GB", "GPU_MEMORY_UTILIZATION", "usable_memory_gb", "weight_bytes",
           "quadrature_bounds",
           "conformal_half_width", "needed_half_width", "widen", "shipped_half_width", "non_negative_number",
           "check_keys", "MAX_LOG_HALF_WIDTH",
           "route_experiment", "read_table", "KEY_COLUMNS", "load_registry", "canonical_values"]
