"""Packaged configs: names and files resolve, bases merge, every shipped config loads."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import yaml

from memnets.training.commands.run import load_steps
from memnets.training.configs import ConfigNotFoundError, config_argument, load_config, packaged_configs, resolve_config
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.location import find_data

PACKAGED = Path(__file__).resolve().parents[2] / "configs"  # the checkout's configs/, what config_root finds here


def test_a_packaged_name_resolves_in_every_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing on disk here: only the packaged config can match
    expected = (PACKAGED / "pipeline" / "cpu.yaml").resolve()
    for name in ("pipeline/cpu", "pipeline/cpu.yaml", "configs/pipeline/cpu.yaml"):
        assert resolve_config(name).resolve() == expected


def test_an_existing_file_wins_over_the_packaged_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edited = tmp_path / "configs" / "pipeline" / "cpu.yaml"
    edited.parent.mkdir(parents=True)
    edited.write_text("steps: {only: [data, prepare]}\n")
    assert resolve_config("configs/pipeline/cpu.yaml") == Path("configs/pipeline/cpu.yaml")
    assert load_steps("configs/pipeline/cpu.yaml") == [("only", ["data", "prepare"])]


def test_an_unknown_config_is_named_with_the_packaged_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigNotFoundError, match=r"'encoder/tpu'.*encoder/cpu"):
        resolve_config("encoder/tpu")
    with pytest.raises(FileNotFoundError):  # an absolute path is never looked up in the package
        resolve_config(tmp_path / "pipeline" / "cpu.yaml")


def test_a_base_merges_mappings_and_replaces_other_values(tmp_path):
    (tmp_path / "base.yaml").write_text(
        yaml.safe_dump({"trainer": {"max_epochs": 8, "devices": 1, "callbacks": ["a", "b"]}, "model": {"lr": 0.1}})
    )
    (tmp_path / "child.yaml").write_text(
        yaml.safe_dump(
            {"base": "base.yaml", "trainer": {"max_epochs": 2, "callbacks": ["c"]}, "data": {"batch_size": 4}}
        )
    )
    assert load_config(tmp_path / "child.yaml") == {
        "trainer": {"max_epochs": 2, "devices": 1, "callbacks": ["c"]},
        "model": {"lr": 0.1},
        "data": {"batch_size": 4},
    }
    # no base: the file itself goes to jsonargparse; with a base, the merged YAML
    assert config_argument(tmp_path / "base.yaml") == str(tmp_path / "base.yaml")
    assert yaml.safe_load(config_argument(tmp_path / "child.yaml")) == load_config(tmp_path / "child.yaml")


def test_a_base_can_be_a_packaged_name_and_loops_are_refused(tmp_path):
    (tmp_path / "mine.yaml").write_text("base: encoder/cpu\ntrainer: {max_epochs: 5}\n")
    merged = load_config(tmp_path / "mine.yaml")
    assert merged["trainer"]["max_epochs"] == 5 and merged["trainer"]["accelerator"] == "cpu"
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match="loops"):
        load_config(tmp_path / "a.yaml")
    (tmp_path / "bad.yaml").write_text("base: 3\n")
    with pytest.raises(ValueError, match="base must be"):
        load_config(tmp_path / "bad.yaml")


def test_encoder_configs_share_one_base():
    cpu, gpu, ddp = (load_config(f"encoder/{name}") for name in ("cpu", "gpu", "ddp"))
    base = load_config("encoder/base")
    for config in (cpu, gpu, ddp):
        assert config["trainer"]["callbacks"] == base["trainer"]["callbacks"]
        assert config["model"]["temperature"] == base["model"]["temperature"]
    assert (cpu["trainer"]["accelerator"], cpu["trainer"]["max_epochs"], cpu["model"]["max_length"]) == ("cpu", 2, 64)
    assert (gpu["trainer"]["accelerator"], gpu["trainer"]["precision"], gpu["data"]["batch_size"]) == (
        "gpu",
        "bf16-mixed",
        64,
    )
    assert (ddp["trainer"]["strategy"], ddp["trainer"]["precision"], ddp["data"]["batch_size"]) == (
        "ddp",
        "bf16-mixed",
        32,
    )


@pytest.mark.parametrize("name", packaged_configs())
def test_every_packaged_config_loads(name):
    config = load_config(name)
    if name.startswith("pipeline/"):
        steps = load_steps(name)
        assert [step for step, _ in steps][0] == "data"
    elif name.startswith("data/"):
        data = load_data_config(name)
        assert data.path == find_data() and data.path.is_file()  # path: null = the data that find_data finds
        assert not data.cache_dir.is_absolute()  # caches land under the working folder
    else:
        assert {"trainer", "model", "data"} <= set(config)


def test_the_large_configs_train_from_the_large_backbone_and_write_under_checkpoints_large():
    from memnets.nn.encoder import LARGE_BACKBONE
    from memnets.training.retrieval.rankers import parse_spec

    encoder, gpu = load_config("encoder/large"), load_config("encoder/gpu")
    assert encoder["model"]["backbone"] == encoder["data"]["miner_model"] == LARGE_BACKBONE
    assert encoder["trainer"]["precision"] == gpu["trainer"]["precision"] == "bf16-mixed"
    assert encoder["data"]["batch_size"] == gpu["data"]["batch_size"]
    # base.yaml's callbacks, in order, but the export under checkpoints/large/
    classes = [c["class_path"] for c in load_config("encoder/base")["trainer"]["callbacks"]]
    assert [c["class_path"] for c in encoder["trainer"]["callbacks"]] == classes
    assert encoder["trainer"]["callbacks"][-1]["init_args"] == {"export_dir": "checkpoints/large/encoder/best"}
    assert encoder["trainer"]["logger"]["init_args"]["save_dir"] == "checkpoints/large"

    steps = dict(load_steps("pipeline/large"))
    assert list(steps) == [name for name, _ in load_steps("pipeline/gpu")]
    assert steps["encoder"] == ["fit", "encoder", "-c", "encoder/large"]
    paths = [arg.rpartition(":")[2] for argv in steps.values() for arg in argv if "checkpoints" in arg]
    assert paths and all(path.startswith("checkpoints/large/") for path in paths)
    specs = list(itertools.takewhile(lambda arg: not arg.startswith("-"), steps["evaluate-retrieval"][2:]))
    untrained = {name: path for name, _, path in map(parse_spec, [s for s in specs if "checkpoints" not in s])}
    assert untrained == {"bm25": None, "minilm": None, "backbone+heuristic": LARGE_BACKBONE, "backbone": LARGE_BACKBONE}


def test_the_large_cpu_configs_fine_tune_all_of_the_large_backbone_in_bf16_under_checkpoints_large_cpu():
    from memnets.nn.encoder import LARGE_BACKBONE

    encoder, cpu = load_config("encoder/large_cpu"), load_config("encoder/cpu")
    assert encoder["model"]["backbone"] == LARGE_BACKBONE and "top_layers" not in encoder["model"]
    assert (encoder["trainer"]["accelerator"], encoder["trainer"]["precision"]) == ("cpu", "bf16-mixed")
    assert encoder["data"] == cpu["data"]  # the same pairs and hard negatives as the MiniLM it is set beside
    assert encoder["trainer"]["callbacks"][-1]["init_args"] == {"export_dir": "checkpoints/large_cpu/encoder/best"}
    steps = dict(load_steps("pipeline/large_cpu"))
    assert list(steps) == [name for name, _ in load_steps("pipeline/cpu")]
    assert steps["encoder"] == ["fit", "encoder", "-c", "encoder/large_cpu"]
    paths = [arg.rpartition(":")[2] for argv in steps.values() for arg in argv if "checkpoints" in arg]
    assert paths and all(path.startswith("checkpoints/large_cpu/") for path in paths)
    distill = load_config("encoder/distill_cpu")
    assert distill["model"]["teacher"] == "checkpoints/large_cpu/encoder/best" and "backbone" not in distill["model"]
    assert distill["trainer"]["callbacks"][-1]["init_args"] == {"export_dir": "checkpoints/distill/encoder/best"}


def test_the_everyday_encoder_is_the_main_jobs_recipe_with_the_written_conversations_beside_locomo():
    everyday, cpu = load_config("encoder/everyday_cpu"), load_config("encoder/cpu")
    assert everyday["model"] == cpu["model"] and everyday["trainer"]["precision"] == cpu["trainer"]["precision"]
    assert {k: v for k, v in everyday["data"].items() if k != "extra_train"} == cpu["data"]
    (extra,) = everyday["data"]["extra_train"]
    assert len(load_conversations(Path(__file__).resolve().parents[2] / extra)) > 100
    assert everyday["trainer"]["callbacks"][-1]["init_args"] == {"export_dir": "checkpoints/everyday/encoder/best"}


def test_the_smoke_data_config_is_one_conversation_per_split():
    splits = load_data_config("data/smoke").splits
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (1, 1, 1)


def test_the_smoke_encoder_config_builds_a_tiny_random_encoder(tmp_path, monkeypatch):
    from memnets.training.lit.cli import build_cli

    monkeypatch.chdir(tmp_path)
    cli = build_cli("encoder", ["-c", "encoder/smoke"], run=False)
    encoder = cli.model.encoder
    assert encoder.backbone.config.hidden_size == 32 and encoder.backbone.config.num_hidden_layers == 2
    assert cli.trainer.max_epochs == 1 and cli.datamodule.hparams.miner == "bm25"
    vectors = encoder.encode(["Caroline: I went to a support group.", "Who went?"], kind="memory")
    assert vectors.shape == (2, 32)
    assert vectors.norm(dim=1).sub(1).abs().max() < 1e-5


def test_memnets_fit_names_an_unknown_config(capsys):
    from memnets.training.commands.fit import main

    assert main(["encoder", "-c", "encoder/tpu"]) == 2
    assert "'encoder/tpu' is neither a file nor a packaged config" in capsys.readouterr().err


def test_every_config_reader_goes_through_the_one_loader():
    """Only memnets.training.configs parses YAML: a reader calling yaml.*load itself would miss the `base:` chain
    (as a benchmark once did, timing another setup than `memnets fit`)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    loader = root / "memnets" / "training" / "configs.py"
    offenders = []
    for top in ("memnets", "bench", "train"):
        for path in sorted((root / top).rglob("*.py")):
            if path == loader:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all"}
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "yaml"
                ):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not offenders, f"read configs with memnets.training.configs.load_config, not yaml directly: {offenders}"


