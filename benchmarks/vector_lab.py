"""Why the vector stage is built the way it is: sqlite-vec's scans and lookups against numpy, at N vectors.

    python benchmarks/vector_lab.py --count 50000

Random unit vectors (only speed is measured here; recall on real embeddings is in scale.py),
one SQLite database in RAM, 50 queries. For each way to find the 40 nearest of N vectors:

- vec0 float[768], k = 40: sqlite-vec's exact scan;
- vec0 bit[768], k = 10 and k = 200: sqlite-vec's binary-quantised scan (a first stage needs
  hundreds of candidates, hence k = 200);
- vec_distance_hamming over a plain table, ORDER BY ... LIMIT 200;
- numpy float scan (the physical reference) and numpy popcount over packed sign bits;
- rescoring 400 candidates by id with vec_distance_cosine: from vec0, and from a rowid table.

Medians in ms and as a ratio to the numpy float scan of the same run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from common import machine, write_results

import yourmemory

QUERIES = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(args.count, yourmemory.EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    bits = np.packbits(vectors > 0, axis=1)
    db = yourmemory.open_raw(":memory:")
    db.execute("CREATE VIRTUAL TABLE vec_float USING vec0(embedding float[768] distance_metric=cosine)")
    db.execute("CREATE VIRTUAL TABLE vec_bit USING vec0(sketch bit[768])")
    db.execute("CREATE TABLE plain (id INTEGER PRIMARY KEY, embedding BLOB, sketch BLOB)")
    db.execute("BEGIN")
    for i in range(args.count):
        db.execute("INSERT INTO vec_float (rowid, embedding) VALUES (?, ?)", (i + 1, vectors[i].tobytes()))
        db.execute("INSERT INTO vec_bit (rowid, sketch) VALUES (?, vec_bit(?))", (i + 1, bits[i].tobytes()))
        db.execute("INSERT INTO plain VALUES (?, ?, ?)", (i + 1, vectors[i].tobytes(), bits[i].tobytes()))
    db.execute("COMMIT")
    words = bits.view(np.uint64)
    candidates = json.dumps(rng.integers(1, args.count, 400).tolist())
    ways = {
        "vec0 float[768], k = 40": lambda q, b: db.execute(
            "SELECT rowid FROM vec_float WHERE embedding MATCH ? AND k = 40", (q.tobytes(),)).fetchall(),
        "vec0 bit[768], k = 10": lambda q, b: db.execute(
            "SELECT rowid FROM vec_bit WHERE sketch MATCH vec_bit(?) AND k = 10", (b,)).fetchall(),
        "vec0 bit[768], k = 200": lambda q, b: db.execute(
            "SELECT rowid FROM vec_bit WHERE sketch MATCH vec_bit(?) AND k = 200", (b,)).fetchall(),
        "vec_distance_hamming over a plain table, 200": lambda q, b: db.execute(
            "SELECT id FROM plain ORDER BY vec_distance_hamming(vec_bit(sketch), vec_bit(?)) LIMIT 200",
            (b,)).fetchall(),
        "numpy float scan, 40": lambda q, b: np.argpartition(-(vectors @ q), 40)[:40],
        "numpy popcount of sign bits, 200": lambda q, b: np.argpartition(
            np.bitwise_count(words ^ np.frombuffer(b, dtype=np.uint64)).sum(axis=1, dtype=np.uint16), 200)[:200],
        "rescore 400 ids from vec0": lambda q, b: db.execute(
            "SELECT rowid, vec_distance_cosine(embedding, ?) FROM vec_float WHERE rowid IN "
            "(SELECT value FROM json_each(?))", (q.tobytes(), candidates)).fetchall(),
        "rescore 400 ids from a rowid table": lambda q, b: db.execute(
            "SELECT id, vec_distance_cosine(embedding, ?) FROM plain WHERE id IN "
            "(SELECT value FROM json_each(?))", (q.tobytes(), candidates)).fetchall(),
    }
    queries = vectors[rng.integers(0, args.count, QUERIES)]
    timings = {name: [] for name in ways}
    for query in queries:
        query_bits = np.packbits(query > 0).tobytes()
        for name, way in ways.items():
            started = time.perf_counter()
            way(query, query_bits)
            timings[name].append((time.perf_counter() - started) * 1000)
    reference = statistics.median(timings["numpy float scan, 40"])
    rows = [{"way": name, "ms_p50": round(statistics.median(t), 3),
             "to_numpy_float": round(statistics.median(t) / reference, 2)} for name, t in timings.items()]
    for row in rows:
        print(f"{row['way']:<46} {row['ms_p50']:>9.3f} ms  {row['to_numpy_float']:>6.2f}x")
    path = write_results("vector_lab.json", {"benchmark": "vector_lab", "machine": machine(),
                                             "vectors": args.count, "queries": QUERIES, "results": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
