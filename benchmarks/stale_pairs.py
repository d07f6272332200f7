"""A quick screen of the store rules on pairs from the stale-fact case files: updates taken, others kept.

    python benchmarks/stale_pairs.py                       # the first file and the first ten held-out files
    python benchmarks/stale_pairs.py --cases benchmarks/stale_cases.json --out stale_pairs_first.json

Each pair goes into a fresh database through ``store`` (the older text, then the newer), with the real model
(vectors cached on disk, as in stale.py):
- update: a chain's value, then its next value. Wanted: "supersede".
- keep: a chain's value and one of its compatible statements, in the order stale.py stores them, or two values
  of chains in one family (the same attribute for two subjects), both orders. Wanted: "store".
A pair is not a database of neighbours: the likeliest-of-several choice and the cosine floors between a store's
nearest memories play no part, so this screens a rule change in about three minutes; stale.py measures it. The
default files are the ones already read while tuning (the eleventh to thirteenth held-out files are left out:
do not read their records). Results keep the counts and the pairs that went wrong.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from itertools import combinations
from pathlib import Path

from common import CachedEmbedder, Progress, machine, write_results

import yourmemory
from yourmemory import InvalidInput, YourMemory

HERE = Path(__file__).resolve().parent
READ_FILES = ["stale_cases.json", "stale_cases_holdout.json"] + [f"stale_cases_holdout{n}.json" for n in range(2, 11)]
WANTED = {"update": "supersede", "keep": "store"}


def pairs_of(cases: dict) -> list[tuple[str, str, str]]:
    """(kind, older, newer) of one case file."""
    pairs, families = [], {}
    for chain in cases["chains"]:
        values = [value["text"] for value in chain["values"]]
        pairs += [("update", older, newer) for older, newer in zip(values, values[1:])]
        for statement in chain.get("compatible", []):
            after = statement.get("after", 0)  # stored after value number ``after``
            pairs += [("keep", value, statement["text"]) for value in values[:after + 1]]
            pairs += [("keep", statement["text"], value) for value in values[after + 1:]]
        if chain.get("family"):
            families.setdefault(chain["family"], []).append(values)
    for chains in families.values():
        for one, other in combinations(chains, 2):
            pairs += [("keep", a, b) for a in one for b in other] + [("keep", b, a) for a in one for b in other]
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", action="append",
                        help="a stale-fact case file (repeatable; default: the files already read)")
    parser.add_argument("--out", default="stale_pairs.json",
                        help="results file name under benchmarks/results/ (default stale_pairs.json)")
    args = parser.parse_args()
    files = [Path(name) for name in args.cases] if args.cases else [HERE / name for name in READ_FILES]
    for path in files:
        if not path.is_file():
            parser.error(f"--cases: no such file: {path}")
    pairs = [(path.name, *pair) for path in files for pair in pairs_of(json.loads(path.read_text(encoding="utf-8")))]
    embedder = CachedEmbedder()
    counts, wrong = {kind: Counter() for kind in WANTED}, []
    progress = Progress(len(pairs), "pairs")
    for name, kind, older, newer in pairs:
        with YourMemory(":memory:", user="bench", embedder=embedder) as memory:
            try:
                memory.store(older, importance=0.7)
                action = memory.store(newer, importance=0.7)["action"]
            except InvalidInput as error:
                action = f"refused: {error}"
        counts[kind][action] += 1
        if action != WANTED[kind]:
            wrong.append({"file": name, "kind": kind, "older": older, "newer": newer, "action": action})
        progress.step()
    summary = {kind: {"n": sum(c.values()), "right": c[WANTED[kind]], "actions": dict(c)} for kind, c in counts.items()}
    for kind, row in summary.items():
        print(f"{kind:<7} {row['right']:>5} / {row['n']} {WANTED[kind]}   {row['actions']}")
    print("results:", write_results(args.out, {
        "benchmark": "stale-fact pairs", "cases": [path.name for path in files], "machine": machine(),
        "yourmemory": yourmemory.__version__, "summary": summary, "records": wrong}))


if __name__ == "__main__":
    main()
