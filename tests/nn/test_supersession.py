"""The change-of-fact judge (memnets.nn.change_judge): trained by `memnets fit supersession`, saved and loaded
without unpickling, bounded in the length of what it reads, carried by a pack; and the supersession step of
the write path that asks it: candidates of one speaker and one scope, the texts as said (no speaker prefix),
an assistant's reply ending nothing, a backdated transcript stored with the step on (both stores)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

import memnets
from memnets.nn.backbones import DEFAULT_BACKBONE
from memnets.nn.change_judge import MAX_CHARS, MAX_TOKENS, ChangeJudge, ChangeJudgeNet, NotAJudge, cut

WRITTEN = Path(__file__).resolve().parents[2] / "data" / "supersession" / "written"
EXACT = None  # the consistency check off: every text is a memory of its own (the judge decides here)
JAN, JUN = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)


class RecordingJudge:
    """A real SupersessionJudge for tests: ends every older statement, and records the pairs it read."""

    threshold = 0.5

    def __init__(self):
        self.read: list[tuple[str, str]] = []

    def score(self, older: str, newer: str) -> float:
        self.read.append((older, newer))
        return 1.0


def few_pairs(tmp_path: Path, name: str, count: int) -> Path:
    """The first ``count`` rows of a written pairs file, as a file of their own."""
    rows = (WRITTEN / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:count]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """`memnets fit supersession` (its LightningCLI) on a few written pairs and as many mismatched ones: one layer
    of the bundled backbone."""
    from memnets.training.lit.cli import build_cli

    out = tmp_path_factory.mktemp("fit")
    train, validation = few_pairs(out, "train_a", 48), few_pairs(out, "validation", 32)
    L.seed_everything(0, verbose=False)
    cli = build_cli(
        "supersession",
        [
            "--data.train", json.dumps([str(train)]), "--data.validation", json.dumps([str(validation)]),
            "--data.mismatched", "48", "--model.layers", "1", "--model.output_dir", str(out / "judge"),
            "--trainer.max_epochs", "2", "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
            "--trainer.enable_progress_bar", "false", "--trainer.default_root_dir", str(out),
        ],
    )  # fmt: skip
    return cli.model.judge, out / "judge"


def test_fit_supersession_saves_a_judge_that_loads_back_with_the_same_scores(fitted):
    judge, folder = fitted
    config = json.loads((folder / "config.json").read_text())
    assert config["format"] == "memnets-change-judge" and config["layers"] == 1
    assert 0.0 <= config["threshold"] <= 1.0 and config["validation"]["pairs"] == 32
    loaded = ChangeJudge.load(folder)
    pairs = [("I live in Leeds.", "I moved to Lyon in June."), ("I have a dog.", "My sister got a cat.")]
    assert loaded.scores(pairs) == pytest.approx(judge.scores(pairs), abs=2e-3)  # saved in half precision
    assert loaded.threshold == judge.threshold
    # the score from which a newer statement likely replaces the older one: chosen on validation with it
    assert 0.0 <= config["order_threshold"] <= config["threshold"]
    assert loaded.order_threshold == judge.order_threshold == config["order_threshold"]
    assert config["validation"]["other_subjects"] == 6 * 32 and "order_threshold" not in loaded.info


def test_a_fit_can_start_from_a_saved_judge_and_takes_its_depth(fitted, tmp_path):
    """``start``: the fine-tuning begins at a saved judge's layers and classifier (the pack's recipe starts at the
    shipped judge), whatever ``layers`` says; a folder that holds no judge is refused, naming it."""
    from memnets.training.lit.supersession import ChangeJudgeModule

    _, folder = fitted
    for start, expected in ((str(folder), ChangeJudge.load(folder)), ("shipped", ChangeJudge.load())):
        module = ChangeJudgeModule(layers=6, start=start, output_dir=None)
        assert module.net.layers == expected.net.layers and module.net.training
        started, saved = module.net.trained_state(), expected.net.trained_state()
        assert started.keys() == saved.keys() and all(torch.equal(started[k], saved[k]) for k in saved)
        # what it starts at is recorded with what that judge learned, for the saved judge's config.json
        learned = {key: expected.info[key] for key in ("trained_on", "started_from") if key in expected.info}
        assert module.started_from == {"judge": start, **learned} and learned["trained_on"]
    with pytest.raises((ValueError, FileNotFoundError), match="nowhere"):
        ChangeJudgeModule(start=str(tmp_path / "nowhere"), output_dir=None)


def test_a_judge_stored_in_int8_is_half_the_file_and_judges_as_the_float_one(fitted, tmp_path):
    """``save(weights="int8")``: each layer matrix as int8 per output row with its scales (the rest float16), half
    the bytes of float16; written as format v2 (a memnets that reads v1 only refuses it instead of misreading it);
    torch and ONNX Runtime read it alike; the judge loaded from it saves int8 again unless told."""
    from memnets.nn.serving_judge import ServingJudge

    judge, _ = fitted
    half, int8 = judge.save(tmp_path / "half"), judge.save(tmp_path / "int8", weights="int8")
    size = {name: (tmp_path / name / "model.safetensors").stat().st_size for name in ("half", "int8")}
    assert size["int8"] < 0.55 * size["half"]
    config = json.loads((int8 / "config.json").read_text())
    assert (config["format_version"], config["weights"]) == (2, "int8")
    assert json.loads((half / "config.json").read_text())["format_version"] == 1
    pairs = [("I live in Leeds.", "I moved to Lyon in June."), ("I have a dog.", "My sister got a cat.")]
    stored = ChangeJudge.load(int8)
    assert stored.weights == "int8" and stored.threshold == judge.threshold and "weights" not in stored.info
    assert stored.scores(pairs) == pytest.approx(ChangeJudge.load(half).scores(pairs), abs=0.02)
    np.testing.assert_allclose(ServingJudge.load(int8, backend="onnx").scores(pairs), stored.scores(pairs), atol=1e-5)
    stored.save(tmp_path / "again")
    assert (tmp_path / "again" / "model.safetensors").stat().st_size == size["int8"]
    # a float32 file saves float32 again unless told, and so does one written before the config said how it stores
    exact = ChangeJudge.load(judge.save(tmp_path / "float32", weights="float32"))
    config = json.loads((tmp_path / "float32" / "config.json").read_text())
    (tmp_path / "float32" / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "weights"}))
    assert exact.weights == ChangeJudge.load(tmp_path / "float32").weights == "float32"
    # int8 graphs on ONNX Runtime: u8 weights (any CPU) within int8's error of the torch judge
    np.testing.assert_allclose(ServingJudge.load(int8, backend="int8").scores(pairs), stored.scores(pairs), atol=0.05)


def test_a_judge_file_this_memnets_cannot_read_is_refused_naming_what_is_wrong(fitted, tmp_path):
    from safetensors.numpy import load_file, save_file

    judge, _ = fitted
    folder = judge.save(tmp_path / "judge", weights="int8")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"format_version": 3}))
    with pytest.raises(ValueError, match="format v3, this memnets reads v1 and v2"):
        ChangeJudge.load(folder)
    (folder / "config.json").write_text(json.dumps(config))
    arrays = load_file(str(folder / "model.safetensors"))
    name = next(k for k in arrays if k.endswith(".int8_scale"))
    del arrays[name]
    save_file(arrays, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="an int8 matrix without its scales"):
        ChangeJudge.load(folder)
    arrays[name] = np.ones(3, dtype=np.float32)  # scales, but not one per row
    save_file(arrays, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="an int8 matrix without its scales, one per row"):
        ChangeJudge.load(folder)
    (folder / "config.json").write_text(json.dumps(config | {"weights": "float16"}))  # an int8 file (v2) said float16
    with pytest.raises(ValueError, match="'weights' must be one of float16, float32, int8 and written as its format"):
        ChangeJudge.load(folder)
    with pytest.raises(ValueError, match="weights must be one of float16, float32, int8, got 'int4'"):
        judge.save(tmp_path / "int4", weights="int4")
    assert not (tmp_path / "int4").exists()


def test_a_fit_may_freeze_the_lower_layers_and_sets_its_thresholds_on_the_weights_it_saves(tmp_path):
    """``frozen_layers``: the lowest layers stay as they start (no backward through them: the pack's recipe adapts a
    deep judge's top layers); ``weights="int8"``: the file is int8, and the threshold and the recall recorded are
    those of the judge as loaded from it."""
    from memnets.training.lit.cli import build_cli
    from memnets.training.lit.supersession import ChangeJudgeModule, read_pairs

    train, validation = few_pairs(tmp_path, "train_a", 32), few_pairs(tmp_path, "validation", 32)
    L.seed_everything(0, verbose=False)
    build_cli(
        "supersession",
        [
            "--data.train", json.dumps([str(train)]), "--data.validation", json.dumps([str(validation)]),
            "--data.mismatched", "16", "--model.layers", "2", "--model.frozen_layers", "1", "--model.weights", "int8",
            "--model.output_dir", str(tmp_path / "judge"), "--trainer.max_epochs", "1", "--trainer.logger", "false",
            "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(tmp_path),
        ],
    )  # fmt: skip
    saved, start = ChangeJudge.load(tmp_path / "judge"), ChangeJudgeNet(2)
    assert saved.weights == "int8"
    start.round_to("int8")  # the backbone's layers as an int8 file keeps them
    layers = [[net.bert.encoder.layer[i].state_dict() for i in (0, 1)] for net in (saved.net, start)]
    (frozen, learned), (frozen_start, learned_start) = layers
    assert all(torch.equal(frozen[k], frozen_start[k]) for k in frozen)
    assert not all(torch.equal(learned[k], learned_start[k]) for k in learned)
    config = json.loads((tmp_path / "judge" / "config.json").read_text())
    rows = read_pairs([str(validation)], "validation")
    scores = np.asarray(saved.scores([(r["older"], r["newer"]) for r in rows]))
    labels = np.asarray([r["label"] for r in rows])
    assert config["validation"]["recall"] == round(float((scores[labels == 1] >= saved.threshold).mean()), 4)
    for wrong in (2, -1, True):
        with pytest.raises(ValueError, match="frozen_layers must be"):
            ChangeJudgeModule(layers=2, frozen_layers=wrong, output_dir=None)


def test_mismatched_pairs_pair_other_subjects_and_draw_a_share_of_their_newer_from_the_changes():
    """The no-change pairs of two subjects: never one subject, and the share asked of them a change's newer
    statement (what a speaker's other facts meet in the write path), drawn the same way for one seed."""
    from memnets.training.lit.supersession import mismatched_pairs, read_pairs

    rows = read_pairs([str(WRITTEN / "train_a.jsonl")], "train")
    pairs = mismatched_pairs(rows, 2000, seed=3, from_changes=0.5)
    assert len(pairs) == 2000 and all(p["label"] == 0 and p["kind"] == "mismatched" for p in pairs)
    subject = {row["older"]: row["domain"] for row in rows}
    newer_subjects = {}
    for row in rows:
        newer_subjects.setdefault(row["newer"], set()).add(row["domain"])
    assert all(subject[p["older"]] not in newer_subjects[p["newer"]] for p in pairs)
    change_newer = {row["newer"] for row in rows if row["label"] == 1}
    share = sum(p["newer"] in change_newer for p in pairs) / len(pairs)
    base = len([r for r in rows if r["label"] == 1]) / len(rows)
    assert 0.5 + base / 2 - 0.05 < share < 0.5 + base / 2 + 0.05  # half from the changes, half from all rows
    assert pairs == mismatched_pairs(rows, 2000, seed=3, from_changes=0.5)
    assert all(p["newer"] in change_newer for p in mismatched_pairs(rows, 200, seed=3, from_changes=1.0))
    alike = mismatched_pairs(rows, 2000, seed=3)  # the shipped judge's draw: newer statements from all rows alike
    assert abs(sum(p["newer"] in change_newer for p in alike) / len(alike) - base) < 0.05


def test_other_subjects_pair_each_newer_statement_with_six_facts_of_other_subjects():
    """What a judge's thresholds are also set on: each row's newer statement beside OTHER_FACTS older statements
    of rows of another subject, never its own, drawn the same way for one seed."""
    from memnets.training.lit.supersession import OTHER_FACTS, other_subjects, read_pairs

    rows = read_pairs([str(WRITTEN / "validation.jsonl")], "validation")
    pairs = other_subjects(rows, seed=1)
    assert len(pairs) == OTHER_FACTS * len(rows) == 6 * len(rows)
    subjects_of = {}
    for row in rows:
        subjects_of.setdefault(row["older"], set()).add(row["domain"])
    for n, row in enumerate(rows):
        chosen = pairs[OTHER_FACTS * n : OTHER_FACTS * (n + 1)]
        assert all(newer == row["newer"] and row["domain"] not in subjects_of[older] for older, newer in chosen)
    assert pairs == other_subjects(rows, seed=1) != other_subjects(rows, seed=2)


def test_a_folder_of_another_kind_or_backbone_is_refused_naming_it(fitted, tiny_model_dir, tmp_path):
    _, folder = fitted
    tiny = ChangeJudge(ChangeJudgeNet(1, str(tiny_model_dir)), 0.5).save(tmp_path / "tiny")
    other = tmp_path / "head"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"dim": 384, "hidden_dims": [128]}))
    (other / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    with pytest.raises(NotAJudge, match="not a change judge"):
        ChangeJudge.load(other)
    with pytest.raises(ValueError, match="hidden size 32"):  # made on the tiny backbone, loaded on MiniLM
        ChangeJudge.load(tiny, DEFAULT_BACKBONE)
    assert ChangeJudge.load(tiny).net.backbone == str(tiny_model_dir)  # by default on the backbone it names
    with pytest.raises(FileNotFoundError, match="no change judge"):
        ChangeJudge.load(tmp_path / "nothing")


def test_a_200000_character_text_is_judged_as_its_first_characters(tiny_model_dir):
    """Bounded by construction (linear, never a pattern that backtracks): the judge reads the first MAX_CHARS
    characters of each text, tokenised to at most MAX_TOKENS, whatever the text holds."""
    net = ChangeJudgeNet(1, str(tiny_model_dir))
    judge = ChangeJudge(net, 0.5)
    for hostile in ("a@" * 100_000, "4" * 200_000, "word " * 40_000):
        assert len(cut(hostile)) == MAX_CHARS
        assert net.tokenize([("I live in Leeds.", hostile)])["input_ids"].shape[1] <= MAX_TOKENS
        assert judge.score("I live in Leeds.", hostile) == pytest.approx(
            judge.score("I live in Leeds.", hostile[:MAX_CHARS])
        )
    with pytest.raises(TypeError, match="must be a str"):
        cut(None)


def test_a_lone_surrogate_is_refused_naming_its_position(tiny_model_dir):
    """The tokenizer refuses a lone surrogate with a TypeError that names nothing; every door refuses such a text
    first, and a judge called directly names it too."""
    judge = ChangeJudge(ChangeJudgeNet(1, str(tiny_model_dir)), 0.5)
    with pytest.raises(ValueError, match="lone surrogate at position 7"):
        judge.score("I live in Leeds.", "I moved\ud800 to Lyon")


def test_the_shipped_judge_reads_the_issue_s_pairs_right():
    """The judge that ships with memnets, on the pairs the review quoted (in none of its training files) and the
    changed fact of the doors' tests of the search order (tests/successor_helpers.py), whose fillers end nothing."""
    judge = ChangeJudge.load()
    leeds = "I live in a small house in Leeds."
    moved, trams, brother, run = judge.scores(
        [
            ("I live in Leeds", "I moved to Lyon"),
            (leeds, "I moved to Lyon in June, still getting used to the trams"),
            (leeds, "My brother moved to Glasgow in May."),
            ("I run every morning before work", "I left my job at the bank"),
        ]
    )
    assert moved >= judge.threshold > max(brother, run)
    from successor_helpers import FILLERS, STALE, SUCCESSOR

    fillers = judge.scores([(older, filler) for older in (STALE, SUCCESSOR) for filler in FILLERS])
    assert max(fillers) < judge.threshold, fillers
    # the change with a second clause is read as a likely replacement (0.988: ranked first, not ended; 0.79 with the
    # judge shipped until 2026-12-07, night), the unrelated job pair is not (0.92): docs/memory.md, "Taught by the large
    # judge, at six layers"
    assert judge.threshold > trams >= judge.order_threshold > max(brother, run)


@pytest.mark.parametrize("backend", ["int8", "int8_vnni", "onnx"])
def test_a_pair_s_served_score_is_its_own_whatever_pairs_are_judged_beside_it(backend):
    """The shipped judge on ONNX Runtime scores a pair alike alone and in any batch: dynamic int8 quantises a call's
    activations by their range over the batch, so a batch moved a pair's score by up to 0.054, and a decision at a
    threshold with it (the write path judges five candidates at once, a search as many pairs as it reads)."""
    from memnets.nn.serving_judge import PROBE_PAIRS, ServingJudge

    judge = ServingJudge.load(backend=backend)
    alone = [judge.score(*pair) for pair in PROBE_PAIRS]
    assert judge.scores(list(PROBE_PAIRS)) == pytest.approx(alone, abs=1e-6)
    assert judge.scores(list(reversed(PROBE_PAIRS[:5]))) == pytest.approx(alone[:5][::-1], abs=1e-6)


@pytest.mark.parametrize("write", ["plain", "named", "user"])
def test_the_speaker_is_a_field_the_judge_reads_the_texts_as_said(location, encoder, write):
    """ "Bob: ..." or "user: ..." in the stored text changes nothing the judge reads."""
    where, options = location
    judge = RecordingJudge()
    said = ("I live in a small house in Leeds.", "My brother moved to Glasgow in May.")
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        for text, when in zip(said, (JAN, JUN), strict=True):
            if write == "plain":
                memory.add(text, user="ann", t=when)
            else:
                message = {"role": "user", "content": text, "time": when.isoformat()}
                memory.add(messages=[message | ({"name": "Bob"} if write == "named" else {})], user="ann")
    assert judge.read == [said]


def test_a_prefix_beside_a_text_of_no_speaker_is_read_by_the_judge_in_the_text(location, encoder):
    """A plain text's "{speaker}: " prefix may be a label ("Update: I moved to Lyon"): beside a text of no speaker the
    pair is judged, the whole texts read (the judge tells a label from another person's news). Two prefixes that
    differ, or a message's speaker field, are two people: not judged. Before, "Update: " made the change another
    speaker's and nothing was judged."""
    where, options = location
    judge = RecordingJudge()
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        memory.add("I live in Leeds.", user="ann", t=JAN)
        memory.add("Update: I moved to Lyon in June.", user="ann", t=JUN)
        memory.add("Alice: I work at the bank.", user="bo", t=JAN)
        memory.add("Bob: I started at a startup.", user="bo", t=JUN)
        memory.add("I work at the bank.", user="cy", t=JAN)
        named = {"role": "user", "name": "Bob", "content": "I started at a startup.", "time": JUN.isoformat()}
        memory.add(messages=[named], user="cy")
    assert judge.read == [("I live in Leeds.", "Update: I moved to Lyon in June.")]


class HomeJudge:
    """A SupersessionJudge for tests: any statement of where the user lives ends an older one."""

    threshold = 0.5
    HOMES = ("I moved to Paris.", "I moved to Lyon.", "I live in Leeds.")

    def score(self, older: str, newer: str) -> float:
        return float(older in self.HOMES and newer in self.HOMES)


def test_a_transcript_imported_newest_first_ends_each_fact_where_the_next_began(location, encoder):
    """Paris (September), then Lyon (May), then Leeds (January), each its own add: Leeds ends where Lyon began, not
    where Paris did, and an as-of read of June answers Lyon alone. Before, Lyon (ended by Paris already) was no
    candidate for Leeds, which stayed valid until September."""
    where, options = location
    paris, lyon, leeds = HomeJudge.HOMES
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=HomeJudge(), **options) as memory:
        for text, month in ((paris, 9), (lyon, 5), (leeds, 1)):
            memory.add(text, user="ann", t=datetime(2024, month, 1, tzinfo=UTC))
        current = {m.content: m for m in memory.list_memories(user="ann", limit=None)}
        assert current[leeds].invalidated_by == current[lyon].id and current[leeds].valid_to == JUN.replace(month=5)
        assert current[lyon].invalidated_by == current[paris].id and current[paris].valid_to is None
        june = memory.search(leeds, user="ann", k=3, as_of=datetime(2024, 6, 15, tzinfo=UTC))
        assert [h.memory.content for h in june] == [lyon]


