"""Child processes for the store contract suite (:mod:`memnets.store.testing`): a second process that
opens the same store and writes, deletes or writes new versions, its output read back line by line.

Like :mod:`memnets.store.testing`, only test code imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable


def start_child(code: str, *args: str, path: Iterable[str] = ()) -> subprocess.Popen:
    """Run ``code`` in a fresh Python (argv[1:] = args, ``path`` prepended to PYTHONPATH), stdout
    line-buffered back to the test.

    Each ``print(..., flush=True)`` of the child reaches the pipe in one write, so a child killed
    mid-print leaves no torn line. That holds only with buffered stdout: PYTHONUNBUFFERED (set in
    many containers, CI's included) makes print write its pieces one by one, and a kill between
    them left "begin-add c296 c2" for the batch c296 c297.
    """
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")]),
    )
    env.pop("PYTHONUNBUFFERED", None)
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        env=env,
    )


CHILD = """
import sys
from memnets.store.testing import DIM, StoreSpec, memory_for, vector_for
spec, mode, owner = StoreSpec.from_json(sys.argv[1]), sys.argv[2], sys.argv[3]
store = spec.open(DIM)
print("open", flush=True)
if mode == "write":
    for i in range(int(sys.argv[4])):
        memory_id = f"{owner}-{i}"
        store.upsert([memory_for(memory_id, owner, minutes=i)], vector_for(memory_id)[None])
        print(memory_id, flush=True)  # printed only once the write was acknowledged
elif mode == "delete":
    print(store.delete(sys.argv[4].split(","), owner), flush=True)
elif mode == "versions":  # new versions of one memory id: "versions owner id n tag"
    memory_id, n, tag = sys.argv[4], int(sys.argv[5]), sys.argv[6]
    for i in range(n):
        version = memory_for(memory_id, owner, minutes=i, content=f"{tag} version {i}")
        store.new_version(version, vector_for(f"{tag}-{i}"))
        print(f"{tag}-{i}", flush=True)  # printed only once the version was acknowledged
store.close()
"""


def child(spec, mode: str, owner: str, *args: str) -> subprocess.Popen:
    """A child process that opens the store of ``spec`` (a :class:`~memnets.store.testing.StoreSpec`) and writes ("write", owner, n) or deletes ("delete", owner, ids)."""
    return start_child(CHILD, spec.to_json(), mode, owner, *args)


def finish(process) -> list[str]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return out.split()
