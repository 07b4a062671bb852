"""Our FP8 path against the SynPerf authors' own features (pipeweave dataset/gemm_fp8_*.csv)."""

import pandas as pd

from synperf.model.features.pipeweave_compat import PIPEWEAVE_COLUMNS, compare


def test_fp8_features_match_the_authors(public_data):
    files = sorted((public_data / "pipeweave/dataset").glob("gemm_fp8_*.csv"))
    df = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    sample = df.sample(2000, random_state=0)   # every GPU, train and test rows
    table = compare(sample, rel_tol=0.01)
    print(table.to_string(index=False))
    assert set(table["column"]) == set(PIPEWEAVE_COLUMNS)
    # every column (decomposition, scheduling, cycles and the efficiency target) within 1% on >= 99% of rows
    assert (table["share_within_tol"] >= 0.99).all(), table
