"""`.ci/run` names its slow suites by file: a test file moved or renamed must not leave CI running nothing, and a
test marked slow in a file that CI does not name would run nowhere (the archive's long state machine did not, and
failed on a rule the store had gained since).

pytest given a path that does not exist fails, but only in CI, after the default suite's quarter of an hour;
this catches it in the default suite, and checks each named suite still holds a test marked slow (CI selects
them with ``-m slow``, so a file whose slow tests were all unmarked would run none there).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_file_that_ci_names_exists_and_has_slow_tests():
    named = sorted(set(re.findall(r"tests/[\w/]+\.py", (ROOT / ".ci" / "run").read_text())))
    assert len(named) >= 5, f".ci/run names too few test files to be read right: {named}"
    missing = [path for path in named if not (ROOT / path).is_file()]
    assert not missing, f".ci/run names test files that do not exist: {missing}"
    unmarked = [path for path in named if "pytest.mark.slow" not in (ROOT / path).read_text()]
    assert not unmarked, f".ci/run runs these with -m slow, but they mark no test slow: {unmarked}"


NOT_IN_CI = {  # slow tests that CI cannot run, and why
    "tests/nn/test_large_backbone.py": "the real all-mpnet-base-v2 needs the [large] extra's five parts, which setup.sh leaves out",
}


def test_every_file_with_slow_tests_is_run_by_ci_or_says_why_not():
    script = (ROOT / ".ci" / "run").read_text()
    named = set(re.findall(r"tests/[\w/]+\.py", script))
    folders = set(re.findall(r"(tests/[\w/]+?)/?(?=\s|$)", script))  # a folder named whole (a .py never matches)
    marked = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"pytest\.mark\.slow\b", path.read_text(encoding="utf-8")) and path.name != Path(__file__).name
    }
    unrun = sorted(
        path
        for path in marked - named - NOT_IN_CI.keys()
        if not any(path.startswith(f"{folder}/") for folder in folders)
    )
    assert not unrun, f"these files mark tests slow, but .ci/run runs none of them: {unrun}"
