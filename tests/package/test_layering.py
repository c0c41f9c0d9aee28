"""The layering of docs/architecture.md, checked on the source: who may import whom, and no circles.

Every import statement counts, at module level or inside a function (a lazy import is still a
dependency), except those under ``if TYPE_CHECKING:`` (type hints only, never run). A "unit" is a
top-level module or subpackage of memnets (``memnets.memory``, ``memnets.scoring``, ...), of its training
side (``memnets.training.lit``, ...), or the bench/ and train/ folders.

Two sides (issue 53): the serving side (``memnets`` outside ``memnets/training``: what an agent imports) and
the training side (``memnets/training``: fit, data, evaluation and their commands). The training side may
import the serving side; nothing of the serving side imports the training side, not even lazily. The one way
across is a string: ``memnets.cli.COMMANDS`` names the training commands as ``"module:function"`` targets that
``memnets.cli.load`` imports when one of them is run.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The serving side, bottom to top; a unit may import the units of lower layers only (docs/architecture.md).
LAYERS: list[tuple[str, set[str]]] = [
    ("argument errors", {"memnets.argerrors"}),
    (
        "foundation",
        {
            "memnets.timeutil",
            "memnets.text",
            "memnets.chunking",
            "memnets.protocols",
            "memnets.safefiles",
            "memnets.netutil",
            "memnets.progress",
            "memnets.extras",
            "memnets.machine",
            "memnets.tracing",
        },
    ),
    ("records, LLM clients, HTTP door checks", {"memnets.records", "memnets.llm", "memnets.httpguard"}),
    ("time: dates of time expressions, supersession rules", {"memnets.temporal"}),
    ("networks", {"memnets.nn"}),
    ("scoring", {"memnets.scoring"}),
    ("pack", {"memnets.pack"}),
    ("retrieval", {"memnets.retrieval"}),
    ("store", {"memnets.store"}),
    ("memory", {"memnets.memory"}),
    ("the memory API", {"memnets.api", "memnets.portable"}),
    ("agent, public names", {"memnets.agent", "memnets"}),
    ("framework adapters and the server", {"memnets.integrations", "memnets.compat", "memnets.server"}),
    ("terminal output", {"memnets.console"}),
    ("commands", {"memnets.commands"}),
    ("the memnets command", {"memnets.cli"}),
    ("python -m memnets", {"memnets.__main__"}),
]
# The training side (memnets/training), bottom to top: a unit may import the serving side up to its commands
# (TRAINING_SEES_UP_TO) and the training units of lower layers. No unit of the serving side imports one.
TRAINING_LAYERS: list[tuple[str, set[str]]] = [
    ("the package, the configs' loader, a fake LLM server",
     {"memnets.training", "memnets.training.configs", "memnets.training.fake_llm"}),
    ("conversations and datasets", {"memnets.training.data"}),
    ("rankers, hard negatives, retrieval metrics", {"memnets.training.retrieval"}),
    ("training", {"memnets.training.lit", "memnets.training.baselines"}),
    ("evaluation", {"memnets.training.evaluation"}),
    ("the training commands", {"memnets.training.commands"}),
]  # fmt: skip
TRAINING_SEES_UP_TO = "memnets.commands"  # the highest serving unit the training side may import
# outside the package, memnets never imports them: bench/ uses the library (no commands); train/ holds
# launcher scripts, which may call a command's main as the `memnets` command does.
# app -> the lowest unit of each side that it may not import
APPS = {"bench": {"memnets.console", "memnets.training.commands"}, "train": {"memnets.cli"}}

# Imports that break the table today, each with the move that removes it. The test fails when one
# of them is gone (delete it here) and for any import not listed.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    found = {}
    for top in ("memnets", "bench", "train"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path) -> set[str]:
    """The modules of this project that ``name`` imports anywhere (TYPE_CHECKING blocks excepted)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return {module for module in found if module in MODULES and module != name}


def unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] in APPS:
        return parts[0]
    return ".".join(parts[:3] if parts[:2] == ["memnets", "training"] else parts[:2])


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}
LAYER_OF = {u: i for i, (_, units) in enumerate(LAYERS) for u in units}
TRAINING_LAYER_OF = {u: i for i, (_, units) in enumerate(TRAINING_LAYERS) for u in units}


def on_training_side(module: str) -> bool:
    return module == "memnets.training" or module.startswith("memnets.training.")


def may_import(source: str, target: str) -> bool:
    """Whether unit ``source`` may import unit ``target``: each side's layers, and serving never imports training."""
    if target in APPS:
        return False  # nothing in memnets imports bench/ or train/
    rank = TRAINING_LAYER_OF if on_training_side(target) else LAYER_OF
    if source in APPS:
        ceilings = [u for u in APPS[source] if on_training_side(u) == on_training_side(target)]
        return all(rank[target] < rank[u] for u in ceilings)
    if not on_training_side(source):
        return not on_training_side(target) and LAYER_OF[target] < LAYER_OF[source]
    if not on_training_side(target):
        return LAYER_OF[target] <= LAYER_OF[TRAINING_SEES_UP_TO]
    return TRAINING_LAYER_OF[target] < TRAINING_LAYER_OF[source]


def unit_edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the module imports behind it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for name, targets in GRAPH.items():
        for target in targets:
            if unit(name) != unit(target):
                edges.setdefault((unit(name), unit(target)), []).append(f"{name} -> {target}")
    return edges


def test_every_unit_of_memnets_has_a_layer():
    units = {unit(name) for name in MODULES if unit(name) not in APPS}
    layered = set(LAYER_OF) | set(TRAINING_LAYER_OF)
    assert units - layered == set(), "add the new unit to (TRAINING_)LAYERS here and to docs/architecture.md"
    assert layered - units == set(), "a unit of (TRAINING_)LAYERS no longer exists"
    assert all(map(on_training_side, TRAINING_LAYER_OF)) and not any(map(on_training_side, LAYER_OF))


def test_imports_follow_the_layers():
    wrong = {}
    for (source, target), where in unit_edges().items():
        if not may_import(source, target) and (source, target) not in KNOWN_VIOLATIONS:
            wrong[(source, target)] = where
    assert wrong == {}, "imports against docs/architecture.md: " + "; ".join(
        f"{s} -> {t} ({w[0]})" for (s, t), w in wrong.items()
    )


def test_the_serving_side_imports_nothing_of_the_training_side():
    """Issue 53: ``memnets`` outside memnets/training never imports memnets.training (lazy imports included)."""
    crossing = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith("memnets") and not on_training_side(name)
        for target in targets
        if on_training_side(target)
    )
    assert crossing == [], f"the serving side imports the training side: {crossing}"
    # the rule as the layer check applies it, both ways
    assert not may_import("memnets.memory", "memnets.training.data")
    assert not may_import("memnets.cli", "memnets.training.commands")
    assert may_import("memnets.training.data", "memnets.text")
    assert may_import("memnets.training.commands", "memnets.commands")
    assert not may_import("memnets.training.data", "memnets.training.lit")
    assert not may_import("bench", "memnets.training.commands") and may_import("train", "memnets.training.commands")


def test_the_cli_reaches_the_training_commands_by_name_only():
    """The one way across: the CLI's table names each training command as a string target, imported when it
    runs; the serving commands (memories, serve, archive) are not on the training side."""
    from memnets.cli import COMMANDS

    serving_words = {"memories", "serve", "archive"}
    for words, (target, _) in COMMANDS.items():
        module = target.partition(":")[0]
        assert module in MODULES, f"{words}: {target} names no module"
        assert on_training_side(module) == (words[0] not in serving_words), f"{words}: {target}"


def test_known_violations_are_still_real():
    edges = unit_edges()
    gone = [pair for pair in KNOWN_VIOLATIONS if pair not in edges]
    assert gone == [], f"fixed: remove {gone} from KNOWN_VIOLATIONS"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            connect(v)
    return result


