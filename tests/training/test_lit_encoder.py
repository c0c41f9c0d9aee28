"""Encoder training end to end on the tiny model and tiny LoCoMo: the `memnets fit encoder` code path."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import yaml
from fit_helpers import encoder_trainer_config, tiny_data_config

from memnets.argerrors import ArgumentTypeError, ArgumentValueError, field_of
from memnets.nn.encoder import MemoryEncoder
from memnets.training.commands.fit import main
from memnets.training.lit.cli import COMPONENTS, build_cli
from memnets.training.lit.data import NoDuplicatesBatchSampler, RetrievalDataModule
from memnets.training.lit.threads import TorchThreads

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def data_config(tmp_path, tiny_locomo_path):
    return tiny_data_config(tmp_path, tiny_locomo_path)


def _fit_config(tmp_path, tiny_model_dir, data_config, epochs=4):
    config = {
        "seed_everything": 0,
        "trainer": encoder_trainer_config(tmp_path, epochs),
        "model": {
            "backbone": str(tiny_model_dir),
            "max_length": 32,
            "lr": 1e-3,
            "warmup_ratio": 0.0,
            "learnable_temperature": True,
            "temperature": 0.1,
            "temperature_lr": 0.01,
            "query_prefix": "query: ",
        },
        "data": {
            "data_config": str(data_config),
            "batch_size": 4,
            "hard_negatives": 1,
            "miner": "encoder",
            "miner_model": str(tiny_model_dir),
            "mining_top_k": 3,
        },
    }
    path = tmp_path / "fit.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_fit_lowers_the_loss_logs_recall_and_exports_a_loadable_encoder(tmp_path, tiny_model_dir, data_config):
    from sentence_transformers import SentenceTransformer

    assert main(["encoder", "-c", str(_fit_config(tmp_path, tiny_model_dir, data_config))]) == 0
    run = tmp_path / "runs" / "encoder" / "version_0"
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    losses = defaultdict(list)
    for row in rows:
        if row.get("train/loss"):
            losses[int(row["epoch"])].append(float(row["train/loss"]))
    first, last = min(losses), max(losses)
    assert last == 3 and sum(losses[last]) / len(losses[last]) < sum(losses[first]) / len(losses[first])
    recalls = [float(row["val/recall@10"]) for row in rows if row.get("val/recall@10")]
    assert len(recalls) == 4 and all(0.0 <= r <= 1.0 for r in recalls)

    best = tmp_path / "best"
    info = json.loads((best / "training.json").read_text())
    assert info["best_score"] == pytest.approx(max(recalls)) and info["best_checkpoint"].endswith(".ckpt")
    assert info["torch_threads"] == torch.get_num_threads()  # what the steps ran with
    trained = MemoryEncoder.from_pretrained(best)
    assert trained.query_prefix == "query: " and trained.max_length == 32
    untrained = MemoryEncoder.from_pretrained(tiny_model_dir)
    texts = ["Alice: I adopted a cat.", "what pet did Alice get?"]
    assert not torch.allclose(trained.encode(texts), untrained.encode(texts))
    st = SentenceTransformer(str(best), device="cpu")
    torch.testing.assert_close(
        st.encode_query(texts, convert_to_tensor=True).cpu(), trained.encode(texts, kind="query"), atol=1e-5, rtol=1e-4
    )
    assert (run / "encoder" / "memnets_encoder.json").is_file()


def test_fit_with_frozen_embeddings_and_lowest_layer_trains_only_the_rest(tmp_path, tiny_model_dir, data_config):
    config = str(_fit_config(tmp_path, tiny_model_dir, data_config, epochs=2))
    assert main(["encoder", "-c", config, "--model.freeze_embeddings", "true", "--model.freeze_layers", "1"]) == 0
    before = MemoryEncoder.from_pretrained(tiny_model_dir).backbone.state_dict()
    after = MemoryEncoder.from_pretrained(tmp_path / "best").backbone.state_dict()
    assert before.keys() == after.keys()
    frozen = [k for k in before if k.startswith(("embeddings.", "encoder.layer.0.", "pooler."))]
    trained = [k for k in before if k.startswith("encoder.layer.1.")]
    assert len(frozen) + len(trained) == len(before) and frozen and trained
    for key in frozen:
        torch.testing.assert_close(after[key], before[key], rtol=0, atol=0, msg=key)
    changed = [key for key in trained if not torch.equal(after[key], before[key])]
    assert len(changed) == len(trained), sorted(set(trained) - set(changed))


def test_a_cpu_fit_in_bf16_autocast_validates_and_exports(tmp_path, tiny_model_dir, data_config):
    """encoder/large_cpu trains in ``bf16-mixed`` on the CPU: validation ranks inside that autocast (a bfloat16
    product once failed there, after a whole epoch) and the recall it logs is a number."""
    config = str(_fit_config(tmp_path, tiny_model_dir, data_config, epochs=1))
    assert main(["encoder", "-c", config, "--trainer.precision", "bf16-mixed"]) == 0
    rows = list(csv.DictReader((tmp_path / "runs" / "encoder" / "version_0" / "metrics.csv").open()))
    recalls = [float(row["val/recall@10"]) for row in rows if row.get("val/recall@10")]
    assert len(recalls) == 1 and 0.0 <= recalls[0] <= 1.0
    assert MemoryEncoder.from_pretrained(tmp_path / "best").encode(["Alice: I adopted a cat."]).dtype == torch.float32


def test_freezing_stops_gradients_where_asked_and_names_a_bad_layer_count(tiny_model_dir):
    encoder = MemoryEncoder.from_pretrained(tiny_model_dir)
    assert encoder.freeze_lower() == []
    frozen = encoder.freeze_lower(embeddings=True, layers=1)
    assert {name.split(".")[1] for name in frozen} == {"embeddings", "encoder"}
    assert all(".layer.0." in name for name in frozen if ".encoder." in name)
    encoder.train()
    vectors = encoder(**encoder.tokenize(["Alice: I adopted a cat.", "Bob: nice"]))
    vectors.sum().backward()
    for name, parameter in encoder.named_parameters():
        has_gradient = parameter.grad is not None
        assert has_gradient == (name not in frozen and not name.startswith("backbone.pooler.")), name
    for bad, error in ((3, ArgumentValueError), (-1, ArgumentValueError), (1.5, ArgumentTypeError)):
        with pytest.raises(error, match="layers") as caught:
            MemoryEncoder.from_pretrained(tiny_model_dir).freeze_lower(layers=bad)
        assert field_of(caught.value) == "layers"


def test_cli_builds_without_fitting_and_rejects_unknown_components(tmp_path, tiny_model_dir, data_config, capsys):
    config = str(_fit_config(tmp_path, tiny_model_dir, data_config))
    cli = build_cli("encoder", ["-c", config, "--torch_threads.per_process", "1"], run=False)
    assert cli.model.encoder.dim == 32 and cli.datamodule.hparams.batch_size == 4
    # every fit sets its threads, also with a config whose callbacks do not name TorchThreads
    assert [c.per_process for c in cli.trainer.callbacks if isinstance(c, TorchThreads)] == [1]
    assert main(["nonsense"]) == 2 and "unknown component" in capsys.readouterr().err
    assert set(COMPONENTS) >= {"encoder"}


def test_batches_are_duplicate_free_and_grouped_by_conversation():
    # 3 conversations; query "q0" of conv a has two positives; positive 7 is shared by two queries
    queries = ["a:q0", "a:q0", "a:q1", "a:q2", "a:q3", "b:q0", "b:q1", "b:q2", "c:q0", "c:q1", "a:q4"]
    positives = [1, 2, 7, 3, 4, 5, 6, 8, 9, 10, 7]
    groups = [q[0] for q in queries]
    sampler = NoDuplicatesBatchSampler(queries, positives, groups, batch_size=2, seed=3, num_replicas=1, rank=0)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(queries)))  # every pair once (no drop_last)
    for batch in batches:
        assert len({queries[i] for i in batch}) == len(batch) and len({positives[i] for i in batch}) == len(batch)
    grouped = [b for b in batches if len(b) == 2]
    assert sum(len({groups[i] for i in b}) == 1 for b in grouped) >= len(grouped) - 1
    sampler.set_epoch(1)
    assert list(sampler) != batches and len(sampler) == len(list(sampler))


def test_ddp_ranks_get_disjoint_slices_of_one_global_batch():
    queries = [f"q{i}" for i in range(24)]
    positives = list(range(24))
    groups = ["a"] * 12 + ["b"] * 12  # two global batches of 6 per conversation
    ranks = [
        list(NoDuplicatesBatchSampler(queries, positives, groups, 3, seed=0, num_replicas=2, rank=r)) for r in (0, 1)
    ]
    assert len(ranks[0]) == len(ranks[1]) == 4
    for left, right in zip(*ranks):
        assert len(left) == len(right) == 3 and not set(left) & set(right)
        assert len({groups[i] for i in left + right}) == 1


def test_collated_keys_mark_every_positive_of_a_query(tiny_model_dir, data_config):
    data = RetrievalDataModule(
        data_config=str(data_config), batch_size=4, hard_negatives=2, miner="bm25", mining_top_k=3
    )
    data.setup("fit")
    # the question with two evidence turns yields two pairs; both carry both keys
    rows = [row for row in data.train_pairs if row["qa_index"] == 2]
    assert len(rows) == 2
    batch = data.collator(rows)
    assert batch["query_positive_keys"].shape == (2, 2)
    assert set(batch["query_positive_keys"][0].tolist()) == set(batch["positive_keys"].tolist())
    assert batch["hard_negative_keys"].shape == (2, 2) and len(batch["hard_negatives"]) == 4
    assert not set(batch["hard_negative_keys"].flatten().tolist()) & set(batch["positive_keys"].tolist())
    with pytest.raises(ValueError, match="batch_size"):
        NoDuplicatesBatchSampler(["a"], [1], ["g"], batch_size=1)


def test_extra_training_files_add_their_conversations_and_refuse_a_repeated_id(tmp_path, data_config):
    extra = tmp_path / "everyday.jsonl"
    conversation = {
        "id": "everyday-1",
        "sessions": [{"time": "2024-01-02T09:00:00", "turns": [
            {"id": "t1", "speaker": "user", "text": "I live in Leeds."},
            {"id": "t2", "speaker": "user", "text": "My cousin moved to Glasgow."}]}],
        "questions": [{"question": "Where does the user live?", "evidence": ["t1"]}],
    }  # fmt: skip
    extra.write_text(json.dumps(conversation) + "\n")
    plain = RetrievalDataModule(data_config=str(data_config), hard_negatives=0)
    plain.setup("fit")
    data = RetrievalDataModule(data_config=str(data_config), hard_negatives=0, extra_train=[str(extra)])
    data.setup("fit")
    added = [row for row in data.train_pairs if row["conv_id"] == "everyday-1"]
    assert [(row["query"], row["positive"]) for row in added] == [
        ("Where does the user live?", "user: I live in Leeds.")
    ]
    assert len(data.train_pairs) == len(plain.train_pairs) + 1
    assert [c.sample_id for c in data.validation_conversations] == ["tiny-2"]  # validation stays the config's
    # the fixture's JSONL repeats the tiny LoCoMo file's ids: refused, naming the file and the id
    repeated = str(FIXTURES / "tiny_conversations.jsonl")
    again = RetrievalDataModule(data_config=str(data_config), hard_negatives=0, extra_train=[repeated])
    with pytest.raises(ValueError, match="tiny_conversations.jsonl: conversation id 'tiny-1'"):
        again.setup("fit")
    # nor may a held-out conversation train: the validation conversation alone, under its own id
    validation = tmp_path / "validation.jsonl"
    validation.write_text(json.dumps(conversation | {"id": "tiny-2"}) + "\n")
    leak = RetrievalDataModule(data_config=str(data_config), hard_negatives=0, extra_train=[str(validation)])
    with pytest.raises(ValueError, match="'tiny-2' is already a training, validation or test conversation"):
        leak.setup("fit")


def test_distillation_is_zero_only_where_the_student_ranks_as_the_teacher():
    from memnets.training.lit.distill import distillation_loss

    teacher = torch.tensor([[4.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    assert distillation_loss(teacher, teacher).item() == pytest.approx(0.0, abs=1e-6)
    assert distillation_loss(teacher + 7.0, teacher).item() == pytest.approx(0.0, abs=1e-6)  # a shift is no change
    assert distillation_loss(teacher.flip(-1), teacher).item() > 1.0


def test_a_fit_with_a_teacher_logs_the_distillation_and_keeps_the_teacher_out_of_the_checkpoint(
    tmp_path, tiny_model_dir, data_config
):
    config = str(_fit_config(tmp_path, tiny_model_dir, data_config, epochs=1))
    assert (
        main(["encoder", "-c", config, "--model.teacher", str(tiny_model_dir), "--model.teacher_temperature", "0.1"])
        == 0
    )
    rows = list(csv.DictReader((tmp_path / "runs" / "encoder" / "version_0" / "metrics.csv").open()))
    distilled = [float(row["train/distill"]) for row in rows if row.get("train/distill")]
    assert distilled and all(d >= 0.0 for d in distilled)
    checkpoint = json.loads((tmp_path / "best" / "training.json").read_text())["best_checkpoint"]
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    assert state and not [k for k in state if "teacher" in k]
    with pytest.raises(ValueError, match="teacher_temperature must be positive"):
        from memnets.training.lit.distill import Teacher

        Teacher(str(tiny_model_dir), temperature=0.0)
