"""Where a CPU training step of the encoder spends its time, and what each speed choice saves.

One process, the real encoder/cpu recipe (bundled MiniLM, max_length 64, 32 pairs per step with one
mined hard negative each, AdamW over every trained parameter) on the first real batches of the
train split. Every variant starts from the same weights with its own optimiser, and the variants
take turns on the same batches (batch 1 for A, B, C, then batch 2 for C, B, A, ...), so that a load
that moves on a shared machine weighs on them alike; the table gives medians, each step split into
tokenise, forward (with the loss), backward and optimiser (step and zero_grad), and each variant's
median step over the shipped one's. Beside the wall seconds each step's CPU seconds of the process
are recorded: on a machine that others load, the CPU seconds of a one-thread run
(``OMP_NUM_THREADS=1``) measure a step's work where wall seconds mostly measure the load (torch's
threads wait on each other when one is descheduled). Variants:

- ``shipped``: the EncoderModule as encoder/cpu builds it (SDPA attention, torch's threads);
- ``eager``: the backbone's eager attention instead of SDPA (the same computation);
- ``frozen-embeddings``: the embedding block (chiefly the 30,522 x 384 word-embedding matrix) not
  trained (no gradient, no AdamW state for it: a change to what is learned, which needs a full fit
  to judge; ``model.freeze_embeddings``);
- ``frozen-embeddings+1``, ``frozen-embeddings+2``: the embeddings and the lowest 1 / 2 of the six
  transformer layers not trained (backpropagation stops above them; ``model.freeze_layers``);
- ``compiled``: the backbone through ``torch.compile(dynamic=True)`` (the same computation; its
  compile time lands in the first steps, which the JSON keeps step by step);
- ``1-thread``: one torch thread instead of torch's count (the same computation).

Every variant's loss on the first batch with dropout off, before any update, is recorded beside the
shipped one's: the same computation gives the same loss. Once per run it also times one validation
pass (the conv-49 ranking every epoch ends with) and the collation of the timed batches.

Not part of `memnets bench` (minutes of the real MiniLM): ``python -m bench.experiments.training_step``
(``--steps N`` batches per variant, default 6; ``--quick``: 2). Writes ``training_step.json`` under
``--out``.
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from contextlib import nullcontext

import torch

from bench.common import REPO_ROOT, parser, write_result

VARIANTS = (
    "shipped",
    "eager",
    "frozen-embeddings",
    "frozen-embeddings+1",
    "frozen-embeddings+2",
    "compiled",
    "1-thread",
)
PHASES = ("tokenize", "forward", "backward", "optimizer")
MEASURES = (*PHASES, "cpu")


class one_thread:
    """torch limited to one intra-op thread inside the block."""

    def __enter__(self):
        self._threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self._threads)


def build_module(variant: str, template):
    """A copy of the shipped ``template`` EncoderModule changed as ``variant`` says, and its AdamW."""
    module = copy.deepcopy(template)
    if variant == "eager":
        module.encoder.backbone.set_attn_implementation("eager")
    if variant.startswith("frozen-embeddings"):
        module.encoder.freeze_lower(embeddings=True, layers=int(variant.partition("+")[2] or 0))
    if variant == "compiled":
        module.encoder.backbone = torch.compile(module.encoder.backbone, dynamic=True)
    trained = [p for p in module.parameters() if p.requires_grad]
    return module, torch.optim.AdamW(trained, lr=module.hparams.lr, weight_decay=module.hparams.weight_decay)


def batch_loss(module, batch: dict, timings: dict | None = None) -> torch.Tensor:
    """The EncoderModule's training loss of ``batch`` (as its training_step computes it), timing the
    tokenisation and the forward pass into ``timings`` when given."""
    started = time.perf_counter()
    encoder, size = module.encoder, len(batch["queries"])
    queries = encoder.tokenize(batch["queries"], "query")
    memories = encoder.tokenize(batch["positives"] + batch["hard_negatives"], "memory")
    tokenized = time.perf_counter()
    query_vectors, memory_vectors = encoder(**queries), encoder(**memories)
    positives, negatives = memory_vectors[:size], memory_vectors[size:]
    loss = module.loss_fn(
        query_vectors,
        positives,
        negatives.view(size, -1, negatives.shape[-1]),
        positive_keys=batch["positive_keys"],
        query_positive_keys=batch["query_positive_keys"],
        hard_negative_keys=batch["hard_negative_keys"],
    )
    if timings is not None:
        timings["tokenize"].append(tokenized - started)
        timings["forward"].append(time.perf_counter() - tokenized)
    return loss


def train_step(module, optimizer, batch: dict, timings: dict) -> float:
    cpu_started = time.process_time()
    loss = batch_loss(module, batch, timings)
    started = time.perf_counter()
    loss.backward()
    backward_done = time.perf_counter()
    optimizer.step()
    optimizer.zero_grad()
    timings["backward"].append(backward_done - started)
    timings["optimizer"].append(time.perf_counter() - backward_done)
    timings["cpu"].append(time.process_time() - cpu_started)
    return float(loss.detach())


def validation_seconds(module, conversation) -> float:
    """Seconds of one validation pass over ``conversation`` (the module's validation_step)."""
    started = time.perf_counter()
    module.validation_step(conversation, 0)
    module._validation_rows = []
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    p = parser("experiments.training_step", __doc__)
    p.add_argument("--steps", type=int, default=6, help="batches each variant steps through (default 6; --quick 2)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or "shipped" not in variants:
        p.error(f"--variants: unknown {unknown}; 'shipped' is required; expected some of {', '.join(VARIANTS)}")
    steps = 2 if args.quick else args.steps
    if steps < 1:
        p.error(f"--steps must be at least 1, got {steps}")

    import os

    from memnets.training.lit.data import RetrievalDataModule
    from memnets.training.lit.encoder import EncoderModule

    os.chdir(REPO_ROOT)  # data/cache of the checkout: hard negatives mined once, as a fit reads them
    loadavg_before = [round(x, 2) for x in os.getloadavg()]
    torch.manual_seed(0)
    data = RetrievalDataModule(data_config="data/locomo", batch_size=32, hard_negatives=1, mining_top_k=20)
    data.prepare_data()
    data.setup("fit")
    started = time.perf_counter()
    batches = []
    for batch in data.train_dataloader():
        batches.append(batch)
        if len(batches) == steps:
            break
    collate_seconds = (time.perf_counter() - started) / len(batches)
    template = EncoderModule(max_length=64, lr=5e-5, temperature=0.05, learnable_temperature=True)

    modules, first_losses = {}, {}
    for variant in variants:
        module, optimizer = build_module(variant, template)
        module.encoder.eval()  # the first batch's loss without dropout: equal for the same computation
        with torch.no_grad(), one_thread() if variant == "1-thread" else nullcontext():
            first_losses[variant] = float(batch_loss(module, batches[0]))
        module.encoder.train()
        modules[variant] = (module, optimizer)

    timings = {v: {measure: [] for measure in MEASURES} for v in variants}
    losses = {v: [] for v in variants}
    for i, batch in enumerate(batches):
        for variant in variants if i % 2 == 0 else variants[::-1]:
            module, optimizer = modules[variant]
            torch.manual_seed(i)  # the same dropout draws where the computation is the same
            with one_thread() if variant == "1-thread" else nullcontext():
                losses[variant].append(train_step(module, optimizer, batch, timings[variant]))
        print(f"batch {i + 1}/{len(batches)} done", file=sys.stderr, flush=True)
    validation = validation_seconds(modules["shipped"][0], data.validation_conversations[0])

    rows, steps = [], {}
    for variant in variants:
        medians = {measure: statistics.median(timings[variant][measure]) for measure in MEASURES}
        steps[variant] = [sum(v) for v in zip(*(timings[variant][phase] for phase in PHASES), strict=True)]
        rows.append(
            {
                "variant": variant,
                "step_s": statistics.median(steps[variant]),
                **{f"{k}_s": v for k, v in medians.items()},
            }
        )
    shipped, shipped_cpu = rows[0]["step_s"], rows[0]["cpu_s"]
    print(
        "| variant | step s | tokenize s | forward s | backward s | optimizer s | step / shipped "
        "| CPU s | CPU / shipped | first loss, no dropout |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        row["ratio"] = row["step_s"] / shipped
        row["cpu_ratio"] = row["cpu_s"] / shipped_cpu
        row["first_loss"] = first_losses[row["variant"]]
        row["losses"] = losses[row["variant"]]
        row["wall_steps_s"], row["cpu_steps_s"] = steps[row["variant"]], timings[row["variant"]]["cpu"]
        print(
            f"| {row['variant']} | {row['step_s']:.2f} | {row['tokenize_s']:.3f} | {row['forward_s']:.2f} | "
            f"{row['backward_s']:.2f} | {row['optimizer_s']:.3f} | {row['ratio']:.2f} | {row['cpu_s']:.2f} | "
            f"{row['cpu_ratio']:.2f} | {row['first_loss']:.5f} |"
        )
    loadavg_after = [round(x, 2) for x in os.getloadavg()]
    print(f"collate {collate_seconds:.3f} s per batch; one validation pass (conv-49) {validation:.1f} s")
    path = write_result(
        args.out,
        "training_step",
        {"steps": len(batches), "variants": variants, "loadavg_before": loadavg_before, "loadavg_after": loadavg_after},
        {"rows": rows, "collate_seconds_per_batch": collate_seconds, "validation_pass_seconds": validation},
        [
            "medians over the same batches, variants interleaved batch by batch in one process (order reversed every other batch)",
            "cpu_s: the process's CPU seconds per step (with one torch thread: the step's work, whatever the load)",
            "first_loss: the first batch's loss with dropout off before any update (same computation, same loss)",
        ],
    )
    print(f"load average before {loadavg_before}, after {loadavg_after}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
