"""Every link and every repository path a page names resolves, so that no page points at a file that
was renamed, archived or never committed.

Checked in every markdown page of the repository (README.md, docs/, bench/, data/, clients/ ...;
the benchmark outputs under docs/results/ are records, not pages, and are left as written):

- relative links ``[text](target)`` and ``[text](target#anchor)``: the target exists, and an anchor
  into a markdown page is one of that page's headings (GitHub's heading ids);
- paths in backticks that start with a top folder of the repository (``docs/``, ``bench/``,
  ``data/`` ...), each word of a backticked command included: the file or folder exists. ``{a,b}``
  is expanded and ``*`` must match at least one file. Folders that commands fill (data/cache/,
  checkpoints/, bench/results/) and words with placeholders (``<DIR>``, ``DATE``) are not checked;
- ``docs/results/NAME`` anywhere in a page: the result file is in docs/results/; and no code (bench/,
  memnets/, train/, scripts/, tests/, configs/) names a result that is only in docs/results/archive.tar.gz
  (code may name the file a command will write, so a name that is nowhere is not an error there);
- and the other way round: every file in docs/results/ is named by a page, the code or a result file
  so named, so runs nothing cites go into the archive instead of piling up.
"""

from __future__ import annotations

import fnmatch
import glob
import re
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"node_modules", "build", "dist", "__pycache__", "cache", "lightning_logs"}
TOP = ("docs", "bench", "data", "configs", "scripts", "tests", "train", "examples")  # memnets/x reads as a module
GENERATED = ("data/cache/", "checkpoints/", "bench/results/")
CODE_DIRS = ("bench", "memnets", "train", "scripts", "tests", "configs", ".ci")

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
BACKTICK = re.compile(r"`([^`\n]+)`")
PATH_WORD = re.compile(rf"^(?:\./)?((?:{'|'.join(TOP)})/[\w./{{}},*-]*)$")
RESULT = re.compile(r"docs/results/([\w.{},*-]+)")
PLACEHOLDER = re.compile(r"<|>|\.\.\.|(?<![A-Za-z])(?!README|LICENSE)[A-Z]{3,}(?![a-z])|\bX\b")
ARCHIVE = ROOT / "docs" / "results" / "archive.tar.gz"


def pages() -> list[Path]:
    """The repository's markdown pages, without the benchmark outputs in docs/results/."""
    found = []
    for path in sorted(ROOT.rglob("*.md")):
        parts = path.relative_to(ROOT).parts
        if any(part in SKIP_DIRS or part.startswith(".") or part.endswith(".egg-info") for part in parts[:-1]):
            continue
        if parts[:2] == ("bench", "results"):
            continue  # reports a local run wrote, not committed
        if parts[:2] == ("docs", "results") and parts[-1] != "README.md":
            continue
        if parts[0] == "checkpoints" and parts[-1] != "README.md":
            continue
        found.append(path)
    return found


def expand(word: str) -> list[str]:
    """``a{b,c}d`` -> ``abd``, ``acd`` (nested and repeated braces too)."""
    match = re.search(r"\{([^{}]*)\}", word)
    if not match:
        return [word]
    return [w for alt in match.group(1).split(",") for w in expand(word[: match.start()] + alt + word[match.end() :])]


def exists(relative: str) -> bool:
    """A repository path, a ``*`` pattern that matches something, exists."""
    relative = relative.rstrip(".,;:")
    if "*" in relative:
        return bool(glob.glob(str(ROOT / relative)))
    return (ROOT / relative).exists()


def slug(heading: str) -> str:
    """GitHub's id for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The ids of a page's headings, with GitHub's -1, -2 ... for repeats."""
    seen: dict[str, int] = {}
    ids = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if match := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            ids.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return ids


def broken_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("<"):
            continue  # https:, mailto: ...
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    return broken


