"""Distillation of a stronger encoder into the one being trained: the teacher's ranking of each step's candidates.

A fine-tuned all-mpnet-base-v2 ranks LoCoMo's turns better than a fine-tuned MiniLM (docs/encoder.md) but costs
seven times as much to serve. Distilling it keeps the student's serving cost and teaches it the teacher's
graded judgement of every candidate of a step, not only which one is the positive: for each query of a
batch, the teacher's softmax over the batch's memories (the positives of all queries and the hard
negatives) is the target of the student's, by the KL divergence. The teacher is frozen, runs without
gradients on the step's texts (in the fit's precision: bf16 autocast makes it cheap on a CPU that has it),
and is not part of the student's checkpoint.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memnets.nn.encoder import MemoryEncoder


class Teacher:
    """A frozen MemoryEncoder (``path``: any encoder folder or backbone name) scoring a step's texts.

    Kept out of the LightningModule's submodules on purpose: its weights are not trained, not saved in the
    student's checkpoints and not given to the optimiser.
    """

    def __init__(self, path: str, temperature: float = 0.05):
        if not temperature > 0:
            raise ValueError(f"teacher_temperature must be positive, got {temperature!r}")
        self.encoder = MemoryEncoder.from_pretrained(path).eval().requires_grad_(False)
        self.temperature = float(temperature)

    @torch.no_grad()
    def logits(self, queries: list[str], memories: list[str]) -> torch.Tensor:
        """The teacher's similarities of each query to each memory over its temperature, on the teacher's
        device (the student's: the module moves it there when fitting starts): [len(queries), len(memories)]."""
        asked = self.encoder.embed(queries, "query").float()
        return asked @ self.encoder.embed(memories, "memory").float().T / self.temperature


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) of each row's softmax over the candidates, averaged over the rows."""
    return F.kl_div(
        F.log_softmax(student_logits.float(), dim=-1),
        F.log_softmax(teacher_logits.float(), dim=-1),
        log_target=True,
        reduction="batchmean",
    )


__all__ = ["Teacher", "distillation_loss"]
