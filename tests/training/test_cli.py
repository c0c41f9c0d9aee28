"""The `memnets` command end to end on the fixture: data prepare and eval retrieval."""

import json

import pytest
import yaml

from memnets.cli import main, resolve


def test_dispatch_picks_the_longest_command():
    assert resolve(["eval", "retrieval", "--split", "test"]) == (
        "memnets.training.commands.evaluate:retrieval_main",
        ["--split", "test"],
    )
    assert resolve(["fit", "encoder", "-c", "x.yaml"])[1] == ["encoder", "-c", "x.yaml"]
    assert resolve(["nope"]) is None


def test_unknown_command_exits_2(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


@pytest.fixture()
def data_config(tmp_path, tiny_locomo_path):
    path = tmp_path / "data.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "path": str(tiny_locomo_path),
                "cache_dir": str(tmp_path / "cache"),
                "splits": {"train": ["tiny-1"], "validation": [], "test": ["tiny-2"]},
            }
        )
    )
    return path


def test_data_prepare_prints_counts_and_balance(data_config, capsys):
    assert main(["data", "prepare", "-c", str(data_config)]) == 0
    out = capsys.readouterr().out
    assert "importance" in out and "75.0%" in out  # tiny-1: 6 of 8 turns are cited
    assert "tiny-1: dropped unresolvable evidence ids" in out and "D9:9" in out


def test_eval_retrieval_reports_bm25_and_a_dense_model_side_by_side(data_config, tiny_model_dir, tmp_path, capsys):
    out_json = tmp_path / "eval.json"
    code = main(
        [
            "eval",
            "retrieval",
            "bm25",
            f"tiny=dense:{tiny_model_dir}",
            "-c",
            str(data_config),
            "--split",
            "train",
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    payload = json.loads(out_json.read_text())
    names = [r["name"] for r in payload["reports"]]
    assert names == ["bm25", "tiny"]
    bm25 = payload["reports"][0]
    assert bm25["counts"]["questions"] == 4  # tiny-1 categories 1-4 with evidence
    assert bm25["overall"]["recall@50"] == 1.0  # 8 turns: everything is in the top 50
    # "What breed is Ann's dog?" shares only "breed" with D1:2 ("What breed is he?"): BM25 ranks it first.
    first = next(q for q in bm25["per_question"] if q["qa_index"] == 0)
    assert first["recall@1"] == 0.0
    # the ranked ids of each question, best first, beside its evidence (as the answers JSON has them)
    assert first["retrieved"][0] == "D1:2" and first["retrieved"][0] not in first["evidence"]
    assert all(len(q["retrieved"]) == 8 and set(q["evidence"]) <= set(q["retrieved"]) for q in bm25["per_question"])
    assert "retrieval on the train split" in capsys.readouterr().out


def test_an_eval_table_title_is_one_line(tmp_path, capsys):
    """rich wraps a title at its table's width: a long scope over a one-retriever table was cut mid-phrase."""
    from memnets.console import print_table
    from memnets.training.commands.evaluate import category_table, comparison_table
    from memnets.training.retrieval.metrics import DEFAULT_KS, RetrievalReport

    metrics = {f"recall@{k}": 0.5 for k in DEFAULT_KS} | {"mrr@10": 0.3, "ndcg@10": 0.4}
    report = RetrievalReport("bm25", metrics, {1: metrics}, {"questions": 199, "category_1": 199})
    scope = f"every conversation of {tmp_path / 'a-long-folder-name' / 'locomo10.json'}"
    print_table(comparison_table([report], scope, DEFAULT_KS))
    print_table(category_table([report]))
    lines = capsys.readouterr().out.splitlines()
    assert any(f"retrieval on {scope} (199 questions)" in line for line in lines)
    assert any("recall@10 per category (questions)" in line for line in lines)


def test_eval_retrieval_rejects_a_bad_spec(data_config, capsys):
    assert main(["eval", "retrieval", "colbert", "-c", str(data_config)]) == 2
    assert "unknown kind 'colbert'" in capsys.readouterr().err
