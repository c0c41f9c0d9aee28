"""bench/ as a report apart from experiments, checked on the source (issue 30).

- no test imports bench/: a test checks a benchmark by running it (tests/bench_helpers.py), and what
  tests need lives with the tests or in memnets (memnets.server.testing);
- bench/ has no import circle, and no script imports another script: helpers shared by scripts
  live in bench/common.py (the figures of the report in bench/figures.py and bench/sections/);
- the scripts directly in bench/ are the report's benchmarks (bench.sections.BENCHMARKS, assembled
  by ``python -m bench``) and the tools named here; every other script is in bench/experiments/;
  bench/README.md gives the command of each.

Imports are read as tests/package/test_layering.py reads them: every import statement, lazy ones too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_layering import GRAPH, MODULES, ROOT, _cycles, imports_of

TESTS = Path(__file__).resolve().parents[1]
BENCH = {name for name in MODULES if name.split(".")[0] == "bench"}
TOOLS = {
    "bench.run": "the runner of the report (python -m bench)",
    "bench.compare": "the before/after comparison of two checkouts",
    "bench.encoding_st": "sentence-transformers' side of bench.encoding, started by path under another Python",
}


def defines_main(path: Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


SCRIPTS = {name for name in BENCH if defines_main(MODULES[name])}


def report_benchmarks() -> set[str]:
    """``bench.sections.BENCHMARKS``, read from the source (a test does not import bench/)."""
    tree = ast.parse((ROOT / "bench" / "sections" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["BENCHMARKS"]:
            return {f"bench.{name}" for name in ast.literal_eval(node.value)}
    raise AssertionError("bench/sections/__init__.py has no BENCHMARKS")


def bench_imports_of_tests() -> dict[str, list[str]]:
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        imported = sorted(module for module in imports_of(name, path) if module in BENCH)
        if imported:
            found[str(path.relative_to(ROOT))] = imported
    return found


def test_no_test_imports_bench():
    assert bench_imports_of_tests() == {}, "run the script instead: tests/bench_helpers.py run_bench"


def test_bench_has_no_import_circle():
    assert _cycles({name: GRAPH[name] & BENCH for name in BENCH}) == []


def test_no_bench_script_imports_another_script():
    wrong = {name: sorted(GRAPH[name] & SCRIPTS) for name in sorted(SCRIPTS) if GRAPH[name] & SCRIPTS}
    assert wrong == {}, "move what they share to bench/common.py"


def test_bench_holds_the_report_and_the_tools_and_experiments_hold_the_rest():
    top = {name for name in SCRIPTS if name.count(".") == 1}
    assert top == report_benchmarks() | set(TOOLS)
    assert SCRIPTS - top == {name for name in SCRIPTS if name.startswith("bench.experiments.")}


def test_the_readme_gives_every_script_its_command():
    readme = (ROOT / "bench" / "README.md").read_text()
    commands = set(re.findall(r"python -m (bench(?:\.\w+)*)", readme))
    assert SCRIPTS - set(TOOLS) - commands - {"bench.run"} == set()
    assert "bench" in commands and "bench.compare" in commands


def test_the_checks_see_lazy_and_from_package_imports(tmp_path):
    script = tmp_path / "test_example.py"
    script.write_text("def f():\n    from bench import search\n    import bench.experiments.load\n")
    assert imports_of("tests.test_example", script) >= {"bench.search", "bench.experiments.load"}
    assert {"bench.search", "bench.experiments.load", "bench.run"} <= SCRIPTS and "bench.common" not in SCRIPTS
