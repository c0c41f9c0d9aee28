"""The memory encoder: text -> unit vector, used for both queries and memories.

A Hugging Face transformer backbone (by default the bundled all-MiniLM-L6-v2), mean pooling of
the last hidden states over the attention mask, an optional linear projection and L2
normalisation. For the same model this computes exactly what sentence-transformers computes, so a
folder written by :meth:`MemoryEncoder.save_pretrained` loads in transformers, in
sentence-transformers (``SentenceTransformer(dir)``) and here again with ``from_pretrained(dir)``.

Work per text is bounded: a text is cut to a character prefix before it is tokenised (see
:meth:`MemoryEncoder.cut`), so a 4 MB memory or query costs what its first few thousand characters
cost, and for ordinary text the tokens are exactly those of the whole text truncated to the window.

Optional text prefixes mark queries and memories (e.g. ``"query: "``); they are prepended before
tokenisation and are saved with the model (also as sentence-transformers prompts ``query`` and
``document``) so that a loaded encoder embeds text the way it was trained to.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel, AutoTokenizer

from memnets.argerrors import ArgumentTypeError, ArgumentValueError
from memnets.nn.backbones import CONFIG_NAME, DEFAULT_BACKBONE, NAMED_BACKBONES, PROJECTION_DIR, resolve_backbone
from memnets.nn.bucketing import token_batches
from memnets.nn.large_backbone import LARGE_BACKBONE as LARGE_BACKBONE
from memnets.nn.modes import evaluating
from memnets.nn.text_window import CUT_CHARS_PER_TOKEN as CUT_CHARS_PER_TOKEN
from memnets.nn.text_window import CUT_MAX_CHARS_PER_TOKEN as CUT_MAX_CHARS_PER_TOKEN
from memnets.nn.text_window import EncoderTexts
from memnets.progress import quiet_loading, track
from memnets.protocols import Kind

logger = logging.getLogger(__name__)

# LARGE_BACKBONE (imported above, re-exported beside it): the name "all-mpnet-base-v2" (768-d); from_pretrained
# joins the [large] extra's parts into the user's cache on its first use (memnets.nn.large_backbone).
FORMAT_VERSION = 1
# How encode() computes: "torch" (exact, the default), "onnx" (the same graph on ONNX Runtime),
# "int8" (ONNX Runtime with int8 weights: the fast CPU path), "int8_vnni" (int8 for CPUs with VNNI:
# s8 weights, quantised attention; by name only), "int8_vnni_ffn" (int8_vnni with all but the first
# FFN down-projection in s8 too: faster, agrees less; by name only), "fp16" / "bf16" (torch autocast on
# a CUDA device), "auto" (the fastest of int8 / onnx that loads and agrees with torch on this machine, else torch:
# memnets.nn.backend_choice). Training (forward) is always torch, in float32.
BACKENDS = ("torch", "onnx", "int8", "int8_vnni", "int8_vnni_ffn", "fp16", "bf16", "auto")
GPU_BACKENDS = {"fp16": torch.float16, "bf16": torch.bfloat16}


class MemoryEncoder(EncoderTexts, torch.nn.Module):
    """Backbone + mean pooling (+ projection) + L2 normalisation.

    Build it with :meth:`from_pretrained`. ``forward`` keeps gradients (training); ``encode`` is the
    batched, gradient-free inference path that returns CPU float32 unit vectors, computed by
    ``backend`` (see :data:`BACKENDS`; the variant a store records beside its vectors).
    """

    source = "an encoder built in memory"  # what it is, for people: set by from_pretrained

    def __init__(
        self,
        backbone: torch.nn.Module,
        tokenizer,
        *,
        max_length: int = 256,
        projection_dim: int | None = None,
        query_prefix: str = "",
        memory_prefix: str = "",
    ):
        super().__init__()
        if max_length < 2:
            raise ValueError(f"max_length must be at least 2 tokens, got {max_length}")
        if projection_dim is not None and projection_dim < 1:
            raise ValueError(f"projection_dim must be a positive integer or None, got {projection_dim}")
        self.backbone = backbone
        self.tokenizer = tokenizer
        # A fast tokenizer keeps its padding and truncation settings in its (Rust) state, and every
        # call sets them to its own: an unpadded call in another thread (cut() here, the memory API's
        # token check, the chunker) between a padded call's setting and its encoding left that batch
        # unpadded ("Unable to create tensor ... activate truncation and/or padding"; the server met it
        # when batched encodes ran beside concurrent adds). tokenize() pads with a copy of its own,
        # which only ever sees its one setting, so no other call changes its state.
        self._padding_tokenizer = copy.deepcopy(tokenizer)
        self.max_length = int(max_length)
        self.query_prefix = query_prefix
        self.memory_prefix = memory_prefix
        hidden = backbone.config.hidden_size
        self.projection = torch.nn.Linear(hidden, projection_dim) if projection_dim else None
        self.backend = "torch"
        self._runner = None  # the ONNX Runtime session of the "onnx" / "int8" backends, or the traced torch graph

    # ------------------------------------------------------------------ construction and files
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path = DEFAULT_BACKBONE,
        *,
        max_length: int | None = None,
        projection_dim: int | None = None,
        query_prefix: str | None = None,
        memory_prefix: str | None = None,
        backbone_config: Mapping[str, Any] | None = None,
        backend: str = "torch",
    ) -> MemoryEncoder:
        """Load a backbone (any HF encoder folder, or a name of :data:`memnets.nn.backbones.NAMED_BACKBONES`:
        ``"all-MiniLM-L6-v2"``, :data:`LARGE_BACKBONE`) or a folder written by :meth:`save_pretrained`.

        Arguments left as ``None`` take the value saved in the folder's ``memnets_encoder.json``
        (a trained encoder keeps its prefixes, length and projection), else the defaults:
        ``max_length=256`` (capped by the positions the backbone can embed: :func:`usable_positions`), no
        projection, no prefixes.
        A saved projection is restored with its weights; asking for a different ``projection_dim``
        than the saved one is an error.

        ``backbone_config`` (e.g. ``{"hidden_size": 32, "num_hidden_layers": 2}``) builds instead a
        randomly initialised backbone: ``path``'s architecture with these fields changed, and
        ``path``'s tokenizer. No weights are read; smoke runs and tests use it for tiny, fast models.

        ``backend`` picks how :meth:`encode` computes (:data:`BACKENDS`). ``"onnx"``, ``"int8"``,
        ``"int8_vnni"`` and ``"int8_vnni_ffn"`` read their file (``onnx/`` +
        :data:`memnets.nn.onnx_encoder.ONNX_FILES`) from the folder (``memnets export --backend int8``
        writes them into a pack), else convert the encoder at load (seconds; torch's exporter needs the ``[onnx]``
        extra; :class:`~memnets.nn.serving_encoder.ServingEncoder` builds the same graph without torch); the two ``"int8_vnni"`` ones run where the CPU has VNNI, elsewhere ``"int8"`` with one
        warning line naming the flags (:attr:`backend` says which). ``"fp16"`` and ``"bf16"`` need the
        encoder on a CUDA device.
        ``"auto"`` takes the fastest CPU backend that loads and agrees with the exact encoder here
        (:func:`memnets.nn.backend_choice.choose_backend`), else torch; :attr:`backend` names the choice.

        The encoder comes in eval mode, as Hugging Face's ``from_pretrained`` returns its models
        (a Lightning fit switches it to training and back), so that :meth:`encode` switches nothing.
        """
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        name = path if isinstance(path, str) and path in NAMED_BACKBONES else None
        path = resolve_backbone(path)
        if not path.is_dir():
            raise FileNotFoundError(f"encoder path {str(path)!r} is not a folder with a Hugging Face model")
        saved = {}
        if (path / CONFIG_NAME).is_file():
            saved = json.loads((path / CONFIG_NAME).read_text())
        saved_projection = saved.get("projection_dim")
        if projection_dim is not None and saved_projection is not None and projection_dim != saved_projection:
            raise ValueError(
                f"projection_dim={projection_dim} does not match the saved projection ({saved_projection}) in {path}"
            )
        if backbone_config:
            backbone = AutoModel.from_config(AutoConfig.from_pretrained(path, **dict(backbone_config)))
        else:
            with quiet_loading():  # no "Loading weights" bar on every open
                backbone = AutoModel.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        length = max_length if max_length is not None else saved.get("max_length", 256)
        positions = usable_positions(backbone)
        if positions is not None:
            length = min(length, positions)
        encoder = cls(
            backbone,
            tokenizer,
            max_length=length,
            projection_dim=projection_dim if projection_dim is not None else saved_projection,
            query_prefix=query_prefix if query_prefix is not None else saved.get("query_prefix", ""),
            memory_prefix=memory_prefix if memory_prefix is not None else saved.get("memory_prefix", ""),
        )
        if saved_projection is not None:
            weights = load_file(path / PROJECTION_DIR / "model.safetensors")
            encoder.projection.load_state_dict({k.removeprefix("linear."): v for k, v in weights.items()})
        if str(path) == DEFAULT_BACKBONE:
            encoder.source = "bundled all-MiniLM-L6-v2"
        else:
            encoder.source = f"{name} ({path})" if name else f"encoder folder {path}"
        if backbone_config:
            encoder.source += f", randomly initialised with {dict(backbone_config)}"
        encoder.set_backend(backend, path)
        return encoder.eval()

    def set_backend(self, backend: str, folder: str | Path | None = None) -> MemoryEncoder:
        """Compute :meth:`encode` with ``backend`` from now on (see :meth:`from_pretrained`); an ONNX
        backend reads its file from ``folder``'s ``onnx/`` when there, else converts this encoder."""
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self._runner = None
        if backend == "auto":
            from memnets.nn.backend_choice import choose_backend

            self.backend = "torch"
            choose_backend(self, folder)
            return self
        from memnets.nn.onnx_encoder import (
            ONNX_DIR,
            ONNX_FILES,
            VNNI_BACKENDS,
            OnnxRunner,
            export_onnx,
            require_onnxruntime,
        )

        if backend in VNNI_BACKENDS:
            from memnets.nn.backend_choice import vnni_or_int8

            backend = vnni_or_int8(backend)
        if backend in ONNX_FILES:
            require_onnxruntime()
            saved = Path(folder) / ONNX_DIR / ONNX_FILES[backend] if folder is not None else None
            if saved is not None and saved.is_file():
                self._runner = OnnxRunner(saved)
            else:
                logger.info("converting the encoder for the %r backend (export --backend writes it once)", backend)
                with tempfile.TemporaryDirectory(prefix="memnets-onnx-") as scratch:
                    self._runner = OnnxRunner(export_onnx(self, scratch, backend))
        self.backend = backend
        return self

    def trace_for_serving(self) -> MemoryEncoder:
        """On the torch backend on a CPU, run :meth:`encode`'s passes through a traced graph of this module
        from now on (:mod:`memnets.nn.traced`): the same vectors and fingerprint, without the GIL for the
        whole pass, so that a server's other threads do not slow the encoder. Other backends and devices are
        left as they are. The graph shares the module's weights and is traced in eval mode, as encode runs."""
        if self.backend == "torch" and self._runner is None and self.device.type == "cpu":
            from memnets.nn.traced import TracedRunner

            self._runner = TracedRunner(self)
        return self

    def save_pretrained(self, path: str | Path) -> Path:
        """Write a folder loadable by ``from_pretrained``, transformers and sentence-transformers.

        Contents: the backbone and tokenizer in Hugging Face format; sentence-transformers'
        ``modules.json`` (Transformer -> mean Pooling -> [Dense] -> Normalize) with its module
        configs and the query/memory prefixes as prompts; ``memnets_encoder.json`` with length,
        prefixes and projection.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with quiet_loading():  # its "Writing model shards" bar: saving takes a moment, and -q promises no bars
            self.backbone.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        hidden = self.backbone.config.hidden_size
        modules = [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        ]
        _write_json(path / "sentence_bert_config.json", {"max_seq_length": self.max_length, "do_lower_case": False})
        _write_json(
            path / "1_Pooling" / "config.json",
            {
                "word_embedding_dimension": hidden,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
            },
        )
        if self.projection is not None:
            modules.append(
                {"idx": 2, "name": "2", "path": PROJECTION_DIR, "type": "sentence_transformers.models.Dense"}
            )
            _write_json(
                path / PROJECTION_DIR / "config.json",
                {
                    "in_features": hidden,
                    "out_features": self.projection.out_features,
                    "bias": True,
                    "activation_function": "torch.nn.modules.linear.Identity",
                },
            )
            state = {f"linear.{k}": v.detach().cpu().contiguous() for k, v in self.projection.state_dict().items()}
            save_file(state, path / PROJECTION_DIR / "model.safetensors")
        normalize_idx = len(modules)
        modules.append(
            {
                "idx": normalize_idx,
                "name": str(normalize_idx),
                "path": f"{normalize_idx}_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
        (path / f"{normalize_idx}_Normalize").mkdir(exist_ok=True)
        _write_json(path / "modules.json", modules)
        _write_json(
            path / "config_sentence_transformers.json",
            {
                "prompts": {"query": self.query_prefix, "document": self.memory_prefix},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
        )
        _write_json(
            path / CONFIG_NAME,
            {
                "format_version": FORMAT_VERSION,
                "max_length": self.max_length,
                "projection_dim": self.projection.out_features if self.projection is not None else None,
                "query_prefix": self.query_prefix,
                "memory_prefix": self.memory_prefix,
                "dim": self.dim,
                "pooling": "mean",
                "normalize": True,
            },
        )
        return path

    def freeze_unused_parameters(self) -> list[str]:
        """Stop gradients of the backbone parameters that mean pooling never reads; their names.

        BERT-like backbones carry a pooler (a dense layer over the first token, for next-sentence
        prediction) that :meth:`forward` never runs, so its parameters get no gradient. Under DDP such
        parameters stop training after the first step ("parameters that were not used in producing
        loss"); frozen, DDP waits for no gradient of theirs, without ``find_unused_parameters``'
        walk over the graph on every step. The weights stay where they are: the state_dict, the saved
        folder and the :attr:`fingerprint` are unchanged.
        """
        pooler = getattr(self.backbone, "pooler", None)
        if not isinstance(pooler, torch.nn.Module):
            return []
        pooler.requires_grad_(False)
        return [f"backbone.pooler.{name}" for name, _ in pooler.named_parameters()]

    def freeze_lower(self, embeddings: bool = False, layers: int = 0) -> list[str]:
        """Stop training the backbone's embedding block and / or its lowest ``layers`` transformer
        layers; the names of the parameters frozen.

        A cheaper training step on CPU: a frozen parameter gets no gradient and no optimiser state
        (the word-embedding matrix is half of MiniLM's weights), and when the embeddings and the
        lowest layers are all frozen, backpropagation stops above them. It changes what is learned
        (those weights stay the backbone's), unlike :meth:`freeze_unused_parameters`. BERT-like
        backbones only (``backbone.embeddings``, ``backbone.encoder.layer``).
        """
        if isinstance(layers, bool) or not isinstance(layers, int):
            raise ArgumentTypeError(f"layers must be an int, got {layers!r}", field="layers")
        if not embeddings and layers == 0:
            return []
        layer_list = getattr(getattr(self.backbone, "encoder", None), "layer", None)
        if not hasattr(self.backbone, "embeddings") or not isinstance(layer_list, torch.nn.ModuleList):
            raise ArgumentValueError(
                f"freezing needs a BERT-like backbone (embeddings, encoder.layer), not {type(self.backbone).__name__}",
                field="embeddings" if embeddings else "layers",
            )
        if not 0 <= layers <= len(layer_list):
            raise ArgumentValueError(
                f"layers must be between 0 and the backbone's {len(layer_list)} layers, got {layers}", field="layers"
            )
        modules = ([("embeddings", self.backbone.embeddings)] if embeddings else []) + [
            (f"encoder.layer.{i}", layer_list[i]) for i in range(layers)
        ]
        frozen = []
        for prefix, module in modules:
            module.requires_grad_(False)
            frozen += [f"backbone.{prefix}.{name}" for name, _ in module.named_parameters()]
        return frozen

    # ------------------------------------------------------------------ computation
    @property
    def dim(self) -> int:
        """Size of the output vectors."""
        if self.projection is not None:
            return self.projection.out_features
        return self.backbone.config.hidden_size

    @property
    def fingerprint(self) -> str:
        """Which encoder this is, as a store records it: ``"<backend>:<dim>:<sha256 prefix>"``.

        The sha256 covers the weights (backbone and projection), the tokenizer's vocabulary, mean
        pooling, ``max_length`` and the prefixes; the backend (variant) is part of it because the
        ONNX and int8 backends embed slightly differently. Two encoders with the same fingerprint
        embed alike. The weights are hashed on first use and kept (load a changed encoder again).
        """
        if getattr(self, "_weights_digest", None) is None:
            digest = hashlib.sha256()
            for name, tensor in sorted(self.state_dict().items()):
                digest.update(name.encode())
                digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            settings = [self.max_length, self.query_prefix, self.memory_prefix, "mean", "normalize"]
            digest.update(json.dumps([settings, sorted(self.tokenizer.get_vocab().items())]).encode())
            self._weights_digest = digest.hexdigest()[:32]
        return f"{self.backend}:{self.dim}:{self._weights_digest}"

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def embed(self, texts: Sequence[str], kind: Kind = "memory") -> torch.Tensor:
        """Unit vectors ``[N, dim]`` of ``texts`` on the module's device, in its mode and with gradients where
        enabled: the forward pass of a training step (:meth:`encode` is the inference path)."""
        batch = self.tokenize(texts, kind)
        return self(**{k: v.to(self.device) for k, v in batch.items()})

    def tokenize(self, texts: Sequence[str], kind: Kind = "memory") -> dict[str, torch.Tensor]:
        """Prefix, cut (:meth:`cut`), tokenise, pad and truncate ``texts``: ``{"input_ids",
        "attention_mask"}`` (CPU)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        prefix = self.prefix(kind)
        batch = self._padding_tokenizer(
            [self.cut(prefix + text) for text in texts],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """L2-normalised embeddings ``[B, dim]`` of a tokenised batch (keeps gradients)."""
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.pool(hidden, attention_mask)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """L2-normalised embeddings ``[B, dim]`` of the backbone's last token states ``[B, T, hidden]``:
        mean over the unmasked tokens, then the projection if any (keeps gradients)."""
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        if self.projection is not None:
            pooled = self.projection(pooled)
        return F.normalize(pooled, p=2, dim=-1)

    def encode(
        self,
        texts: Sequence[str],
        kind: Kind = "memory",
        batch_size: int = 64,
        progress: bool = False,
    ) -> torch.Tensor:
        """Embed ``texts`` without gradients: CPU float32 unit vectors ``[N, dim]`` in input order.

        Texts are batched by token count, longest first, each batch padded only to its own longest
        text (:func:`memnets.nn.bucketing.token_batches`: 14.5% fewer token positions than batching
        by characters on LoCoMo turns). On the torch backends the module is put in eval mode for the
        call and its previous mode is restored; an ONNX Runtime backend or a traced graph
        (:meth:`trace_for_serving`) runs no module, so it skips that walk over the module tree (0.07 ms
        of a batch-1 call).
        """
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not one string")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        texts = list(texts)
        if not texts:
            return torch.empty(0, self.dim)
        out = torch.empty(len(texts), self.dim)
        batches = token_batches(
            lambda chunk: self.tokenize(chunk, kind), texts, batch_size, self._padding_tokenizer.padding_side
        )
        modes = evaluating(self) if self._runner is None else contextlib.nullcontext()
        with modes, torch.inference_mode():
            total = -(-len(texts) // batch_size)
            for index, batch in track(batches, total=total, desc=f"encode {kind}", disable=not progress, unit="batch"):
                out[index] = self._embed(batch)
        return out

    def _embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Unit vectors of one tokenised batch by the encoder's backend (CPU float32)."""
        if self._runner is not None:
            return self._runner(batch["input_ids"], batch["attention_mask"])
        device = self.device
        batch = {k: v.to(device) for k, v in batch.items()}
        if self.backend in GPU_BACKENDS:
            if device.type != "cuda":
                raise RuntimeError(
                    f"the {self.backend!r} backend needs the encoder on a CUDA device, it is on {device}"
                )
            with torch.autocast("cuda", dtype=GPU_BACKENDS[self.backend]):
                return self(**batch).float().cpu()
        return self(**batch).float().cpu()


def usable_positions(backbone: torch.nn.Module) -> int | None:
    """How many tokens ``backbone`` can embed: its ``max_position_embeddings``, less the positions
    below the first one for the backbones (MPNet, RoBERTa) whose position ids start after their padding
    index (all-mpnet-base-v2: 514 - 2 = 512; a 513th token was an IndexError). None when the config says nothing."""
    positions = getattr(backbone.config, "max_position_embeddings", None)
    padding = getattr(getattr(backbone, "embeddings", None), "padding_idx", None)
    if positions is None or not isinstance(padding, int):
        return positions
    return positions - (padding + 1)


def encoder_dim(path: str | Path | None = None) -> int:
    """The size of the vectors of the encoder saved in ``path`` (None: the bundled backbone), read from
    its config files without loading any weights: what a head built for that encoder must take. A backbone
    name (:func:`memnets.nn.backbones.resolve_backbone`) is read from its folder."""
    path = resolve_backbone(path or DEFAULT_BACKBONE)
    if not path.is_dir():
        raise FileNotFoundError(f"encoder path {str(path)!r} is not a folder with a Hugging Face model")
    if (path / CONFIG_NAME).is_file():
        saved = json.loads((path / CONFIG_NAME).read_text())
        if isinstance(saved.get("dim"), int):
            return saved["dim"]
    return int(AutoConfig.from_pretrained(path).hidden_size)


def _write_json(path: Path, payload) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


# defined with the backbones (torch-free), imported from here by the library, the tests and the benchmarks
__all__ = ["BACKENDS", "CONFIG_NAME", "DEFAULT_BACKBONE", "LARGE_BACKBONE", "PROJECTION_DIR", "MemoryEncoder", "encoder_dim", "usable_positions"]  # fmt: skip
