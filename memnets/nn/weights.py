"""Configs checked against their safetensors weights before anything is allocated.

A saved network is a config (what to build) and a safetensors file (the tensors). Loaders that
trust the config build first and load after: a config naming 12 layers over 6 layers of weights
loads with random layers 6-11 and a log line, and ``hidden_dims: [1e9]`` allocates gigabytes before
any shape is compared. Here the network is built on PyTorch's ``meta`` device (shapes, no memory),
or, without torch, its shapes are written out from the config (a BERT backbone: :func:`bert_shapes`),
compared with the file's header (names and shapes, read without the tensors), and only a config that
matches every tensor, with none missing and none unexpected, goes on to be built for real. Every failure is a :class:`WeightsMismatch` (a ValueError) naming the files and the
field or tensor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

Shapes = dict[str, tuple[int, ...]]
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
_LAYER_FIELDS = ("num_hidden_layers", "num_layers", "n_layer")


class WeightsMismatch(ValueError):
    """A config that does not describe its weights file (or a file that cannot be read as safetensors)."""


def read_json(path: Path, what: str) -> object:
    """Parse a JSON config; a file that is not JSON, or nests past the parser's depth, is a
    :class:`WeightsMismatch` naming it (never a bare RecursionError)."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise WeightsMismatch(f"{path}: not valid JSON ({what}): {error}") from None
    except RecursionError:
        raise WeightsMismatch(f"{path}: nested too deeply to be {what}") from None


def tensor_shapes(path: Path) -> Shapes:
    """The name and shape of every tensor of a safetensors file, from its header only."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "numpy") as handle:  # the header only: no tensor is converted
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except (SafetensorError, OSError) as error:
        raise WeightsMismatch(f"{path}: not a readable safetensors file: {error}") from None


def meta_shapes(build: Callable[[], object]) -> Shapes:
    """The state-dict shapes of the torch module ``build()`` returns, built on the meta device (no memory)."""
    import torch

    with torch.device("meta"):
        module = build()
    return {name: tuple(tensor.shape) for name, tensor in module.state_dict().items()}


def check_shapes(
    expected: Mapping[str, tuple[int, ...]],
    found: Shapes,
    *,
    config: str,
    weights: Path,
    fields: Mapping[str, object] | None = None,
) -> None:
    """Every tensor ``config`` describes is in ``weights`` with its shape, and nothing else is.
    ``fields``: the config's fields, to name those whose value gives a wrong size."""

    def listed(names: list[str]) -> str:
        return ", ".join(names[:3]) + (f" (and {len(names) - 3} more)" if len(names) > 3 else "")

    missing = sorted(set(expected) - set(found))
    if missing:
        raise WeightsMismatch(f"{config} describes tensors that {weights} lacks: {listed(missing)}")
    unexpected = sorted(set(found) - set(expected))
    if unexpected:
        raise WeightsMismatch(f"{weights} holds tensors that {config} does not describe: {listed(unexpected)}")
    for name in sorted(expected):
        if tuple(expected[name]) != tuple(found[name]):
            sizes = set(expected[name]) - set(found[name])
            suspects = [key for key, value in (fields or {}).items() if type(value) is int and value in sizes]
            raise WeightsMismatch(
                f"{config} makes tensor {name} of shape {list(expected[name])} but {weights} holds "
                f"{list(found[name])}"
                + (f" (a size set by field {' or '.join(map(repr, suspects))})" if suspects else "")
            )


def check_backbone(folder: Path, shown: Path | None = None) -> None:
    """A Hugging Face backbone folder (``config.json`` + ``model.safetensors``, as ``save_pretrained``
    writes it) whose config builds exactly the tensors of its weights. The layer count is compared
    first, from the tensor names, so a config with a huge count fails before even the meta build
    (whose Python objects grow with it).
    ``shown``: the folder to name in messages (a pack's own path rather than its verified copy)."""
    from transformers import AutoConfig, AutoModel

    shown = shown or folder
    config_file, weights_file = shown / "config.json", shown / "model.safetensors"
    fields, found = _backbone_files(folder, shown)
    try:
        config = AutoConfig.from_pretrained(folder)
        expected = meta_shapes(lambda: AutoModel.from_config(config))
    except (ValueError, KeyError, TypeError, AttributeError, RuntimeError, OSError, OverflowError) as error:
        raise WeightsMismatch(f"{config_file}: does not build a model: {type(error).__name__}: {error}") from None
    check_shapes(expected, found, config=str(config_file), weights=weights_file, fields=fields)


