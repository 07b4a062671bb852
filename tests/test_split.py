import pandas as pd
import pytest

from synperf.split import assign_split


def table():
    shapes = pd.DataFrame({"m": range(1, 2001)})
    gpus = ["a", "b", "c", "z"]
    df = pd.concat([shapes.assign(gpu=g) for g in gpus], ignore_index=True)
    df["kernel"], df["dtype"] = "gemm", "bfloat16"
    return df


def test_heldout_shapes_are_the_same_on_every_seen_gpu():
    df = table()
    s = assign_split(df, ["a", "b"], ["c"], 0.2, seed=0)
    held = {g: set(df.loc[(df.gpu == g) & (s == "test_seen"), "m"]) for g in ("a", "b")}
    assert held["a"] == held["b"]
    assert 0.15 < len(held["a"]) / 2000 < 0.25
    assert set(s[df.gpu == "c"]) == {"unseen"}
    assert set(s[df.gpu == "z"]) == {"unused"}
    train_a = set(df.loc[(df.gpu == "a") & (s == "train"), "m"])
    assert not (train_a & held["a"])


def test_seed_changes_the_heldout_shapes_deterministically():
    df = table()
    s0, s0b, s1 = (assign_split(df, ["a"], [], 0.2, seed) for seed in (0, 0, 1))
    assert (s0 == s0b).all() and not (s0 == s1).all()


def test_gpu_in_both_lists_is_rejected():
    with pytest.raises(ValueError, match="both seen and unseen"):
        assign_split(table(), ["a"], ["a"], 0.2)


def test_source_files_decide_the_heldout_rows_when_configured():
    from synperf.split import experiment_split

    df = table()
    df["source_file"] = ["neusight/dataset/test/linear.csv" if m % 4 == 0 else
                         "neusight/dataset/train/collect/linear/p2.1.0/x.csv" for m in df["m"]]
    exp = {"seen": ["a", "b"], "unseen": ["c"], "heldout_source_files": "dataset/test/"}
    s = experiment_split(df, exp)
    seen = df.gpu.isin(["a", "b"])
    assert ((s[seen] == "test_seen") == (df.loc[seen, "m"] % 4 == 0)).all()
    assert set(s[df.gpu == "c"]) == {"unseen"} and set(s[df.gpu == "z"]) == {"unused"}
    # without the key it is the hashed share of shapes
    plain = experiment_split(df, {"seen": ["a", "b"], "unseen": ["c"]})
    assert (plain == assign_split(df, ["a", "b"], ["c"], 0.2)).all()
    with pytest.raises(ValueError, match="source_file"):
        experiment_split(df.drop(columns="source_file"), exp)
    with pytest.raises(ValueError, match="both must be > 0"):
        experiment_split(df, {**exp, "heldout_source_files": "nowhere/"})
