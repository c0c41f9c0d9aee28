"""memnets benchmark scripts (not tests): quality, encoding, search, manager and training.

Each module is runnable on its own (``python -m bench.search --quick --out bench/results``) and
writes ``<out>/<name>.json``; ``memnets bench`` runs them all in separate processes (so one
benchmark's memory does not inflate the next one's RSS) and writes the report with
:mod:`bench.report`.
"""
