"""How many lists an IVF search must visit on an owner's own vectors, kept current as the owner grows.

A fixed nprobe suits the data it was chosen on: on loosely clustered vectors, or once later adds
pile into lists trained on earlier data, the same nprobe finds far fewer true neighbours (recall@10
0.78 instead of 0.98 at 300k loose Gaussian vectors in 632 lists trained at 100k). So each IVF owner
keeps a small self-check: ``CALIBRATION_QUERIES`` of its own vectors with their exact top-k among
the others, and the IVF list of each of those neighbours.

For an IVF-Flat index the recall at nprobe p needs no search: a true neighbour is returned exactly
when its list is among the p lists nearest the query (scores in a visited list are exact), so the
recall at every p follows from the rank of each neighbour's list among the query's centroid scores.
The chosen nprobe is the smallest that reaches ``TARGET_RECALL`` on the self-check (never below
:func:`~memnets.retrieval.faiss_index.default_nprobe`, so real data keeps its measured setting).

It stays current without rescanning the owner for every add: an add merges its vectors into the
exact top-k of every check query (queries x added vectors) and, like a reservoir sample, draws a
share of its vectors to replace check queries (their exact top-k from one scan of the owner per
``SWAP_BATCH`` draws), so that adds from new regions are checked in proportion; a removal drops
the check queries it touches (a rebuild or a load starts afresh).
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

from memnets.retrieval.ivf_growth import lists_in_use

CALIBRATION_QUERIES = 128  # own vectors checked; recall is a mean over 128 x 10 neighbours
CALIBRATION_K = 10  # neighbours per check query (the k the benchmarks report)
SCAN_BLOCK = 32_768  # vectors scored before they are merged into the running top-k, in an exact scan
SWAP_BATCH = 8  # draws swapped in together: one exact scan of the owner (mostly reading it) serves them all
TARGET_RECALL = 0.98  # the smallest nprobe reaching this on the self-check is used (0.95 promised: at 0.97,
# perturbed-copy queries of a drifting set got 0.949 where the self-check read 0.97)


@dataclass
class Calibration:
    """One IVF owner's self-check: check queries, their exact neighbours and those neighbours' lists."""

    labels: np.ndarray  # [S] the check queries' own labels
    queries: np.ndarray  # [S, d] their vectors
    centroid_scores: np.ndarray  # [S, nlist] inner product of each query with each list's centroid
    truth_scores: np.ndarray  # [S, k] exact top-k scores among the owner's other vectors, descending
    truth_labels: np.ndarray  # [S, k] their labels (-1: fewer than k others)
    truth_lists: np.ndarray  # [S, k] the IVF list of each
    seen: int  # vectors offered to the reservoir so far
    rng: np.random.Generator
    pending_labels: np.ndarray  # [P] added vectors drawn to become check queries at the next swap
    pending_queries: np.ndarray  # [P, d] their vectors


def start(ivf, labels: np.ndarray, queries: np.ndarray) -> Calibration:
    """A self-check of an IVF owner whose ``labels`` (all of its live ones) are in ``ivf``: a sample
    of them as check queries (``queries``: the vectors of ``labels[pick(len(labels))]``) and their
    exact neighbours among the others."""
    rng = np.random.default_rng([len(labels), 1])  # the reservoir's draws, apart from pick's
    own = labels[pick(len(labels))]
    scores, found = _without_self(*exact_neighbours(ivf, queries, CALIBRATION_K + 1), own)
    return Calibration(
        labels=own.copy(),
        queries=queries.copy(),
        centroid_scores=queries @ _centroids(ivf).T,
        truth_scores=scores,
        truth_labels=found,
        truth_lists=_lists_of(ivf, found),
        seen=len(labels),
        rng=rng,
        pending_labels=np.zeros(0, "int64"),
        pending_queries=np.zeros((0, queries.shape[1]), "float32"),
    )


def pick(n: int) -> np.ndarray:
    """Positions (sorted) of the check queries among an owner's n live labels, the same for the same n."""
    return np.sort(np.random.default_rng(n).choice(n, min(CALIBRATION_QUERIES, n), replace=False))


@dataclass(frozen=True)
class Among:
    """Each check query's exact top-k among an add's own vectors: the costly part of :func:`absorb`
    (check queries x added vectors), which reads no index, so that the retriever works it out before
    it takes its lock (a search then waits for the add's index update only). Valid while the
    self-check's queries are the ones it was computed for."""

    queries: np.ndarray  # the check queries (the calibration's array when it was computed)
    scores: np.ndarray  # [S, k] descending; -inf where the add had fewer than k vectors
    positions: np.ndarray  # [S, k] positions in the add (-1 where none)


