"""memnets benchmark scripts (not tests): the report's benchmarks here, experiments in bench.experiments.

Each module is runnable on its own (``python -m bench.search --quick --out bench/results``) and
writes ``<out>/<name>.json``; ``memnets bench`` runs the report's ones in separate processes (so one
benchmark's memory does not inflate the next one's RSS) and writes the report with
:mod:`bench.report`. What several scripts use is in :mod:`bench.common`; bench/README.md lists them all.
"""
