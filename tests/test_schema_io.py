import numpy as np
import pandas as pd
import pytest

from synperf.data.io import InputError, atomic_path, categorical_strings, read_table, write_parquet
from synperf.data.schema import COLUMNS, conform, reduce_duplicates, validate


def gemm_rows(lat=(10.0, 12.0, 11.0), gpu="h100_sxm"):
    return conform(pd.DataFrame({
        "gpu": gpu, "kernel": "gemm", "implementation": "cublas", "dtype": "bfloat16",
        "m": [64] * len(lat), "n": 4096, "k": 4096, "batch": 1, "latency_us": list(lat),
        "latency_stat": "mean", "source": "test", "source_version": "t", "source_file": "f.parquet",
    }))


def test_conform_gives_every_canonical_column_with_its_dtype():
    df = gemm_rows()
    assert list(df.columns) == list(COLUMNS)
    assert df["m"].dtype == "Int64" and df["latency_us"].dtype == "float64"
    assert df["n_duplicates"].tolist() == [1, 1, 1]
    assert df["num_heads"].isna().all()


def test_validate_accepts_good_rows(registry):
    validate(gemm_rows(), "t", registry.ids)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.assign(latency_us=[10.0, np.nan, 1.0]), "row 1"),
    (lambda d: d.assign(latency_us=[10.0, 1.0, -1.0]), "latency_us must be a finite number > 0"),
    (lambda d: d.assign(kernel="conv2d"), "unknown kernel"),
    (lambda d: d.assign(gpu="h999"), "not an id in config/gpus.yaml"),
    (lambda d: d.assign(k=pd.array([None, None, None], dtype="Int64")), "needs parameter 'k'"),
])
def test_validate_names_the_bad_row(registry, change, message):
    with pytest.raises(InputError, match=message) as e:
        validate(change(gemm_rows()), "some/file.parquet", registry.ids)
    assert "some/file.parquet" in str(e.value)


def test_validate_rejects_a_mistyped_column(registry):
    df = gemm_rows()
    df["m"] = df["m"].astype("float64")
    with pytest.raises(InputError, match="column 'm' has dtype float64, expected Int64"):
        validate(df, "x", registry.ids)


def test_reduce_duplicates_takes_the_median_and_counts():
    df = pd.concat([gemm_rows((10.0, 30.0, 11.0)), gemm_rows((5.0,)).assign(m=pd.array([128], dtype="Int64"))],
                   ignore_index=True)
    out, removed = reduce_duplicates(df)
    assert removed == 2 and len(out) == 2
    m64 = out[out["m"] == 64].iloc[0]
    assert m64["latency_us"] == 11.0 and m64["n_duplicates"] == 3
    assert out[out["m"] == 128].iloc[0]["latency_us"] == 5.0


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_truncated_parquet_is_reported_with_its_name(tmp_path):
    path = tmp_path / "gemm.parquet"
    write_parquet(gemm_rows(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="gemm.parquet: cannot be read as parquet"):
        read_table(path)


def test_malformed_csv_is_reported(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('a,b\n1,"unterminated\n')
    with pytest.raises(InputError, match="bad.csv"):
        read_table(path)


def test_a_latency_with_a_unit_names_file_row_and_value():
    import pandas as pd

    from synperf.data.io import InputError
    from synperf.data.schema import conform

    df = pd.DataFrame({"gpu": ["h100_sxm"] * 3, "kernel": ["rmsnorm"] * 3, "dtype": ["bfloat16"] * 3,
                       "num_tokens": [1, 2, 4], "hidden_size": [4096] * 3, "latency_us": ["11.0", "12.1 us", "13"]})
    with pytest.raises(InputError, match=r"^own\.parquet: row 1, column 'latency_us': '12\.1 us' is not a number$"):
        conform(df, "own.parquet")
    with pytest.raises(InputError, match=r"row 2, column 'num_tokens': 4\.5 is not an integer"):
        conform(df.assign(latency_us=[1.0, 2.0, 3.0], num_tokens=[1, 2, 4.5]), "own.parquet")
    assert conform(df.assign(latency_us=["11.0", "12.1", "13"]))["latency_us"].tolist() == [11.0, 12.1, 13.0]


def test_categorical_strings_keeps_values_and_converts_only_repeated_string_columns(tmp_path):
    df = pd.DataFrame({"gpu": ["h100_sxm", "a100_sxm4_80gb", "h100_sxm", None, "h100_sxm", "a100_sxm4_80gb"],
                       "problem_key": ["k0", "k1", "k2", "k3", "k4", "k5"],  # every value distinct: stays a string
                       "latency_us": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    out = categorical_strings(df)
    assert isinstance(out["gpu"].dtype, pd.CategoricalDtype)
    assert list(out["gpu"].cat.categories) == ["a100_sxm4_80gb", "h100_sxm"]
    assert not isinstance(out["problem_key"].dtype, pd.CategoricalDtype)
    assert out["latency_us"].dtype == np.float64
    assert out["gpu"].isna().tolist() == df["gpu"].isna().tolist()
    assert out["gpu"].astype(str).tolist()[:3] == ["h100_sxm", "a100_sxm4_80gb", "h100_sxm"]
    assert df["gpu"].dtype != out["gpu"].dtype  # the input frame is not modified
    # written and read back, the columns stay categories with the same values
    write_parquet(out, tmp_path / "t.parquet")
    back = read_table(tmp_path / "t.parquet")
    assert isinstance(back["gpu"].dtype, pd.CategoricalDtype)
    pd.testing.assert_series_equal(back["gpu"].astype(object), out["gpu"].astype(object))
