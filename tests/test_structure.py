"""Package structure: no import cycle, the CPU pipeline never imports the GPU-only code, every config level
rejects unknown keys, and each rule's code inputs are only the modules its script imports (editing the report
reruns the report, never the training)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from synperf.imports import ROOT, code_closure, find_cycles, import_graph, module_closure, module_name

REPO = Path(__file__).resolve().parent.parent
CPU_PACKAGES = ("data", "model", "evaluation", "reporting", "pipeline")
RULE_SCRIPTS = ["ingest", "merge_measurements", "features", "check_leaks", "train", "evaluate_protocols",
                "score_selection", "choose_feature_set", "report", "ceiling"]


def cpu_modules() -> list[str]:
    mods = ["synperf", "synperf.api", "synperf.imports", "synperf.cli"]
    for pkg in CPU_PACKAGES:
        mods += [module_name(p) for p in sorted((ROOT / pkg).rglob("*.py"))]
    return mods


def loaded_packages(mods: list[str], package: str) -> list[str]:
    """The modules of ``package`` (itself or below) loaded after importing every module of ``mods`` in a fresh
    Python process (this checkout first on its path)."""
    code = ("import importlib, json, sys\n"
            f"for m in {mods!r}:\n    importlib.import_module(m)\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m == {package!r} or m.startswith({package + '.'!r}))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_import_cycle_between_modules():
    graph = import_graph()
    assert len(graph) > 40 and "synperf.model.estimator" in graph
    assert find_cycles(graph) == []


def test_find_cycles_sees_a_cycle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"a"}}) == [["a"]] and find_cycles({"a": {"b"}, "b": set()}) == []


def test_cpu_pipeline_never_imports_the_gpu_package():
    assert loaded_packages(cpu_modules(), "synperf.gpu") == []


def test_rule_scripts_import_only_their_stage():
    for script in RULE_SCRIPTS:
        mods = module_closure(REPO / "scripts" / f"{script}.py")
        assert not [m for m in mods if m.startswith("synperf.gpu")], script
    report = module_closure(REPO / "scripts" / "report.py")
    # the report needs no model and no other stage; every script shares the rule runner (logging, one-line errors)
    assert not [m for m in report if m.startswith(("synperf.model", "synperf.pipeline."))
                and m != "synperf.pipeline.rule"], report
    train = module_closure(REPO / "scripts" / "train.py")
    assert "synperf.model.estimator" in train and not [m for m in train if m.startswith("synperf.reporting")]
    mods = module_closure(REPO / "scripts" / "ingest.py")
    assert not [m for m in mods if m.startswith(("synperf.model", "synperf.evaluation"))], mods
    # the merge's physical-ceiling check uses the work formulas of synperf.model.kernels (and the schedule they
    # import), nothing else of the model
    mods = module_closure(REPO / "scripts" / "merge_measurements.py")
    assert not [m for m in mods if m.startswith(("synperf.model", "synperf.evaluation"))
                and not m.startswith(("synperf.model.kernels", "synperf.model.schedule"))
                and m != "synperf.model"], mods
    # lazy imports inside functions count, and so do the packages' __init__ files
    assert "synperf.evaluation.leak_check" in train and "synperf.model" in train
    assert all(Path(p).is_file() for p in code_closure(REPO / "scripts" / "train.py"))


def test_leak_check_and_feature_jobs_never_load_torch():
    """Every module the check_leaks, features, ingest and merge scripts import, lazily too, loads without torch
    (its import takes seconds of every such job)."""
    mods = sorted({m for s in ("check_leaks", "features", "ingest", "merge_measurements")
                   for m in module_closure(REPO / "scripts" / f"{s}.py")})
    assert "synperf.evaluation.leak_check" in mods and "synperf.model.training" in mods
    assert loaded_packages(mods, "torch") == []


def test_no_checkout_relative_defaults_in_library_modules():
    bad = []
    for p in sorted(ROOT.rglob("*.py")):
        if p.name in ("api.py", "imports.py") or "gpu" in p.relative_to(ROOT).parts:
            continue
        text = p.read_text()
        for needle in ("REPO_ROOT", "DEFAULT_REGISTRY", "DEFAULT_MEASURED_DIR", "config.yaml\"", "\"config\" /"):
            if needle in text:
                bad.append((str(p.relative_to(REPO)), needle))
    assert bad == []


def test_every_config_level_rejects_unknown_keys():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    open_levels = []

    def walk(node, path):
        if isinstance(node, dict):
            if node.get("type") == "object" and not ({"additionalProperties", "propertyNames"} & set(node)):
                open_levels.append(path)
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(schema, "$")
    assert open_levels == []


def _repo_copy(dst: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    return dst


def _scheduled(proc_out: str) -> dict[str, int]:
    jobs, on = {}, False
    for line in proc_out.splitlines():
        if line.startswith("job ") and "count" in line:
            on = True
            continue
        if on:
            parts = line.split()
            if not parts or parts[0] == "total":
                break
            if parts[0].startswith("-"):
                continue
            jobs[parts[0]] = int(parts[1])
    return jobs


def test_editing_the_report_reruns_the_report_not_the_training(tmp_path):
    """In a copy of the repository, with fake (empty) public data: mark every output complete
    (``snakemake --touch``), touch a reporting module, and ask what would run."""
    repo = _repo_copy(tmp_path / "repo")
    data = tmp_path / "public-data"
    for rel in yaml.safe_load((repo / "config" / "public_data_manifest.yaml").read_text())["files"]:
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / rel).write_text("")

    def snakemake(*args):
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args, "--config",
                               f"public_data_dir={data}"], cwd=repo, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=500)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return proc.stdout

    # --touch only updates existing files: create every planned output (empty), then touch them in DAG order
    planned = snakemake("-n")
    for line in planned.splitlines():
        if line.strip().startswith(("output:", "benchmark:")):
            for out in line.split(":", 1)[1].split(","):
                (repo / out.strip()).parent.mkdir(parents=True, exist_ok=True)
                (repo / out.strip()).touch()
    # every rule's code inputs are relative to the checkout, so a moved or copied checkout keeps its input sets
    inputs = [f.strip() for line in planned.splitlines() if line.strip().startswith("input:")
              for f in line.split(":", 1)[1].split(",")]
    code = [f for f in inputs if f.endswith(".py")]
    assert code and all(not Path(f).is_absolute() for f in code), [f for f in code if Path(f).is_absolute()][:3]
    assert "synperf/model/estimator.py" in code
    snakemake("--touch", "--quiet")
    assert _scheduled(snakemake("-n")) == {}
    # a copy of the checkout with its outputs and metadata, modification times kept, has nothing to do either
    copy = shutil.copytree(repo, tmp_path / "moved", symlinks=True)
    moved = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-n", "--config",
                            f"public_data_dir={data}"], cwd=copy, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=500)
    assert moved.returncode == 0 and _scheduled(moved.stdout) == {}, moved.stdout[-2000:]
    future = (repo / "results" / "report.md").stat().st_mtime + 10
    os.utime(repo / "synperf" / "reporting" / "report.py", (future, future))
    jobs = _scheduled(snakemake("-n"))
    assert jobs.get("report") == 1 and "train" not in jobs and "features" not in jobs, jobs
    # a fingerprint predictor that went missing retrains that experiment alone
    (repo / "models" / "gemm" / "fingerprint.joblib").unlink()
    jobs = _scheduled(snakemake("-n"))
    assert jobs.get("train") == 1 and "features" not in jobs, jobs
    # and editing the model reruns the training (the code inputs still follow the code)
    os.utime(repo / "synperf" / "model" / "estimator.py", (future, future))
    jobs = _scheduled(snakemake("-n"))
    assert jobs.get("train", 0) > 0 and "ingest_source" not in jobs and "features" not in jobs, jobs


#: package folders of one module per item, which the layout page (docs/layout.md) describes as a whole
PER_ITEM_FOLDERS = {"ingest", "kernels", "features", "launchers", "triton_kernels"}


def _layout_block() -> str:
    text = (REPO / "docs" / "layout.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_the_layout_page_names_every_folder_and_module_of_the_tree():
    """The layout block of docs/layout.md names every tracked top-level folder, every package folder and every module of
    the package (so a new module is described where it lives), except inside the folders of one module per item
    (:data:`PER_ITEM_FOLDERS`: one per input format, kernel family, feature set...), named as a whole."""
    import re

    block = _layout_block()
    words = set(re.findall(r"[A-Za-z_][\w.]*", block))
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    top_dirs = sorted({p.split("/", 1)[0] for p in tracked if "/" in p and not p.startswith(".")})
    missing = [d for d in top_dirs if d + "/" not in block]
    for pkg in sorted(p for p in (ROOT).rglob("*") if p.is_dir() and (p / "__init__.py").exists() and p != ROOT):
        if pkg.name + "/" not in block:
            missing.append(str(pkg.relative_to(REPO)) + "/")
        for mod in sorted(pkg.glob("*.py")) if pkg.name not in PER_ITEM_FOLDERS else []:
            if mod.stem != "__init__" and not mod.stem.startswith("_") and mod.stem not in words:
                missing.append(str(mod.relative_to(REPO)))
    for mod in sorted(ROOT.glob("*.py")):
        if mod.stem != "__init__" and mod.name not in block:
            missing.append(str(mod.relative_to(REPO)))
    assert not missing, f"docs/layout.md's Layout section does not name: {missing}"
    # and every package folder it names exists
    named = re.findall(r"^  (\w+)/", block, flags=re.M)
    assert named and all((ROOT / n).is_dir() for n in named), named
