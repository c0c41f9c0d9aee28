"""The memory encoder trained by its backbone's top layers only: `memnets fit encoder_top -c encoder/large_top`.

:class:`EncoderModule` (its loss, optimiser, validation and export) with one change: a training step
embeds its texts through :class:`memnets.nn.top_layers.TopLayers`, so the frozen embeddings and lower
layers run once per distinct text and the step pays for the top ``top_layers`` only. The way to the large
backbone's quality that a 2-core CPU affords (docs/encoder.md, "The large backbone on a CPU").
Validation and the exported encoder run the whole backbone, as for any MemoryEncoder.
"""

from __future__ import annotations

import torch

from memnets.nn.top_layers import TopLayers
from memnets.training.lit.encoder import EncoderModule


class TopLayersEncoderModule(EncoderModule):
    """Fine-tunes the top ``top_layers`` transformer layers of the backbone (every other backbone weight
    frozen) over cached lower-layer token states; the other arguments are :class:`EncoderModule`'s
    (``freeze_embeddings`` and ``freeze_layers`` are implied and ignored)."""

    def __init__(self, top_layers: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.top = TopLayers(self.encoder, top_layers, batch_size=self.hparams.eval_batch_size)

    def embed(self, texts: list[str], kind: str) -> torch.Tensor:
        return self.top.embed(texts, kind)
