"""The CPU code paths synperf pins for reproducible training across machines (``synperf.PINNED_CPU_KERNELS``)."""

import os
import platform
import subprocess
import sys

import pytest

import synperf

PROBE = ("import synperf, os, torch; x = torch.ones(64, 64) @ torch.ones(64, 64); "
         "print(os.environ['MKL_CBWR'], os.environ['ATEN_CPU_CAPABILITY'], torch.backends.cpu.get_cpu_capability())")


def _probe(**env) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in synperf.PINNED_CPU_KERNELS}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the pinned code paths are x86-64 ones")
def test_importing_synperf_pins_the_avx2_code_paths_of_mkl_and_aten():
    if "avx2" not in open("/proc/cpuinfo").read():
        pytest.skip("this CPU has no AVX2: the libraries fall back to older code paths")
    assert _probe() == ["AVX2", "avx2", "AVX2"]


def test_a_code_path_the_user_set_is_kept():
    assert _probe(MKL_CBWR="COMPATIBLE", ATEN_CPU_CAPABILITY="default")[:3] == ["COMPATIBLE", "default", "DEFAULT"]
