"""The only names :mod:`synperf.e2e` takes from the rest of synperf (one place, so that moving modules
into subpackages is a one-file change here)."""

from synperf.api import launch_table, predict  # noqa: F401
from synperf.hardware import Registry, load_registry  # noqa: F401
from synperf.io import InputError  # noqa: F401

__all__ = ["predict", "launch_table", "Registry", "load_registry", "InputError"]
