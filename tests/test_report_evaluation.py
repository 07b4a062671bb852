"""The report's evaluation-contract section states what the leak checks and the selection found."""

from __future__ import annotations

import json

import pandas as pd

from synperf.reporting.report import evaluation_section


def test_section_shows_leaks_twins_and_the_selection_verdict(tmp_path):
    leak = {"experiment": "gemm_fp8", "ok": True, "leaks": {"unseen_gpu_rows_in_training": 0},
            "rows": {"train": 100, "test_seen": 20, "unseen": 40}, "validation_rows": 20,
            "unseen": [{"gpu": "h100_sxm", "rows": 20, "twin_gpus": ["h800_sxm"], "twin_share": 0.0,
                        "twin_any_share": 1.0, "problem_share": 0.0, "nearest_seen_gpu": "h800_sxm",
                        "nearest_spec_max_rel_diff": 0.0}]}
    pd.DataFrame({"experiment": ["gemm_fp8", "geometric mean"], "v2": [10.0, 10.0], "v1": [20.0, 20.0],
                  "best": ["v2", "v2"]}).to_csv(tmp_path / "sel.csv", index=False)
    choice = {"chosen": "v2", "configured": "v2", "agrees": True, "folds": 2,
              "budget": {"max_epochs": 25, "max_train_rows": 5000}}
    (tmp_path / "choice.json").write_text(json.dumps(choice))
    md = "\n".join(evaluation_section([leak], str(tmp_path / "sel.csv"), str(tmp_path / "choice.json")))
    assert "| gemm_fp8 | 100 | 20 | 40 | 0 | h100_sxm: h800_sxm (0, 100) | h100_sxm: h800_sxm (0.00) |" in md
    assert "Lowest: `v2`; chosen: `v2`; the configured primary `feature_set` is this choice" in md
    # the configured set kept within the noise margin of a lower one
    (tmp_path / "choice.json").write_text(json.dumps({**choice, "lowest": "v1", "min_gain": 0.05}))
    md = "\n".join(evaluation_section([leak], str(tmp_path / "sel.csv"), str(tmp_path / "choice.json")))
    assert "unless the configured set is within 5% of it" in md
    assert "Lowest: `v1`; chosen: `v2`; the configured primary `feature_set` is this choice" in md
    (tmp_path / "choice.json").write_text(json.dumps({**choice, "configured": "v1", "agrees": False}))
    md = "\n".join(evaluation_section([leak], str(tmp_path / "sel.csv"), str(tmp_path / "choice.json")))
    assert "**the configured primary `feature_set` is `v1`, not the selected one**" in md


def test_stage_times_sum_wall_per_rule_and_leave_out_the_sampled_cpu_time(tmp_path):
    import pytest

    from synperf.data.io import InputError
    from synperf.reporting.stage_times import STAGE_COLUMNS, stage_section, stage_times

    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    bench = tmp_path / "benchmarks"
    (bench / "train").mkdir(parents=True)
    files = []
    for name, wall, rss, cpu in (("train/gemm.tsv", 40.0, 900.0, 15.0), ("train/rmsnorm.tsv", 10.0, 300.0, 9.5),
                                 ("report.tsv", 5.0, 200.0, 4.0)):
        (bench / name).write_text(head + f"{wall}\t0:00:{int(wall)}\t{rss}\t0\t0\t0\t0\t0\t90\t{cpu}\n")
        files.append(str(bench / name))
    t = stage_times(files)
    assert list(t.columns) == STAGE_COLUMNS and "cpu_s" not in t.columns
    assert t["rule"].tolist() == ["train", "report", "total"]  # largest summed wall first, then the total
    train = t.set_index("rule").loc["train"]
    assert (train["jobs"], train["wall_s"], train["longest_job_s"], train["sampled_max_rss_mb"]) == (2, 50.0, 40.0,
                                                                                                    900.0)
    assert t.set_index("rule").loc["total", "wall_s"] == 55.0
    assert "misses most of a longer job's CPU time" in "\n".join(stage_section(t))
    bad = tmp_path / "bad.tsv"
    bad.write_text("seconds\n1\n")
    with pytest.raises(InputError, match="bad.tsv: not a Snakemake benchmark file"):
        stage_times([str(bad)])
