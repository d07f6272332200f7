"""spaCy's own tok2vec, attribute ruler and lemmatizer against YourMemory's direct versions of them, on real texts.

    python benchmarks/parse_lab.py                 # every LoCoMo turn and every text of the benchmark files
    python benchmarks/parse_lab.py --limit 2000    # the first 2,000 of them

Each text (at most 2,000 characters, as ``parse`` cuts them) is parsed with spaCy's steps and with the direct
ones (``yourmemory.use_faster_parse_steps``), in alternating rounds, in one process whose numpy OpenBLAS runs on
one thread as `serve`'s does. Reported: how many texts parse to the same bits both ways (the tok2vec tensor and
every token's text, POS, tag, morphology, lemma, dependency and head), and the parse time of each way, median
and mean, from the second round of each (the first warms spaCy's caches).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from common import Progress, load_locomo, machine, write_results

import yourmemory

BENCHMARKS = Path(__file__).resolve().parent


def texts_of(value) -> list[str]:
    """Every string with a space in a JSON value: statements, questions, distractors."""
    if isinstance(value, str):
        return [value] if " " in value.strip() else []
    if isinstance(value, dict):
        value = list(value.values())
    return [text for item in value for text in texts_of(item)] if isinstance(value, list) else []


def corpus(data: str | None, limit: int | None) -> list[str]:
    texts = [turn["text"] for sample in load_locomo(data) for key, session in sample["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for turn in session]
    for path in sorted(BENCHMARKS.glob("*.json")):
        texts += texts_of(json.loads(path.read_text(encoding="utf-8")))
    return list(dict.fromkeys(text[:2000] for text in texts))[:limit]


def parse_all(pipeline, texts: list[str], direct: bool, label: str) -> tuple[list, list[float]]:
    yourmemory.use_faster_parse_steps(pipeline, on=direct)
    parses, seconds, progress = [], [], Progress(len(texts), label)
    for text in texts:
        started = time.perf_counter()
        doc = pipeline(text)
        seconds.append(time.perf_counter() - started)
        parses.append(yourmemory._parse_attributes(doc))
        progress.step()
    return parses, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--limit", type=int, help="parse only the first N texts")
    args = parser.parse_args()
    threads = yourmemory.one_openblas_thread_unless_set()
    texts = corpus(args.data, args.limit)
    pipeline = yourmemory.nlp()
    runs = {}
    for round_ in (1, 2):
        for way, direct in (("spacy", False), ("direct", True)):
            runs[way] = parse_all(pipeline, texts, direct, f"round {round_}, {way}")
    yourmemory.use_faster_parse_steps(pipeline)
    same = sum(a == b for a, b in zip(runs["spacy"][0], runs["direct"][0]))
    timing = {way: {"p50_ms": round(statistics.median(seconds) * 1000, 3),
                    "mean_ms": round(statistics.mean(seconds) * 1000, 3)} for way, (_, seconds) in runs.items()}
    result = {"texts": len(texts), "same_parse": same, "openblas_threads": threads, **timing,
              "direct_to_spacy_p50": round(timing["direct"]["p50_ms"] / timing["spacy"]["p50_ms"], 2)}
    print(json.dumps(result))
    path = write_results("parse_lab.json", {"benchmark": "parse_lab", "machine": machine(), "result": result})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
