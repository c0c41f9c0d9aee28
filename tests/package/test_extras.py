"""A Python import that needs a missing extra names the extra and a pip command that works.

memnets is installed from a checkout or a wheel (README), never from PyPI, so the command names
the place this memnets came from. The imports run in a child process in which the extra's module
cannot be found (a meta path finder refuses it), as in a venv without that extra.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from memnets.extras import install_command

BLOCK = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
try:
    {statement}
except ImportError as error:
    print(type(error).__name__, error.name, str(error), sep="|")
"""


@pytest.mark.parametrize(
    ("statement", "module", "extra"),
    [
        ("import memnets; memnets.Client", "httpx", "server"),
        ("import memnets.integrations.langchain", "langchain_core", "langchain"),
        ("import memnets.integrations.langgraph", "langgraph", "langgraph"),
        ("import memnets.integrations.mcp_server", "mcp", "mcp"),
        ("import memnets.integrations.mcp_stdio", "mcp", "mcp"),
    ],
)
def test_an_import_without_its_extra_names_the_extra_and_the_install_command(statement, module, extra):
    code = BLOCK.format(module=module, statement=statement)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    kind, name, message = result.stdout.strip().split("|", 2)
    assert kind == "ModuleNotFoundError" and name == module  # still what callers and the CLI catch
    assert f"the extra [{extra}]" in message, message
    assert message.endswith(install_command(extra)), message


def test_the_install_command_names_this_checkout_not_pypi():
    """The test venv is an editable install of a checkout (scripts/setup.sh): the command says `-e` with its path."""
    command = install_command("server")
    assert command.startswith("pip install -e '/") and command.endswith("[server]'"), command
    assert command != "pip install 'memnets[server]'"  # not PyPI's name, whatever the checkout's folder is called