def test_no_import_circles_between_units():
    graph: dict[str, set[str]] = {}
    for source, target in unit_edges():
        if (source, target) not in KNOWN_VIOLATIONS:
            graph.setdefault(source, set()).add(target)
    assert _cycles(graph) == []


def test_the_checker_sees_circles_and_lazy_imports():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    # a function-level import counts; a TYPE_CHECKING one does not
    assert "memnets.pack" in GRAPH["memnets.training.retrieval.rankers"]
    assert "memnets.training.data.locomo" not in GRAPH["memnets.training.retrieval.rankers"]


TRAINING = {"torch", "transformers", "lightning", "pytorch_lightning"}  # the [train] extra's packages
# The modules that import the training packages at module level: the training side (issue 52). Every other
# module of memnets serves without them, importing them inside a function where a training path needs them.
TRAINING_SIDE = {"memnets.training.lit", "memnets.training.baselines", "memnets.training.evaluation.heads"} | {
    f"memnets.nn.{name}"
    for name in ("change_judge", "distributed", "embedding_cache", "encoder", "heads", "losses", "modes",
                 "onnx_encoder", "top_layers", "traced")
}  # fmt: skip
# what the doors load: memnets.open, the stores, the manager, the server, MCP, the adapters, the CLI's memory commands
SERVING_DOORS = [
    "memnets", "memnets.api", "memnets.nn.serving_encoder", "memnets.nn.serving_judge", "memnets.nn.loading",
    "memnets.nn.serving_heads", "memnets.pack",
    "memnets.server.app", "memnets.server.run", "memnets.integrations.mcp_server", "memnets.integrations.langchain",
    "memnets.integrations.langgraph", "memnets.commands.memories", "memnets.commands.serve", "memnets.cli",
]  # fmt: skip


def module_level_imports(path: Path) -> set[str]:
    """The top-level packages a module imports when it is imported (function bodies and TYPE_CHECKING aside)."""
    found: set[str] = set()

    def visit(nodes) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.If):
                visit(node.orelse if _type_checking_only(node) else [*node.body, *node.orelse])
            elif isinstance(node, (ast.Try, ast.With)):
                visit([*node.body, *getattr(node, "handlers", []), *getattr(node, "orelse", [])])
            elif isinstance(node, ast.ExceptHandler):
                visit(node.body)

    visit(ast.parse(path.read_text(), filename=str(path)).body)
    return found


def test_only_the_training_side_imports_torch_at_module_level():
    importing = {
        name for name, path in MODULES.items() if name.startswith("memnets") and module_level_imports(path) & TRAINING
    }
    inside = {name for name in importing if any(name == t or name.startswith(t + ".") for t in TRAINING_SIDE)}
    assert importing - inside == set(), "serving modules must import torch/transformers/Lightning inside functions"
    assert {t for t in TRAINING_SIDE if not any(n == t or n.startswith(t + ".") for n in importing)} == set()


def test_the_serving_doors_do_not_import_torch():
    code = "import sys\n" + "".join(f"import {m}\n" for m in SERVING_DOORS)
    code += f"print(sorted(p for p in sys.modules if p.split('.')[0] in {sorted(TRAINING)!r}"
    code += " or p.startswith('memnets.training')))"  # nor the training side of memnets
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "module", ["memnets", "memnets.records", "memnets.protocols", "memnets.scoring", "memnets.store"]
)
def test_light_modules_do_not_import_torch(module):
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_public_names_resolve():
    import memnets

    missing = [name for name in memnets.__all__ if getattr(memnets, name, None) is None]
    assert missing == []
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        memnets.nothing  # noqa: B018


