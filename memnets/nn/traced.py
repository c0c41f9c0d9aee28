"""The torch backend's forward pass as one traced graph, for a server's encoder on a CPU.

Called from Python, an ``nn.Module``'s forward takes the GIL back before each of its operators (a
few hundred per MiniLM pass). In a server the event loop and the request threads hold the GIL much
of the time, so the encoder's thread waits for it between operators, and every handover costs CPU.
Alone, on one thread at a batch of 10, the bundled encoder encoded 186.5 texts/s eager and 200.7
traced. Beside a thread that holds the GIL half the time, eager fell to 125.9 texts/s (and 5.30 ->
6.03 ms of CPU per text); traced fell only to 170.2 (``python -m bench.experiments.gil_passes``;
docs/history.md, "Workers and traced passes").

:class:`TracedRunner` runs the same module traced with ``torch.jit.trace``. It has the same
operators and shares the module's weights (nothing is copied). TorchScript runs the whole pass
without the GIL. The vectors are the eager ones to the last bit on the bundled encoder
(tests/nn/test_traced_encoder.py), so the encoder's fingerprint (``torch:...``) does not change.

A trace records the path its example takes through Python branches. The example is a padded batch of
two texts, so that a branch on the attention mask would keep the masked path, which is right for every
batch (a batch without padding has a mask of ones). transformers 5.24's BERT has no such branch that
matters: traced from an unpadded example it gives the same vectors too.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

import torch

# Two texts of different lengths: the traced graph is the one with padding, which is right for every batch.
EXAMPLE = ("a short text", "a longer text, so that the first one of the two is padded to its length")


@contextmanager
def _attribute_reads_unlogged():
    """transformers' own log quiet below ERROR while the tracer reads every attribute of the backbone: reading
    ``loss_function`` of a model without a ``loss_type`` logs "`loss_type=None` was set in the config but it is
    unrecognized" once, which the server printed at start although no loss is ever computed."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class TracedRunner:
    """``encoder``'s forward (eval mode, no gradients) traced once: token ids and mask in, unit vectors out."""

    def __init__(self, encoder) -> None:
        example = encoder.tokenize(list(EXAMPLE), "memory")
        with warnings.catch_warnings(), _attribute_reads_unlogged(), torch.inference_mode():
            # the tracer warns at every Python branch on a tensor; the example takes the padded path on purpose
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            # it also reads every attribute of every submodule (torch.jit's module_has_exports), and a backbone's
            # deprecated properties warn when read: is_gradient_checkpointing's FutureWarning (transformers 5)
            warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
            self.graph = torch.jit.trace(
                encoder.eval(), (example["input_ids"], example["attention_mask"]), check_trace=False
            )

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.graph(input_ids, attention_mask)
