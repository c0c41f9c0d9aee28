"""`.ci/run` names its slow suites by file: a test file moved or renamed must not leave CI running nothing.

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
