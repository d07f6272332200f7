"""Stale-fact benchmark: facts that change over time, through YourMemory's own store / recall path.

    python benchmarks/stale.py                 # all chains, default protocol
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout.json --out stale_holdout.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout2.json --out stale_holdout2.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout3.json --out stale_holdout3.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout4.json --out stale_holdout4.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout5.json --out stale_holdout5.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout6.json --out stale_holdout6.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout7.json --out stale_holdout7.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout8.json --out stale_holdout8.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout9.json --out stale_holdout9.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout10.json --out stale_holdout10.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout11.json --out stale_holdout11.json
    python benchmarks/stale.py --cases benchmarks/stale_cases_holdout12.json --out stale_holdout12.json
    python benchmarks/stale.py --limit 2       # the first 2 databases only, for a quick look

Cases: benchmarks/stale_cases.json, hand-written; benchmarks/stale_cases_holdout.json,
stale_cases_holdout2.json, stale_cases_holdout3.json, stale_cases_holdout4.json,
stale_cases_holdout5.json, stale_cases_holdout6.json, stale_cases_holdout7.json,
stale_cases_holdout8.json to stale_cases_holdout12.json, 100 more chains each, written later by someone who had not seen the
detection rules or the other files (each once the one before had been read or run often during
tuning: run the newest, do not read its records). A chain states one fact 2-4 times (a preference,
a version, where someone lives, an employer, a tool, a project decision...); the last value is
current. Chains are packed, families together, into groups of about
--group-size chains; each group gets a fresh database. Its chains' values (in order), the
chains' compatible statements (same topic, no contradiction) and --distractors unrelated
memories are interleaved at random (seeded) times and stored one by one through ``store``
on a simulated clock (--step-seconds apart); then each chain's query is asked once with
``recall(top_k)``.

Per chain: top-1 is right when the first memory comes from the chain (a value or a
compatible statement) and states the current value: it is the current value's own memory, or
it contains the current answer string and no older one. Stale returned: memories of older
values among the top_k. False merges: a compatible statement or distractor that reinforced or
superseded any memory, a value that reinforced or superseded a memory other than an older
value of its own chain, or any such memory lost to one of those; every memory a store
superseded is checked (before commit 507faf4 a store could supersede several, listed in
``supersededIds``; reruns of such code are counted right too). A value merged into an older
value of its own chain (the update was lost) is counted apart, as a lost update.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from common import CachedEmbedder, Progress, machine, wilson, write_results

import yourmemory
from yourmemory import InvalidInput, YourMemory

CASES = Path(__file__).resolve().parent / "stale_cases.json"
IMPORTANCE = 0.7
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed simulated clock, so runs repeat


# -- cases -------------------------------------------------------------------

def states(text: str, answer: str) -> bool:
    """``answer`` occurs in ``text`` as a whole token run (case-insensitive): "npm" is not in "pnpm"."""
    return re.search(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", text, re.I) is not None


def load_cases(path: Path) -> dict:
    cases = json.loads(path.read_text())
    problems, ids, texts = [], set(), Counter()
    for chain in cases["chains"]:
        cid, values = chain["id"], chain["values"]
        if cid in ids:
            problems.append(f"{cid}: duplicate id")
        ids.add(cid)
        if not 2 <= len(values) <= 4:
            problems.append(f"{cid}: {len(values)} values, want 2-4")
        if not chain.get("query", "").strip():
            problems.append(f"{cid}: no query")
        answers = [v["answer"] for v in values]
        if len({a.lower() for a in answers}) != len(answers):
            problems.append(f"{cid}: answers not distinct")
        for i, value in enumerate(values):
            texts[value["text"]] += 1
            if not states(value["text"], value["answer"]):
                problems.append(f"{cid}: value {i} does not state its answer {value['answer']!r}")
            for later in answers[i + 1:]:  # a value may name the one it replaces, never a later one
                if states(value["text"], later):
                    problems.append(f"{cid}: value {i} already states the later answer {later!r}")
        for item in chain.get("compatible", []):
            texts[item["text"]] += 1
            if not 0 <= item["after"] <= len(values):
                problems.append(f"{cid}: compatible 'after' out of range")
    for text in cases["distractors"]:
        texts[text] += 1
    problems += [f"text used twice: {t!r}" for t, n in texts.items() if n > 1]
    if problems:
        raise SystemExit("stale_cases.json has problems:\n  " + "\n  ".join(problems))
    return cases


def make_groups(chains: list[dict], size: int, rng: random.Random) -> list[list[dict]]:
    """Families stay together; units are shuffled and packed into groups of about ``size`` chains."""
    units: dict[str, list[dict]] = {}
    for chain in chains:
        units.setdefault(chain.get("family") or chain["id"], []).append(chain)
    order = list(units.values())
    rng.shuffle(order)
    groups, current = [], []
    for unit in order:
        current += unit
        if len(current) >= size:
            groups.append(current)
            current = []
    if current:
        if groups and len(current) < size // 2:
            groups[-1] += current
        else:
            groups.append(current)
    return groups


def timeline(group: list[dict], distractors: list[str], n_distractors: int, rng: random.Random) -> list[dict]:
    """Every memory the group stores, in time order. Values keep their order within a chain;
    a compatible statement comes after its chain's first ``after`` values."""
    events = []
    for chain in group:
        times = sorted(rng.random() for _ in chain["values"])
        for i, (t, value) in enumerate(zip(times, chain["values"])):
            events.append({"t": t, "type": "value", "chain": chain["id"], "index": i, "text": value["text"]})
        for j, item in enumerate(chain.get("compatible", [])):
            low = times[item["after"] - 1] if item["after"] else 0.0
            events.append({"t": rng.uniform(low, 1.0), "type": "compatible", "chain": chain["id"], "index": j,
                           "text": item["text"]})
    for k in rng.sample(range(len(distractors)), min(n_distractors, len(distractors))):
        events.append({"t": rng.random(), "type": "distractor", "chain": None, "index": k, "text": distractors[k]})
    events.sort(key=lambda e: e["t"])
    return events


