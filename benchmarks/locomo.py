"""LoCoMo retrieval benchmark through YourMemory's own store_memory / recall_memory path.

    python benchmarks/locomo.py --units summaries   # the seed system's protocol, exactly
    python benchmarks/locomo.py --units turns       # one memory per dialog turn, evidence recall@k
    python benchmarks/locomo.py --units turns --top-k 100 --out locomo_turns_depth.json
                                                    # how deep the evidence lies (recall@k up to 100)

One fresh database per conversation; memories stored in session order with
importance 0.7 at benchmark time; questions asked verbatim. Results: a JSON file
with one record per question under benchmarks/results/.
"""
from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from pathlib import Path

from common import CachedEmbedder, Progress, load_locomo, machine, wilson, write_results

import yourmemory
from yourmemory import InvalidInput, YourMemory

IMPORTANCE = 0.7
TURNS_K = (5, 10, 20, 30, 50, 100)  # recall@k reported for each k up to the results asked for (20 by default)


def answer_hit(answer: str, retrieved: list[str]) -> bool:
    """The seed's rule: the answer is a substring of the results joined, or >= 50% of its
    words longer than 3 letters occur in them as substrings."""
    joined = " ".join(retrieved).lower()
    answer = str(answer).lower()
    if answer in joined:
        return True
    words = [w for w in re.findall(r"\w+", answer) if len(w) > 3]
    return bool(words) and sum(w in joined for w in words) / len(words) >= 0.5


def session_number(key: str) -> int:
    return int(re.search(r"session_(\d+)", key).group(1))


def summary_units(sample: dict) -> list[tuple[str, str]]:
    """(unit id, content): session summaries in session order; unit id "S3" for session 3."""
    keys = sorted(sample["session_summary"], key=session_number)
    return [(f"S{session_number(k)}", sample["session_summary"][k]) for k in keys]


def turn_units(sample: dict) -> list[tuple[str, str]]:
    """(dialog id, "Speaker: text" [+ " [shares CAPTION]"]) for every turn, in session order."""
    conversation = sample["conversation"]
    keys = sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=session_number)
    units = []
    for key in keys:
        for turn in conversation[key]:
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [shares {turn['blip_caption']}]"
            units.append((turn["dia_id"], content))
    return units


def questions(sample: dict, units: str) -> list[tuple[int, dict]]:
    """(index in the sample's qa list, question) for the questions this protocol asks."""
    if units == "summaries":
        wanted = lambda q: q["category"] in (1, 2, 3, 4) and isinstance(q.get("answer"), str)
    else:
        wanted = lambda q: bool(q.get("evidence"))
    return [(i, q) for i, q in enumerate(sample["qa"]) if wanted(q)]


def evidence_targets(question: dict, units: str) -> set[str]:
    targets = set()
    for dia in question["evidence"]:
        for match in re.findall(r"D(\d+):(\d+)", dia):
            targets.add(f"S{int(match[0])}" if units == "summaries" else f"D{int(match[0])}:{int(match[1])}")
    return targets


def evidence_recall(targets: set[str], found: list, k: int) -> float:
    """The share of a question's evidence ``targets`` among the first ``k`` units ``found``."""
    return len(targets & set(found[:k])) / len(targets)


def store_units(memory: YourMemory, units: list[tuple[str, str]], progress: Progress) -> tuple[dict, dict]:
    """Store each (unit id, content) in order, as the protocol does: {memory id: unit id} (a reinforced unit maps
    to the memory it joined; a refused one is simply not found), and how many stores took each action. Then
    their sentences are embedded (``index_sentences``), as the server's background job does after stores."""
    unit_of: dict[int, str] = {}
    actions: dict[str, int] = defaultdict(int)
    for unit_id, content in units:
        progress.step()
        try:
            result = memory.store(content, importance=IMPORTANCE)
        except InvalidInput:
            actions["refused"] += 1
            continue
        actions[result["action"]] += 1
        unit_of.setdefault(result["id"], unit_id)
    memory.index_sentences()
    return unit_of, actions


