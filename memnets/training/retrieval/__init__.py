"""Retrieval as training and evaluation measure it: the Ranker protocol and registry (BM25, dense, heuristic,
learned), hard negatives for the encoder, and the metrics (recall@k, MRR, nDCG; LongMemEval's) that the
evaluation and the encoder's validation share. The serving side's retrieval (FAISS, fusion) is
:mod:`memnets.retrieval`."""