def broken_paths(page: Path) -> list[str]:
    broken = []
    for match in BACKTICK.finditer(page.read_text()):
        for word in match.group(1).replace("=", " ").split():
            found = PATH_WORD.match(word.strip("\"'()"))
            if not found or PLACEHOLDER.search(word):
                continue
            path = found.group(1)
            if path.startswith(GENERATED):
                continue
            broken += [f"`{p}`" for p in expand(path) if not exists(p)]
    return broken


def missing_results(text: str) -> list[str]:
    missing = []
    for match in RESULT.finditer(text):
        name = match.group(1).rstrip(".,;:")
        if PLACEHOLDER.search(name) or name.endswith("-"):
            continue
        missing += [f"docs/results/{n}" for n in expand(name) if not exists(f"docs/results/{n}")]
    return missing


PAGES = pages()


def test_the_pages_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/index.md", "bench/README.md", "docs/results/README.md"} <= names
    assert not any(n.startswith("docs/results/") and n != "docs/results/README.md" for n in names)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_path_a_page_names_exists(page):
    problems = broken_links(page) + broken_paths(page) + missing_results(page.read_text())
    assert not problems, f"{page.relative_to(ROOT)} names what is not there: {sorted(set(problems))}"


def archived() -> set[str]:
    """The names of the result files only in docs/results/archive.tar.gz."""
    with tarfile.open(ARCHIVE) as archive:
        return {Path(name).name for name in archive.getnames()}


def test_no_code_names_an_archived_result():
    names = archived()
    assert len(names) > 10
    found = {}
    for top in CODE_DIRS:
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and (path.suffix in {".py", ".yaml", ".yml", ".sh"} or path.name == "run"):
                text = path.read_text(errors="replace")
                if hits := sorted(n for n in names if n in text):
                    found[path.relative_to(ROOT).as_posix()] = hits
    assert not found, f"code names result files that are only in {ARCHIVE.name}: {found}"


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The checks fail on a missing file, a missing heading and a missing result (not vacuous)."""
    page = ROOT / "docs" / "index.md"
    assert broken_links(page) == []
    fake = tmp_path / "page.md"
    fake.write_text(
        "[a](nowhere.md) [b](#no-such-heading) `docs/nowhere.md` `bench/{run,gone}.py` "
        "see docs/results/never-run.json\n# A heading\n[c](#a-heading)\n"
    )
    assert broken_links(fake) == [
        "nowhere.md (no such file)",
        "#no-such-heading (no heading #no-such-heading in page.md)",
    ]
    assert broken_paths(fake) == ["`docs/nowhere.md`", "`bench/gone.py`"]
    assert missing_results(fake.read_text()) == ["docs/results/never-run.json"]


GLOB_WORD = re.compile(r"[\w.-]{4,}(?:\*|\{[^}\s]+\})[\w.*{},-]*")


def results_named(text: str, names: list[str]) -> set[str]:
    """The result files a text names: by their name, or by a ``*`` or ``{a,b}`` pattern."""
    found = {n for n in names if n in text and re.search(rf"(?:results/|(?<![\w/.-])){re.escape(n)}(?![\w-])", text)}
    for match in GLOB_WORD.finditer(text):
        if "**" not in match.group(0):
            for pattern in expand(match.group(0).rstrip(".,")):
                found |= {n for n in names if fnmatch.fnmatch(n, pattern)}
    return found


def test_every_result_file_is_named_by_a_page_or_the_code():
    """docs/results/ holds only what something cites (the rest goes into archive.tar.gz), counting a
    result file that a named result file names."""
    folder = ROOT / "docs" / "results"
    names = sorted(p.name for p in folder.iterdir() if p.name not in {"README.md", ARCHIVE.name})
    texts = [p.read_text() for p in PAGES if p.parent != folder]
    for top in CODE_DIRS:
        texts += [p.read_text(errors="replace") for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".yaml", ".sh"}]
    named = set().union(*(results_named(t, names) for t in texts))
    frontier = list(named)
    while frontier:
        more = results_named((folder / frontier.pop()).read_text(errors="replace"), names) - named
        named |= more
        frontier += more
    unnamed = sorted(set(names) - named)
    assert not unnamed, f"result files nothing names (move them into {ARCHIVE.name}): {unnamed}"
