"""Smoke tests of the benchmark scripts and the report writer on tiny sizes.

Each script runs as its own process (``python -m bench.NAME``, as the docs give it) on random unit
vectors (``--random``) or the tiny encoder, and the JSON it writes and the report made from it are
read back. Real runs, no mocks: FaissRetriever on a few hundred vectors, the Archive and
MemoryManager with the tiny encoder, sentence-transformers against MemoryEncoder on the tiny model.
The numbers are meaningless; what is checked is that the pieces run and the report holds them
(tables, plots, raw JSON).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC

import numpy as np
import pytest
from bench_helpers import REPO, result, run_bench

from memnets.cli import main as cli_main
from memnets.nn.backend_choice import has_vnni

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def search_out(tmp_path_factory):
    """bench.search on 300 and 600 random unit vectors: OUT with search.json."""
    out = tmp_path_factory.mktemp("bench")
    run_bench("bench.search", "--random", "--quick", "--sizes", "300,600", "--out", out)
    return out


def test_brute_force_agrees_with_exact_faiss(search_out):
    rows_all = result(search_out, "search")["results"]["rows"]
    rows = {(r["method"], r["n"]): r for r in rows_all if "chosen" not in r}
    for n in (300, 600):
        assert rows[("FaissRetriever flat (exact)", n)]["recall@10"] == 1.0
        assert rows[("numpy brute force", n)]["recall@10"] == pytest.approx(1.0)
        assert rows[("torch brute force", n)]["recall@10"] == pytest.approx(1.0)
    swept = [r for r in rows_all if "chosen" in r]
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


def test_growth_mode_measures_each_checkpoint_and_the_rebuilds(tmp_path):
    """bench.search --growth on a few thousand vectors, with the retriever's flat -> IVF switch lowered
    to 1,000 so that a background rebuild happens: every checkpoint measured twice, the rebuild's
    phases read from the retriever's log, the agent's calls split, and the tables printed."""
    args = ["--growth", "--random", "--sizes", "500,3000", "--adds", "250,all", "--exact-below", "1000", "--sets"]
    printed = run_bench("bench.search", *args, "real,drift", "--out", tmp_path).stdout
    payload = result(tmp_path, "search_growth")
    assert list(payload["results"]["sets"]) == ["real", "drift"] == payload["settings"]["sets"]
    grown, at_once = payload["results"]["sets"]["real"]["runs"]
    assert [p["n"] for p in grown["points"]] == [500, 3000] == [p["n"] for p in at_once["points"]]
    first, last = grown["points"]
    assert first["after_add"]["kind"] == "flat" and first["after_add"]["recall@10"] == 1.0
    assert last["after_wait"]["kind"] == "ivf" and not last["after_wait"]["upkeep_in_flight"]
    assert last["after_wait"]["trained_size"] >= 1_000 and 0.0 < last["after_wait"]["recall@10"] <= 1.0
    wait = last["after_wait"]
    assert wait["nprobe"] >= 16  # the default, or more where the index's self-check asks for it
    assert set(wait["by_nprobe"]) == {str(p) for p in (8, 16, 32, 64) if p <= wait["nlist"] and p != wait["nprobe"]}
    swapped = [r for r in grown["rebuilds"] if r["event"] == "swapped"]
    assert swapped and all(r["end_s"] >= r["start_s"] >= 0 and r["build_s"] > 0 for r in swapped)
    assert sum(group["calls"] for group in grown["agent"].values()) > 0
    assert at_once["rebuilds"] == [] and at_once["points"][1]["after_add"]["kind"] == "ivf"
    assert "| real | adds of 250 | 3k |" in printed and "| drift | adds of 250 | 3k |" in printed and payload["notes"]
    assert payload["settings"]["exact_below"] == 1000
    assert "| drift | adds of 250 | 3k |" in (tmp_path / "search_growth.md").read_text()


def test_report_has_tables_plots_and_raw_json(search_out, tmp_path):
    payload = result(search_out, "search")
    assert payload["machine"]["cores"] >= 1 and payload["versions"]["faiss"]
    shutil.copy(search_out / "search.json", tmp_path / "search.json")
    run_bench("bench", "--only", "search", "--out", tmp_path, "--report-only", "--quick")
    text = (tmp_path / "report.md").read_text()
    assert "## Vector search at scale" in text and "| n | method | setting |" in text
    assert "| 300 | FaissRetriever flat (exact) |" in text and "numpy brute force" in text
    assert "Not run." in text.split("## Retrieval quality")[1]  # the sections without results say so
    assert "1M not run" in text  # a target that was not measured is not claimed
    for image in ("bench_search_latency.png", "bench_search_sweep.png"):
        assert f"(img/{image})" in text
        assert (tmp_path / "img" / image).read_bytes()[:8] == PNG_MAGIC
    raw = json.loads((tmp_path / "results.json").read_text())
    assert raw["quick"] is True and raw["benchmarks"]["search"]["results"]["rows"]


def test_manager_benchmark_grows_a_real_archive(tiny_model_dir, tmp_path):
    args = ["--random", "--encoder", tiny_model_dir, "--sizes", "40,120", "--calls", "2", "--out", tmp_path]
    run_bench("bench.manager", *args)
    rows = result(tmp_path, "manager")["results"]["rows"]
    assert [r["n"] for r in rows] == [40, 120]
    assert rows[0]["archive_count"] >= 40 and rows[1]["archive_count"] >= 120  # bulk plus observed memories
    assert all(r["query"]["calls"] == 2 and r["observe"]["p50_ms"] > 0 for r in rows)
    run_bench("bench", "--only", "manager", "--out", tmp_path, "--report-only")
    text = (tmp_path / "report.md").read_text()
    assert "| 40 | flat |" in text and "10k and 1M not both run" in text


def test_int8_variants_measure_speed_agreement_and_the_batch_s_effect(tiny_model_dir, tmp_path):
    """bench.experiments.int8_variants on a tiny encoder: every variant's texts/s, agreement with torch and the
    cosine of a text encoded alone to the same text in its batch, which the float32 graph keeps at 1 (its vectors
    do not depend on the batch; the dynamically quantised ones may)."""
    run_bench("bench.experiments.int8_variants", "--encoder", tiny_model_dir, "--texts", "12", "--repeats", "1",
              "--out", tmp_path)  # fmt: skip
    found = result(tmp_path, "int8_variants")["results"]
    assert {"fp32", "default"} <= set(found)
    for row in found.values():
        assert row["texts_per_s"] > 0 and row["single"]["calls"] == 12
        assert -1.0 <= row["alone_to_batched"]["min"] <= row["alone_to_batched"]["mean"] <= 1.0 + 1e-5
    assert found["fp32"]["alone_to_batched"]["min"] > 0.9999
    assert found["fp32"]["cosine_to_exact"]["min"] > 0.9999


def test_encoding_benchmark_compares_every_backend_with_sentence_transformers(tiny_model_dir, tmp_path):
    args = ["--model", tiny_model_dir, "--texts", "8", "--batch-size", "4", "--repeats", "2", "--single", "3"]
    run_bench("bench.encoding", *args, "--out", tmp_path)
    found = result(tmp_path, "encoding")["results"]
    assert found["max_abs_diff_memnets_torch_vs_st_torch"] < 1e-4  # both compute the same embeddings
    vnni = {"memnets-int8_vnni", "memnets-int8_vnni_ffn"} if has_vnni() else set()
    ours = {"memnets-torch", "memnets-onnx", "memnets-int8"} | vnni
    assert set(found["sides"]) == ours | {"st-torch"}  # the int8_vnni ones only where the CPU has VNNI
    for side in found["sides"].values():
        assert len(side["seconds"]) == 2 and side["texts_per_s"] > 0 and side["single"]["calls"] == 6
    assert found["sides"]["memnets-onnx"]["cosine_to_exact"]["min"] > 0.9999
    throughput = found["ratios"]["texts_per_s"]  # memnets' fastest over sentence-transformers' fastest
    fastest = max(found["sides"][s]["texts_per_s"] for s in found["sides"] if s.startswith("memnets-"))
    assert throughput["st"] == "st-torch" and throughput["ratio"] == fastest / found["sides"]["st-torch"]["texts_per_s"]
    assert any("instruction sets: " in line for line in found["header"])
    assert (tmp_path / "encoding.md").read_text().count("| memnets-") == len(ours)
    run_bench("bench", "--only", "encoding", "--out", tmp_path, "--report-only")
    text = (tmp_path / "report.md").read_text()
    assert "memnets-int8" in text and "1.25x sentence-transformers' fastest" in text


def test_store_benchmark_runs_both_stores(pg_url, tmp_path):
    """bench.store on 2,000 random vectors: the embedded store and PostgreSQL (the tests' server) each
    load, build, search exactly enough at this size, filter, and take writes into a built index."""
    args = ["--random", "--sizes", "2000", "--queries", "20", "--pg-url", pg_url, "--out", tmp_path]
    run_bench("bench.store", *args)
    rows = {row["store"].split(" ")[0]: row for row in result(tmp_path, "store")["results"]["rows"]}
    assert set(rows) == {"Archive", "PgVectorStore"}
    for row in rows.values():
        assert row["n"] == 2000 and row["search"]["calls"] == row["filtered"]["calls"] > 0
        assert row["search"]["recall_at_10"] > 0.9 and row["filtered"]["recall_at_10"] > 0.9
        assert row["live_upsert_per_s"] > 0 and row["bytes_per_vector"] > 0
    run_bench("bench", "--only", "store", "--out", tmp_path, "--report-only")
    assert "PgVectorStore" in (tmp_path / "report.md").read_text()


def test_command_rejects_unknown_benchmarks_and_reports_from_existing_json(search_out, tmp_path):
    refused = run_bench("bench", "--only", "search,speed", expect=2)
    assert "speed" in refused.stderr
    shutil.copy(search_out / "search.json", tmp_path / "search.json")
    run_bench("bench", "--only", "search", "--out", tmp_path, "--report-only")
    assert "FaissRetriever flat (exact)" in (tmp_path / "report.md").read_text()
    empty = tmp_path / "empty"
    nothing = run_bench("bench", "--only", "quality", "--out", empty, "--report-only", expect=1)
    assert "no results" in nothing.stderr and not (empty / "report.md").exists()


def test_compare_refuses_what_it_cannot_compare(tmp_path):
    """bench.compare stops before running anything on a revision that does not exist or a --with for
    a benchmark it was not asked to run (its full runs are the lead's, minutes per benchmark)."""
    missing = run_bench("bench.compare", "--before", "no-such-revision", "--out", tmp_path / "c.json", "api", expect=1)
    assert "'no-such-revision' is neither a folder nor a revision" in missing.stderr
    stray = run_bench("bench.compare", "--before", "HEAD", "--with", "store=--quick", "api", expect=2)
    assert "--with names ['store']" in stray.stderr and not (tmp_path / "c.json").exists()


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

    vectors = np.random.default_rng(4).normal(size=(200, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
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


@pytest.mark.slow  # about 25 s: a load run against a real two-worker server (.ci/run runs it)
def test_load_benchmark_counts_every_worker_of_a_server(tiny_model_dir, tmp_path):
    """With --workers 2 a /metrics scrape reaches one worker: the load benchmark scrapes until each has
    answered and sums them. Each request encodes one text, so the texts it counts are the requests:
    fewer would be one worker's count. The encoder's limit also measures the workers' layout. The
    server's CPU is split by thread: the encoder's threads (named by the server), the event loops and
    the request threads, which add up to the whole."""
    out = tmp_path / "load.json"
    args = ["--parts", "load", "--stores", "embedded", "--encoder", tiny_model_dir, "--memories", "300"]
    args += ["--seconds", "2", "--clients", "6", "--batching", "on", "--workers", "2", "--limit-seconds", "0.3"]
    run_bench("bench.experiments.load", *args, "--out", out)
    (row,) = json.loads(out.read_text())["runs"]
    assert row["errors"] == 0 and row["requests"] > 0
    assert row["encoded_texts"] == row["requests"]
    assert row["encoder_busy"] > 0 and row["server_cores"] > 0
    assert {"2x1 traced", "2x1 eager"} <= set(row["limit_by_layout"])
    parts = row["server_encoder_cpu_ms_per_text"] + row["loop_cpu_ms_per_request"]
    parts += row["request_threads_cpu_ms_per_request"]
    assert row["server_encoder_cpu_ms_per_text"] > 0 and row["request_threads_cpu_ms_per_request"] > 0
    assert parts == pytest.approx(row["server_cpu_ms_per_request"], abs=0.05)  # one text per request