def label(event: dict | None) -> str:
    if event is None:
        return "unknown"
    if event["type"] == "distractor":
        return f"distractor:{event['index']}"
    return f"{event['type']}:{event['chain']}:{event['index']}"


# -- one database ------------------------------------------------------------

class Clock:
    def __init__(self, step: float):
        self.now, self.step = START, step

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step


def run_group(number: int, group: list[dict], events: list[dict], args, embedder, workdir: Path,
              progress: Progress) -> tuple[list[dict], Counter]:
    clock = Clock(args.step_seconds)
    memory = YourMemory(workdir / f"group{number}.db", user="bench", embedder=embedder, clock=clock)
    origin: dict[int, dict] = {}          # memory id -> the event whose text it holds
    by_text = {e["text"]: e for e in events}
    value_id: dict[tuple[str, int], int] = {}   # (chain, value index) -> id of the memory that holds it
    superseded: set[int] = set()
    actions: Counter = Counter()
    per_chain = {c["id"]: {"value_actions": [], "compatible_actions": [], "false_merges": [],
                           "lost_updates": 0, "correct_supersedes": 0} for c in group}

    false_merges: list[dict] = []

    def false_merge(event: dict, action: str, target: dict | None) -> None:
        entry = {"item": label(event), "action": action, "target": label(target)}
        for side in (event, target):
            if side is not None and side["chain"] in per_chain and entry not in per_chain[side["chain"]]["false_merges"]:
                per_chain[side["chain"]]["false_merges"].append(entry)
        false_merges.append(entry)

    for event in events:
        clock.tick()
        try:
            result = memory.store(event["text"], importance=IMPORTANCE)
        except InvalidInput as error:
            actions[f"{event['type']}:refused"] += 1
            event["action"] = "refused"
            if event["chain"]:
                key = "value_actions" if event["type"] == "value" else "compatible_actions"
                per_chain[event["chain"]][key].append("refused")
            print(f"\nrefused {label(event)}: {error}")
            progress.step()
            continue
        action, mid = result["action"], result["id"]
        actions[f"{event['type']}:{action}"] += 1
        targets = []  # every memory this store merged into or replaced: a store may supersede several
        if action == "supersede":
            replaced = result.get("supersededIds", [result["supersededId"]])  # several, before commit 507faf4
            targets = [origin.get(old) for old in replaced]
            superseded.update(replaced)
            origin[mid] = event
        elif action == "reinforce":
            targets = [origin.get(mid)]
        else:
            origin[mid] = event
        if event["type"] == "value":
            chain = per_chain[event["chain"]]
            chain["value_actions"].append(action)
            for target in targets:
                own_older = (target is not None and target["type"] == "value" and target["chain"] == event["chain"]
                             and target["index"] < event["index"])
                if own_older and action == "supersede":
                    chain["correct_supersedes"] += 1
                elif own_older:
                    chain["lost_updates"] += 1
                else:
                    false_merge(event, action, target)
            value_id[(event["chain"], event["index"])] = mid
        else:
            if event["chain"]:
                per_chain[event["chain"]]["compatible_actions"].append(action)
            for target in targets:
                false_merge(event, action, target)
        progress.step()

    memory.index_sentences()  # as the server's background job does after stores
    records = []
    for chain in group:
        clock.tick()
        cid, values = chain["id"], chain["values"]
        answers = [v["answer"] for v in values]
        current = len(values) - 1
        recalled = memory.recall(chain["query"], top_k=args.top_k)["memories"]
        sources = [origin.get(m["id"]) or by_text.get(m["content"]) for m in recalled]
        stale_ranks, current_rank = [], None
        for rank, (m, source) in enumerate(zip(recalled, sources), 1):
            if source and source["type"] == "value" and source["chain"] == cid:
                if source["index"] < current:
                    stale_ranks.append(rank)
                elif current_rank is None:
                    current_rank = rank
        top1 = False
        if recalled and sources[0] and sources[0]["chain"] == cid:
            content, source = recalled[0]["content"], sources[0]
            own_current = source["type"] == "value" and source["index"] == current and content == source["text"]
            top1 = own_current or (states(content, answers[current])
                                    and not any(states(content, a) for a in answers[:current]))
        old_ids = {value_id.get((cid, i)) for i in range(current)} - {None}
        info = per_chain[cid]
        records.append({
            "chain": cid, "kind": chain["kind"], "family": chain.get("family"), "group": number,
            "values": len(values), "top1": top1, "top1_source": label(sources[0]) if recalled else None,
            "returned": [[label(source), m["via"], m["score"]] for m, source in zip(recalled, sources)],
            "current_rank": current_rank, "stale_returned": len(stale_ranks), "stale_ranks": stale_ranks,
            "stale_live": len(old_ids - superseded),  # older values never superseded (still recallable)
            "value_actions": info["value_actions"], "correct_supersedes": info["correct_supersedes"],
            "lost_updates": info["lost_updates"], "compatible_actions": info["compatible_actions"],
            "false_merges": info["false_merges"],
        })
        progress.step()
    memory.close()
    actions["false_merge_events"] = len(false_merges)
    return records, actions


