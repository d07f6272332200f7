"""Late-interaction lab: the product's own LoCoMo candidates ranked again with other token standings and lifts.

    python benchmarks/late_lab.py --units turns
    python benchmarks/late_lab.py --units summaries

Runs locomo.py's protocol once (the same databases, stores and questions) and keeps, for every question, a copy
of recall's candidates just before late interaction. It then runs the product's own late interaction on them
again with each way in WAYS (a standing in place of ``token_standing``, a lift in place of ``late_lift``), and
reports what the protocol would score with it. The first row is the product's own and must give the product's
figures: that is what makes the other rows worth reading. Newer-first is left out (no turn or
summary is a one-sentence fact), and so is the graph walk, which brings a neighbour into the first 20 of a few
turns questions; the run prints for how many questions the first results are exactly the product's.
"""
from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from common import CachedEmbedder, Progress, load_locomo
from locomo import answer_hit, evidence_recall, evidence_targets, questions, store_units, summary_units, turn_units

import yourmemory
from yourmemory import YourMemory


def averaged_standing(matches, weights=None):
    """The standing before the thirty-ninth session: the weighted MaxSim, in standard deviations from the
    candidates' average (a deviation counted as at least 0.05)."""
    values = yourmemory.maxsim(matches, weights)
    return (values - values.mean()) / max(float(values.std()), 0.05)


def fixed_lift(relevances):
    """The lift before the fortieth session: 0.1 whatever the candidates' spread (with it, who said it gains
    nothing more in late interaction)."""
    return 0.1


PRODUCT = "token standing, lift by the spread"
WAYS = {PRODUCT: (yourmemory.token_standing, yourmemory.late_lift),
        "token standing, fixed lift 0.1 (thirty-ninth session)": (yourmemory.token_standing, fixed_lift),
        "averaged MaxSim, fixed lift 0.1 (thirty-eighth session)": (averaged_standing, fixed_lift)}


class Recorder:
    """Wraps ``YourMemory._compare_tokens`` to keep a copy of its inputs for the question being asked."""

    def __init__(self):
        self.last = None
        self.original = YourMemory._compare_tokens
        recorder = self

        def compare_tokens(memory, found, query_sketches, weights, now):
            recorder.last = (memory, copied(found), query_sketches, weights, now)
            return recorder.original(memory, found, query_sketches, weights, now)
        YourMemory._compare_tokens = compare_tokens

    def ranked(self, standing, lift, top_k: int) -> list[int]:
        """The first ``top_k`` candidates after the product's own late interaction with ``standing`` in place
        of ``token_standing`` and ``lift`` in place of ``late_lift``, ranked by score as recall ranks them before
        the graph walk."""
        found = self.compared(standing, lift)
        return [c["id"] for c in sorted(found.values(), key=lambda c: -c["score"])[:top_k]]

    def compared(self, standing=None, lift=None) -> dict[int, dict]:
        """A copy of the question's candidates after the product's own late interaction (with ``standing`` and
        ``lift`` in place of the product's, if given)."""
        memory, found, query_sketches, weights, now = self.last
        found, product = copied(found), (yourmemory.token_standing, yourmemory.late_lift)
        yourmemory.token_standing, yourmemory.late_lift = standing or product[0], lift or product[1]
        try:
            self.original(memory, found, query_sketches, weights, now)
        finally:
            yourmemory.token_standing, yourmemory.late_lift = product
        return found

    def close(self) -> None:
        YourMemory._compare_tokens = self.original


def copied(found: dict[int, dict]) -> dict[int, dict]:
    """A copy of recall's candidates that late interaction can change (their relevance and score)."""
    return {memory_id: dict(c) for memory_id, c in found.items()}


def run_conversation(sample: dict, units: str, top_k: int, embedder, workdir: Path, progress: Progress,
                     recorder: Recorder) -> list[dict]:
    memory = YourMemory(workdir / f"{sample['sample_id']}.db", user="bench", embedder=embedder)
    unit_of, _ = store_units(memory, summary_units(sample) if units == "summaries" else turn_units(sample), progress)
    content = dict(memory.db.execute("SELECT id, content FROM memories"))
    scored = []
    for _, q in questions(sample, units):
        product = [m["id"] for m in memory.recall(q["question"], top_k=top_k)["memories"]]
        ways = {name: recorder.ranked(standing, lift, top_k) for name, (standing, lift) in WAYS.items()}
        row = {"category": q["category"], "faithful": product == ways[PRODUCT]}
        for name, ids in ways.items():
            if units == "summaries":
                row[name] = [float(answer_hit(q["answer"], [content[i] for i in ids[:5]]))]
            else:
                targets, found = evidence_targets(q, units), [unit_of.get(i) for i in ids]
                row[name] = [evidence_recall(targets, found, k) for k in (5, 10, 20)]
        scored.append(row)
        progress.step()
    memory.close()
    return scored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", choices=("summaries", "turns"), default="turns")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--limit", type=int, help="only the first N conversations (for a quick look)")
    args = parser.parse_args()
    samples = load_locomo(args.data)[:args.limit]
    top_k = 5 if args.units == "summaries" else 20
    units_of = summary_units if args.units == "summaries" else turn_units
    progress = Progress(sum(len(units_of(s)) + len(questions(s, args.units)) for s in samples), "late lab")
    embedder, recorder, scored = CachedEmbedder(), Recorder(), []
    try:
        with tempfile.TemporaryDirectory(prefix="yourmemory-late-lab-") as workdir:
            for sample in samples:
                scored += run_conversation(sample, args.units, top_k, embedder, Path(workdir), progress, recorder)
    finally:
        recorder.close()
    print(f"the product's own late interaction gave the product's results for {sum(s['faithful'] for s in scored)} "
          f"of {len(scored)} questions")
    by_category = defaultdict(list)
    for s in scored:
        by_category[s["category"]].append(s)
    label = "hits@5" if args.units == "summaries" else "recall@5 / @10 / @20"
    for name in WAYS:
        print(f"{name} ({label}):")
        for category, rows in [("all", scored), *sorted(by_category.items())]:
            values = np.array([r[name] for r in rows])
            shown = (f"{int(values.sum())}" if args.units == "summaries"
                     else " / ".join(f"{v:.4f}" for v in values.mean(axis=0)))
            print(f"  {category!s:>4} (n={len(rows)}): {shown}")


if __name__ == "__main__":
    main()
