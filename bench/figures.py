"""Markdown tables and PNG plots (matplotlib, Agg) that the report's sections share."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

IMG_DIR = "img"


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table (right-aligned numbers)."""
    align = ["---:" if rows and all(_numeric(r[i]) for r in rows) else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _numeric(value) -> bool:
    if isinstance(value, (int, float)):
        return True
    return (
        isinstance(value, str)
        and value.replace(".", "", 1).replace(",", "").replace("-", "", 1).replace("x", "").strip().isdigit()
    )


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "-"
    if isinstance(value, int) or (isinstance(value, float) and value >= 1000):
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def size(n: int) -> str:
    return (
        f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)
    )


def style_axes(ax, xlabel: str, ylabel: str, *, log_y: bool = False, legend_size: int = 7) -> None:
    """The look every plot shares: log x axis (sizes, k, latency), labels, light grid, small legend."""
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)


def save_plot(fig, out: Path, name: str) -> str:
    """Save a figure under out/img/ and return its relative path for the Markdown."""
    (out / IMG_DIR).mkdir(parents=True, exist_ok=True)
    path = out / IMG_DIR / f"bench_{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return f"{IMG_DIR}/{path.name}"
