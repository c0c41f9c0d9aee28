"""Retrieval on the serving side: the FAISS index of each owner (kinds, IVF growth and calibration, its files) and
the fusion of dense and lexical rankings. Rankers and metrics for evaluation are :mod:`memnets.training.retrieval`."""