class ListeningJudge(RecordingJudge):
    """Records the pairs it read and ends nothing."""

    def score(self, older: str, newer: str) -> float:
        super().score(older, newer)
        return 0.0


@pytest.mark.parametrize("write", ["plain", "messages"])
def test_the_judge_reads_the_speaker_s_nearest_memories_however_far_apart(tmp_path, write):
    """No cosine floor: a change that shares no subject word with the fact it ends is judged through plain `add`
    as through messages (where the stored "user: " prefix used to lift every pair over the floor)."""
    from memnets.nn.encoder import MemoryEncoder

    encoder = MemoryEncoder.from_pretrained(DEFAULT_BACKBONE)  # the bundled MiniLM: real cosines
    pets, hockey = "No pets, the landlord won't allow it.", "I play ice hockey in a veterans league on Tuesdays."
    cat = "Ziggy knocked my tea onto the laptop this morning. Cats are agents of chaos."
    vectors = encoder.encode([pets, cat]).numpy()
    assert float(vectors[0] @ vectors[1]) < 0.3  # below the floor the candidates had until 2026-12-06
    judge = ListeningJudge()
    with memnets.open(tmp_path / "m", encoder=encoder, duplicate_threshold=EXACT, supersession=judge) as memory:
        for text, when in zip((pets, hockey, cat), (JAN, JAN, JUN), strict=True):
            if write == "plain":
                memory.add(text, user="ann", t=when)
            else:
                memory.add(messages=[{"role": "user", "content": text, "time": when.isoformat()}], user="ann")
    assert sorted(judge.read) == sorted([(pets, hockey), (pets, cat), (hockey, cat)])


