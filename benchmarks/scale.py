"""Store and recall latency, the vector stage against a numpy scan, memory and database size, at N memories.

    python benchmarks/scale.py --sizes 1000,10000,100000 --vectors 1000000

For each size N, a fresh database is filled with N memories from benchmarks/corpus.py
(LoCoMo turns, then docstring sentences; real all-mpnet-base-v2 vectors and token sketches, cached)
through ``import_memory``: the product's insert path with linking, minus the duplicate check. Then,
on that database:

- sentences: each sentence of the memories of several (the LoCoMo turns) embedded alone, as the server's
  background job does after stores (``index_sentences``, the real model), its mean time a memory against the mean
  of one ``embed_one`` call on 200 of those memories; recall below reads them;
- store: 200 further corpus texts through ``store`` with the real model (embedding, spaCy,
  duplicate/contradiction check, linking), beside one ``embed_one`` call on the same text;
- recall: 200 LoCoMo questions with ``top_k=10``, embedding the query, and again with the
  query's vector and token sketches replayed (search, BM25, fusion, late interaction, graph,
  reinforcement only);
- vector stage: ``nearest_vectors`` (sketch candidates + exact cosine in SQLite, k = 40 as
  recall asks) against a numpy brute-force scan over the same vectors in RAM, in the same
  run, and the share of the exact top 10 it returns (recall@10 against exact search); the
  same share and time for a store's search (its 10 nearest neighbours, fewer candidates).

``--vectors`` runs the vector stage alone at that many vectors: the real corpus vectors plus
perturbed copies (Gaussian noise, renormalised) to fill up, written straight into
``memory_vectors``. Latencies are medians and 95th percentiles of one run; ratios to numpy
say more than milliseconds on a noisy 2-core machine. Each size's result replaces that size's
entry in results/scale.json and the others stay, so sizes can be run one at a time.

``--profile`` runs cProfile over the 200 stores of each size and prints where their time
goes (the profiler slows them down, so such a run writes no results).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from common import RESULTS, Progress, load_locomo, machine, median, percentile, write_results
from corpus import corpus, corpus_sketches

import yourmemory
from yourmemory import InvalidInput, VectorIndex, YourMemory, nearest_vectors

KNN_K = 40          # what recall(top_k=10) asks the vector stage for
QUERIES = 200
STORE_PROBES = 200
USER = "bench"


class ReplayEmbedder:
    """Known vectors and token sketches by text (the corpus, cached queries); anything else goes to the real model."""

    def __init__(self, embedder, known: dict[str, tuple[np.ndarray, bytes]]):
        self.embedder, self.known = embedder, known

    def embed_one(self, text):
        return self.embed_with_tokens(text)[0]

    def embed_with_tokens(self, text):
        if text not in self.known:
            self.known[text] = self.embedder.embed_with_tokens(text)
        return self.known[text]

    def token_words(self, text):
        return self.embedder.token_words(text)

    def embed(self, texts):
        return np.stack([self.embed_one(t) for t in texts])


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, result


def stats(values: list[float]) -> dict:
    return {"p50": round(median(values), 3), "p95": round(percentile(values, 95), 3)}


def memory_mb() -> dict:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"rss_mb": round(int(status["VmRSS"].split()[0]) / 1024, 1),
            "peak_rss_mb": round(int(status["VmHWM"].split()[0]) / 1024, 1)}


# The product runs as `serve` runs it: numpy's OpenBLAS on one thread unless the environment sets a count
# (``yourmemory.one_openblas_thread_unless_set``). The numpy scan it is compared with keeps the threads numpy had.
NUMPY_THREADS: int | None = None
PRODUCT_THREADS: int | None = None


@contextmanager
def reference_threads():
    if NUMPY_THREADS is not None:
        yourmemory.set_openblas_threads(NUMPY_THREADS)
    try:
        yield
    finally:
        if PRODUCT_THREADS is not None:
            yourmemory.set_openblas_threads(PRODUCT_THREADS)


def vector_stage(conn, index: VectorIndex, matrix: np.ndarray, ids: np.ndarray, queries: np.ndarray) -> dict:
    """nearest_vectors against numpy over the same vectors; recall@10 against the exact top 10,
    for recall's search (k = 40, 400 candidates) and for a store's (its 10 neighbours, 200)."""
    stage_ms, numpy_ms, store_ms, overlap, store_overlap = [], [], [], [], []
    position = {memory_id: i for i, memory_id in enumerate(ids.tolist())}

    def share_of_exact_top_10(found, similarities):
        # A returned vector counts if it is as near as the exact 10th: identical vectors (the same
        # text stored twice) tie, and which of them comes first is arbitrary.
        tenth = np.partition(similarities, -10)[-10]
        return sum(similarities[position[m]] >= tenth - 1e-6 for m, _ in found[:10]) / 10

    for query in queries:
        ms, found = timed(nearest_vectors, conn, index, query, [USER], KNN_K)
        stage_ms.append(ms)
        with reference_threads():
            ms, top = timed(lambda q: np.argpartition(-(matrix @ q), KNN_K)[:KNN_K], query)
        numpy_ms.append(ms)
        ms, neighbours = timed(nearest_vectors, conn, index, query, [USER], yourmemory.EDGE_FANOUT)
        store_ms.append(ms)
        similarities = matrix @ query
        overlap.append(share_of_exact_top_10(found, similarities))
        store_overlap.append(share_of_exact_top_10(neighbours, similarities))
    return {"vector_stage_ms": stats(stage_ms), "numpy_scan_ms": stats(numpy_ms),
            "vector_stage_to_numpy": round(median(stage_ms) / median(numpy_ms), 2),
            "recall_at_10_vs_exact": round(float(np.mean(overlap)), 4),
            "store_search_ms": stats(store_ms),
            "store_search_recall_at_10_vs_exact": round(float(np.mean(store_overlap)), 4)}


def measure(size: int, samples: list[dict], embedder, questions: list[str], workdir: Path,
            profiler: cProfile.Profile | None = None) -> dict:
    texts, vectors, digest = corpus(samples, size + STORE_PROBES)
    base, probes = texts[:size], texts[size:]
    known = dict(zip(texts, zip(vectors, corpus_sketches(texts))))
    db = workdir / f"scale-{size}.db"
    memory = YourMemory(db, user=USER, embedder=ReplayEmbedder(embedder, known))
    progress, started, import_refused = Progress(size, f"import {size}"), time.perf_counter(), 0
    for text in base:
        try:
            memory.import_memory({"content": text, "importance": 0.7})
        except InvalidInput:
            import_refused += 1
        progress.step()
    load_seconds = time.perf_counter() - started

    memory.embedder = embedder  # sentences, stores and first recalls pay for the real model
    sentences = index_sentences(memory, embedder, size)
    store_ms, embed_ms, refused = [], [], 0
    for text in probes:
        try:
            if profiler:
                profiler.enable()
            store_ms.append(timed(memory.store, text, 0.7)[0])
        except InvalidInput:
            refused += 1
            continue
        finally:
            if profiler:
                profiler.disable()
        embed_ms.append(timed(embedder.embed_one, text)[0])
    recall_ms = [timed(memory.recall, q, 10)[0] for q in questions]
    embedded = {q: embedder.embed_with_tokens(q) for q in questions}
    query_vectors = np.stack([embedded[q][0] for q in questions])
    memory.embedder = ReplayEmbedder(embedder, embedded)
    replay_ms = [timed(memory.recall, q, 10)[0] for q in questions]

    rows = memory.db.execute("SELECT memory_id, embedding FROM memory_vectors WHERE active = 1 AND scope = ?",
                             (USER,)).fetchall()
    ids = np.array([memory_id for memory_id, _ in rows])
    matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
    stage = vector_stage(memory.db, memory.vectors, matrix, ids, query_vectors)
    active = memory.db.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
    memory.close()
    return {
        "memories": size, "active_after_run": active, "corpus_sha256": digest,
        "import_per_second": round(size / load_seconds, 1), "import_refused": import_refused,
        "store_ms": stats(store_ms), "embed_one_ms": stats(embed_ms),
        "store_to_embedding": round(median(store_ms) / median(embed_ms), 2), "store_refused": refused,
        **sentences,
        "recall_ms": stats(recall_ms), "recall_without_embedding_ms": stats(replay_ms),
        **stage,
        "database_bytes": sum(p.stat().st_size for p in workdir.glob(f"scale-{size}.db*")),
        **memory_mb(),
    }


def index_sentences(memory: YourMemory, embedder, size: int) -> dict:
    """Embed the sentences of the memories of several (what the server's background job does after stores), and
    compare the mean time a memory took with the mean of one ``embed_one`` call on 200 of those memories."""
    bar = None

    def on_progress(done: int, total: int) -> None:
        nonlocal bar
        bar = bar or Progress(total, f"sentences {size}")
        bar.step(done - bar.done)
    started = time.perf_counter()
    report = memory.index_sentences(on_progress=on_progress)
    seconds = time.perf_counter() - started
    if not report["indexed"]:
        return {"sentences_indexed": 0}
    sample = [content for (content,) in memory.db.execute(
        "SELECT content FROM memories WHERE id IN (SELECT memory_id FROM memory_sentences WHERE length(vectors) > 0) "
        "ORDER BY id LIMIT 200")]
    embed_mean = sum(timed(embedder.embed_one, text)[0] for text in sample) / len(sample)
    per_memory = 1000 * seconds / report["indexed"]
    return {"sentences_indexed": report["indexed"], "index_sentences_ms_per_memory": round(per_memory, 1),
            "index_sentences_to_embedding": round(per_memory / embed_mean, 2)}


def measure_vectors(count: int, samples: list[dict], query_vectors: np.ndarray, workdir: Path) -> dict:
    """The vector stage alone at ``count`` vectors (real corpus vectors, then perturbed copies)."""
    _, real, digest = corpus(samples, min(count, 100_000))
    rng = np.random.default_rng(7)
    matrix = np.empty((count, real.shape[1]), dtype=np.float32)
    matrix[:len(real)] = real
    for start in range(len(real), count, 50_000):
        end = min(count, start + 50_000)
        copies = real[rng.integers(0, len(real), end - start)] + rng.normal(0, 0.02, (end - start, real.shape[1]))
        matrix[start:end] = copies / np.linalg.norm(copies, axis=1, keepdims=True)
    conn = yourmemory.connect(workdir / f"vectors-{count}.db")
    progress = Progress(count, f"write {count} vectors")
    for start in range(0, count, 10_000):
        batch = range(start, min(count, start + 10_000))
        with yourmemory.transaction(conn):
            conn.executemany("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (?, ?, ?, 1)",
                             ((i + 1, matrix[i].tobytes(), USER) for i in batch))
        progress.step(len(batch))
    index = VectorIndex()
    load_ms, _ = timed(index.load, conn)
    stage = vector_stage(conn, index, matrix, np.arange(1, count + 1), query_vectors)
    conn.close()
    return {"vectors": count, "real_vectors": len(real), "corpus_sha256": digest,
            "sketch_load_ms": round(load_ms, 1), **stage,
            "database_bytes": sum(p.stat().st_size for p in workdir.glob(f"vectors-{count}.db*")), **memory_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000", help="comma-separated memory counts (default 1000)")
    parser.add_argument("--vectors", type=int, default=0, help="also run the vector stage alone at this many vectors")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--profile", action="store_true", help="profile the stores; print, write no results")
    args = parser.parse_args()
    global NUMPY_THREADS, PRODUCT_THREADS
    NUMPY_THREADS = yourmemory.openblas_threads()
    PRODUCT_THREADS = yourmemory.one_openblas_thread_unless_set()
    samples = load_locomo(args.data)
    embedder = yourmemory.Embedder().load()
    questions = [q["question"] for s in samples for q in s["qa"]][:QUERIES]
    threads = {"openblas_threads": {"product": PRODUCT_THREADS, "numpy_scan": NUMPY_THREADS}}
    results = []
    with tempfile.TemporaryDirectory(prefix="yourmemory-scale-", dir=Path.home()) as workdir:
        for size in [int(s) for s in args.sizes.split(",") if s]:
            profiler = cProfile.Profile() if args.profile else None
            results.append({"date": machine()["date"], **threads,
                            **measure(size, samples, embedder, questions, Path(workdir), profiler)})
            print(results[-1], flush=True)
            if profiler:
                print(f"where {size} memories' stores spend their time (cProfile, by cumulative time):")
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)
        if args.vectors:
            query_vectors = np.stack([embedder.embed_one(q) for q in questions])
            results.append({"date": machine()["date"], **threads,
                            **measure_vectors(args.vectors, samples, query_vectors, Path(workdir))})
            print(results[-1], flush=True)
    if args.profile:
        return
    path = write_results("scale.json", {"benchmark": "scale", "machine": machine(),
                                        "results": merged(RESULTS / "scale.json", results)})
    print(f"results: {path}")


def merged(path: Path, results: list[dict]) -> list[dict]:
    """Earlier results for other sizes are kept (each carries its date), so sizes can run separately."""
    def key(result):
        return ("memories", result["memories"]) if "memories" in result else ("vectors", result["vectors"])
    fresh = {key(r) for r in results}
    earlier = json.loads(path.read_text())["results"] if path.is_file() else []
    kept = [r for r in earlier if key(r) not in fresh and "date" in r]
    return sorted(kept + results, key=lambda r: key(r))


if __name__ == "__main__":
    main()
