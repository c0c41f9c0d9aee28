"""Terminal output shared by the commands: rich tables that stay readable when piped to a file."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

PIPED_WIDTH = 140  # rich assumes 80 columns when not on a terminal, which wraps wide tables


def console() -> Console:
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=PIPED_WIDTH)


def print_table(table: Table) -> None:
    console().print(table)
