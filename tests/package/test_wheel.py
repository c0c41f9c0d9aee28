"""The package as a user installs it: a wheel in a fresh venv, run from a folder that is not the checkout.

The wheel is built from a copy of the sources (nothing is written into the checkout). It must carry
the configs (mapped in from the top-level configs/) and no data: its licence is the code's alone.
Two installs of it:

- into a venv that sees this venv's packages through a .pth file (nothing is downloaded): from an
  empty working folder, the commands find the packaged configs and the data through $MEMNETS_DATA
  and write their outputs under that folder, never inside the installation;
- into a venv with only the core dependencies (pip resolves them; torch is the CPU pin): the
  README's `memnets.open` example runs from another folder, and a training command says which
  extra it needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel, installs it twice and runs the CLI: a few minutes on 2 cores

ROOT = Path(__file__).resolve().parents[2]
PACKAGED_CONFIGS = (
    "memnets/_configs/pipeline/cpu.yaml",
    "memnets/_configs/pipeline/smoke.yaml",
    "memnets/_configs/encoder/base.yaml",
    "memnets/_configs/data/locomo.yaml",
    "memnets/py.typed",
)
CPU_TORCH = "torch==2.13.0"  # as scripts/setup.sh: a plain `torch` would pull a multi-GB CUDA build


def _run(command: list[str], cwd: Path, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if check:
        assert result.returncode == 0, (
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if "__pycache__" not in path.parts}


def _clean_env() -> dict[str, str]:
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "MEMNETS_DATA"}
    return {key: value for key, value in os.environ.items() if key not in drop}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy of its sources."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for folder in ("memnets", "configs"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        tmp,
        env,
    )
    (built,) = dist.glob("memnets-*.whl")
    return built


def test_the_wheel_carries_the_configs_and_no_data(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(name for name in names if name.endswith(".dist-info/METADATA"))).decode()
    missing = sorted(set(PACKAGED_CONFIGS) - set(names))
    assert not missing, f"the wheel lacks package data: {missing}"
    assert not [name for name in names if "locomo" in name.lower() and not name.endswith((".py", ".yaml"))]
    licence = re.findall(r"^License-Expression: (.*)$", metadata, re.M)
    assert licence == ["Apache-2.0"], licence
    assert "NC" not in metadata.split("\n\n")[0], "the wheel's metadata names a non-commercial licence"
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)(?!.*extra ==)", metadata, re.M)
    for heavy in ("lightning", "datasets", "matplotlib", "sentence-transformers", "jsonargparse"):
        assert heavy not in requires, f"{heavy} is a core dependency of the wheel"


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with the wheel installed and this venv's packages behind it (no download)."""
    target = tmp_path_factory.mktemp("venv-shared")
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # this venv's packages (torch, transformers, ...) behind the new venv's own site-packages
    (site / "memnets_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], target, {})
    return target


def test_the_installed_wheel_runs_from_another_folder(installed, tmp_path):
    env = _clean_env()
    memnets = str(installed / "bin" / "memnets")
    python = str(installed / "bin" / "python")
    work = tmp_path / "work"
    work.mkdir()

    where = _run([python, "-c", "import memnets; print(memnets.__file__)"], work, env).stdout.split()
    package = Path(where[0]).parent
    assert package.is_relative_to(installed), f"memnets imported from {package}, not from the wheel"
    installed_files = _files(package)

    lost = _run([memnets, "data", "prepare"], work, env, check=False)  # no data anywhere: one clear error
    assert lost.returncode != 0
    assert "--data FILE" in lost.stderr and "$MEMNETS_DATA" in lost.stderr and "data/locomo" in lost.stderr

    env["MEMNETS_DATA"] = str(ROOT / "data" / "locomo")  # a folder holding locomo8.json
    out = _run([memnets, "data", "prepare"], work, env).stdout
    assert "retrieval" in out and "gate" in out
    caches = list((work / "data" / "cache").rglob("*"))
    assert any(path.is_file() for path in caches), "data prepare wrote no cache under the working folder"

    report = work / "results" / "eval" / "bm25.json"  # a folder that does not exist yet
    data = str(ROOT / "data" / "locomo" / "locomo8.json")
    command = [
        memnets,
        "eval",
        "retrieval",
        "bm25",
        "--data",
        data,
        "--split",
        "test",
        "--json",
        "results/eval/bm25.json",
    ]
    _run(command, work, _clean_env())  # --data alone, without the variable
    text = json.dumps(json.loads(report.read_text()))
    assert "bm25" in text and "recall@10" in text

    plan = _run([memnets, "run", "-c", "pipeline/smoke", "--dry-run", "--data", data], work, env).stdout
    assert "=== step evaluate-retrieval" in plan and f"--data {data}" in plan
    ddp = _run(
        [
            python,
            "-c",
            "from memnets.training.configs import load_config; c = load_config('encoder/ddp')['trainer'];"
            "print(c['strategy'], c['accelerator'], len(c['callbacks']))",
        ],
        work,
        env,
    ).stdout
    assert ddp.split() == ["ddp", "gpu", "5"]  # the base chain ddp -> gpu -> base, inside the installed package

    assert _files(package) == installed_files, "a command wrote inside the installed package"


def _readme_example() -> str:
    """The README's `memnets.open` example: the first python block under its heading."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Memory for your agent: `memnets.open`") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_a_core_install_runs_the_readme_example(wheel, tmp_path):
    """Only the core dependencies, resolved by pip: `memnets.open` works, training names its extra."""
    target = tmp_path / "venv-core"
    venv.EnvBuilder(with_pip=True).create(target)
    python = str(target / "bin" / "python")
    env = dict(_clean_env(), PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", HF_HUB_OFFLINE="1")
    _run([python, "-m", "pip", "install", "-q", CPU_TORCH], tmp_path, env)
    _run([python, "-m", "pip", "install", "-q", str(wheel)], tmp_path, env)
    absent = _run([python, "-c", "import lightning"], tmp_path, env, check=False)
    assert absent.returncode != 0, "lightning came with the core install"

    work = tmp_path / "work"
    work.mkdir()
    (work / "example.py").write_text(_readme_example())
    out = _run([python, "example.py"], work, env).stdout
    assert "Rex" in out, out  # the first search finds the dog

    fit = _run([str(target / "bin" / "memnets"), "fit", "encoder", "-c", "encoder/cpu"], work, env, check=False)
    assert fit.returncode == 1 and f"of the extra [train]: pip install '{wheel}[train]'" in fit.stderr, fit.stderr
    client = _run([python, "-c", "import memnets; memnets.Client"], work, env, check=False)
    assert (
        f"memnets.Client needs the optional dependency 'httpx' of the extra [server]: pip install '{wheel}[server]'"
        in client.stderr
    )
