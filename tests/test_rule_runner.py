"""The rule runner: bad input ends a rule with one line naming what was wrong; bugs keep their traceback."""
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run_script(tmp_path, body, log=True):
    """Run a rule-script-like program with a stand-in for Snakemake's script object."""
    logfile = tmp_path / "rule.log"
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from types import SimpleNamespace
        from synperf.pipeline.rule import run
        sm = SimpleNamespace(rule="features", log={[str(logfile)] if log else []!r})
    """) + textwrap.dedent(body))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    return proc, (logfile.read_text() if logfile.exists() else "")


def test_bad_input_is_one_line_on_stderr_and_in_the_log(tmp_path):
    proc, log = _run_script(tmp_path, """
        import logging
        from synperf.data.io import InputError
        def step():
            logging.getLogger("synperf.test").info("reading rows")
            print("progress line")
            raise InputError("measurements.parquet: row 12, column latency_us: expected a number > 0, got '12.1 us'")
        run(sm, step)
    """)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "rule features: measurements.parquet: row 12, column latency_us: expected a number > 0, got '12.1 us'"]
    assert "reading rows" in log and "progress line" in log and "row 12" in log
    assert "Traceback" not in proc.stderr + log


def test_a_failed_leak_check_is_bad_input_too(tmp_path):
    proc, _ = _run_script(tmp_path, """
        from synperf.evaluation.leak_check import LeakError
        def step():
            raise LeakError("leak check gemm: unseen_gpu_rows_in_training: 3 row(s) (l40s: 3)")
        run(sm, step)
    """, log=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "rule features: leak check gemm: unseen_gpu_rows_in_training: 3 row(s) (l40s: 3)"]


def test_a_bug_keeps_its_traceback(tmp_path):
    proc, log = _run_script(tmp_path, """
        def step():
            return {}["missing"]
        run(sm, step)
    """)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "KeyError: 'missing'" in proc.stderr
