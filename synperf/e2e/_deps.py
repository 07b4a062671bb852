"""The only names :mod:`synperf.e2e` takes from the rest of synperf (one place, so that moving modules
into subpackages is a one-file change here)."""

from synperf.api import default_paths, default_registry, launch_table, predict  # noqa: F401
from synperf.data.checks import gpu_name_map  # noqa: F401
from synperf.data.hardware import Registry, load_registry  # noqa: F401
from synperf.data.io import InputError, atomic_path, close_match, read_user_csv, require_columns, write_csv  # noqa: F401

__all__ = ["predict", "launch_table", "default_paths", "default_registry", "gpu_name_map", "Registry", "load_registry",
           "InputError",
           "atomic_path", "close_match", "read_user_csv", "require_columns", "write_csv"]

