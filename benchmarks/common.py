"""Shared helpers for the benchmarks: data location, progress bar, statistics, machine description."""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))


def load_locomo(path: str | None) -> list[dict]:
    location = Path(path) if path else DEFAULT_LOCOMO
    if not location.is_file():
        sys.exit(f"LoCoMo data not found at {location}; pass --data PATH (locomo10.json)")
    return json.loads(location.read_text())


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.done, self.started = total, label, 0, time.monotonic()

    def step(self, n: int = 1) -> None:
        every = max(1, self.total // 200)
        before, self.done = self.done, self.done + n
        if self.done == self.total or self.done // every != before // every:  # steps of n > 1 cross marks
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done) if self.done else 0
            filled = int(30 * self.done / self.total)
            sys.stderr.write(f"\r{self.label} [{'#' * filled}{'-' * (30 - filled)}] "
                             f"{self.done}/{self.total} {elapsed:5.0f}s eta {eta:4.0f}s")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> dict:
    return {"date": date.today().isoformat(), "python": platform.python_version(),
            "platform": platform.platform(), "cpus": os.cpu_count()}


def write_results(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / name
    records = payload.pop("records", None)
    text = json.dumps(payload, indent=1, ensure_ascii=False)
    if records is not None:  # one record per line: small, and diffs read well
        lines = ",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records)
        text = text[:-2] + ',\n "records": [\n' + lines + "\n ]\n}"
    target.write_text(text + "\n")
    return target


class CachedEmbedder:
    """The real model, with each text's vector kept on disk so that reruns skip the ONNX call.

    Vectors come from the same ``embed_one`` call the product makes (one text at a time, so
    no padding differs), keyed by the SHA-256 of the text and of the model file's size and
    mtime: a rebuilt model never serves stale vectors. Retrieval figures are unchanged by
    the cache; timing benchmarks must not use it.
    """

    def __init__(self, path: Path | None = None):
        import hashlib
        import sqlite3
        import yourmemory
        self.model = yourmemory.Embedder().load()
        onnx = yourmemory.model_dir() / "model.onnx"
        self.salt = f"{onnx.stat().st_size}:{onnx.stat().st_mtime_ns}".encode()
        self.hashlib = hashlib
        path = path or yourmemory.cache_home() / "yourmemory-bench" / "embeddings.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS token_sketches (key BLOB PRIMARY KEY, sketches BLOB NOT NULL)")
        self.hits = self.misses = 0

    def load(self) -> "CachedEmbedder":
        return self

    def _key(self, text: str) -> bytes:
        return self.hashlib.sha256(self.salt + b"\0" + text.encode("utf-8", "surrogatepass")).digest()

    def embed_one(self, text: str):
        import numpy as np
        key = self._key(text)
        row = self.db.execute("SELECT vector FROM vectors WHERE key = ?", (key,)).fetchone()
        if row:
            self.hits += 1
            return np.frombuffer(row[0], dtype=np.float32).copy()
        self.misses += 1
        vector = np.asarray(self.model.embed_one(text), dtype=np.float32)
        self.db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?)", (key, vector.tobytes()))
        return vector

    def embed_with_tokens(self, text: str):
        """The vector as ``embed_one`` gives it, and the text's token sketches, both kept on disk."""
        import numpy as np
        key = self._key(text)
        row = self.db.execute("SELECT v.vector, t.sketches FROM vectors AS v JOIN token_sketches AS t USING (key) "
                              "WHERE key = ?", (key,)).fetchone()
        if row:
            self.hits += 1
            return np.frombuffer(row[0], dtype=np.float32).copy(), row[1]
        self.misses += 1
        vector, sketches = self.model.embed_with_tokens(text)
        self.db.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?)", (key, vector.tobytes()))
        self.db.execute("INSERT OR REPLACE INTO token_sketches VALUES (?, ?)", (key, sketches))
        return vector, sketches

    def token_words(self, text: str):
        """The words of the text's token sketches, from the tokenizer alone (nothing to cache)."""
        return self.model.token_words(text)

    def embed(self, texts):
        import numpy as np
        return np.stack([self.embed_one(text) for text in texts]) if texts else np.zeros((0, 768), np.float32)
