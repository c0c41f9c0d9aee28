"""DataModule for the memory encoder: retrieval pairs with keys, hard negatives and clean batches.

Train batches come from ``build_retrieval_pairs`` on the train split (questions -> each evidence
turn, optionally observation facts -> source turn). Every pair carries integer keys (one per distinct
memory turn) for its positive, for all positives of its query and for its hard negatives, so the
loss can drop false negatives. :class:`NoDuplicatesBatchSampler` builds batches without a repeated
query or positive, optionally all from one conversation (then in-batch negatives are turns of the
same conversation, hard ones; negatives from another conversation are mostly easy). Under DDP it
builds one global batch per step and gives each rank its slice.

Validation batches are the validation conversations themselves: the module ranks their turns for
every question (categories 1-4) and logs recall@k.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

import lightning as L
import torch
from torch.utils.data import DataLoader, Sampler

from memnets.nn import distributed
from memnets.nn.encoder import DEFAULT_BACKBONE
from memnets.training.data.builders import build_retrieval_pairs
from memnets.training.data.config import load_data_config
from memnets.training.data.formats import load_conversations
from memnets.training.data.locomo import Conversation
from memnets.training.retrieval.hard_negatives import cached_hard_negatives, query_positives


class NoDuplicatesBatchSampler(Sampler[list[int]]):
    """Batches of pair indices with no repeated query text and no repeated positive.

    Args:
        queries, positives: per pair, the query text and the positive's key (anything hashable).
        groups: per pair, its conversation; with ``group_by_conversation`` every batch is drawn from
            one group (leftovers of all groups are then batched together at the end of the epoch).
        batch_size: rows per rank; a step takes ``batch_size * num_replicas`` rows and each rank gets
            its slice, so the negatives of the global batch are duplicate-free too.
        drop_last: drop a final short batch (always dropped under DDP, where ranks need equal shares).
    """

    def __init__(
        self,
        queries: Sequence[str],
        positives: Sequence,
        groups: Sequence[str],
        batch_size: int,
        *,
        group_by_conversation: bool = True,
        drop_last: bool = False,
        seed: int = 0,
        num_replicas: int | None = None,
        rank: int | None = None,
    ):
        if not len(queries) == len(positives) == len(groups):
            raise ValueError("queries, positives and groups must have one entry per pair")
        if batch_size < 2:
            raise ValueError(f"batch_size must be at least 2 (in-batch negatives), got {batch_size}")
        self.queries, self.positives, self.groups = list(queries), list(positives), list(groups)
        self.batch_size = batch_size
        self.group_by_conversation = group_by_conversation
        self.num_replicas = num_replicas if num_replicas is not None else distributed.world_size()
        self.rank = rank if rank is not None else distributed.rank()
        self.drop_last = drop_last or self.num_replicas > 1
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _first_unique(self, pending: list[int], size: int) -> list[int]:
        """Up to ``size`` indices from ``pending``, in order, skipping repeated queries and positives."""
        batch, seen_q, seen_p = [], set(), set()
        for i in pending:
            if len(batch) == size:
                break
            if self.queries[i] not in seen_q and self.positives[i] not in seen_p:
                batch.append(i)
                seen_q.add(self.queries[i])
                seen_p.add(self.positives[i])
        return batch

    def _fill(self, order: list[int], size: int) -> tuple[list[list[int]], list[int]]:
        """Duplicate-free batches of exactly ``size`` from ``order``; returns (batches, leftovers)."""
        batches, pending = [], list(order)
        while pending:
            batch = self._first_unique(pending, size)
            if len(batch) < size:
                break
            batches.append(batch)
            chosen = set(batch)
            pending = [i for i in pending if i not in chosen]
        else:
            return batches, []
        return batches, pending

    def global_batches(self) -> list[list[int]]:
        rng = random.Random(f"{self.seed}/{self.epoch}")
        size = self.batch_size * self.num_replicas
        indices = list(range(len(self.queries)))
        if self.group_by_conversation:
            by_group: dict[str, list[int]] = defaultdict(list)
            for i in indices:
                by_group[self.groups[i]].append(i)
            batches, leftovers = [], []
            for group in sorted(by_group):
                members = by_group[group]
                rng.shuffle(members)
                full, rest = self._fill(members, size)
                batches += full
                leftovers += rest
        else:
            batches, leftovers = [], indices
        rng.shuffle(leftovers)
        full, rest = self._fill(leftovers, size)
        batches += full
        while rest and not self.drop_last:  # short, still duplicate-free, batches at the end
            batch = self._first_unique(rest, size)
            batches.append(batch)
            chosen = set(batch)
            rest = [i for i in rest if i not in chosen]
        rng.shuffle(batches)
        return batches

    def __iter__(self):
        for batch in self.global_batches():
            yield batch[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]

    def __len__(self) -> int:
        return len(self.global_batches())


class PairCollator:
    """Turns pair rows into the texts to embed and the key tensors of the loss.

    Output: ``queries`` (list[str]), ``positives`` (list[str]), ``hard_negatives`` (list[str],
    ``hard_negatives`` per pair, flattened) and long tensors ``positive_keys [B]``,
    ``query_positive_keys [B, K]`` (-1 padded), ``hard_negative_keys [B, H]``.
    """

    def __init__(
        self,
        key_of: dict[tuple[str, str], int],
        contents: dict[tuple[str, str], str],
        query_positives: dict[tuple[str, str], set[str]],
        negatives: list[list[str]] | None,
        hard_negatives: int,
        seed: int = 0,
    ):
        self.key_of, self.contents, self.query_positives = key_of, contents, query_positives
        self.negatives, self.hard_negatives = negatives, hard_negatives
        self.rng = random.Random(seed)

    def __call__(self, rows: list[dict]) -> dict:
        batch = {
            "queries": [row["query"] for row in rows],
            "positives": [row["positive"] for row in rows],
            "positive_keys": torch.tensor([self.key_of[(row["conv_id"], row["positive_id"])] for row in rows]),
        }
        positive_sets = [sorted(self.query_positives[(row["conv_id"], row["query"])]) for row in rows]
        width = max(len(s) for s in positive_sets)
        batch["query_positive_keys"] = torch.tensor(
            [
                [self.key_of[(row["conv_id"], d)] for d in s] + [-1] * (width - len(s))
                for row, s in zip(rows, positive_sets)
            ]
        )
        if self.hard_negatives and self.negatives is not None:
            chosen = [self.rng.sample(self.negatives[row["index"]], self.hard_negatives) for row in rows]
            batch["hard_negatives"] = [
                self.contents[(row["conv_id"], d)] for row, ids in zip(rows, chosen) for d in ids
            ]
            batch["hard_negative_keys"] = torch.tensor(
                [[self.key_of[(row["conv_id"], d)] for d in ids] for row, ids in zip(rows, chosen)]
            )
        return batch


class RetrievalDataModule(L.LightningDataModule):
    """Retrieval pairs of the train split, validation conversations for recall@k.

    Args:
        data_config: the data config YAML (split by conversation, data path, cache folder).
        data_path: the conversations file, replacing the config's ``path:`` (`memnets fit --data FILE`).
        batch_size: pairs per step per device.
        include_observations: add (observation fact -> source turn) pairs to the question pairs.
        group_by_conversation: draw each batch from one conversation (hard in-batch negatives).
        extra_train: conversation files (any format ``--data`` reads) whose every conversation trains beside
            the data config's train split, e.g. ``data/supersession/user_facts_train.jsonl`` (everyday
            voices); validation stays the config's.
        hard_negatives: mined hard negatives per pair per step (0 = in-batch negatives only).
        miner: ``"encoder"`` (``miner_model``: a folder or a backbone name such as ``all-mpnet-base-v2``;
            the bundled untrained backbone by default) or ``"bm25"``.
        mining_top_k: candidates kept per pair; each step samples ``hard_negatives`` of them.
        relative_margin: drop candidates scoring above ``(1 - margin) * positive score``.
        num_workers: DataLoader workers.
        seed: batch order and negative sampling.
    """

    def __init__(
        self,
        data_config: str | None = None,
        data_path: str | None = None,
        batch_size: int = 32,
        include_observations: bool = True,
        group_by_conversation: bool = True,
        extra_train: Sequence[str] = (),
        hard_negatives: int = 1,
        miner: str = "encoder",
        miner_model: str = DEFAULT_BACKBONE,
        mining_top_k: int = 20,
        relative_margin: float = 0.05,
        num_workers: int = 0,
        seed: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.train_pairs: list[dict] | None = None
        self.validation_conversations: list[Conversation] = []

    def _load(self):
        hp = self.hparams
        config = load_data_config(hp.data_config, data=hp.data_path)
        conversations = {c.sample_id: c for c in load_conversations(config.path, config.splits["train"])}
        held_out = {*config.splits["validation"], *config.splits["test"]}
        for path in hp.extra_train:
            for conversation in load_conversations(path):
                if conversation.sample_id in conversations or conversation.sample_id in held_out:
                    raise ValueError(
                        f"extra_train {path}: conversation id {conversation.sample_id!r} is already a training, "
                        "validation or test conversation (ids must be unique across the files, and held-out "
                        "conversations never train)"
                    )
                conversations[conversation.sample_id] = conversation
        pairs = build_retrieval_pairs(conversations.values(), include_observations=hp.include_observations).to_list()
        for i, row in enumerate(pairs):
            row["index"] = i
        return config, conversations, pairs

    def prepare_data(self) -> None:
        """Mine hard negatives once (local rank 0) into the cache that every rank's ``setup`` reads."""
        if self.hparams.hard_negatives:
            config, conversations, pairs = self._load()
            self._mine(pairs, conversations, config.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.train_pairs is not None:
            return
        hp = self.hparams
        config, conversations, pairs = self._load()
        self.validation_conversations = load_conversations(config.path, config.splits["validation"])
        self.train_pairs = pairs
        key_of, contents = {}, {}
        for conv in conversations.values():
            for turn in conv.turns:
                key_of[(conv.sample_id, turn.dia_id)] = len(key_of)
                contents[(conv.sample_id, turn.dia_id)] = turn.content
        negatives = self._mine(pairs, conversations, config.cache_dir) if hp.hard_negatives else None
        self.collator = PairCollator(key_of, contents, query_positives(pairs), negatives, hp.hard_negatives, hp.seed)
        self.pair_keys = [key_of[(row["conv_id"], row["positive_id"])] for row in pairs]

    def _mine(self, pairs, conversations, cache_dir) -> list[list[str]]:
        hp = self.hparams

        def load_encoder():
            from memnets.nn.encoder import MemoryEncoder

            miner = MemoryEncoder.from_pretrained(hp.miner_model, max_length=128)
            # on a GPU when there is one, as the heads' embedding cache does (the large backbone mines
            # the train split's ~6,500 texts in seconds there, minutes on a CPU)
            return miner.cuda() if torch.cuda.is_available() else miner

        return cached_hard_negatives(
            cache_dir,
            pairs,
            conversations,
            miner=hp.miner,
            top_k=hp.mining_top_k,
            relative_margin=hp.relative_margin,
            seed=hp.seed,
            encoder_loader=load_encoder if hp.miner == "encoder" else None,
            encoder_name=f"{hp.miner_model}||" if hp.miner == "encoder" else None,
        )

    def train_dataloader(self) -> DataLoader:
        hp = self.hparams
        sampler = NoDuplicatesBatchSampler(
            [row["conv_id"] + "\0" + row["query"] for row in self.train_pairs],
            self.pair_keys,
            [row["conv_id"] for row in self.train_pairs],
            hp.batch_size,
            group_by_conversation=hp.group_by_conversation,
            seed=hp.seed,
        )
        return DataLoader(self.train_pairs, batch_sampler=sampler, collate_fn=self.collator, num_workers=hp.num_workers)

    def val_dataloader(self) -> DataLoader:
        # one "batch" per validation conversation; the module ranks its turns for every question
        return DataLoader(self.validation_conversations, batch_size=1, collate_fn=_single)


def _single(items: list):
    return items[0]
