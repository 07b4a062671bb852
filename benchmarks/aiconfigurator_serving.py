"""aiconfigurator's own TTFT/TPOT estimate for every silicon row the serving simulator prices, cached as a table.

aiconfigurator is not a synperf dependency: install it into its own virtual environment and pass its executable::

    python3 -m venv /work/venv-aic && /work/venv-aic/bin/pip install aiconfigurator
    python benchmarks/aiconfigurator_serving.py --aic /work/venv-aic/bin/aiconfigurator \\
        --silicon PUBLIC_DATA/aiconfigurator/silicon_sample_public.csv --out data/baselines/aiconfigurator_serving.csv

Per priced row (:func:`synperf.serving.silicon.read_silicon`) it runs ``aiconfigurator cli estimate
--estimate-mode agg --backend vllm --model-path DIR --system SYSTEM --isl --osl --batch-size CONCURRENCY --tp-size
--gemm-quant-mode fp8|bfloat16`` where DIR holds the row's shipped example config (``examples/models/<model>.json``
as ``config.json``: the CLI reads a local Hugging Face config; this machine has no network). The table keeps
aiconfigurator's version and the command in ``#`` header lines; a row it refuses gets its one-line error in
``aic_error``. aiconfigurator prices from its own measured kernel tables of these very GPUs (its default
``--database-mode SILICON``). Rows already in ``--out`` (same keys and system) are kept, not estimated again, and
the table is rewritten (atomically) every 10 rows, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synperf.serving.score import KEYS  # noqa: E402
from synperf.serving.silicon import MOE_MODELS, read_silicon  # noqa: E402

COMMAND = ("aiconfigurator cli estimate --estimate-mode agg --backend vllm --model-path DIR --system SYSTEM --isl ISL "
           "--osl OSL --batch-size CONCURRENCY --tp-size TP --gemm-quant-mode fp8|bfloat16 "
           "[--moe-tp-size TP --moe-ep-size 1: MoE rows]")


def estimate(aic: str, model_dir: Path, row) -> tuple[float, float, str]:
    cmd = [aic, "cli", "estimate", "--estimate-mode", "agg", "--backend", "vllm", "--model-path", str(model_dir),
           "--system", str(row["system"]), "--isl", str(int(row["isl"])), "--osl", str(int(row["osl"])),
           "--batch-size", str(int(row["concurrency"])), "--tp-size", str(int(row["tp"])),
           "--gemm-quant-mode", str(row["gemm_dtype"])]
    if row["model_path"] in MOE_MODELS:  # tensor-parallel experts, as the priced MoE rows (moe_tp_size = tp)
        cmd += ["--moe-tp-size", str(int(row["tp"])), "--moe-ep-size", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = p.stdout + p.stderr
    ttft = re.search(r"TTFT:\s+([\d.]+) ms", text)
    tpot = re.search(r"TPOT:\s+([\d.]+) ms", text)
    if ttft and tpot:
        return float(ttft.group(1)), float(tpot.group(1)), ""
    err = [ln for ln in text.splitlines() if "error" in ln.lower()] or text.strip().splitlines()[-1:]
    return float("nan"), float("nan"), (err[-1] if err else f"exit {p.returncode}")[:300]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aic", required=True, help="the aiconfigurator executable of its own venv")
    ap.add_argument("--silicon", required=True)
    ap.add_argument("--examples", default=str(Path(__file__).resolve().parents[1] / "examples" / "models"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    version = subprocess.run([a.aic, "version"], capture_output=True, text=True).stdout.strip().splitlines()
    rows = read_silicon(a.silicon)
    rows = rows[rows["reason"] == ""].reset_index(drop=True)
    keys = list(KEYS) + ["system"]
    out_path = Path(a.out)
    done = pd.read_csv(out_path, comment="#") if out_path.exists() else pd.DataFrame(columns=keys)
    done = done.merge(rows[keys].drop_duplicates(), on=keys)  # rows no longer priced are dropped
    have = set(map(tuple, done[keys].astype(str).to_numpy()))
    todo = rows[[tuple(map(str, k)) not in have for k in rows[keys].to_numpy()]].drop_duplicates(keys)
    print(f"{len(done)} rows cached, {len(todo)} to estimate", flush=True)
    tmp = Path(tempfile.mkdtemp())
    out, t0 = done.to_dict("records"), time.time()

    def write() -> None:
        df = pd.DataFrame(out)
        header = [f"# {' '.join(version[-1:]) or '(version unknown)'}; one estimate per priced silicon row",
                  f"# command per row: {COMMAND}",
                  f"# {len(df)} rows, {int(df['aic_ttft_ms'].notna().sum())} estimated"]
        out_path.parent.mkdir(parents=True, exist_ok=True)
        part = out_path.with_suffix(".part")
        with open(part, "w") as f:
            f.write("\n".join(header) + "\n")
            df.to_csv(f, index=False)
        part.replace(out_path)

    try:
        for n, (_, r) in enumerate(todo.iterrows(), 1):
            d = tmp / r["model"]
            if not d.exists():
                d.mkdir()
                shutil.copy(Path(a.examples) / f"{r['model']}.json", d / "config.json")
            ttft, tpot, err = estimate(a.aic, d, r)
            out.append({**{k: r[k] for k in KEYS}, "system": r["system"], "aic_ttft_ms": ttft, "aic_tpot_ms": tpot,
                        "aic_error": err})
            print(f"{n}/{len(todo)} {r['model']} {r['system']} tp{r['tp']} c{r['concurrency']} "
                  f"{r['isl']}/{r['osl']}: {ttft:.1f} / {tpot:.2f} ms {err}", flush=True)
            if n % 10 == 0:
                write()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if out:
            write()
    print(f"wrote {a.out}: {len(out)} rows, {len(todo)} estimated in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
