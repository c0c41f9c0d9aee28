"""The one build step pyproject.toml cannot declare: copy the top-level configs/ into the wheel.

Users read and edit the YAML in configs/ of a checkout; an installed wheel must still find it, so
the build puts a copy at memnets/_configs/ (memnets.training.configs.config_root looks there first, then at a
checkout's configs/). The data in data/ is never copied: the wheel's licence is the code's alone.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONFIGS = Path(__file__).resolve().parent / "configs"


class BuildWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads configs/ of the checkout itself
            return
        target = Path(self.build_lib) / "memnets" / "_configs"
        for source in sorted(CONFIGS.rglob("*.yaml")):
            destination = target / source.relative_to(CONFIGS)
            destination.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(source), str(destination))


setup(cmdclass={"build_py": BuildWithConfigs})