def neighbours_among(calibration: Calibration, vectors: np.ndarray) -> Among:
    """The self-check queries' exact top-k among ``vectors`` (an add's), by position in them."""
    queries = calibration.queries  # read once: an add under the lock replaces the array, never edits it
    block = queries @ vectors.T
    none = (len(queries), CALIBRATION_K)
    scores, positions = _merge(
        np.full(none, -np.inf, "float32"),
        np.full(none, -1, "int64"),
        block,
        np.broadcast_to(np.arange(len(vectors)), block.shape),
    )
    return Among(queries=queries, scores=scores, positions=positions)


def absorb(calibration: Calibration, ivf, vectors: np.ndarray, labels: np.ndarray, among: Among | None = None) -> None:
    """Take an add (already in the index) into the self-check: merge it into every query's exact
    top-k (``among``, worked out before, or here), then draw a reservoir share of its vectors as new
    check queries, swapped in (their neighbours from one exact scan of the owner) once
    ``SWAP_BATCH`` are drawn."""
    c = calibration
    if among is None or among.queries is not c.queries:
        among = neighbours_among(c, vectors)
    found = np.where(among.positions >= 0, labels[np.maximum(among.positions, 0)], -1)
    merged_scores, merged_labels = _merge(c.truth_scores, c.truth_labels, among.scores, found)
    c.truth_lists = np.where(merged_labels != c.truth_labels, -1, c.truth_lists)
    c.truth_scores, c.truth_labels = merged_scores, merged_labels
    c.seen += len(labels)
    drawn = c.rng.choice(len(labels), min(len(labels), c.rng.binomial(CALIBRATION_QUERIES, len(labels) / c.seen)))
    c.pending_labels = np.concatenate([c.pending_labels, labels[np.unique(drawn)]])
    c.pending_queries = np.concatenate([c.pending_queries, vectors[np.unique(drawn)]])
    if len(c.pending_labels) >= min(SWAP_BATCH, CALIBRATION_QUERIES - len(c.labels) or SWAP_BATCH):
        _swap_in(c, ivf)
    stale = c.truth_lists == -1
    c.truth_lists[stale] = _lists_of(ivf, np.where(stale, c.truth_labels, -1))[stale]


def _swap_in(c: Calibration, ivf) -> None:
    """Make the pending draws check queries: fill the free places, then replace random ones."""
    new_labels, new_queries = c.pending_labels[-CALIBRATION_QUERIES:], c.pending_queries[-CALIBRATION_QUERIES:]
    scores, found = _without_self(*exact_neighbours(ivf, new_queries, CALIBRATION_K + 1), new_labels)
    surplus = max(0, len(c.labels) + len(new_labels) - CALIBRATION_QUERIES)
    keep = np.setdiff1d(np.arange(len(c.labels)), c.rng.choice(len(c.labels), surplus, replace=False))
    centroids = _centroids(ivf)
    c.labels = np.concatenate([c.labels[keep], new_labels])
    c.queries = np.concatenate([c.queries[keep], new_queries])
    c.centroid_scores = np.concatenate([c.centroid_scores[keep], new_queries @ centroids.T])
    c.truth_scores = np.concatenate([c.truth_scores[keep], scores])
    c.truth_labels = np.concatenate([c.truth_labels[keep], found])
    c.truth_lists = np.concatenate([c.truth_lists[keep], np.full(found.shape, -1, "int64")])
    c.pending_labels, c.pending_queries = c.pending_labels[:0], c.pending_queries[:0]


def add_lists(calibration: Calibration, centroids: np.ndarray) -> None:
    """Take new lists (their centroids, numbered after the existing ones) into the check queries'
    centroid scores, before any vector enters them."""
    c = calibration
    c.centroid_scores = np.concatenate([c.centroid_scores, c.queries @ centroids.T], axis=1)


def _centroids(ivf) -> np.ndarray:
    """The centroids of the lists in use (an IVF may hold spare lists beyond them: ivf_growth)."""
    return ivf.quantizer.reconstruct_n(0, lists_in_use(ivf))


def forget(calibration: Calibration, labels: np.ndarray) -> None:
    """Drop the check queries that are, or whose neighbours include, removed labels (sorted)."""
    c = calibration
    pending = ~np.isin(c.pending_labels, labels)
    c.pending_labels, c.pending_queries = c.pending_labels[pending], c.pending_queries[pending]
    touched = np.isin(c.labels, labels) | np.isin(c.truth_labels, labels).any(axis=1)
    if touched.any():
        keep = ~touched
        c.labels, c.queries, c.centroid_scores = c.labels[keep], c.queries[keep], c.centroid_scores[keep]
        c.truth_scores, c.truth_labels, c.truth_lists = c.truth_scores[keep], c.truth_labels[keep], c.truth_lists[keep]


