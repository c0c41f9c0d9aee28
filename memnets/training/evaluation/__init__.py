"""Evaluation of the trained parts, one module per question asked of them.

- :mod:`memnets.training.evaluation.retrieval`: recall@k (LoCoMo rule), MRR@10 and nDCG@10 of a ranker;
- :mod:`memnets.training.evaluation.longmemeval`: LongMemEval's recall_any / recall_all / NDCG at turn and
  session level, per question type, each question over its own haystack;
- :mod:`memnets.training.evaluation.answers`: answer accuracy: retrieve, answer with the user's model, judge
  (prompts in :mod:`memnets.training.evaluation.answer_prompts`);
- :mod:`memnets.training.evaluation.heads`: the importance and recall-gate heads against their baselines;
- :mod:`memnets.training.evaluation.replay`: a conversation streamed through the memory manager, its
  questions asked at the end or after their evidence.

Library code: results are returned (and logged), never printed; the commands print them.
"""
