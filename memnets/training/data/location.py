"""Where the conversations are: the one rule every command and reader uses to find its data file.

The code wheel carries no data (the LoCoMo subset is CC BY-NC 4.0, the code Apache-2.0), so the
data file is found, in this order:

1. an explicit file: `--data FILE` on any command that reads conversations, or `path:` in a data
   config (the command line wins over the config);
2. the environment variable `MEMNETS_DATA`: a file, or a folder holding `locomo8.json`;
3. `data/locomo/locomo8.json` of a checkout: under the working folder, else beside the source tree
   that memnets was imported from (an editable install used from elsewhere).

When none of them exists, DataNotFoundError says all three and what was looked at.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from memnets.argerrors import MissingInputError

DATA_ENV = "MEMNETS_DATA"
LOCOMO_FILE = "locomo8.json"
CHECKOUT_DATA = Path("data") / "locomo"


class DataNotFoundError(MissingInputError):
    """No data file: none given, none in $MEMNETS_DATA, none in a checkout's data/locomo."""


def find_data(explicit: str | Path | None = None) -> Path:
    """The data file to read: ``explicit`` when given, else ``$MEMNETS_DATA``, else a checkout's data/locomo.

    An explicit path or the variable naming something that does not exist is an error naming it
    (it is never skipped for the next place: a typo must not silently read other data).
    """
    if explicit is not None:
        return _data_file(Path(explicit), "the data file given (--data or the config's path:)")
    from_env = os.environ.get(DATA_ENV)
    if from_env:
        return _data_file(Path(from_env), f"${DATA_ENV}")
    candidates = [Path.cwd() / CHECKOUT_DATA / LOCOMO_FILE, _source_checkout() / CHECKOUT_DATA / LOCOMO_FILE]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(path) for path in dict.fromkeys(candidates))
    raise DataNotFoundError(
        "no conversations to read: pass --data FILE (a LoCoMo JSON or memnets JSONL file), "
        f"or set ${DATA_ENV} to a file or a folder holding {LOCOMO_FILE}, "
        f"or run from a checkout that has {CHECKOUT_DATA / LOCOMO_FILE} (looked at {looked})"
    )


def find_input(path: str | Path, what: str) -> Path:
    """An input file a config names (the change-of-fact judge's pairs, say): a relative path under the working folder,
    else beside the source tree memnets was imported from (a checkout's ``data/``, as :func:`find_data` looks); an
    absolute one as it is. DataNotFoundError naming ``what``, the path and where it looked when none exists (a
    command run outside the checkout had stopped on a traceback)."""
    path = Path(path)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, _source_checkout() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise DataNotFoundError(
        f"{what}: {path} does not exist (looked at {looked}); run from a checkout of memnets, whose data/ holds it, "
        "or give the file in the config"
    )


def _data_file(path: Path, origin: str) -> Path:
    if path.is_dir():
        path = path / LOCOMO_FILE
    if not path.is_file():
        raise DataNotFoundError(f"{origin}: {path} does not exist")
    return path


def _source_checkout() -> Path:
    """The folder above the imported `memnets` package (a checkout when memnets runs from source)."""
    return Path(str(files("memnets"))).parent