@pytest.mark.parametrize(
    "name",
    [
        "supersession/six_layers_base",
        "supersession/six_layers",
        "supersession/taught",
        "supersession/written_base",
        "supersession/shipped",
        "supersession/large",
    ],
)
def test_the_judge_that_ships_learns_no_locomo_text(name):
    """LoCoMo is CC BY-NC: both fits of the judge that ships (and of the judges before it, and the large one) read the
    project's own pairs only, and the teacher's scores it learns are of the project's written training pairs."""
    data = load_config(name)["data"]
    assert data["replayed"] == 0
    assert not [path for path in data["train"] + data["validation"] + data.get("scored", []) if "locomo" in path]
    for path in data.get("scored", []):  # the teacher's pairs: statements of the written training rows only
        rows = [json.loads(line) for line in (PACKAGED.parent / path).read_text().splitlines()]
        assert {row[side][0] for row in rows for side in ("older_from", "newer_from")} <= set("ABEFGHIKLMNOP")


@pytest.mark.parametrize(
    "first_fit, second_fit",
    [("six_layers_base", "taught"), ("six_layers_base", "six_layers"), ("written_base", "shipped")],
)
def test_the_shipped_judge_is_fitted_from_the_first_fits_output(first_fit, second_fit):
    """Two fits make the judge that ships (six_layers_base, then taught; the judges before it six_layers_base, then
    six_layers, and written_base, then shipped): the second starts where the first saved, every layer learning in both."""
    first, second = load_config(f"supersession/{first_fit}"), load_config(f"supersession/{second_fit}")
    assert second["model"]["start"] == first["model"]["output_dir"]
    assert first["model"]["start"] is None
    assert first["model"]["frozen_layers"] == second["model"]["frozen_layers"] == 0


def test_the_judge_that_ships_is_the_six_layer_fit_saved_in_int8():
    """memnets/judges/default/ is what supersession/taught saves: six layers of the bundled backbone, in int8, having
    learned the written pairs and the teacher's scores the config names."""
    from memnets.nn.judge_files import DEFAULT_JUDGE_DIR

    fits = load_config("supersession/six_layers_base"), load_config("supersession/taught")
    shipped = json.loads((DEFAULT_JUDGE_DIR / "config.json").read_text())
    assert (
        (shipped["layers"], shipped["weights"])
        == (fits[0]["model"]["layers"], fits[1]["model"]["weights"])
        == (6, "int8")
    )
    assert shipped["started_from"]["judge"] == fits[1]["model"]["start"]
    assert shipped["trained_on"] == fits[1]["data"]["train"] + fits[1]["data"]["scored"]
