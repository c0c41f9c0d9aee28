"""A full disk under a real ``memnets serve http`` process on the embedded store (a tmpfs filled to its
last block): a write answers 507 ``insufficient_storage`` with the documented error shape and a
message that says what to do, the Python client raises it as such, and reads and deletions go on.
The mount needs root; elsewhere the test skips with the reason.

Before: SQLite's ``OperationalError`` "database or disk is full" (SQLITE_FULL) reached the client as a
500 ``internal``, a bug report for what is the operator's disk."""

from __future__ import annotations

import subprocess

import httpx
import pytest
from archive_helpers import fill, mount

import memnets
from memnets.server.client import ServerError
from memnets.server.testing import ServerProcess


@pytest.fixture
def full_disk_server(tmp_path, tiny_model_dir):
    """A server whose memory lives on a 24 MiB tmpfs (its log outside it), and the tmpfs's folder."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk))
    try:
        args = ["--encoder", str(tiny_model_dir)]
        with ServerProcess(disk / "memory", *args, log=tmp_path / "server.log") as server:
            yield disk, server.wait_ready()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_write_on_a_full_disk_is_a_507_and_reads_and_deletions_go_on(full_disk_server):
    disk, server = full_disk_server
    with httpx.Client(base_url=server.url, timeout=60) as client:
        kept = client.post("/v1/memories", json={"user": "ann", "text": "ann keeps bees"}).json()["memory"]
        fill(disk)
        refused = client.post("/v1/memories", json={"user": "ann", "text": "ann moved to Lyon " + "x" * 4000})
        assert refused.status_code == 507, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["field"], error["type"]) == ("insufficient_storage", None, None)
        assert "disk is full" in error["message"] and "Free space" in error["message"]
        with memnets.Client(server.url) as remote, pytest.raises(ServerError) as raised:
            remote.add("ann moved to Lyon", user="ann")
        assert (raised.value.status, raised.value.code) == (507, "insufficient_storage")
        listed = client.get("/v1/memories", params={"user": "ann"})
        assert [m["id"] for m in listed.json()["memories"]] == [kept["id"]]  # nothing of the refused adds
        gone = client.delete(f"/v1/memories/{kept['id']}", params={"user": "ann"})
        assert gone.json() == {"deleted": True}  # the store's reserve makes room for a deletion
    assert "POST /v1/memories: the store's disk is full" in server.output()
