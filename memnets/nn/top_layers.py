"""Training only a backbone's top layers, over its lower layers' token states computed once per text.

A full fine-tune of the large backbone (all-mpnet-base-v2, 12 layers, 768-d) costs about eight times a
MiniLM step, too slow for a 2-core CPU. With the embeddings and the lowest layers frozen, what they
make of a text never changes during training: :class:`TopLayers` runs them once per distinct text (no
gradient, eval mode: no dropout), keeps the token states (float16, at the text's own length), and every
training step runs only the top ``layers`` on them. A pair seen in both epochs, or a turn that is the
positive of several questions, pays the lower part once.

Nothing else changes: the encoder trained is the MemoryEncoder given (its frozen lower weights are its
own), so it is saved, loaded, exported and served as any other. BERT-like backbones whose encoder block
runs ``encoder.layer`` in order (BERT / MiniLM, MPNet); MPNet's relative position bias, shared by every
layer, stays frozen so that the lower and the top layers see the same one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from transformers.masking_utils import create_bidirectional_mask

from memnets.argerrors import ArgumentValueError
from memnets.nn.encoder import MemoryEncoder
from memnets.nn.modes import evaluating
from memnets.protocols import Kind


@contextmanager
def _running_only(block: torch.nn.Module, layers: torch.nn.ModuleList) -> Iterator[None]:
    """``block`` (a backbone's encoder block) runs ``layers`` instead of its own inside the context."""
    own = block.layer
    block.layer = layers
    try:
        yield
    finally:
        block.layer = own


class TopLayers:
    """The top ``layers`` of ``encoder``'s backbone trained over cached lower-layer token states.

    Construction freezes every backbone parameter but those of the top ``layers`` (the projection, if
    any, stays trainable). ``embed(texts, kind)`` is ``encoder.tokenize`` + ``encoder.forward`` with
    gradients through the top layers only. Cached states live on the CPU; ``cached`` counts the texts.
    """

    def __init__(self, encoder: MemoryEncoder, layers: int, batch_size: int = 64):
        block = getattr(encoder.backbone, "encoder", None)
        all_layers = getattr(block, "layer", None)
        if not isinstance(all_layers, torch.nn.ModuleList):
            raise ArgumentValueError(
                f"top layers need a BERT-like backbone (encoder.layer), not {type(encoder.backbone).__name__}",
                field="top_layers",
            )
        if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers <= len(all_layers):
            raise ArgumentValueError(
                f"top_layers must be an int between 1 and the backbone's {len(all_layers)} layers, got {layers!r}",
                field="top_layers",
            )
        if encoder.tokenizer.padding_side != "right":
            raise ArgumentValueError(
                f"top layers keep states of right-padded batches; the tokenizer pads {encoder.tokenizer.padding_side}",
                field="top_layers",
            )
        self.encoder, self.block, self.batch_size = encoder, block, batch_size
        split = len(all_layers) - layers
        self.lower, self.top = all_layers[:split], all_layers[split:]
        encoder.backbone.requires_grad_(False)
        self.top.requires_grad_(True)
        self._states: dict[tuple[str, str], torch.Tensor] = {}

    @property
    def cached(self) -> int:
        return len(self._states)

    def _fill(self, texts: Sequence[str], kind: Kind) -> None:
        """Compute and keep the lower-layer states of the texts not cached yet, in batches of similar
        lengths (less padding)."""
        missing = sorted(dict.fromkeys(t for t in texts if (kind, t) not in self._states), key=len)
        backbone, device = self.encoder.backbone, self.encoder.device
        with evaluating(backbone), torch.no_grad(), _running_only(self.block, self.lower):
            for start in range(0, len(missing), self.batch_size):
                chunk = missing[start : start + self.batch_size]
                batch = {k: v.to(device) for k, v in self.encoder.tokenize(chunk, kind).items()}
                hidden = backbone(**batch).last_hidden_state
                for text, states, mask in zip(chunk, hidden, batch["attention_mask"]):
                    self._states[(kind, text)] = states[mask.bool()].to("cpu", torch.float16)

    def embed(self, texts: Sequence[str], kind: Kind) -> torch.Tensor:
        """Unit vectors ``[len(texts), dim]`` of ``texts``, gradients through the top layers (and projection)."""
        self._fill(texts, kind)
        states = [self._states[(kind, text)] for text in texts]
        device = self.encoder.device
        hidden = torch.nn.utils.rnn.pad_sequence(states, batch_first=True).to(device, torch.float32)
        mask = torch.zeros(hidden.shape[:2], dtype=torch.long, device=device)
        for row, state in enumerate(states):
            mask[row, : len(state)] = 1
        attention = create_bidirectional_mask(
            config=self.encoder.backbone.config, inputs_embeds=hidden, attention_mask=mask
        )
        with _running_only(self.block, self.top):
            hidden = self.block(hidden, attention_mask=attention)[0]
        return self.encoder.pool(hidden, mask)


__all__ = ["TopLayers"]
