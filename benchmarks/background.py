"""Recall while the server's sentence job catches up: what a background model run costs the agent's calls.

    python benchmarks/background.py

A fresh database of the 5,882 LoCoMo turns (``benchmarks/corpus.py``'s cached vectors and token sketches, stored
through ``import_memory``) whose sentences are not embedded yet, as after an upgrade or an import through the
library. Then, for each way the job may run, on a fresh copy of it: the server's ``SentenceIndexer`` started, and
60 LoCoMo questions recalled ``--gap`` seconds apart (default 2, an agent's pace), each inside the server's count
of tool calls (``CallsInFlight``):

- ``none``: no job, the reference;
- ``before``: the job as it was before it gave way to calls (16 memories a batch, no wait for a quiet moment,
  its model runs never stopped);
- ``now``: the job as ``serve`` runs it (each call stops its model run; it waits for QUIET_SECONDS without a call).

Reported: recall p50 / p95 with the query's embedding, and the memories the job embedded meanwhile. Medians of
one run on a noisy 2-core machine: compare the ways within a run, not milliseconds across machines.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import Progress, load_locomo, machine, median, percentile, write_results
from corpus import corpus, corpus_sketches
from scale import ReplayEmbedder

import yourmemory
from yourmemory import CallsInFlight, InvalidInput, SentenceIndexer, YourMemory

USER = "bench"
WAYS = ("none", "before", "now")


def build(samples: list[dict], embedder, path: Path) -> int:
    """The LoCoMo turns imported with their cached vectors and sketches; their sentences left waiting."""
    texts, vectors, _ = corpus(samples, 5_882)
    known = dict(zip(texts, zip(vectors, corpus_sketches(texts))))
    progress, imported = Progress(len(texts), "import the turns"), []
    with YourMemory(path, user=USER, embedder=ReplayEmbedder(embedder, known)) as memory:
        for text in texts:
            try:
                memory.import_memory({"content": text, "importance": 0.7})
                imported.append(text)
            except InvalidInput:  # as scale.py counts them: none among the turns so far
                pass
            progress.step()
    return sum(bool(yourmemory.sentences_to_embed(text)) for text in imported)


def waiting(memory: YourMemory) -> int:
    return memory.db.execute("""SELECT count(*) FROM memories AS m
                                WHERE NOT EXISTS (SELECT 1 FROM memory_sentences AS s WHERE s.memory_id = m.id)
                                """).fetchone()[0]


def run_way(way: str, template: Path, workdir: Path, embedder, questions: list[str], gap: float) -> dict:
    """Recall ``questions`` ``gap`` seconds apart beside the job run ``way``, on a fresh copy of ``template``."""
    path = workdir / f"{way}.db"
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{template}{suffix}").exists():
            shutil.copy(f"{template}{suffix}", f"{path}{suffix}")
    memory = YourMemory(path, user=USER, embedder=embedder)
    memory.recall("warm up", 5)  # the model and spaCy loaded before anything is timed
    before_waiting = waiting(memory)
    warm = threading.Thread(target=lambda: None)  # the server's WarmUp, already done
    warm.start()
    warm.join()
    calls = CallsInFlight(on_start=embedder.stop_background_runs if way == "now" else None)
    job, batch = None, yourmemory.SENTENCE_JOB_BATCH
    if way == "before":
        yourmemory.SENTENCE_JOB_BATCH = 16  # its own count of calls, which no call enters: it never waits
        job = SentenceIndexer(memory, warm, CallsInFlight(quiet_seconds=0))
    elif way == "now":
        job = SentenceIndexer(memory, warm, calls)
    recall_ms, progress = [], Progress(len(questions), f"recall ({way})")
    try:
        if job:
            job.start()
            time.sleep(1)  # the job is under way when the first question comes
        for question in questions:
            with calls.running():
                started = time.perf_counter()
                memory.recall(question, 10)
                recall_ms.append(1000 * (time.perf_counter() - started))
            progress.step()
            time.sleep(gap)
    finally:
        if job:
            job.stop()
        yourmemory.SENTENCE_JOB_BATCH = batch
    embedded = before_waiting - waiting(memory)
    memory.close()
    return {"way": way, "recall_ms": {"p50": round(median(recall_ms), 1), "p95": round(percentile(recall_ms, 95), 1)},
            "memories_embedded_meanwhile": embedded, "recall_ms_each": [round(ms, 1) for ms in recall_ms]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between two recalls (default 2)")
    parser.add_argument("--questions", type=int, default=60, help="recalls per way (default 60)")
    args = parser.parse_args()
    if args.gap < 0 or args.questions < 1:
        parser.error("--gap must be 0 or more and --questions 1 or more")
    yourmemory.one_openblas_thread_unless_set()
    samples = load_locomo(args.data)
    embedder = yourmemory.Embedder().load()
    questions = [q["question"] for s in samples for q in s["qa"]][:args.questions]
    with tempfile.TemporaryDirectory(prefix="yourmemory-background-", dir=Path.home()) as workdir:
        template = Path(workdir) / "turns.db"
        several = build(samples, embedder, template)
        results = [run_way(way, template, Path(workdir), embedder, questions, args.gap) for way in WAYS]
    for result in results:
        print(f"{result['way']:>6}: recall p50 {result['recall_ms']['p50']} ms, p95 {result['recall_ms']['p95']} ms; "
              f"{result['memories_embedded_meanwhile']} memories embedded meanwhile")
    path = write_results("background.json", {
        "benchmark": "background", "machine": machine(), "gap_seconds": args.gap,
        "memories_with_sentences_waiting": several, "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
