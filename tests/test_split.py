import numpy as np
import pandas as pd
import pytest

from synperf.evaluation.split import assign_split


def table():
    shapes = pd.DataFrame({"m": range(1, 2001)})
    gpus = ["a", "b", "c", "z"]
    df = pd.concat([shapes.assign(gpu=g) for g in gpus], ignore_index=True)
    df["kernel"], df["dtype"], df["n"], df["k"], df["batch"] = "gemm", "bfloat16", 4096, 4096, 1
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
    from synperf.evaluation.split import experiment_split

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


def test_every_variant_of_a_heldout_problem_is_held_out_together():
    """Two implementations and two KV-cache dtypes of one attention problem share its problem key."""
    from synperf.evaluation.split import problem_key, shape_key

    base = pd.DataFrame({"batch_size": range(1, 401), "seq_len": 1, "kv_len": 4096, "num_heads": 32,
                         "num_kv_heads": 8, "head_dim": 128, "window_size": 0})
    variants = [base.assign(implementation=impl, kv_cache_dtype=kv) for impl in ("fa2", "flashinfer")
                for kv in ("bfloat16", "fp8")]
    df = pd.concat([v.assign(gpu=g) for v in variants for g in ("a", "b")], ignore_index=True)
    df["kernel"], df["dtype"] = "attention_decode", "bfloat16"
    assert problem_key(df).nunique() == 400 and shape_key(df).nunique() == 1600
    s = assign_split(df, ["a", "b"], [], 0.2)
    per_problem = s.groupby(df["batch_size"]).nunique()
    assert (per_problem == 1).all()                      # one label per problem, across variants and GPUs
    assert 0.1 < (s == "test_seen").mean() < 0.3


def test_problem_key_refuses_a_table_it_cannot_key():
    from synperf.data.io import InputError
    from synperf.evaluation.split import problem_key

    with pytest.raises(InputError, match="kernel"):
        problem_key(pd.DataFrame({"m": [1]}))
    with pytest.raises(InputError, match=r"lack column\(s\) \['batch'\]"):
        problem_key(pd.DataFrame({"kernel": ["gemm"], "dtype": ["bf16"], "m": [1], "n": [1], "k": [1]}))
    with pytest.raises(InputError, match="no problem key"):
        problem_key(pd.DataFrame({"kernel": ["conv2d"]}))


def test_source_file_split_drops_training_rows_of_heldout_problems():
    from synperf.evaluation.split import experiment_split

    df = table()
    # the same problem (m = 8) in both files on GPU a: the training copy must not train
    extra = df[(df.m == 8) & (df.gpu == "a")].assign(implementation="other")
    df = pd.concat([df, extra], ignore_index=True)
    df["source_file"] = "train.csv"
    df.loc[df.index[-1], "source_file"] = "test.csv"
    s = experiment_split(df, {"seen": ["a", "b"], "unseen": ["c"], "heldout_source_files": "test.csv"})
    assert s.iloc[-1] == "test_seen"
    assert set(s[df.m == 8].iloc[:-1][df.gpu.isin(["a", "b"])]) == {"unused"}
    assert (s[(df.m != 8) & df.gpu.isin(["a", "b"])] == "train").all()


def test_shape_key_hashes_each_row_as_its_string_values_whatever_the_column_dtypes():
    """The key of a row is the salted hash of its shape columns as strings: the same whether a column is a
    string, a category or a number column, with missing values, and whatever the other rows are."""
    from synperf.evaluation.split import SHAPE_COLUMNS, shape_key

    df = pd.DataFrame({"kernel": ["gemm", "gemm", "attention_decode", "gemm"],
                       "implementation": ["cublas", "cublas", "fa2", None], "dtype": ["bfloat16"] * 4,
                       "m": [128.0, 256.0, np.nan, 128.0], "n": [4096, 4096, 0, 4096],
                       "gpu": ["a", "b", "a", "a"]})
    cols = [c for c in SHAPE_COLUMNS if c in df.columns]
    expected = pd.util.hash_pandas_object(df[cols].astype("string"), index=False, hash_key="synperf000000003")
    got = shape_key(df, 3)
    assert (got.to_numpy() == expected.to_numpy()).all()
    assert got[0] != got[1] and got[0] != got[3]            # m differs; a missing implementation differs
    as_category = df.astype({"kernel": "category", "implementation": "category"})
    assert (shape_key(as_category, 3).to_numpy() == got.to_numpy()).all()
    assert shape_key(df.iloc[[3, 0]], 3).tolist() == [got[3], got[0]]  # row by row, index kept
    assert shape_key(df.iloc[[3, 0]], 3).index.tolist() == [3, 0]