def test_an_assistant_reply_ends_no_fact_and_no_other_speaker_is_a_candidate(location, encoder):
    where, options = location
    judge = RecordingJudge()
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        memory.add(messages=[{"role": "user", "content": "I live in Leeds.", "time": JAN.isoformat()}], user="ann")
        memory.add(
            messages=[
                {"role": "assistant", "content": "So you live in Lyon now?", "time": JUN.isoformat()},
                {"role": "user", "name": "Bob", "content": "I live in Lyon.", "time": JUN.isoformat()},
            ],
            user="ann",
        )
        assert all(m.valid_to is None for m in memory.list_memories(user="ann", limit=None))
    assert judge.read == []


def test_supersession_never_reaches_across_a_session_or_an_agent(location, encoder):
    """One scope rule for every step that reads or changes another memory: a write in session s1 neither ends a
    memory of s2 nor is ended by one (which would reveal its id and start); another agent's memories likewise."""
    where, options = location
    judge = RecordingJudge()
    with memnets.open(where, encoder=encoder, duplicate_threshold=EXACT, supersession=judge, **options) as memory:
        other = memory.add("I live in Leeds.", user="ann", session="s2", t=JAN)
        agent = memory.add("I live in Leeds.", user="ann", agent="planner", session="s1", t=JAN)
        later = memory.add("I live in York now.", user="ann", session="s2", t=JUN)
        backdated = memory.add("I live in Hull.", user="ann", session="s1", t=datetime(2023, 6, 1, tzinfo=UTC))
        memory.add("I moved to Lyon.", user="ann", session="s1", t=JUN)
        current = {m.id: m for m in memory.list_memories(user="ann", limit=None)}
    assert current[other.id].invalidated_by == later.id  # within s2 it ends (the step is on)
    assert current[agent.id].valid_to is None  # the planner's s1 memory: another agent
    assert current[backdated.id].invalidated_by not in (later.id, other.id)  # not closed by s2's memory
    assert all(older.startswith("I live in Hull") or "Leeds" not in older for older, _ in judge.read[1:])