def _backbone_files(folder: Path, shown: Path) -> tuple[dict, Shapes]:
    """A backbone folder's ``config.json`` fields and its weights' shapes, the config's layer count compared first,
    from the tensor names, so that a config with a huge count fails before any network is described (whose
    Python objects grow with it)."""
    config_file, weights_file = shown / "config.json", shown / "model.safetensors"
    fields = read_json(folder / "config.json", "a model config")
    if not isinstance(fields, dict):
        raise WeightsMismatch(f"{config_file}: expected a JSON object")
    found = tensor_shapes(folder / "model.safetensors")
    layers = {int(match[1]) for name in found for match in [_LAYER_INDEX.search(name)] if match}
    for field in _LAYER_FIELDS:
        count = fields.get(field)
        if count is None:
            continue
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise WeightsMismatch(f"{config_file}: field {field!r} must be a layer count, got {count!r}")
        if count > (max(layers) + 1 if layers else 0):  # fewer: the comparison names the extra tensors
            raise WeightsMismatch(
                f"{config_file}: field {field!r} is {count} but {weights_file} holds "
                f"{max(layers) + 1 if layers else 0} layers"
            )
    return fields, found


# the sizes of transformers' BertConfig where a config.json leaves them out
BERT_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072,
                 "max_position_embeddings": 512, "type_vocab_size": 2}  # fmt: skip


def bert_shapes(fields: dict) -> Shapes:
    """The state-dict shapes of transformers' ``BertModel`` (pooler included, as ``AutoModel`` builds it) of a
    BERT ``config.json``'s fields: what :func:`check_backbone` finds on the meta device, without torch."""
    size = {name: fields.get(name, default) for name, default in BERT_DEFAULTS.items()}
    bad = [name for name, value in size.items() if not isinstance(value, int) or isinstance(value, bool) or value < 1]
    if bad:
        raise WeightsMismatch(f"field {bad[0]!r} must be a positive int, got {size[bad[0]]!r}")
    hidden, inner = size["hidden_size"], size["intermediate_size"]
    square, vector = (hidden, hidden), (hidden,)
    shapes: Shapes = {
        "embeddings.word_embeddings.weight": (size["vocab_size"], hidden),
        "embeddings.position_embeddings.weight": (size["max_position_embeddings"], hidden),
        "embeddings.token_type_embeddings.weight": (size["type_vocab_size"], hidden),
        "pooler.dense.weight": square,
        "pooler.dense.bias": vector,
    }
    norms = ["embeddings.LayerNorm"]
    for i in range(size["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for linear in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes |= {f"{p}.{linear}.weight": square, f"{p}.{linear}.bias": vector}
        shapes |= {f"{p}.intermediate.dense.weight": (inner, hidden), f"{p}.intermediate.dense.bias": (inner,)}
        shapes |= {f"{p}.output.dense.weight": (hidden, inner), f"{p}.output.dense.bias": vector}
        norms += [f"{p}.attention.output.LayerNorm", f"{p}.output.LayerNorm"]
    return shapes | {f"{norm}.{part}": vector for norm in norms for part in ("weight", "bias")}


def check_bert_backbone(folder: Path, shown: Path | None = None) -> None:
    """:func:`check_backbone` of a BERT backbone, without torch or transformers: its ``config.json`` describes
    exactly the tensors of its ``model.safetensors`` (:func:`bert_shapes`). ``shown``: the folder to name."""
    shown = shown or folder
    config_file = shown / "config.json"
    fields, found = _backbone_files(folder, shown)
    try:
        expected = bert_shapes(fields)
    except WeightsMismatch as error:
        raise WeightsMismatch(f"{config_file}: {error}") from None
    check_shapes(expected, found, config=str(config_file), weights=shown / "model.safetensors", fields=fields)


def check_linear(weights: Path, shown: Path, *, in_features: int, out_features: int, config: str) -> None:
    """A sentence-transformers Dense file (``linear.weight`` [out, in], ``linear.bias`` [out])."""
    expected = {"linear.weight": (out_features, in_features), "linear.bias": (out_features,)}
    check_shapes(expected, tensor_shapes(weights), config=config, weights=shown)
