"""The TypeScript client (clients/typescript/): its saved OpenAPI document is the one the server
serves, its checked-in types (src/schema.ts) are openapi-typescript's of that document (so they cannot
drift from the server's bodies and answers), and its node tests
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

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
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
        "`.venv/bin/python scripts/save_openapi.py` (it writes src/schema.ts too)"
    )


def _node_tools() -> tuple[str, str] | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    major = int(
        subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0]
    )
    return (node, npm) if major >= 18 else None


def node_and_npm() -> tuple[str, str]:
    """node and npm, or a skip (a failure with MEMNETS_REQUIRE_NODE=1)."""
    tools = _node_tools()
    if tools is None:
        if os.environ.get("MEMNETS_REQUIRE_NODE") == "1":
            pytest.fail("MEMNETS_REQUIRE_NODE=1 but node >= 18 and npm are not on PATH")
        pytest.skip("node >= 18 and npm are not on PATH")
    return tools


def npm_steps(npm: str, *steps: list[str], cwd: Path = CLIENT) -> str:
    """Run ``npm STEP`` for each step in ``cwd``, failing on the first that fails; the last one's stdout."""
    for step in steps:
        done = subprocess.run([npm, *step], cwd=cwd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"npm {' '.join(step)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
def test_the_checked_in_typescript_types_are_generated_from_the_saved_openapi_document(tmp_path):
    """src/schema.ts is what openapi-typescript (the version package-lock.json pins) makes of openapi.json,
    to the byte: the client's types are never edited by hand, nor left behind by a change of the server."""
    node, npm = node_and_npm()
    generator = CLIENT / "node_modules" / ".bin" / "openapi-typescript"
    if not generator.exists():
        npm_steps(npm, ["ci", "--no-audit", "--no-fund"])
    made = tmp_path / "schema.ts"
    done = subprocess.run([str(generator), "openapi.json", "-o", str(made)], cwd=CLIENT, capture_output=True, text=True)
    assert done.returncode == 0, f"openapi-typescript failed:\n{done.stdout}\n{done.stderr}"
    assert made.read_text(encoding="utf-8") == (CLIENT / "src" / "schema.ts").read_text(encoding="utf-8"), (
        "clients/typescript/src/schema.ts differs from what openapi-typescript makes of openapi.json: run "
        "`.venv/bin/python scripts/save_openapi.py`"
    )


@pytest.mark.slow
def test_the_typescript_client_passes_its_tests_against_a_real_server(tiny_model_dir, tmp_path):
    node, npm = node_and_npm()
    npm_steps(npm, ["ci", "--no-audit", "--no-fund"], ["run", "build"], ["run", "lint"])
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


USER_SCRIPT = """
import { InvalidArgumentError, MemnetsClient } from "memnets-client";

const memory = new MemnetsClient(process.env.MEMNETS_URL, { token: process.env.MEMNETS_TOKEN });
const added = await memory.add("Ann moved to Lisbon", { user: "ann" });
const hits = await memory.search("Ann moved to Lisbon", { user: "ann", k: 1 });
let refused = null;
try {
  await memory.search("Where does Ann live?", { user: "ann", limit: 3 });
} catch (error) {
  refused = { name: error.name, isInvalidArgument: error instanceof InvalidArgumentError, message: error.message };
}
console.log(JSON.stringify({ outcome: added.outcome, first: hits[0].memory.content, refused }));
"""


@pytest.mark.slow
def test_the_packed_client_installs_into_a_project_and_talks_to_a_real_server(tiny_model_dir, tmp_path):
    """As clients/typescript/README.md says: `npm pack` the checkout's client, `npm install` the tarball into a
    project of one's own, and import it by its package name; the script adds, searches and gets a refusal."""
    node, npm = node_and_npm()
    npm_steps(npm, ["ci", "--no-audit", "--no-fund"], ["run", "build"])
    packed = tmp_path / "packed"
    packed.mkdir()
    tarball = packed / npm_steps(npm, ["pack", "--pack-destination", str(packed)]).strip().splitlines()[-1]
    project = tmp_path / "project"
    project.mkdir()
    npm_steps(
        npm,
        ["init", "-y"],
        ["pkg", "set", "type=module"],
        ["install", "--no-audit", "--no-fund", str(tarball)],
        cwd=project,
    )
    (project / "use.mjs").write_text(USER_SCRIPT, encoding="utf-8")
    with ServerProcess(
        tmp_path / "memory",
        "--encoder",
        str(tiny_model_dir),
        "--token-env",
        "MEMNETS_TEST_ADMIN",
        env={"MEMNETS_TEST_ADMIN": ADMIN},
    ) as server:
        server.wait_ready(token=ADMIN)
        environment = {**os.environ, "MEMNETS_URL": server.url, "MEMNETS_TOKEN": ADMIN}
        done = subprocess.run(
            [node, "use.mjs"], cwd=project, env=environment, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "added" and result["first"] == "Ann moved to Lisbon"
    assert result["refused"]["isInvalidArgument"] and result["refused"]["message"].startswith(
        'search: unknown option "limit" (search takes user, k, filters'
    )
    assert not (project / "node_modules" / "memnets-client" / "node_modules").exists()  # no runtime dependency
