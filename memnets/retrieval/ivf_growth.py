"""New IVF lists for adds that fit none of the trained ones.

Lists trained on earlier data take later adds from new regions (new topics, a drifting
distribution) badly: each vector goes to the nearest of centroids that are all far from it, a new
cluster's members scatter over many lists, and the self-check can hold recall only by probing many
of them (on the growth benchmark's drifting clusters at 300k, 128 of 1,264 lists and 2.09 ms a
search, until a rebuild swapped in 20 s later). Instead, an add whose vectors mostly fit no list
gets lists of its own: spherical k-means on those vectors, its centroids added to the coarse
quantizer and its lists taken from spare ones, before the vectors are assigned to the lists.

FAISS fixes an IVF's number of inverted lists when it is made, so a named IVF is made with
``SPARE_LISTS_PER_LIST`` spare lists per trained one (an empty list costs a few bytes); a list
beyond the quantizer's centroids is never probed, and so ``lists_in_use`` is the quantizer's size,
not ``nlist``. The index stays one IVF: searches, removal, reconstruction, saving, loading and
rebuilds work as before. Past its spare lists, an owner works as without them (the self-check
raises nprobe, and a strained owner is retrained).

A vector fits no list when its best centroid scores below the owner's ``fit_floor``: the
``FIT_QUANTILE`` quantile of that score over a sample of the owner's own vectors, taken when its
lists are trained or loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

SPARE_LISTS_PER_LIST = 7  # a named IVF is made with this many spare lists per trained list: room for
# adds of new clusters until it is retrained (at 2x its trained size, or later while a rebuild runs)
FIT_QUANTILE = 0.01  # a vector scoring below this quantile of the owner's own best-centroid scores fits no list
FIT_SAMPLE = 4_096  # own vectors whose best-centroid scores give the fit floor
GROW_SHARE = 0.1  # an add grows lists only when at least this share of it fits no list, and at least
# ``min_points`` vectors do (of 100k vectors added to lists trained on the 100k before them: 1.3% on the
# growth benchmark's real set, 4.6% loose, 2.4% tight, 99.98% on the drifting set: bench.experiments.ivf_fit)
GROW_ITERATIONS = 5  # spherical k-means iterations for new lists (as for training the lists)
GROW_TRAIN_PER_LIST = 32  # k-means sample per new list (as for training the lists)


def reserve_spare_lists(ivf, spare: int) -> None:
    """Give a trained, empty IVF ``spare`` more (empty) inverted lists, for :func:`plan` to fill."""
    if ivf.ntotal:
        raise ValueError("reserve_spare_lists: the IVF must be empty (its lists are replaced)")
    lists = faiss.ArrayInvertedLists(ivf.nlist + spare, ivf.code_size)
    ivf.nlist = lists.nlist
    ivf.replace_invlists(lists, True)
    lists.this.disown()  # the IVF owns and frees it


def lists_in_use(ivf) -> int:
    """Lists that hold or may receive vectors: one per centroid of the coarse quantizer."""
    return int(ivf.quantizer.ntotal)


def spare_lists(ivf) -> int:
    """Empty lists not yet given a centroid."""
    return int(ivf.nlist) - lists_in_use(ivf)


def fit_floor(ivf, vectors: np.ndarray) -> float:
    """The ``FIT_QUANTILE`` quantile of the best-centroid score of an owner's vectors (a sample)."""
    scores, _ = ivf.quantizer.search(vectors, 1)
    return float(np.quantile(scores[:, 0], FIT_QUANTILE))


@dataclass(frozen=True)
class Growth:
    """Lists an add is assigned to, and the centroids of the new lists among them (numbered from
    ``first``, the quantizer's size when planned; None when the add grows none)."""

    lists: np.ndarray  # [N] int64
    centroids: np.ndarray | None  # [m, d] unit rows, for lists first .. first + m - 1
    first: int


def plan(ivf, vectors: np.ndarray, floor: float | None, lock, *, per_list: float, min_points: int) -> Growth:
    """The lists of an add's vectors, with new lists for those that fit no list when enough of them
    do (about ``per_list`` vectors each, as the owner's lists hold, at least ``min_points``; no more
    than the spare lists). Reads the quantizer under ``lock`` (which :func:`grow` is called under),
    then trains any new lists without it."""
    with lock:
        scores, lists = ivf.quantizer.search(vectors, 1)
        first, spare = lists_in_use(ivf), spare_lists(ivf)
    scores, lists = scores[:, 0], lists[:, 0].astype("int64")
    if floor is None:
        return Growth(lists, None, first)
    misfits = np.flatnonzero(scores < floor)
    count = min(spare, len(misfits) // min_points, max(1, round(len(misfits) / max(per_list, 1.0))))
    if count < 1 or len(misfits) < GROW_SHARE * len(vectors):
        return Growth(lists, None, first)
    centroids = _spherical_kmeans(vectors[misfits], count)
    new_lists = faiss.IndexFlatIP(centroids.shape[1])
    new_lists.add(centroids)
    new_scores, best = new_lists.search(vectors, 1)  # every vector of the add to its best list, old or new
    better = new_scores[:, 0] > scores
    lists[better] = first + best[better, 0]
    return Growth(lists, centroids, first)


def grow(ivf, growth: Growth, lock) -> None:
    """Add the growth's centroids to the quantizer, under ``lock`` (the caller holds searches off)."""
    if growth.centroids is not None:
        with lock:
            ivf.quantizer.add(growth.centroids)


def _spherical_kmeans(vectors: np.ndarray, count: int) -> np.ndarray:
    """``count`` unit centroids of the vectors (FAISS k-means on a sample of 32 per centroid)."""
    kmeans = faiss.Kmeans(
        vectors.shape[1],
        count,
        niter=GROW_ITERATIONS,
        spherical=True,
        min_points_per_centroid=1,
        max_points_per_centroid=GROW_TRAIN_PER_LIST,
        seed=len(vectors),
    )
    kmeans.train(np.ascontiguousarray(vectors, dtype="float32"))
    return kmeans.centroids


def without_spare_lists(index):
    """A copy of an IVF index without its spare lists (for a GPU copy, whose lists must all have a
    centroid), or the index itself when it has none."""
    ivf = faiss.extract_index_ivf(index)
    used = lists_in_use(ivf)
    if used == ivf.nlist:
        return index
    copy = faiss.clone_index(index)
    copied = faiss.extract_index_ivf(copy)
    lists = faiss.ArrayInvertedLists(used, copied.code_size)
    for i in range(used):
        size = copied.invlists.list_size(i)
        if size:
            lists.add_entries(i, size, copied.invlists.get_ids(i), copied.invlists.get_codes(i))
    copied.nlist = used
    copied.replace_invlists(lists, True)
    lists.this.disown()
    return copy