@pytest.mark.parametrize("write", ["plain", "messages"])
def test_a_backdated_transcript_is_stored_with_supersession_on(location, encoder, write):
    """An old statement read late becomes the fact's older version (X~1); that row is history and is not judged
    again (before: the step ended it, the store refused "marked superseded_by" and nothing was stored)."""
    where, options = location
    with memnets.open(where, encoder=encoder, supersession=RecordingJudge(), **options) as memory:

        def said(text: str, when: datetime):
            if write == "plain":
                return memory.add(text, user="ann", t=when)
            message = {"role": "user", "content": text, "time": when.isoformat()}
            return memory.add(messages=[message], user="ann")[0].memory

        porto = said("Ann lives in Porto", JUN)
        lisbon = said("Ann lives in Lisbon", JAN)
        assert lisbon.superseded_by == porto.id and lisbon.valid_to == JUN
        history = memory.history(porto.id, user="ann")
        assert [m.content.endswith(city) for m, city in zip(history, ("Lisbon", "Porto"), strict=True)] == [True, True]
        assert memory.get(porto.id, user="ann").valid_to is None


def test_open_with_auto_supersession_uses_the_shipped_judge_and_none_leaves_it_off(tiny_model_dir, tmp_path):
    from memnets.nn.serving_judge import ServingJudge

    for setting, expected in (("auto", ServingJudge), (None, type(None))):
        with memnets.open(tmp_path / str(setting), encoder=tiny_model_dir, supersession=setting) as memory:
            judge = memory.supersession
            assert isinstance(judge.judge if judge is not None else None, expected)
    with pytest.raises(ValueError, match="auto"):
        memnets.open(tmp_path / "bad", encoder=tiny_model_dir, supersession="rules")