def recall_by_nprobe(calibration: Calibration, nprobe: int) -> float:
    """Recall@k of the self-check's queries at this nprobe (IVF-Flat: exact within visited lists)."""
    ranks = _list_ranks(calibration)
    return float((ranks < nprobe).mean()) if ranks.size else 1.0


def needed_nprobe(calibration: Calibration, floor: int, most: int) -> int:
    """The smallest nprobe, at least ``floor``, whose self-check recall reaches TARGET_RECALL, and at
    most ``most`` (the caller's bound on a search's cost, at least ``floor``)."""
    ranks = np.sort(_list_ranks(calibration))
    if not ranks.size:
        return floor
    needed = int(ranks[min(len(ranks) - 1, int(np.ceil(TARGET_RECALL * len(ranks))) - 1)]) + 1
    return min(most, max(floor, needed))


def exact_neighbours(ivf, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k (scores, labels) [S, k] of the queries among every vector in the IVF's lists.

    One matrix product per block of ``SCAN_BLOCK`` vectors (IVF-Flat lists read in place: the codes
    are the floats), not an IVF search with nprobe = nlist, which scans vector by vector and is ~10x
    slower; nor one product per list, which multithreaded BLAS runs many times slower on a busy CPU."""
    flat, invlists = isinstance(faiss.downcast_index(ivf), faiss.IndexIVFFlat), ivf.invlists
    scores = np.full((len(queries), k), -np.inf, dtype="float32")
    found = np.full((len(queries), k), -1, dtype="int64")
    parts, pending, lists = [], 0, lists_in_use(ivf)  # spare lists beyond these are empty
    for i in range(lists):
        size = invlists.list_size(i)
        if size:
            ids = faiss.rev_swig_ptr(invlists.get_ids(i), size)
            if flat:
                codes = faiss.rev_swig_ptr(invlists.get_codes(i), size * ivf.code_size)
                parts.append((ids, codes.view("float32").reshape(size, ivf.d)))
            else:
                parts.append((ids, ivf.reconstruct_batch(ids)))
            pending += size
        if parts and (pending >= SCAN_BLOCK or i == lists - 1):
            block = queries @ np.concatenate([vectors for _, vectors in parts]).T
            block_labels = np.concatenate([ids for ids, _ in parts])
            scores, found = _merge(scores, found, block, np.broadcast_to(block_labels, block.shape))
            parts, pending = [], 0
    return scores, found


def _list_ranks(calibration: Calibration) -> np.ndarray:
    """For every true neighbour of every check query, how many lists score above its own (flat)."""
    c = calibration
    valid = c.truth_labels >= 0
    rows = np.broadcast_to(np.arange(len(c.labels))[:, None], valid.shape)[valid]
    own = c.centroid_scores[rows, c.truth_lists[valid]]
    return (c.centroid_scores[rows] > own[:, None]).sum(axis=1)


def _lists_of(ivf, labels: np.ndarray) -> np.ndarray:
    """The IVF list holding each label (-1 for -1), from the index's direct map."""
    lists = np.full(labels.shape, -1, dtype="int64")
    for position in zip(*np.nonzero(labels >= 0)):
        lists[position] = faiss.lo_listno(ivf.direct_map.get(int(labels[position])))
    return lists


def _merge(scores: np.ndarray, labels: np.ndarray, more_scores: np.ndarray, more_labels: np.ndarray):
    """The top-k (scores, labels) per row of two candidate sets, descending."""
    k = scores.shape[1]
    all_scores = np.concatenate([scores, more_scores.astype("float32", copy=False)], axis=1)
    all_labels = np.concatenate([labels, more_labels], axis=1)
    top = np.argpartition(-all_scores, k - 1, axis=1)[:, :k]
    top_scores = np.take_along_axis(all_scores, top, axis=1)
    order = np.argsort(-top_scores, axis=1, kind="stable")
    top = np.take_along_axis(top, order, axis=1)
    top_scores = np.take_along_axis(all_scores, top, axis=1)
    top_labels = np.where(np.isfinite(top_scores), np.take_along_axis(all_labels, top, axis=1), -1)
    return top_scores, top_labels


def _without_self(scores: np.ndarray, found: np.ndarray, own: np.ndarray):
    """k+1 results per query minus the query's own label (or the last one), k left."""
    keep = found != own[:, None]
    keep[keep.sum(axis=1) > CALIBRATION_K, -1] = False
    k = CALIBRATION_K
    return scores[keep].reshape(-1, k), found[keep].reshape(-1, k)
