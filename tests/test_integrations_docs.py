"""The examples of docs/integrations.md run as printed and print what the page shows.

Slow: each loads the bundled all-MiniLM-L6-v2 encoder (and the MCP one starts a server). Ids are
random and scores may move in the last digits across platforms, so those are masked before comparing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
EXAMPLE = re.compile(r"```python\n(.*?)```\s*Output:\s*```\n(.*?)```", re.S)


def _mask(text: str) -> str:
    text = re.sub(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", "<id>", text)
    return re.sub(r"\d+\.\d+", "<num>", text)


EXAMPLES = EXAMPLE.findall(DOC.read_text())


def test_every_python_example_has_its_output():
    assert len(EXAMPLES) == DOC.read_text().count("```python") == 4


@pytest.mark.slow
@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_docs_example_runs_as_printed(number, tmp_path):
    code, shown = EXAMPLES[number]
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _mask(done.stdout).strip() == _mask(shown).strip()
