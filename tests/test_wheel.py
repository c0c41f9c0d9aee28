"""The package as a user installs it: a wheel in a fresh venv, run from a folder that is not the checkout.

The wheel is built from a copy of the sources (nothing is written into the checkout), installed
without its dependencies into a new venv that sees this venv's packages (torch, transformers, ...)
through a .pth file, so nothing is downloaded. From an empty working folder, `memnets data prepare`
and `memnets eval retrieval bm25` must find the packaged configs and LoCoMo subset and write their
outputs under that folder, never inside the installation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel and runs the CLI three times: about a minute on 2 cores

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DATA = (
    "memnets/configs/pipeline/cpu.yaml",
    "memnets/configs/pipeline/smoke.yaml",
    "memnets/configs/encoder/base.yaml",
    "memnets/configs/data/locomo.yaml",
    "memnets/datasets/locomo/locomo8.json",
    "memnets/datasets/locomo/LICENSE.txt",
    "memnets/datasets/locomo/README.md",
)


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (
        f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if "__pycache__" not in path.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the wheel of this checkout installed; returns the venv folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "memnets", source / "memnets", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        tmp,
        env,
    )
    (wheel,) = dist.glob("memnets-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        missing = sorted(set(PACKAGE_DATA) - set(archive.namelist()))
    assert not missing, f"the wheel lacks package data: {missing}"

    target = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    # this venv's packages (torch, transformers, ...) behind the new venv's own site-packages
    (site / "memnets_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)], tmp, env)
    return target


def test_the_installed_wheel_runs_from_another_folder(installed, tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    memnets = str(installed / "bin" / "memnets")
    python = str(installed / "bin" / "python")
    work = tmp_path / "work"
    work.mkdir()

    where = _run(
        [python, "-c", "import memnets, memnets.datasets as d; print(memnets.__file__); print(d.locomo_path())"],
        work,
        env,
    ).split()
    package = Path(where[0]).parent
    assert package.is_relative_to(installed), f"memnets imported from {package}, not from the wheel"
    assert Path(where[1]).is_file() and Path(where[1]).is_relative_to(package)
    installed_files = _files(package)

    out = _run([memnets, "data", "prepare"], work, env)
    assert "retrieval" in out and "gate" in out
    caches = list((work / "data" / "cache").rglob("*"))
    assert any(path.is_file() for path in caches), "data prepare wrote no cache under the working folder"

    report = work / "results" / "eval" / "bm25.json"  # a folder that does not exist yet
    _run([memnets, "eval", "retrieval", "bm25", "--split", "test", "--json", str(report.relative_to(work))], work, env)
    payload = json.loads(report.read_text())
    text = json.dumps(payload)
    assert "bm25" in text and "recall@10" in text

    plan = _run([memnets, "run", "-c", "pipeline/smoke", "--dry-run"], work, env)
    assert "=== step evaluate-retrieval" in plan
    ddp = _run(
        [
            python,
            "-c",
            "from memnets.configs import load_config; c = load_config('encoder/ddp')['trainer'];"
            "print(c['strategy'], c['accelerator'], len(c['callbacks']))",
        ],
        work,
        env,
    )
    assert ddp.split() == ["ddp", "gpu", "5"]  # the base chain ddp -> gpu -> base, inside the installed package

    assert _files(package) == installed_files, "a command wrote inside the installed package"
