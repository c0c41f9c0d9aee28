"""Every code block of README.md and docs/*.md marked runnable runs as printed, offline, in a
temporary folder, and prints what the page shows.

The marker is an HTML comment on the line before the fence (invisible on GitHub):

- ``<!-- runnable -->`` before a ```` ```python ```` block: the block runs as a script; when an
  ``Output:`` block follows it, its standard output must match that block.
- ``<!-- runnable -->`` before a ```` ```console ```` block: a terminal session. Each ``$ `` line is a
  command (a ``<<'EOF'`` here-document runs to its ``EOF`` line), run with bash in one folder, one
  after the other; the lines after it, up to the next ``$ ``, are its output (standard output and
  error together). ``memnets`` is this checkout's ``python -m memnets``.

Ids that are uuids and decimal numbers (scores, timings) are masked before comparing. Each block
loads the bundled all-MiniLM-L6-v2 encoder, so running them is slow-marked; the fast test checks
that the marked blocks are found and compile.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
BLOCK = re.compile(
    r"^<!-- runnable -->\n```(python|console)\n(.*?)^```\n(?:\s*Output:\s*\n```\n(.*?)^```\n)?", re.S | re.M
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    code: str
    output: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append(Block(page.relative_to(ROOT).as_posix(), line, *match.groups()))
    return found


BLOCKS = blocks()


def mask(text: str) -> str:
    text = re.sub(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", "<id>", text)
    text = re.sub(r"\d+\.\d+", "<num>", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def session(code: str) -> list[tuple[str, str]]:
    """(command, shown output) of each ``$ `` line of a console block."""
    steps, lines = [], code.splitlines()
    n = 0
    while n < len(lines):
        if not lines[n].startswith("$ "):
            raise ValueError(f"console block: expected a '$ ' command, got {lines[n]!r}")
        command = [lines[n][2:]]
        if command[0].endswith("<<'EOF'"):
            while lines[n] != "EOF":
                n += 1
                command.append(lines[n])
        n += 1
        shown = []
        while n < len(lines) and not lines[n].startswith("$ "):
            shown.append(lines[n])
            n += 1
        steps.append(("\n".join(command), "\n".join(shown)))
    return steps


def environment(tmp_path: Path) -> dict[str, str]:
    """The environment of a block: this checkout first on the path, ``memnets`` as ``python -m memnets``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "memnets"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m memnets "$@"\n')
    launcher.chmod(0o755)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
    return env


def run_console(code: str, cwd: Path, env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(command, shown output, actual output) of each command of a console block, run in ``cwd``."""
    results = []
    for command, shown in session(code):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # interleaved as a terminal shows them
            text=True,
            timeout=600,
        )
        results.append((command, shown, done.stdout))
    return results


def test_marked_blocks_are_found_and_compile():
    pages = {block.page for block in BLOCKS}
    assert {"README.md", "docs/cli.md", "docs/integrations.md", "docs/memory.md"} <= pages
    for block in BLOCKS:
        if block.language == "python":
            compile(block.code, str(block), "exec")
        else:
            assert session(block.code), block
    # a marker that does not stand right before a python or console fence is a mistake
    markers = sum(page.read_text().count(MARKER) for page in PAGES)
    assert markers == len(BLOCKS)


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_marked_block_runs_as_printed(block, tmp_path):
    env = environment(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    if block.language == "console":
        for command, shown, actual in run_console(block.code, work, env):
            assert mask(actual) == mask(shown), f"{block}: {command}"
        return
    script = work / "example.py"
    script.write_text(block.code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=work, env=env)
    assert done.returncode == 0, f"{block}: {done.stderr[-3000:]}"
    if block.output is not None:
        assert mask(done.stdout) == mask(block.output), block
