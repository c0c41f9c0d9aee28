"""The doors of the core install run without torch: each in a process where torch, transformers and
Lightning cannot be imported (a ``sys.meta_path`` finder refuses them, as a missing package would).

``memnets.open`` + add + search (with the shipped change judge asked for), ``memnets memories search``, the REST
server and MCP over stdio, and the LangChain and LangGraph adapters. tests/test_wheel_torchless.py (slow)
installs the wheel into a venv without torch and runs the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from memnets.server.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("torch", "transformers", "lightning", "pytorch_lightning")
BLOCKER = f"""
import sys

class RefuseTraining:
    '''Imports of {BLOCKED} fail as they would where the packages are not installed.'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (refused by tests/test_torchless.py)", name=name)
        return None

sys.meta_path.insert(0, RefuseTraining())
"""
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    """The environment of a torch-free child: the blocker as its sitecustomize, this checkout, a warm graph cache."""
    site = tmp_path_factory.mktemp("torchless_site")
    (site / "sitecustomize.py").write_text(BLOCKER)
    cache = tmp_path_factory.mktemp("torchless_cache")
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "MEMNETS_CACHE": str(cache)}


def run(env: dict, code: str) -> dict:
    """Run ``code`` in a torch-free child; the JSON it prints last."""
    script = textwrap.dedent(code) + "\nimport sys as _s; assert not {'torch', 'transformers'} & set(_s.modules)\n"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_blocker_refuses_torch(env):
    assert run(env, "import json, importlib.util as u; print(json.dumps(u.find_spec('numpy') is not None))")
    done = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "refused by tests/test_torchless.py" in done.stderr


def test_open_add_search_and_the_judge_run_without_torch(env, tmp_path):
    found = run(
        env,
        f"""
        import json, memnets
        with memnets.open({str(tmp_path / "memory")!r}, supersession="auto") as memory:
            memory.add("I live in Leeds.", user="ann")
            memory.add("I moved to Lyon in June.", user="ann")
            hits = memory.search("Where does Ann live?", user="ann", k=2)
            judge = memory._writes.supersession.judge
            print(json.dumps({{"hits": [h.memory.content for h in hits], "fingerprint": memory.encoder.fingerprint,
                              "encoder": type(memory.encoder).__name__, "judge": type(judge).__name__}}))
        """,
    )
    assert found["encoder"] == "ServingEncoder" and found["judge"] == "ServingJudge"
    assert found["fingerprint"].startswith("onnx:384:")
    assert found["hits"][0] == "I moved to Lyon in June."  # the shipped judge ended the older fact


def test_the_cli_search_runs_without_torch(env, tmp_path):
    folder = tmp_path / "memory"
    run(
        env,
        f"import json, memnets\nmemnets.open({str(folder)!r}).add('I adopted a beagle named Rex', user='ann')\nprint(1)",
    )
    done = subprocess.run(
        [sys.executable, "-m", "memnets", "memories", str(folder), "search", "dog", "--user", "ann", "--json"],
        env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "beagle" in done.stdout


def test_the_rest_server_serves_without_torch(env, tmp_path):
    with ServerProcess(tmp_path / "memory", env={k: env[k] for k in ("PYTHONPATH", "MEMNETS_CACHE")}) as server:
        server.wait_ready(timeout=TIMEOUT_S)
        added = httpx.post(f"{server.url}/v1/memories", json={"text": "I adopted a beagle named Rex", "user": "ann"})
        assert added.status_code == 200, added.text
        found = httpx.post(f"{server.url}/v1/search", json={"query": "dog", "user": "ann"}).json()
        assert found["results"][0]["memory"]["content"] == "I adopted a beagle named Rex"
        assert "refused by tests/test_torchless.py" not in server.output()  # nothing even tried


def test_mcp_answers_without_torch(env, tmp_path):
    server = subprocess.Popen(
        [sys.executable, "-m", "memnets", "serve", "mcp", str(tmp_path / "memory")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip

    def ask(message: dict) -> dict | None:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        return json.loads(server.stdout.readline()) if "id" in message else None

    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        assert ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})["result"]
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        add = {"name": "add_memory", "arguments": {"text": "I adopted a beagle named Rex", "user_id": "ann"}}
        assert not ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": add})["result"]["isError"]
        search = {"name": "search_memory", "arguments": {"query": "dog", "user_id": "ann"}}
        reply = ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": search})
        assert "beagle" in reply["result"]["content"][0]["text"]
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    assert b"refused by tests/test_torchless.py" not in server.stderr.read()


def test_the_langchain_and_langgraph_adapters_run_without_torch(env, tmp_path):
    pytest.importorskip("langgraph")
    pytest.importorskip("langchain_core")
    found = run(
        env,
        f"""
        import json, memnets
        from memnets.integrations.langchain import MemnetsRetriever
        from memnets.integrations.langgraph import MemnetsStore
        with memnets.open({str(tmp_path / "memory")!r}) as memory:
            memory.add("I adopted a beagle named Rex", user="ann")
            docs = MemnetsRetriever(memory=memory, user="ann", k=1).invoke("dog")
            store = MemnetsStore(memory)
            store.put(("ann", "notes"), "n1", {{"text": "My sister lives in Porto"}})
            items = store.search(("ann", "notes"), query="sister")
            print(json.dumps({{"doc": docs[0].page_content, "item": items[0].value}}))
        """,
    )
    assert found["doc"] == "I adopted a beagle named Rex" and found["item"] == {"text": "My sister lives in Porto"}
