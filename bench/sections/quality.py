"""The report's section on LoCoMo recall@k of each retriever (bench/quality.py)."""

from __future__ import annotations

from pathlib import Path

from bench.figures import fmt, plt, save_plot, style_axes, table

TITLE = "Retrieval quality"


def write(payload: dict, out: Path, targets: list) -> list[str]:
    r = payload["results"]
    reports = r["reports"]
    lines = [
        f"Split `{r['split']}` ({', '.join(r['conversations'])}), QA categories 1-4, LoCoMo rule: per question, "
        "recall@k is the share of its evidence turns in the top k of its own conversation's turns.",
        "",
    ]
    if not reports:
        return lines + ["No retriever was evaluated."]
    first = next(iter(reports.values()))
    ks = [m for m in first["overall"] if m.startswith("recall@")]
    metrics = ks + ["mrr@10", "ndcg@10"]
    lines.append(f"Questions: {first['counts']['questions']}. Values in %.")
    lines.append("")
    lines.append(
        table(
            ["retriever", *[m.replace("recall", "R") for m in metrics], "seconds"],
            [
                [name, *[fmt(100 * rep["overall"][m]) for m in metrics], fmt(rep["seconds"])]
                for name, rep in reports.items()
            ],
        )
    )
    categories = sorted({c for rep in reports.values() for c in rep["by_category"]}, key=int)
    names = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    lines += [
        "",
        "Recall@10 per category (questions):",
        "",
        table(
            [
                "retriever",
                *[f"{c} {names.get(c, '')} ({first['counts'].get('category_' + c, '')})" for c in categories],
            ],
            [
                [
                    name,
                    *[
                        fmt(100 * rep["by_category"][c]["recall@10"]) if c in rep["by_category"] else "-"
                        for c in categories
                    ],
                ]
                for name, rep in reports.items()
            ],
        ),
    ]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    k_values = [int(m.split("@")[1]) for m in ks]
    for name, rep in reports.items():
        ax.plot(k_values, [100 * rep["overall"][m] for m in ks], marker="o", label=name)
    style_axes(ax, "k", "recall@k (%)")
    ax.set_xticks(k_values, [str(k) for k in k_values])
    ax.set_title(f"LoCoMo {r['split']} split, categories 1-4")
    lines += ["", f"![recall@k curves]({save_plot(fig, out, 'quality_recall')})"]
    return lines
