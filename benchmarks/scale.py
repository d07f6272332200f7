"""Store and recall latency, KNN against a numpy brute-force scan, RSS and database size, at N memories.

    python benchmarks/scale.py --sizes 1000

Memories are LoCoMo dialog turns ("Speaker: text"), stored one by one through the
full store path (embedding, dedup/contradiction check, linking). Queries are LoCoMo
questions. Latencies are medians and 95th percentiles from one run; the KNN stage
is also reported as a ratio to a numpy scan over the same vectors on the same
machine in the same run, which says more than seconds on a noisy 2-core box.
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from common import Progress, load_locomo, machine, median, percentile, write_results
from locomo import turn_units

import yourmemory
from yourmemory import InvalidInput, YourMemory

KNN_K = 40
QUERIES = 200


class RememberingEmbedder:
    """Wraps the real embedder; replays vectors it has seen, to time recall without the model."""

    def __init__(self, embedder):
        self.embedder, self.seen = embedder, {}

    def embed_one(self, text):
        if text not in self.seen:
            self.seen[text] = self.embedder.embed_one(text)
        return self.seen[text]

    def embed(self, texts):
        return np.stack([self.embed_one(t) for t in texts])


def texts(samples, n):
    turns = [content for s in samples for _, content in turn_units(s)]
    out, round_ = [], 0
    while len(out) < n:
        out += [t if round_ == 0 else f"{t} (#{round_})" for t in turns][: n - len(out)]
        round_ += 1
    return out


def timed(fn, *args, **kwargs):
    started = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - started) * 1000


def measure(size, samples, embedder, workdir: Path) -> dict:
    replay = RememberingEmbedder(embedder)
    db = workdir / f"scale-{size}.db"
    memory = YourMemory(db, user="bench", embedder=replay)
    store_ms, refused = [], 0
    progress = Progress(size, f"store {size}")
    for text in texts(samples, size):
        started = time.perf_counter()
        try:
            memory.store(text, importance=0.7)
            store_ms.append((time.perf_counter() - started) * 1000)
        except InvalidInput:
            refused += 1
        progress.step()
    queries = [q["question"] for s in samples for q in s["qa"]][:QUERIES]
    recall_ms = [timed(memory.recall, q, 10) for q in queries]          # embeds each query
    replay_ms = [timed(memory.recall, q, 10) for q in queries]          # same queries, vectors replayed
    vectors = [replay.embed_one(q) for q in queries]
    knn_ms = [timed(memory._nearest, v, "bench", KNN_K) for v in vectors]
    matrix = np.stack([np.frombuffer(blob, dtype=np.float32) for (blob,) in
                       memory.db.execute("SELECT embedding FROM memory_vectors")])
    numpy_ms = [timed(lambda v: np.argpartition(-(matrix @ v), KNN_K)[:KNN_K], v) for v in vectors]
    memory.close()
    size_bytes = sum(p.stat().st_size for p in workdir.glob(f"scale-{size}.db*"))
    return {
        "memories": size, "refused_as_questions": refused,
        "store_ms": {"p50": round(median(store_ms), 2), "p95": round(percentile(store_ms, 95), 2)},
        "recall_ms": {"p50": round(median(recall_ms), 2), "p95": round(percentile(recall_ms, 95), 2)},
        "recall_without_embedding_ms": {"p50": round(median(replay_ms), 2), "p95": round(percentile(replay_ms, 95), 2)},
        "knn_sqlite_vec_ms_p50": round(median(knn_ms), 3), "knn_numpy_ms_p50": round(median(numpy_ms), 3),
        "knn_ratio_sqlite_vec_to_numpy": round(median(knn_ms) / median(numpy_ms), 2),
        "database_bytes": size_bytes,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000", help="comma-separated memory counts (default 1000)")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    args = parser.parse_args()
    samples = load_locomo(args.data)
    embedder = yourmemory.Embedder().load()
    results = []
    with tempfile.TemporaryDirectory(prefix="yourmemory-scale-") as workdir:
        for size in [int(s) for s in args.sizes.split(",")]:
            result = measure(size, samples, embedder, Path(workdir))
            print(result)
            results.append(result)
    path = write_results("scale.json", {"benchmark": "scale", "machine": machine(), "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
