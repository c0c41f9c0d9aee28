"""Which adds get lists of their own: the share of an add that fits none of an owner's IVF lists.

For each vector set of bench/vector_sets.py (``--sets``), an IVF owner is built by the library's
own ``faiss_index.build_index("ivf", ...)`` on the first ``--size`` vectors, and the next ``--size``
are scored against its centroids as an add would be (``ivf_growth.plan``'s quantizer search). Per set:
the owner's fit floor (``OwnerIndex.fit_floor``, the ``ivf_growth.FIT_QUANTILE`` quantile of its own
vectors' best-centroid scores) and the share of the add below it. An add grows lists when that share
reaches ``ivf_growth.GROW_SHARE``: the real, loose and tight sets' adds come from the distribution the
lists were trained on and must stay well under it; the drifting set's come from new clusters.

Usage: ``python -m bench.experiments.ivf_fit --out docs/results`` (100k + 100k per set, about a
minute a set on 2 cores); ``--quick``: 20k + 20k.
"""

from __future__ import annotations

import numpy as np

from bench.common import CACHE_DIR, parser, real_embeddings, write_result
from bench.figures import table
from bench.vector_sets import VECTOR_SETS, vector_set


def misfits(name: str, size: int) -> dict:
    """The fit floor of an owner built on ``size`` vectors of the set, and the share of the next
    ``size`` below it."""
    import faiss

    from memnets.retrieval import faiss_index, ivf_growth

    real = real_embeddings(CACHE_DIR) if name == "real" else None
    vectors, _ = vector_set(name, 2 * size, 10, real)
    state = faiss_index.build_index(
        "ivf", vectors[:size], np.arange(size, dtype="int64"), dim=vectors.shape[1], hnsw_m=32, ef_construction=40
    )
    scores, _ = faiss.extract_index_ivf(state.index).quantizer.search(vectors[size:], 1)
    share = float((scores[:, 0] < state.fit_floor).mean())
    return {
        "set": name,
        "owner": size,
        "add": size,
        "fit_floor": round(state.fit_floor, 3),
        "share_below": round(share, 4),
        "grows_lists": share >= ivf_growth.GROW_SHARE,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.ivf_fit", __doc__)
    p.add_argument("--sets", default=",".join(VECTOR_SETS), help="comma-separated vector sets (bench/vector_sets.py)")
    p.add_argument("--size", type=int, default=100_000, help="vectors in the owner, and in the add")
    args = p.parse_args(argv)
    size = 20_000 if args.quick else args.size
    rows = []
    for name in args.sets.split(","):
        rows.append(misfits(name, size))
        print(rows[-1], flush=True)
    text = table(list(rows[0]), [list(row.values()) for row in rows])
    print(text)
    path = write_result(args.out, "ivf_fit", {"sets": args.sets.split(","), "size": size}, {"rows": rows})
    path.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
