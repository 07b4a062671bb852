"""Atomic file output and checked table and artefact input.

Every output of the pipeline is written to a temporary file in the target's
directory and moved into place with :func:`os.replace`, so a crash never
leaves a half-written file behind: readers see either the old file or the new
one.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


class InputError(ValueError):
    """Bad input data: the message names the file, row or key and what was expected."""


def close_match(word: str, allowed) -> str:
    """``" (did you mean 'x'?)"`` for the allowed name closest to ``word``, else ``""``: an allowed name that holds
    ``word`` (``ep_size`` -> ``moe_ep_size``), the shortest such, else the closest by :mod:`difflib`."""
    word, allowed = str(word), [str(a) for a in allowed]
    holding = sorted((a for a in allowed if word and word in a), key=len)
    near = holding[:1] or difflib.get_close_matches(word, allowed, n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success move it onto ``path``.

    On any exception the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_parquet(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write ``df`` to Parquet atomically (no index)."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_csv(df: pd.DataFrame, path: str | os.PathLike, **kwargs: Any) -> None:
    """Write ``df`` to CSV atomically (no index unless ``index=True`` is passed)."""
    kwargs.setdefault("index", False)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **kwargs)


def write_text(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` (UTF-8) atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` as indented JSON atomically."""
    write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_table(path: str | os.PathLike, **kwargs: Any) -> pd.DataFrame:
    """Read a Parquet or CSV file, turning parser failures into :class:`InputError`.

    Raises:
        InputError: the file is missing, truncated, or not a valid table; the
            message names the file.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path, **kwargs)
        if path.suffix == ".csv":
            return pd.read_csv(path, **kwargs)
    except Exception as exc:  # pyarrow / pandas raise many types for corrupt files
        raise InputError(
            f"{path}: cannot be read as {path.suffix[1:]} ({type(exc).__name__}: {exc}); "
            "the file may be truncated or corrupt"
        ) from exc
    raise InputError(f"{path}: unsupported table format {path.suffix!r} (expected .parquet or .csv)")


def read_user_csv(path: str | os.PathLike, where: str) -> pd.DataFrame:
    """A CSV file a user hands over (a trace, launches, measured launches), every line with the header's fields.

    ``where`` prefixes every message (e.g. ``"--launches runs.csv"``). pandas alone would take the first field of
    rows one field longer than the header as their index and shift every column by one; here such a file is
    refused, naming the first line whose field count differs.

    Raises:
        InputError: the file is missing or unreadable, not UTF-8 text, empty, not parseable as CSV, has a column
            name twice in its header or a line with more fields than its header.
    """
    import csv
    import warnings

    p = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            df = pd.read_csv(p, index_col=False)
        with open(p, newline="", encoding="utf-8") as f:   # pandas renames a repeated column 'm' to 'm.1'
            header = next(csv.reader(f), [])
        twice = sorted({c for c in header if header.count(c) > 1})
        if twice:
            raise InputError(f"{where}: column {twice[0]!r} appears more than once in the header")
        return df
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 text ({e.reason})") from None
    except (pd.errors.ParserWarning, pd.errors.ParserError) as e:
        with open(p, newline="", encoding="utf-8") as f:
            rows = csv.reader(f)
            header = len(next(rows, []))
            for i, row in enumerate(rows, start=2):
                if len(row) > header:
                    raise InputError(f"{where}: line {i} has {len(row)} fields, the header {header}") from None
        raise InputError(f"{where}: cannot read CSV ({e})") from None
    except (OSError, pd.errors.EmptyDataError) as e:
        raise InputError(f"{where}: cannot read CSV ({e})") from None


def brief_error(exc: BaseException, limit: int = 100) -> str:
    """``"<type>: <message>"`` of ``exc`` on one line: the first line of the message, cut at its first sentence when
    longer than ``limit`` characters, and at ``limit``."""
    text = (str(exc).strip().splitlines() or [""])[0]
    if len(text) > limit and ". " in text:
        text = text[: text.index(". ") + 1]
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(exc).__name__}: {text}"


#: what :func:`read_artefact` reads each file suffix as, and the kind the message names
_ARTEFACT_KINDS = {".json": "JSON", ".joblib": "joblib", ".pt": "model"}


def read_artefact(path: str | os.PathLike, stage: str = "train", *, keys: tuple[str, ...] = ()) -> Any:
    """The content of one pipeline artefact, by its suffix: ``.json`` (a JSON document), ``.joblib`` (a joblib
    pickle), ``.pt`` (a torch state dict, tensors only, mapped to the CPU).

    Args:
        stage: the pipeline stage that writes the file, named in the message.
        keys: for JSON, keys the document (an object) must have.

    Raises:
        InputError: one line naming the file: ``"<path>: file not found; rerun the <stage> stage"``, ``"<path>: not a
            valid model file (truncated?) (<error>); rerun the <stage> stage"``, or a JSON document that is not an
            object holding ``keys``.
    """
    path = Path(path)
    kind = _ARTEFACT_KINDS.get(path.suffix)
    if kind is None:
        raise InputError(f"{path}: unsupported artefact format {path.suffix!r}; expected one of "
                         f"{sorted(_ARTEFACT_KINDS)}")
    if not path.is_file():
        raise InputError(f"{path}: file not found; rerun the {stage} stage")
    try:
        if kind == "JSON":
            obj = json.loads(path.read_text(encoding="utf-8"))
        elif kind == "joblib":
            import joblib

            obj = joblib.load(path)
        else:
            import torch

            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # json, pickle, zipfile and torch raise many types for a damaged file
        raise InputError(f"{path}: not a valid {kind} file (truncated?) ({brief_error(exc)}); rerun the {stage} "
                         "stage") from None
    if kind == "JSON" and keys:
        if not isinstance(obj, dict):
            raise InputError(f"{path}: expected a JSON object, found {type(obj).__name__}; rerun the {stage} stage")
        missing = [k for k in keys if k not in obj]
        if missing:
            raise InputError(f"{path}: missing {missing}; rerun the {stage} stage")
    return obj


def categorical_strings(df: pd.DataFrame, max_share: float = 0.5) -> pd.DataFrame:
    """``df`` with every string column holding at most ``max_share`` x ``len(df)`` distinct values as a
    ``category`` column (values, order and missing values unchanged; other columns untouched, no copy of them).

    For the stages that subset a large feature table many times (the leave-one-out folds, the selection folds):
    selecting rows of a category column moves integer codes, where a pyarrow-backed string column copies every
    string.
    """
    out = {}
    for c in df.columns:
        col = df[c]
        if pd.api.types.is_string_dtype(col.dtype) and not isinstance(col.dtype, pd.CategoricalDtype) \
                and col.nunique(dropna=True) <= max_share * len(df):
            out[c] = col.astype("category")
    return df.assign(**out) if out else df


def require_columns(df: pd.DataFrame, columns: list[str] | tuple[str, ...], source: str,
                    noun: str = "column") -> None:
    """Raise :class:`InputError` naming ``source`` if any of ``columns`` is missing.

    The one-line message lists the missing names, the expected ones and, for a missing name that a present one
    resembles (:func:`difflib.get_close_matches`), that name as the likely misspelling. ``noun`` names what the
    columns are in the source (``column``; ``key`` for JSON lines).
    """
    import difflib

    missing = [c for c in columns if c not in df.columns]
    if missing:
        present = [str(c) for c in df.columns if c not in columns]
        close = [f"{m!r} (found {hit[0]!r})" for m in missing
                 if (hit := difflib.get_close_matches(str(m), present, n=1, cutoff=0.8))]
        hint = f"; misspelled? {', '.join(close)}" if close else ""
        raise InputError(
            f"{source}: missing {noun}(s) {missing}; expected at least {list(columns)}{hint}"
        )