# -- report ------------------------------------------------------------------

def block(records: list[dict]) -> dict:
    n = len(records)
    hits = sum(r["top1"] for r in records)
    low, high = wilson(hits, n)
    return {"n": n, "top1": hits, "top1_rate": round(hits / n, 4) if n else None,
            "wilson95": [round(low, 4), round(high, 4)],
            "stale_returned": sum(r["stale_returned"] for r in records),
            "chains_with_stale_returned": sum(1 for r in records if r["stale_returned"]),
            "stale_live": sum(r["stale_live"] for r in records),
            "lost_updates": sum(r["lost_updates"] for r in records),
            "chains_with_false_merges": sum(1 for r in records if r["false_merges"])}


def summarise(records: list[dict], false_merge_events: int) -> dict:
    by_kind, by_length = defaultdict(list), defaultdict(list)
    for r in records:
        by_kind[r["kind"]].append(r)
        by_length[r["values"]].append(r)
    superseded_needed = sum(r["values"] - 1 for r in records)
    return {"all": {**block(records), "false_merges": false_merge_events,
                    "supersedes_needed": superseded_needed,
                    "correct_supersedes": sum(r["correct_supersedes"] for r in records)},
            "by_kind": {k: block(rs) for k, rs in sorted(by_kind.items())},
            "by_values": {str(k): block(rs) for k, rs in sorted(by_length.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=str(CASES), help="cases file (default: benchmarks/stale_cases.json)")
    parser.add_argument("--group-size", type=int, default=10, help="chains per database (families kept whole)")
    parser.add_argument("--distractors", type=int, default=15, help="unrelated memories per database")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=60.0,
                        help="simulated time between two stores (default 60: decay plays no part)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="only the first N databases (for a quick look)")
    parser.add_argument("--out", help="results file name under benchmarks/results/ (default stale.json)")
    parser.add_argument("--no-embedding-cache", action="store_true",
                        help="embed every text with the model again (the cache only skips repeated ONNX calls)")
    args = parser.parse_args()
    cases = load_cases(Path(args.cases))
    rng = random.Random(args.seed)
    groups = make_groups(cases["chains"], args.group_size, rng)[:args.limit]
    plans = [timeline(g, cases["distractors"], args.distractors, rng) for g in groups]
    embedder = yourmemory.Embedder().load() if args.no_embedding_cache else CachedEmbedder()
    total = sum(len(events) + len(g) for g, events in zip(groups, plans))
    progress = Progress(total, "stale")
    records, actions = [], Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="yourmemory-stale-") as workdir:
        for number, (group, events) in enumerate(zip(groups, plans)):
            group_records, group_actions = run_group(number, group, events, args, embedder, Path(workdir), progress)
            records += group_records
            actions.update(group_actions)
    false_merge_events = actions.pop("false_merge_events", 0)
    summary = summarise(records, false_merge_events)
    report = {"benchmark": "stale", "machine": machine(), "yourmemory": yourmemory.__version__,
              "protocol": {"cases": Path(args.cases).name, "chains": len(records), "databases": len(groups),
                           "group_size": args.group_size, "distractors_per_db": args.distractors,
                           "top_k": args.top_k, "step_seconds": args.step_seconds, "seed": args.seed,
                           "importance": IMPORTANCE},
              "seconds": round(time.monotonic() - started, 1),
              "store_actions": dict(sorted(actions.items())), "summary": summary, "records": records}
    path = write_results(args.out or "stale.json", report)
    a = summary["all"]
    print(f"store actions: {dict(sorted(actions.items()))}")
    print(f"chains {a['n']} in {len(groups)} databases; top-1 current {a['top1']}/{a['n']} = {a['top1_rate']:.1%} "
          f"(95% Wilson {a['wilson95'][0]:.1%}-{a['wilson95'][1]:.1%})")
    print(f"stale values returned in top-{args.top_k}: {a['stale_returned']} (in {a['chains_with_stale_returned']} "
          f"chains); false merges: {a['false_merges']} (touching {a['chains_with_false_merges']} chains); "
          f"lost updates: {a['lost_updates']}")
    print(f"supersedes: {a['correct_supersedes']} correct of {a['supersedes_needed']} needed; "
          f"older values still live: {a['stale_live']}")
    for name, section in (("kind", summary["by_kind"]), ("values", summary["by_values"])):
        for key, b in section.items():
            print(f"  {name} {key:>11}: n={b['n']:3d} top1={b['top1_rate']:.1%} stale_returned={b['stale_returned']} "
                  f"false-merge chains={b['chains_with_false_merges']} lost={b['lost_updates']}")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
