#!/usr/bin/env python3
"""Build mined.jsonl from hand-written labels in spec/*.py (text and dates filled from the data)."""

import collections
import importlib.util
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "locomo" / "locomo8.json"
SPLIT = {"conv-50": "test", "conv-49": "validation"}
ORDER = ["conv-50", "conv-49", "conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-47"]
KINDS = {"change", "correction", "restatement", "other_person", "unrelated", "plan", "exception", "addition", "past"}
DOMAINS = set(
    "home work study relationships family health diet pets vehicles contact schedules plans preferences possessions hobbies finances other".split()
)
d = {s["sample_id"]: s["conversation"] for s in json.load(open(DATA))}
out, seen = [], set()
for conv in ORDER:
    f = HERE / f"{conv.replace('-', '')}.py"
    try:
        spec = importlib.util.spec_from_file_location(conv, f)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
    except FileNotFoundError:
        continue
    c = d[conv]
    turns = {}
    for k, v in c.items():
        if re.fullmatch(r"session_\d+", k):
            n = int(k.split("_")[1])
            for t in v:
                turns[t["dia_id"]] = (t, n, c[f"session_{n}_date_time"])
    for spk, o, nw, lab, kind, dom, q, ab, aa, note in m.PAIRS:
        to, so, do = turns[o]
        tn, sn, dn = turns[nw]
        assert to["speaker"] == spk == tn["speaker"], (conv, o, nw, spk)
        assert so < sn, (conv, o, nw)
        assert kind in KINDS and dom in DOMAINS, (conv, o, nw, kind, dom)
        assert (lab == 1) == (kind in ("change", "correction")), (conv, o, nw)
        key = (conv, o, nw)
        assert key not in seen, key
        seen.add(key)
        if lab == 0:
            assert aa, key
        out.append(
            dict(
                conversation=conv,
                split=SPLIT.get(conv, "train"),
                speaker=spk,
                older_dia_id=o,
                newer_dia_id=nw,
                older=to["text"],
                newer=tn["text"],
                older_date=do,
                newer_date=dn,
                label=lab,
                kind=kind,
                domain=dom,
                question=q,
                answer_before=ab,
                answer_after=aa,
                note=note,
            )
        )
with open(HERE.parent / "locomo_mined.jsonl", "w") as fh:
    for r in out:
        fh.write(json.dumps(r, ensure_ascii=False) + "\n")
cnt = collections.Counter((r["conversation"], r["label"]) for r in out)
for conv in ORDER:
    if (conv, 0) in cnt or (conv, 1) in cnt:
        print(conv, "label1", cnt[(conv, 1)], "label0", cnt[(conv, 0)])
print("total", len(out), collections.Counter(r["label"] for r in out))
