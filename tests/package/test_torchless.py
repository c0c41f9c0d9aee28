"""The doors of the core install run without torch: each in a process where torch, transformers and
Lightning cannot be imported (a ``sys.meta_path`` finder refuses them, as a missing package would).

``memnets.open`` + add + search (with the shipped change judge asked for), the same with a pack (its encoder,
heads and judge; built here, with torch), ``memnets memories search``, the REST server and MCP over stdio, and
the LangChain and LangGraph adapters. Each runs twice: in this venv with the
import hook (fast), and (slow) in a venv that ``scripts/core_venv.sh`` makes from the wheel of this checkout,
with the serving extras' packages and no torch at all, from a folder that is not the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from memnets.server.testing import free_port

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "transformers", "lightning", "pytorch_lightning")
BLOCKER = f"""
import sys
import textwrap

class RefuseTraining:
    '''Imports of {BLOCKED} fail as they would where the packages are not installed.'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (refused by tests/package/test_torchless.py)", name=name)
        return None

sys.meta_path.insert(0, RefuseTraining())
"""
TIMEOUT_S = 120


# the packages of the serving extras the doors below need, added to the core venv (scripts/core_venv.sh)
SERVING_EXTRAS = ["fastapi>=0.115,<1", "uvicorn>=0.30,<1", "httpx>=0.27,<1", "prometheus-client>=0.20,<1",
                  "mcp>=1.20,<2", "langgraph>=1.0,<2", "langchain-core>=1.0,<2"]  # fmt: skip


class Child(NamedTuple):
    """How a torch-free child process runs: its interpreter, environment and working folder."""

    python: str
    env: dict
    cwd: Path


@pytest.fixture(scope="module", params=["import hook", pytest.param("core venv", marks=pytest.mark.slow)])
def child(request, tmp_path_factory) -> Child:
    """A torch-free child: this venv with the blocker as its sitecustomize and this checkout first on the
    path, or a venv of the core install alone (the wheel built from this checkout); a graph cache of its own."""
    cache = tmp_path_factory.mktemp("torchless_cache")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {
        "MEMNETS_CACHE": str(cache)
    }
    if request.param == "import hook":
        site = tmp_path_factory.mktemp("torchless_site")
        (site / "sitecustomize.py").write_text(BLOCKER)
        return Child(sys.executable, env | {"PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}, ROOT)
    venv = tmp_path_factory.mktemp("core") / "venv"
    made = subprocess.run(
        ["bash", str(ROOT / "scripts" / "core_venv.sh"), str(venv), "-", *SERVING_EXTRAS],
        env=env | {"PYTHON": sys.executable}, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    return Child(str(venv / "bin" / "python"), env, tmp_path_factory.mktemp("elsewhere"))


def run(child: Child, code: str) -> dict:
    """Run ``code`` in a torch-free child; the JSON it prints last."""
    script = textwrap.dedent(code) + "\nimport sys as _s; assert not {'torch', 'transformers'} & set(_s.modules)\n"
    done = subprocess.run(
        [child.python, "-c", script], env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_torch_cannot_be_imported_there(child):
    assert run(child, "import json, importlib.util as u; print(json.dumps(u.find_spec('numpy') is not None))")
    done = subprocess.run(
        [child.python, "-c", "import torch"], env=child.env, cwd=child.cwd, capture_output=True, text=True
    )
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr


def test_open_add_search_and_the_judge_run_without_torch(child, tmp_path):
    found = run(
        child,
        f"""
        import json, memnets
        with memnets.open({str(tmp_path / "memory")!r}, supersession="auto") as memory:
            memory.add("I live in Leeds.", user="ann")
            memory.add("I moved to Lyon in June.", user="ann")
            hits = memory.search("Where does Ann live?", user="ann", k=2)
            judge = memory.supersession.judge
            print(json.dumps({{"hits": [h.memory.content for h in hits], "fingerprint": memory.encoder.fingerprint,
                              "encoder": type(memory.encoder).__name__, "judge": type(judge).__name__}}))
        """,
    )
    assert found["encoder"] == "ServingEncoder" and found["judge"] == "ServingJudge"
    assert found["fingerprint"].startswith("onnx:384:")
    assert found["hits"][0] == "I moved to Lyon in June."  # the shipped judge ended the older fact


@pytest.fixture(scope="module")
def pack_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A tiny pack with every component: encoder (a projection), importance head, recall gate, change judge."""
    import torch

    from memnets.nn.change_judge import ChangeJudge, ChangeJudgeNet
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.heads import ImportanceHead, RecallGateHead
    from memnets.pack import export_pack

    torch.manual_seed(0)
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir, projection_dim=16)
    heads = {"importance": ImportanceHead(16, hidden_dims=(8,)), "gate": RecallGateHead(16, hidden_dims=(8,))}
    judge = ChangeJudge(ChangeJudgeNet(layers=1), threshold=0.5)
    return export_pack(tmp_path_factory.mktemp("pack") / "pack", encoder, supersession=judge, **heads)


def test_a_pack_opens_adds_and_searches_without_torch(child, pack_dir, tmp_path):
    """Its encoder on ONNX Runtime, its heads in numpy, its judge on ONNX Runtime; a store the pack filled on
    torch's exact backend is refused there with the way out, one filled on its "onnx" backend opens."""
    import memnets

    importance = head_says(str(pack_dir), "I live in Leeds.")
    with memnets.open(tmp_path / "on_torch", pack=pack_dir) as memory:
        memory.add("I adopted a beagle named Rex", user="ann")
    with memnets.open(tmp_path / "on_onnx", pack=pack_dir, backend="onnx") as memory:
        memory.add("I adopted a beagle named Rex", user="ann")
    found = run(
        child,
        f"""
        import json, memnets
        with memnets.open({str(tmp_path / "memory")!r}, pack={str(pack_dir)!r}, supersession="auto") as memory:
            added = memory.add("I live in Leeds.", user="ann")
            memory.add("I adopted a beagle named Rex", user="ann")
            hits = memory.search("beagle", user="ann", k=1)
            parts = [memory.encoder, memory.importance.head, memory.gate.head, memory.supersession.judge]
            kinds = [type(part).__name__ for part in parts]
        with memnets.open({str(tmp_path / "on_onnx")!r}, pack={str(pack_dir)!r}) as memory:
            moved = memory.search("beagle", user="ann", k=1)[0].memory.content
        try:
            memnets.open({str(tmp_path / "on_torch")!r}, pack={str(pack_dir)!r})
            refused = None
        except Exception as error:
            refused = str(error)
        print(json.dumps({{"hit": hits[0].memory.content, "kinds": kinds, "importance": added.importance,
                          "moved": moved, "refused": refused}}))
        """,
    )
    assert found["kinds"] == ["ServingEncoder", "ServingImportance", "ServingGate", "ServingJudge"]
    assert found["hit"] == found["moved"] == "I adopted a beagle named Rex"
    assert found["importance"] == pytest.approx(importance, abs=1e-5)  # the pack's head, as on torch
    assert "memnets archive reembed" in found["refused"]
    done = subprocess.run(
        [child.python, "-m", "memnets", "memories", str(tmp_path / "on_onnx"), "--pack", str(pack_dir), "search",
         "dog", "--user", "ann", "--json"],
        env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "beagle" in done.stdout


def test_a_pack_of_another_backbone_names_the_train_extra_there(child, mpnet_pack):
    message = run(
        child,
        f"""
        import json
        from memnets.pack import load_pack
        try:
            load_pack({str(mpnet_pack)!r})
        except ModuleNotFoundError as error:
            print(json.dumps(str(error)))
        """,
    )
    assert "a pack's encoder on the backend 'onnx' (torch) needs the optional dependency" in message
    assert "of the extra [train]" in message


def test_the_cli_search_runs_without_torch(child, tmp_path):
    folder = tmp_path / "memory"
    run(
        child,
        f"import memnets\nmemnets.open({str(folder)!r}).add('I adopted a beagle named Rex', user='ann')\nprint(1)",
    )
    done = subprocess.run(
        [child.python, "-m", "memnets", "memories", str(folder), "search", "dog", "--user", "ann", "--json"],
        env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "beagle" in done.stdout


@pytest.mark.parametrize("packed", [False, True], ids=["bundled encoder", "pack"])
def test_the_rest_server_serves_without_torch(child, tmp_path, packed, request):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    pack = ["--pack", str(request.getfixturevalue("pack_dir"))] if packed else []
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(
            [child.python, "-m", "memnets", "serve", "http", str(tmp_path / "memory"), "--port", str(port), *pack],
            env=child.env, cwd=child.cwd, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not _ready(url):
            assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.05)
        added = httpx.post(f"{url}/v1/memories", json={"text": "I adopted a beagle named Rex", "user": "ann"})
        assert added.status_code == 200, added.text
        found = httpx.post(f"{url}/v1/search", json={"query": "dog", "user": "ann"}).json()
        assert found["results"][0]["memory"]["content"] == "I adopted a beagle named Rex"
        if packed:  # the pack's importance head scored the add
            assert found["results"][0]["memory"]["importance"] == pytest.approx(
                head_says(pack[1], "I adopted a beagle named Rex"), abs=1e-5
            )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert "No module named" not in (tmp_path / "server.log").read_text()  # nothing even tried


def head_says(pack: str, text: str) -> float:
    """The importance the pack's head gives ``text`` on torch (this process)."""
    from memnets.pack import load_pack

    exact = load_pack(pack, backend="torch")
    return float(exact.importance.predict_proba(exact.encoder.encode([text]).numpy())[0])


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_mcp_answers_without_torch(child, tmp_path):
    server = subprocess.Popen(
        [child.python, "-m", "memnets", "serve", "mcp", str(tmp_path / "memory")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child.env, cwd=child.cwd,
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
    assert b"No module named" not in server.stderr.read()


def test_the_langchain_and_langgraph_adapters_run_without_torch(child, tmp_path):
    found = run(
        child,
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


def test_the_torch_backend_names_the_train_extra_there(child, tmp_path):
    message = run(
        child,
        f"""
        import json, memnets
        try:
            memnets.open({str(tmp_path / "memory")!r}, backend="torch")
        except ModuleNotFoundError as error:
            print(json.dumps(str(error)))
        """,
    )
    assert "the encoder backend 'torch' (torch) needs the optional dependency" in message
    assert "of the extra [train]" in message
