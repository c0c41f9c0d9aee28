"""Measurements run on their own, each for one question or issue, not by ``memnets bench``.

Each is ``python -m bench.experiments.NAME`` from the root of a checkout (bench/README.md lists
them with their commands); their figures go into the docs by hand. They use the helpers of
:mod:`bench.common`, never another script.
"""
