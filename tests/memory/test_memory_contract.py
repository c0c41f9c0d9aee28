"""The memory contract (memnets.memory.testing.MemoryContract) run on AgentMemory over both stores.

The suite lives in :mod:`memnets.memory.testing`, so that another implementation of the API runs the
same tests. Here it runs on ``memnets.open`` over the embedded store (a folder) and over PostgreSQL (a
table of its own on the ``pg_url`` server; those cases skip with the reason when it cannot start);
tests/server/test_server_api.py runs it on ``memnets.Client`` through a real server on both stores.
"""

from __future__ import annotations

import pytest

import memnets
from memnets.memory.testing import MemoryContract


class TestAgentMemory(MemoryContract):
    @pytest.fixture(scope="class")
    def encoder(self, tiny_model_dir):
        from memnets.nn.encoder import MemoryEncoder

        return MemoryEncoder.from_pretrained(tiny_model_dir)

    @pytest.fixture
    def make_memory(self, encoder, location):
        """memnets.open on the conftest's ``location``: an empty folder, or a new table on PostgreSQL."""
        where, options = location
        opened = []

        def make(duplicate_threshold=None):
            threshold = {} if duplicate_threshold is None else {"duplicate_threshold": duplicate_threshold}
            opened.append(memnets.open(where, encoder=encoder, **options, **threshold))
            return opened[-1]

        yield make
        for memory in opened:
            memory.close()
