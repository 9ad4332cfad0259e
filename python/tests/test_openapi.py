"""The HTTP API's OpenAPI document, as `trajwiki serve` answers it at /openapi.json, validates as
OpenAPI 3.1 (openapi-spec-validator, a validator of the OpenAPI Initiative's schemas). The
document is generated from the routes and their request types (utoipa); `tests/serve.rs` checks
that it lists exactly the routes the server serves."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO

BIN = Path(os.environ.get("TRAJWIKI_BIN", REPO / "target" / "debug" / "trajwiki"))


def trajwiki(*args: str) -> None:
    done = subprocess.run([str(BIN), *args], capture_output=True, text=True)
    assert done.returncode == 0, f"trajwiki {' '.join(args)}: {done.stderr}"


def test_the_document_validates_as_openapi_3_1(tmp_path: Path) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    if not BIN.is_file():
        pytest.skip(f"no trajwiki binary at {BIN} (cargo build)")
    store = tmp_path / "store"
    trajwiki("ingest", "--store", str(store), str(REPO / "tests/fixtures/demo.jsonl"), "-q")
    server = subprocess.Popen(
        [str(BIN), "serve", "--store", str(store), "--port", "0", "--model", "hashing"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        url = None
        assert server.stderr is not None
        for line in server.stderr:
            if "http://" in line:
                url = line[line.index("http://"):].strip()
                break
        assert url, "the server says where it listens"
        with urllib.request.urlopen(f"{url}/openapi.json", timeout=30) as answer:
            document = json.load(answer)
    finally:
        server.kill()
        server.wait()
    assert document["openapi"].startswith("3.1."), document["openapi"]
    validator.validate(document)
    # The validator is no formality: a path parameter left out is refused.
    broken = json.loads(json.dumps(document))
    broken["paths"]["/v1/namespaces/{ns}/pages"]["get"]["parameters"] = []
    with pytest.raises(Exception, match="ns"):
        validator.validate(broken)