def test_a_pack_carries_its_judge_and_auto_takes_it(fitted, tmp_path):
    """`memnets export --supersession` puts the judge in the pack; ``supersession="auto"`` with that pack is it,
    served on ONNX Runtime as the shipped judge is (its scores those of the saved judge on torch: within 1e-5 on the float32
    graph, within int8's error where ``"auto"`` chose the int8 one)."""
    from memnets.nn.encoder import MemoryEncoder
    from memnets.nn.serving_judge import ServingJudge
    from memnets.pack import export_pack, load_pack

    judge, folder = fitted
    encoder = MemoryEncoder.from_pretrained()
    pack = load_pack(export_pack(tmp_path / "pack", encoder, supersession=folder))
    assert isinstance(pack.supersession, ServingJudge) and pack.supersession.threshold == judge.threshold
    pairs = [("I live in Leeds.", "I moved to Lyon in June."), ("I have a dog.", "My sister got a cat.")]
    saved = ChangeJudge.load(folder)  # the judge's weights as saved (float16)
    exact = pack.supersession.backend == "onnx"  # "auto": the float32 graph, or int8 where the CPU has VNNI
    np.testing.assert_allclose(pack.supersession.scores(pairs), saved.scores(pairs), atol=1e-5 if exact else 0.05)
    with memnets.open(tmp_path / "memory", pack=pack, supersession="auto") as memory:
        assert memory.supersession.judge is pack.supersession
