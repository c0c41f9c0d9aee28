"""The training side of memnets: what fits, evaluates and benchmarks the memory, never what serves it.

An agent imports ``memnets`` (the memory, its stores, the server, the adapters, the serving encoder and
judge); this package holds what only the research and the training pipeline run:

- :mod:`memnets.training.data`: conversations (LoCoMo, LongMemEval, JSONL), where they are found, and the
  datasets the three tasks train on;
- :mod:`memnets.training.lit`: the LightningModules and DataModules, and LightningCLI (``memnets fit``);
- :mod:`memnets.training.retrieval`: the Ranker protocol and registry (BM25, dense, heuristic, learned), hard
  negatives and the retrieval metrics that evaluation and the encoder's validation share;
- :mod:`memnets.training.evaluation`: retrieval, LongMemEval, answers, heads and replay evaluations;
- :mod:`memnets.training.baselines`: the sentence-transformers fine-tune to beat;
- :mod:`memnets.training.configs`: the loader of the YAML configs in ``configs/``;
- :mod:`memnets.training.fake_llm`: a local OpenAI-compatible server with scripted answers (tests, bench/);
- :mod:`memnets.training.commands`: the ``memnets`` commands that run them (``fit``, ``run``, ``eval``,
  ``data prepare``, ``export``, ``replay``, ``baseline``, ``bench``).

The rule (``tests/package/test_layering.py``): nothing of ``memnets`` outside this package imports it. The
``memnets`` command names its training commands by string in ``memnets.cli.COMMANDS`` and imports one only
when it is run.
"""
