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
    assert "Chosen: `v2`; the configured primary `feature_set` is this choice" in md
    (tmp_path / "choice.json").write_text(json.dumps({**choice, "configured": "v1", "agrees": False}))
    md = "\n".join(evaluation_section([leak], str(tmp_path / "sel.csv"), str(tmp_path / "choice.json")))
    assert "**the configured primary `feature_set` is `v1`, not the selected one**" in md
