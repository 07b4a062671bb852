"""The download rule and its sha256 check, against a local HTTP server on 127.0.0.1."""

import functools
import hashlib
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from synperf.data.download import fetch, load_manifest, main, upstream_url
from synperf.data.io import InputError

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "served"
    (root / "vidur/compute/a40/x").mkdir(parents=True)
    payload = b"num_tokens,latency\n1,0.5\n"
    (root / "vidur/compute/a40/x/mlp.csv").write_bytes(payload)
    (root / "pipeweave/hardware").mkdir(parents=True)
    (root / "pipeweave/hardware/RTX A6000.json").write_bytes(b"{}")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root, hashlib.sha256(payload).hexdigest()
    httpd.shutdown()


def test_fetch_checks_the_hash(server, tmp_path):
    base, root, sha = server
    dest = tmp_path / "out" / "mlp.csv"
    fetch(f"{base}/vidur/compute/a40/x/mlp.csv", dest, sha)
    assert dest.read_bytes() == (root / "vidur/compute/a40/x/mlp.csv").read_bytes()
    bad = tmp_path / "out" / "bad.csv"
    with pytest.raises(InputError, match="does not match"):
        fetch(f"{base}/vidur/compute/a40/x/mlp.csv", bad, "0" * 64)
    assert not bad.exists() and [p.name for p in bad.parent.iterdir()] == ["mlp.csv"]
    with pytest.raises(InputError, match="download failed"):
        fetch(f"{base}/missing.csv", tmp_path / "m.csv", sha)


def test_snakemake_rule_downloads_into_the_configured_folder(server, tmp_path):
    base, root, sha = server
    man = {"files": {
        "vidur/compute/a40/x/mlp.csv": {"url": f"{base}/vidur/compute/a40/x/mlp.csv", "sha256": sha},
        "pipeweave/hardware/RTX A6000.json": {"url": f"{base}/pipeweave/hardware/RTX%20A6000.json",
                                              "sha256": hashlib.sha256(b"{}").hexdigest()},
    }}
    mpath = tmp_path / "manifest.yaml"
    mpath.write_text(yaml.safe_dump(man))
    dl = tmp_path / "dl"
    targets = [str(dl / "vidur/compute/a40/x/mlp.csv"), str(dl / "pipeweave/hardware/RTX A6000.json")]
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"public_data_manifest={mpath}",
         f"download_dir={dl}", f"public_data_dir={dl}", "--", *targets],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (dl / "vidur/compute/a40/x/mlp.csv").read_bytes() == (root / "vidur/compute/a40/x/mlp.csv").read_bytes()
    assert (dl / "pipeweave/hardware/RTX A6000.json").read_bytes() == b"{}"


def test_shipped_manifest_pins_commits():
    man = load_manifest(REPO / "config/public_data_manifest.yaml")
    assert len(man) > 50
    for rel, entry in man.items():
        assert len(entry["sha256"]) == 64
        assert entry["url"] == upstream_url(rel)
        assert "/main/" not in entry["url"] and "/master/" not in entry["url"]


def test_shipped_manifest_matches_the_local_copy(public_data):
    from synperf.data.download import sha256_file

    man = load_manifest(REPO / "config/public_data_manifest.yaml")
    for rel, entry in list(man.items())[::9]:
        assert sha256_file(public_data / rel) == entry["sha256"], rel


def test_manifest_rebuild_reproduces_the_shipped_manifest(public_data, tmp_path, capsys):
    """``python -m synperf.data.download manifest <data>`` on the pinned copy writes the shipped file: the same
    files (the comparison data of the ceiling report included), then the same bytes."""
    shipped = REPO / "config/public_data_manifest.yaml"
    assert main(["manifest", str(public_data), "-o", str(tmp_path / "m.yaml")]) == 0
    rebuilt = load_manifest(tmp_path / "m.yaml")
    assert sorted(rebuilt) == sorted(load_manifest(shipped))
    assert "pipeweave/pipetuning_test/demo/topk_underperforming_L40.csv" in rebuilt
    assert "pipeweave/pipetuning_test/moe_dse/improve/improvement_sglang_detail.csv" in rebuilt
    # the end-to-end inputs: every real run, model config, request trace and collective table
    for folder, pattern in (("pipeweave/e2e/real", "*.jsonl"), ("pipeweave/config", "*.json"),
                            ("pipeweave/workload", "*.csv"), ("pipeweave/dataset/collective", "*/*.csv")):
        local = sorted(str(p.relative_to(public_data)) for p in (public_data / folder).glob(pattern))
        assert local and set(local) <= set(rebuilt), folder
    assert "pipeweave/dataset/collective/RTX 6000 Ada/all_reduce.csv" in rebuilt
    assert (tmp_path / "m.yaml").read_text() == shipped.read_text()
    assert capsys.readouterr().out == f"{tmp_path / 'm.yaml'}: {len(rebuilt)} files\n"
