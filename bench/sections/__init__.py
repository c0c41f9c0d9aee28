"""The report's sections, one module per benchmark, and the one list of benchmarks.

``bench.sections.NAME`` belongs to the script ``bench.NAME``: its ``TITLE`` heads the section and
``write(payload, out, targets)`` returns the section's Markdown lines (plots saved under ``out``)
and appends ``[target, measured, verdict]`` rows to ``targets``. A new benchmark adds its name here
and its section module; the runner and the report read this list.
"""

BENCHMARKS = ("quality", "encoding", "search", "manager", "store", "api", "training")
TARGET_N = 1_000_000  # the archive size the scale targets are set at
