"""Store decisions on pairs met in realistic use: does the second statement keep, reinforce or supersede the first?

    python benchmarks/store_pairs.py
    python benchmarks/store_pairs.py --cases benchmarks/store_pairs_holdout.json --out store_pairs_holdout.json
    python benchmarks/store_pairs.py --cases benchmarks/store_pairs_holdout2.json --out store_pairs_holdout2.json
    python benchmarks/store_pairs.py --cases benchmarks/store_pairs_several.json --out store_pairs_several.json

Cases: benchmarks/store_pairs.json, from a helper who wrote realistic memory streams (a developer's
project, a family assistant) and reported what went wrong, plus a few updates the product already got
right. Each pair goes into a fresh database through ``store`` (first, then second), with the real model:
- keep: another fact (another subject, a narrower case, one more of a kind, a plan): both must stay
  active, action "store". A supersede or reinforce here hides a memory for good.
- not_duplicate: a change of tense: anything but "reinforce".
- update: a new value of the same fact: action "supersede" of the first. A miss leaves both active
  (recall may still rank the newer one first); it loses nothing.
These cases were seen while the store rules were mended (2026-12-01): they measure those repairs,
not held-out behaviour; the stale-fact files do that. store_pairs_holdout.json and
store_pairs_holdout2.json (2026-12-02) were written by a helper who had not read the rules, the
code or the other cases: the first was then read while the rules were mended, the second is run
only to measure (do not read its records). store_pairs_several.json (the same day, by another such
helper) holds relations of several values ("Omar is allergic to penicillin" / "... also to peanuts")
and updates that end one; it was read while mending.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import machine, write_results

import yourmemory

CASES = Path(__file__).with_name("store_pairs.json")
WANTED = {"keep": {"store"}, "not_duplicate": {"store", "supersede"}, "update": {"supersede"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=str(CASES), help="cases file (default: benchmarks/store_pairs.json)")
    parser.add_argument("--out", default="store_pairs.json",
                        help="results file name under benchmarks/results/ (default store_pairs.json)")
    args = parser.parse_args()
    if not Path(args.cases).is_file():
        parser.error(f"--cases: no such file: {args.cases}")
    cases = json.loads(Path(args.cases).read_text(encoding="utf-8"))
    embedder = yourmemory.Embedder().load()
    records, summary = [], {}
    with tempfile.TemporaryDirectory() as workdir:
        for kind, pairs in cases.items():
            right = 0
            for number, (first, second) in enumerate(pairs):
                with yourmemory.YourMemory(Path(workdir) / f"{kind}-{number}.db", user="bench",
                                           embedder=embedder) as memory:
                    memory.store(first)
                    action = memory.store(second)["action"]
                right += action in WANTED[kind]
                records.append({"kind": kind, "first": first, "second": second, "action": action,
                                "right": action in WANTED[kind]})
            summary[kind] = {"n": len(pairs), "right": right}
            print(f"{kind:<14} {right:>3} / {len(pairs)}")
    print("results:", write_results(args.out, {
        "benchmark": "store pairs", "cases": Path(args.cases).name, "machine": machine(),
        "yourmemory": yourmemory.__version__,
        "summary": summary, "records": records}))


if __name__ == "__main__":
    main()