def test_the_type_checking_names_are_the_lazy_exports():
    """memnets/__init__.py shows type checkers the same public names that it imports lazily."""
    import memnets

    tree = ast.parse((ROOT / "memnets" / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and _type_checking_only(node))
    shown = {
        alias.asname or alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert shown == memnets._EXPORTS


MAX_MODULE_LINES = 700  # issue 30: a module past this mixes jobs that belong in modules of their own


def test_no_module_of_memnets_is_over_the_line_bound():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / "memnets").rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


VERSION_NUMBERING = {"version_id", "older_version"}  # memnets.store.rows: the numbering of {id}~{n}
NUMBERS_VERSIONS = "memnets.store.core_versions"  # issue 53: the one module that calls them


def version_numbering_in(path: Path) -> list[str]:
    """Where a module numbers versions: a use of rows' ``version_id``/``older_version``, or an f-string that
    puts a value after ``VERSION_SEPARATOR`` (``f"{id}{VERSION_SEPARATOR}{n}"``); reading one apart is not."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in VERSION_NUMBERING and not isinstance(getattr(node, "ctx", None), ast.Store):
            found.append(f"{name} (line {node.lineno})")
        if isinstance(node, ast.JoinedStr):
            values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
            names = [getattr(v, "id", getattr(v, "attr", None)) for v in values]
            if "VERSION_SEPARATOR" in names[:-1]:
                found.append(f"an f-string after VERSION_SEPARATOR (line {node.lineno})")
    return found


def test_only_the_store_numbers_versions():
    """One owner of versioning: the memory layer never names the ``{id}~{n}`` of a version it writes."""
    numbering = {
        name: where
        for name, path in MODULES.items()
        if name not in (NUMBERS_VERSIONS, "memnets.store.rows") and (where := version_numbering_in(path))
    }
    assert not numbering, f"versions numbered outside {NUMBERS_VERSIONS}: {numbering}"
    assert version_numbering_in(MODULES[NUMBERS_VERSIONS])  # the check sees the numbering where it is


# issue 53: every statement of the store is built, as (sql, params), by its query builders
QUERY_BUILDERS = {"memnets.store.queries", "memnets.store.queries_sqlite", "memnets.store.queries_postgres"}
SQL_WORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|LOCK TABLE|VACUUM|ANALYZE|PRAGMA|BEGIN|COMMIT|ROLLBACK|"
    r"SAVEPOINT|RELEASE)\b"
)  # the statements' words: queries, schema changes, upkeep, settings and transaction control


def sql_in(path: Path) -> list[int]:
    """The lines of a module's string literals (f-string parts too; docstrings and comments are not) that hold
    an SQL statement's word."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and SQL_WORDS.search(node.value)
    )


def test_no_statement_of_the_store_is_built_outside_its_query_builders():
    store = {name: path for name, path in MODULES.items() if name.startswith("memnets.store.")}
    outside = {name: lines for name, path in store.items() if name not in QUERY_BUILDERS and (lines := sql_in(path))}
    assert not outside, f"SQL text outside the query builders (module: lines): {outside}"
    assert all(sql_in(store[name]) for name in QUERY_BUILDERS)  # the check sees SQL where it is


THREAD_LOCAL = re.compile(r"\b(threading\.local|local\(\)|ContextVar)\b")


def test_the_store_holds_no_thread_local():
    """issue 53: the store carries its state explicitly (an atomic_write is a WriteTransaction object,
    memnets.store.transaction), never in a threading.local or a context variable."""
    store = {name: path for name, path in MODULES.items() if name.startswith("memnets.store")}
    found = {name: THREAD_LOCAL.findall(path.read_text(encoding="utf-8")) for name, path in store.items()}
    assert {name: hits for name, hits in found.items() if hits} == {}
    assert THREAD_LOCAL.findall("self._hold = threading.local()")  # the check sees one


def test_the_stores_are_the_core_plus_an_engine():
    """issue 53: no mixin stacks; each store is the core (one base) handed its engine (composition)."""
    from memnets.store.archive import Archive
    from memnets.store.archive_search import ArchiveEngine
    from memnets.store.core import SqlStore
    from memnets.store.engine import Engine

    assert SqlStore.__bases__ == (object,)
    assert Archive.__bases__ == (SqlStore,) and issubclass(ArchiveEngine, Engine)
    if importlib.util.find_spec("pgvector") is not None:  # the [pgvector] extra
        from memnets.store.pg_search import PgEngine
        from memnets.store.postgres import PgVectorStore

        assert PgVectorStore.__bases__ == (SqlStore,) and issubclass(PgEngine, Engine)
