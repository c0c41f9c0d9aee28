"""`memnets run`: steps from a pipeline config, each a real `memnets` process."""

import json
from pathlib import Path

import pytest
import yaml

from memnets.cli import main
from memnets.machine import SPEED_FLAGS, instruction_sets
from memnets.training.commands.run import load_steps


def _pipeline(tmp_path, tiny_locomo_path, steps):
    data = tmp_path / "data.yaml"
    data.write_text(
        yaml.safe_dump(
            {
                "path": str(tiny_locomo_path),
                "cache_dir": str(tmp_path / "cache"),
                "splits": {"train": ["tiny-1"], "validation": [], "test": ["tiny-2"]},
            }
        )
    )
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        yaml.safe_dump(
            {"steps": {n: [a.replace("DATA", str(data)) for a in argv] for n, argv in steps}}, sort_keys=False
        )
    )
    return path


def test_run_executes_steps_in_order_and_stops_at_a_failure(tmp_path, tiny_locomo_path, capfd):
    config = _pipeline(
        tmp_path,
        tiny_locomo_path,
        [
            ("data", ["data", "prepare", "-c", "DATA"]),
            ("broken", ["eval", "retrieval", "colbert", "-c", "DATA"]),
            ("never", ["data", "prepare", "-c", "DATA"]),
        ],
    )
    record = tmp_path / "timings" / "run.json"
    assert main(["run", "-c", str(config), "--record", str(record)]) == 2
    out, err = capfd.readouterr()
    assert "=== step data" in out and "=== step never" not in out
    assert "step 'broken' failed with exit code 2; resume with --from broken" in err
    assert any(p.name.startswith("locomo-") for p in (tmp_path / "cache").iterdir())
    timings = json.loads(record.read_text())
    assert [(s["step"], s["status"]) for s in timings["steps"]] == [
        ("data", "ok"),
        ("broken", "failed (2)"),
        ("never", "not run"),
    ]
    assert timings["steps"][0]["seconds"] > 0 and timings["steps"][0]["argv"][:2] == ["data", "prepare"]
    assert timings["total_s"] >= timings["steps"][0]["seconds"]
    machine = timings["machine"]
    assert machine["cpu"] and machine["cores"] >= 1 and machine["torch_threads"] >= 1
    assert set(machine["instruction_sets"]) <= set(SPEED_FLAGS)


def test_instruction_sets_are_read_from_the_cpu_flags():
    flags = set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split())
    assert instruction_sets() == [flag for flag in SPEED_FLAGS if flag in flags]


def test_run_resumes_from_a_step(tmp_path, tiny_locomo_path, capfd):
    config = _pipeline(
        tmp_path, tiny_locomo_path, [("a", ["data", "prepare", "-c", "DATA"]), ("b", ["data", "prepare", "-c", "DATA"])]
    )
    assert main(["run", "-c", str(config), "--from", "b", "--dry-run"]) == 0
    out = capfd.readouterr().out
    assert "=== step b" in out and "=== step a" not in out


def test_bad_pipeline_configs_are_named(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"steps": {"x": "data prepare"}}))
    with pytest.raises(ValueError, match=r"p\.yaml: step 'x' should be a non-empty list"):
        load_steps(path)
    path.write_text(yaml.safe_dump({"steps": [{"name": "x", "run": ["data", "prepare"]}]}))
    with pytest.raises(ValueError, match="mapping under 'steps'"):
        load_steps(path)


def test_a_pipeline_on_a_base_replaces_only_its_steps(tmp_path):
    gpu = load_steps("pipeline/gpu")
    cpu = load_steps("pipeline/cpu")
    assert [name for name, _ in gpu] == [name for name, _ in cpu]
    assert [(n, a) for (n, a), (_, b) in zip(gpu, cpu) if a != b] == [
        ("encoder", ["fit", "encoder", "-c", "encoder/gpu"])
    ]


def test_steps_create_the_folders_they_write(tmp_path, tiny_locomo_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a fresh working folder: nothing exists under it yet
    config = _pipeline(
        tmp_path,
        tiny_locomo_path,
        [
            ("data", ["data", "prepare", "-c", "DATA"]),
            (
                "evaluate",
                ["eval", "retrieval", "bm25", "-c", "DATA", "--split", "test", "--json", "runs/eval/new/bm25.json"],
            ),
        ],
    )
    assert main(["run", "-c", str(config)]) == 0
    assert "recall@10" in (tmp_path / "runs" / "eval" / "new" / "bm25.json").read_text()


def test_packaged_pipelines_are_named_from_any_folder(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-c", "pipeline/smoke", "--dry-run"]) == 0
    out = capfd.readouterr().out
    names = ["data", "encoder", "importance", "gate", "evaluate-heads", "export", "evaluate-retrieval"]
    positions = [out.index(f"=== step {name}:") for name in names]
    assert positions == sorted(positions)
    assert main(["run", "-c", "configs/pipeline/cpu.yaml", "--dry-run"]) == 0  # the older spelling
    assert "memnets fit encoder -c encoder/cpu\n" in capfd.readouterr().out
    assert main(["run", "-c", "pipeline/tpu"]) == 2
    assert "'pipeline/tpu' is neither a file nor a packaged config" in capfd.readouterr().err
