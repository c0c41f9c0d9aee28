"""Smoke tests of the benchmark scripts and the report writer on tiny sizes.

Real runs, no mocks: FaissRetriever on a few hundred random unit vectors, the Archive and
MemoryManager with the tiny encoder, sentence-transformers against MemoryEncoder on the tiny
model. The numbers are meaningless; what is checked is that the pieces run and the report holds
them (tables, plots, raw JSON).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest

from memnets.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # bench/ lives in the source tree, next to the package (not in the wheel)

from bench import common, manager, report, search  # noqa: E402 (bench/ is on sys.path from here)
from bench.embeddings import scaled  # noqa: E402
from bench.run import main  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def unit(rows: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def search_results(tmp_path_factory):
    base, queries = unit(300, 16, 0), unit(40, 16, 1)
    results, notes = search.run(
        base,
        queries,
        (300, 600),
        latency_calls=5,
        exact_calls=5,
        repeats=1,
        batch_size=64,
        nprobes=(1, 16),
        ef_searches=(16,),
    )
    out = tmp_path_factory.mktemp("bench")
    common.write_result(out, "search", {"batch": 64, "sizes": [300, 600]}, results, notes)
    return out, results


def test_scaled_keeps_the_real_vectors_and_adds_unit_noisy_copies():
    base = unit(10, 8, 0)
    out = scaled(base, 35, noise=0.01)
    assert out.shape == (35, 8) and out.dtype == np.float32
    np.testing.assert_array_equal(out[:10], base)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert not np.array_equal(out[10], base[0]) and float(out[10] @ base[0]) > 0.99
    with pytest.raises(ValueError, match="n must be positive"):
        scaled(base, 0)


def test_brute_force_agrees_with_exact_faiss(search_results):
    _, results = search_results
    rows = {(r["method"], r["n"]): r for r in results["rows"] if "chosen" not in r}
    for n in (300, 600):
        assert rows[("FaissRetriever flat (exact)", n)]["recall@10"] == 1.0
        assert rows[("numpy brute force", n)]["recall@10"] == pytest.approx(1.0)
        assert rows[("torch brute force", n)]["recall@10"] == pytest.approx(1.0)
    swept = [r for r in results["rows"] if "chosen" in r]
    assert {r["method"].split(" (")[0] for r in swept} == {
        "FaissRetriever ivf",
        "FaissRetriever ivf-sq8",
        "FaissRetriever hnsw",
    }
    for key in {(r["method"], r["n"]) for r in swept}:  # exactly one chosen and one default setting per index and size
        assert sum(r["chosen"] for r in swept if (r["method"], r["n"]) == key) == 1
        default = [r for r in swept if (r["method"], r["n"]) == key and r["default"]]
        assert len(default) == 1 and default[0]["delete"]["deleted"] == key[1] // 10
        assert default[0]["delete"]["deleted_returned"] == 0 and default[0]["delete"]["short_rows"] == 0
    ivf = [r for r in swept if r["method"].startswith("FaissRetriever ivf (") and r["n"] == 600]
    assert ivf[-1]["recall@10"] >= ivf[0]["recall@10"]  # visiting more lists is at least as good as one


def test_growth_mode_measures_each_checkpoint_and_the_rebuilds(monkeypatch):
    """bench.search_growth on a few thousand vectors, with the retriever's flat -> IVF switch lowered
    to 1,000 so that a background rebuild happens: every checkpoint measured twice, the rebuild's
    phases read from the retriever's log, the agent's calls split, and the tables written."""
    import memnets.retrieval.faiss_retriever as retriever_module
    from bench import search_growth

    monkeypatch.setattr(retriever_module, "AUTO_EXACT_BELOW", 1_000)
    monkeypatch.setattr(search_growth, "LATENCY_CALLS", 5)
    monkeypatch.setattr(search_growth, "SWEEP_CALLS", 2)
    results, notes = search_growth.run_growth(unit(400, 32, 0), unit(50, 32, 1), (500, 3000), (250, 0), noise=0.02)
    grown, at_once = results["runs"]
    assert [p["n"] for p in grown["points"]] == [500, 3000] == [p["n"] for p in at_once["points"]]
    first, last = grown["points"]
    assert first["after_add"]["kind"] == "flat" and first["after_add"]["recall@10"] == 1.0
    assert last["after_wait"]["kind"] == "ivf" and not last["after_wait"]["upkeep_in_flight"]
    assert last["after_wait"]["trained_size"] >= 1_000 and 0.0 < last["after_wait"]["recall@10"] <= 1.0
    wait = last["after_wait"]
    assert set(wait["by_nprobe"]) == {p for p in (8, 32, 64) if p <= wait["nlist"]} and wait["nprobe"] == 16
    swapped = [r for r in grown["rebuilds"] if r["event"] == "swapped"]
    assert swapped and all(r["end_s"] >= r["start_s"] >= 0 and r["build_s"] > 0 for r in swapped)
    assert sum(group["calls"] for group in grown["agent"].values()) > 0
    assert at_once["rebuilds"] == [] and at_once["points"][1]["after_add"]["kind"] == "ivf"
    assert "| adds of 250 | 3k |" in search_growth.growth_table(results)
    assert "| adds of 250 |" in search_growth.rebuild_table(results) and notes


def test_report_has_tables_plots_and_raw_json(search_results, tmp_path):
    out, _ = search_results
    payload = json.loads((out / "search.json").read_text())
    assert payload["machine"]["cores"] >= 1 and payload["versions"]["faiss"]
    path = report.write_report({"search": payload}, tmp_path, quick=True)
    text = path.read_text()
    assert "## Vector search at scale" in text and "| n | method | setting |" in text
    assert "| 300 | FaissRetriever flat (exact) |" in text and "numpy brute force" in text
    assert "Not run." in text.split("## Retrieval quality")[1]  # the sections without results say so
    assert "1M not run" in text  # a target that was not measured is not claimed
    for image in ("bench_search_latency.png", "bench_search_sweep.png"):
        assert f"(img/{image})" in text
        assert (tmp_path / "img" / image).read_bytes()[:8] == PNG_MAGIC
    raw = json.loads((tmp_path / "results.json").read_text())
    assert raw["quick"] is True and raw["benchmarks"]["search"]["results"]["rows"]


def test_report_rejects_unknown_or_empty_results(tmp_path):
    with pytest.raises(ValueError, match="no benchmark results"):
        report.write_report({}, tmp_path)
    with pytest.raises(ValueError, match="unknown benchmark results"):
        report.write_report({"speed": {}}, tmp_path)


def test_manager_benchmark_grows_a_real_archive(tiny_model_dir, tmp_path):
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    vectors = unit(120, encoder.dim, 2)
    texts = [f"memory number {i} about topic {i % 7}" for i in range(30)]
    rows = manager.run(
        vectors,
        texts,
        ["what about topic 3?", "topic 5?"],
        unit(4, encoder.dim, 3),
        (40, 120),
        tmp_path / "archive",
        calls=2,
        encoder=encoder,
    )
    assert [r["n"] for r in rows] == [40, 120]
    assert rows[0]["archive_count"] >= 40 and rows[1]["archive_count"] >= 120  # bulk plus observed memories
    assert all(r["query"]["calls"] == 2 and r["observe"]["p50_ms"] > 0 for r in rows)
    payload = {
        "machine": common.machine(),
        "versions": common.versions(),
        "finished_at": "now",
        "notes": [],
        "results": {"rows": rows, "growth": []},
    }
    text = report.write_report({"manager": payload}, tmp_path / "report").read_text()
    assert "| 40 | flat |" in text and "10k and 1M not both run" in text


def test_encoding_benchmark_compares_every_backend_with_sentence_transformers(tiny_model_dir, tmp_path):
    from bench import encoding
    from bench.sections import encoding as section

    result = encoding.run(
        ["a short memory", "a somewhat longer memory about the weekend trip"] * 4,
        str(tiny_model_dir),
        batch_size=4,
        repeats=2,
        single=3,
    )
    assert result["max_abs_diff_memnets_torch_vs_st_torch"] < 1e-4  # both compute the same embeddings
    assert set(result["sides"]) == {"memnets-torch", "memnets-onnx", "memnets-int8", "st-torch"}
    for side in result["sides"].values():
        assert len(side["seconds"]) == 2 and side["texts_per_s"] > 0 and side["single"]["calls"] == 6
    assert result["sides"]["memnets-onnx"]["cosine_to_exact"]["min"] > 0.9999
    targets: list = []
    lines = section.write(
        {"settings": {"model": "tiny", "texts": 8, "repeats": 2, "batch_size": 4, "single": 3}, "results": result},
        tmp_path,
        targets,
    )
    assert any("memnets-int8" in line for line in lines) and "2x sentence-transformers" in targets[0][0]


def test_command_rejects_unknown_benchmarks_and_reports_from_existing_json(search_results, tmp_path, capsys):
    with pytest.raises(SystemExit) as error:
        main(["--only", "search,speed"])
    assert error.value.code == 2 and "speed" in capsys.readouterr().err
    out, _ = search_results
    assert main(["--only", "search", "--out", str(out), "--report-only"]) == 0
    assert "FaissRetriever flat (exact)" in (out / "report.md").read_text()
    assert main(["--only", "quality", "--out", str(tmp_path), "--report-only"]) == 1  # nothing to report


def test_memnets_bench_runs_the_checkout_runner_in_a_child_process(tmp_path, monkeypatch, capsys):
    """memnets never imports bench/: `memnets bench` starts `python -m bench` from the checkout root."""
    monkeypatch.chdir(REPO)
    assert cli_main(["bench", "--only", "quality", "--out", str(tmp_path), "--report-only"]) == 1  # nothing to report
    monkeypatch.chdir(tmp_path)
    assert cli_main(["bench", "--report-only"]) == 2
    assert "no bench/ folder" in capsys.readouterr().err


def test_archive_search_looks_hits_up_by_primary_key(tmp_path):
    """Found by the manager benchmark: Archive.search fetched its k hits with a plan that scanned
    every row of the owner (linear in the archive: 0.4 s per search at 1M memories)."""
    from datetime import datetime

    from memnets.records import Memory
    from memnets.store.archive import Archive

    vectors = unit(200, 8, 4)
    now = datetime(2024, 1, 1, tzinfo=UTC)
    with Archive(tmp_path / "archive", 8) as archive:
        archive.upsert(
            [
                Memory(id=f"m{i}", owner="a", t=now, content=f"memory {i}", importance=0.5, kind="observation")
                for i in range(200)
            ],
            vectors,
        )
        statements = []
        archive._conn.set_trace_callback(statements.append)
        hits = archive.search(vectors[3], 15, "a")
        archive._conn.set_trace_callback(None)
        assert hits[0][0].id == "m3" and len(hits) == 15
        fetch = [sql for sql in statements if "row IN" in sql]
        assert fetch, statements
        plan = " ".join(str(step) for step in archive._conn.execute("EXPLAIN QUERY PLAN " + fetch[0]).fetchall())
        assert "PRIMARY KEY" in plan and "memories_owner" not in plan, plan
