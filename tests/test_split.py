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