def run_conversation(sample: dict, units: str, top_k: int, embedder, workdir: Path, progress: Progress):
    memory = YourMemory(workdir / f"{sample['sample_id']}.db", user="bench", embedder=embedder)
    unit_of, actions = store_units(memory, summary_units(sample) if units == "summaries" else turn_units(sample),
                                   progress)
    records = []
    for index, q in questions(sample, units):
        recalled = memory.recall(q["question"], top_k=top_k)["memories"]
        ids = [unit_of.get(m["id"]) for m in recalled]
        targets = evidence_targets(q, units)
        # Question and answer texts stay out of the results: LoCoMo is CC BY-NC, read from ../shared only.
        record = {"sample": sample["sample_id"], "qa": index, "category": q["category"], "evidence": sorted(targets)}
        if top_k > 20:  # a deeper run keeps its file small: where each evidence turn came (1-based), not every id
            record["evidence_ranks"] = [ids.index(t) + 1 if t in ids else None for t in sorted(targets)]
        else:
            record["retrieved"] = ids
        if units == "summaries":
            record["hit"] = answer_hit(q["answer"], [m["content"] for m in recalled[:5]])
            record["evidence_recall@5"] = evidence_recall(targets, ids, 5) if targets else None
        else:
            for k in turns_ks(top_k):
                record[f"recall@{k}"] = evidence_recall(targets, ids, k)
        records.append(record)
        progress.step()
    memory.close()
    return records, dict(actions)


def turns_ks(top_k: int) -> list[int]:
    return [k for k in TURNS_K if k <= top_k]


def summarise(records: list[dict], units: str, top_k: int = 20) -> dict:
    by_category = defaultdict(list)
    for r in records:
        by_category[r["category"]].append(r)
    if units == "summaries":
        def block(rs):
            hits = sum(r["hit"] for r in rs)
            low, high = wilson(hits, len(rs))
            ev = [r["evidence_recall@5"] for r in rs if r["evidence_recall@5"] is not None]
            return {"n": len(rs), "hits": hits, "hit_rate": round(hits / len(rs), 4),
                    "wilson95": [round(low, 4), round(high, 4)],
                    "evidence_recall@5": round(sum(ev) / len(ev), 4) if ev else None}
    else:
        def block(rs):
            return {"n": len(rs), **{f"recall@{k}": round(sum(r[f"recall@{k}"] for r in rs) / len(rs), 4)
                                     for k in turns_ks(top_k)}}
    return {"all": block(records), "by_category": {str(c): block(rs) for c, rs in sorted(by_category.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", choices=("summaries", "turns"), default="summaries")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--limit", type=int, help="only the first N conversations (for a quick look)")
    parser.add_argument("--out", help="results file name under benchmarks/results/")
    parser.add_argument("--top-k", type=int, help="turns only: results asked per question (default 20); from 30, "
                                                  "recall@30, @50 and @100 are reported as far as asked")
    parser.add_argument("--no-embedding-cache", action="store_true",
                        help="embed every text with the model again (the cache only skips repeated ONNX calls)")
    args = parser.parse_args()
    samples = load_locomo(args.data)[:args.limit]
    if args.top_k is not None and (args.units == "summaries" or not 20 <= args.top_k <= 100):
        parser.error("--top-k: only with --units turns, from 20 to 100 (the summaries protocol asks for 5)")
    top_k = 5 if args.units == "summaries" else (args.top_k or 20)
    embedder = yourmemory.Embedder().load() if args.no_embedding_cache else CachedEmbedder()
    units_of = summary_units if args.units == "summaries" else turn_units
    total = sum(len(units_of(s)) + len(questions(s, args.units)) for s in samples)
    progress = Progress(total, f"locomo {args.units}")
    records, actions = [], defaultdict(int)
    with tempfile.TemporaryDirectory(prefix="yourmemory-locomo-") as workdir:
        for sample in samples:
            sample_records, sample_actions = run_conversation(sample, args.units, top_k, embedder,
                                                              Path(workdir), progress)
            records += sample_records
            for action, n in sample_actions.items():
                actions[action] += n
    summary = summarise(records, args.units, top_k)
    report = {"benchmark": f"locomo-{args.units}", "machine": machine(), "yourmemory": yourmemory.__version__,
              "store_actions": dict(actions), "summary": summary, "records": records}
    path = write_results(args.out or f"locomo_{args.units}.json", report)
    print(f"store actions: {dict(actions)}")
    for name, block in [("all", summary["all"]), *summary["by_category"].items()]:
        print(f"{name:>4}: {block}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
