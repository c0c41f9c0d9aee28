"""The TypeScript client (clients/typescript/): its saved OpenAPI document is the one the server
serves (the client's types are generated from it, so they cannot drift), and its node tests
(`node --test`) pass against a real `memnets serve http` process with a tiny encoder and the rule
judge (``supersession=auto``: a changed fact, handed over as MEMNETS_CHANGED_FACT from
tests/successor_helpers.py, must never answer above its successor).

The node run needs node >= 18 and npm (and npm's registry for `npm ci`); without them it is skipped,
unless MEMNETS_REQUIRE_NODE=1 (.ci/run sets it), which makes a missing node a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from successor_helpers import FILLERS, KS, QUESTION, STALE, SUCCESSOR, facts

from memnets.server.testing import ServerProcess

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "typescript"
ADMIN = "admin-" + uuid.uuid4().hex
ANN = "ann-" + uuid.uuid4().hex


def test_the_saved_openapi_document_is_the_one_the_server_serves():
    from starlette.testclient import TestClient

    from memnets.server.app import create_app

    served = TestClient(create_app(lambda wrap: None)).get("/openapi.json")  # the memory is never opened
    assert served.status_code == 200
    saved = json.loads((CLIENT / "openapi.json").read_text(encoding="utf-8"))
    assert saved == served.json(), (
        "clients/typescript/openapi.json differs from the server's /openapi.json: run "
        "`.venv/bin/python scripts/save_openapi.py`, then `npm run build` in clients/typescript"
    )


def _node_tools() -> tuple[str, str] | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    major = int(
        subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0]
    )
    return (node, npm) if major >= 18 else None


@pytest.mark.slow
def test_the_typescript_client_passes_its_tests_against_a_real_server(tiny_model_dir, tmp_path):
    tools = _node_tools()
    if tools is None:
        if os.environ.get("MEMNETS_REQUIRE_NODE") == "1":
            pytest.fail("MEMNETS_REQUIRE_NODE=1 but node >= 18 and npm are not on PATH")
        pytest.skip("node >= 18 and npm are not on PATH")
    node, npm = tools
    for step in ([npm, "ci", "--no-audit", "--no-fund"], [npm, "run", "build"], [npm, "run", "lint"]):
        done = subprocess.run(step, cwd=CLIENT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{' '.join(step)}:\n{done.stdout}\n{done.stderr}"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({ANN: "ann"}))
    args = ["--encoder", str(tiny_model_dir), "--set", "duplicate_threshold=0.9999", "--set", "supersession=auto"]
    args += ["--token-env", "MEMNETS_TEST_ADMIN", "--tokens", str(tokens)]
    changed = {
        "facts": [[text, when.isoformat()] for text, when in facts()],
        "question": QUESTION,
        "stale": STALE,
        "successor": SUCCESSOR,
        "ks": KS,
        "count": 2 + len(FILLERS),
    }
    with ServerProcess(tmp_path / "memory", *args, env={"MEMNETS_TEST_ADMIN": ADMIN}) as server:
        server.wait_ready(token=ADMIN)
        environment = {**os.environ, "MEMNETS_URL": server.url, "MEMNETS_TOKEN": ADMIN, "MEMNETS_ANN_TOKEN": ANN}
        environment["MEMNETS_CHANGED_FACT"] = json.dumps(changed)
        done = subprocess.run(
            [node, "--test", "--test-reporter=spec", "test/"],
            cwd=CLIENT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
        )
    print(done.stdout)  # the node tests' own report, in CI's log (pytest -s)
    assert done.returncode == 0, f"node --test failed:\n{done.stdout[-8000:]}\n{done.stderr[-4000:]}"
