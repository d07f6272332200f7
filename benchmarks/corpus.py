"""A large corpus of real English sentences with real embeddings, for the scale benchmark.

    python benchmarks/corpus.py --size 100000

LoCoMo has 5,882 turns; 100,000 memories need more text than that. The corpus is the
LoCoMo turns ("Speaker: text") followed by sentences from the docstrings of every Python
file on this interpreter's path (the standard library and the installed packages, but not this
repository, whose docstrings change with the code), each
20-300 printable characters, starting with a capital letter, free of code-like characters, in a
fixed pseudo-random order. Different machines have different packages, so the corpus
differs between machines; its size and SHA-256 go into the results.

Vectors come from the product's own ``Embedder.embed`` (batched, as a bulk import would
embed) and are cached under the user's cache dir, one per text, keyed by the text and the
model file, so the scale benchmark pays for them once.
"""
from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import re
import sqlite3
import sys
from pathlib import Path

import numpy as np
from common import Progress, load_locomo
from locomo import turn_units

import yourmemory

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
CODE_LIKE = re.compile(r"[{}<>=`|\\\[\]]|>>>|::")


@functools.lru_cache(maxsize=1)
def docstring_sentences() -> tuple[str, ...]:
    repository, environment = Path(__file__).resolve().parents[1], Path(sys.prefix).resolve()
    roots = sorted({Path(p).resolve() for p in sys.path if p and Path(p).is_dir()})
    files = sorted({f for root in roots for f in root.rglob("*.py")  # a virtualenv may live in the checkout
                    if not f.resolve().is_relative_to(repository) or f.resolve().is_relative_to(environment)})
    progress, found = Progress(len(files), "read docstrings"), set()
    for path in files:
        progress.step()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                found.update(_sentences(ast.get_docstring(node) or ""))
    return tuple(sorted(found))


def _sentences(docstring: str):
    for paragraph in re.split(r"\n\s*\n", docstring):
        for sentence in SENTENCE_END.split(" ".join(paragraph.split())):
            if (20 <= len(sentence) <= 300 and re.match(r"[A-Z][a-z]", sentence) and sentence.count(" ") >= 3
                    and sentence.isprintable() and not CODE_LIKE.search(sentence)):
                yield sentence


def locomo_turns(samples: list[dict]) -> list[str]:
    return [content for s in samples for _, content in turn_units(s)]


def build_texts(samples: list[dict], size: int) -> list[str]:
    turns = locomo_turns(samples)
    if size <= len(turns):
        return turns[:size]
    extra = sorted(set(docstring_sentences()) - set(turns), key=lambda t: hashlib.sha1(t.encode()).digest())
    if len(turns) + len(extra) < size:
        sys.exit(f"only {len(turns) + len(extra)} distinct sentences on this machine; ask for fewer")
    return turns + extra[: size - len(turns)]


def corpus(samples: list[dict], size: int) -> tuple[list[str], np.ndarray, str]:
    """(texts, unit vectors, corpus SHA-256) for ``size`` memories, embedding what is not cached.

    Vectors are cached one per text (keyed by the model file and the text), so a run that
    stops halfway keeps what it embedded, and every size shares one cache.
    """
    texts = build_texts(samples, size)
    keys, cache = _cache_keys(texts), _cache()
    cache.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
    vectors = np.zeros((len(texts), yourmemory.EMBEDDING_DIM), dtype=np.float32)
    missing = []
    for i, key in enumerate(keys):
        row = cache.execute("SELECT vector FROM vectors WHERE key = ?", (key,)).fetchone()
        if row:
            vectors[i] = np.frombuffer(row[0], dtype=np.float32)
        else:
            missing.append(i)
    if missing:
        embedder, step = yourmemory.Embedder().load(), 256
        progress = Progress(len(missing), f"embed {len(missing)} of {len(texts)} texts")
        for start in range(0, len(missing), step):
            batch = missing[start:start + step]
            vectors[batch] = embedder.embed([texts[i] for i in batch])
            cache.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                              [(keys[i], vectors[i].tobytes()) for i in batch])
            progress.step(len(batch))
    cache.close()
    return texts, vectors, _digest(texts)


def corpus_sketches(texts: list[str]) -> list[bytes]:
    """Each text's token sketches (``Embedder.embed_with_tokens``, one text a run, as a store makes them), cached
    like the vectors, so that imported corpus memories take part in recall's late interaction."""
    keys, cache = _cache_keys(texts), _cache()
    cache.execute("CREATE TABLE IF NOT EXISTS token_sketches (key BLOB PRIMARY KEY, sketches BLOB NOT NULL)")
    sketches: list[bytes | None] = []
    for key in keys:
        row = cache.execute("SELECT sketches FROM token_sketches WHERE key = ?", (key,)).fetchone()
        sketches.append(row[0] if row else None)
    missing = [i for i, blob in enumerate(sketches) if blob is None]
    if missing:
        embedder = yourmemory.Embedder().load()
        progress = Progress(len(missing), f"token sketches of {len(missing)} of {len(texts)} texts")
        for i in missing:
            sketches[i] = embedder.embed_with_tokens(texts[i])[1]
            cache.execute("INSERT OR REPLACE INTO token_sketches VALUES (?, ?)", (keys[i], sketches[i]))
            progress.step()
    cache.close()
    return sketches


def _cache_keys(texts: list[str]) -> list[bytes]:
    """One key per text: the SHA-256 of the model file's size and mtime and the text (a rebuilt model misses)."""
    onnx = yourmemory.model_dir() / "model.onnx"
    salt = f"{onnx.stat().st_size}:{onnx.stat().st_mtime_ns}".encode()
    return [hashlib.sha256(salt + b"\0" + t.encode("utf-8", "surrogatepass")).digest() for t in texts]


def _cache():
    path = yourmemory.cache_home() / "yourmemory-bench" / "corpus.sqlite"
    path.parent.mkdir(parents=True, exist_ok=True)
    return sqlite3.connect(str(path), isolation_level=None)


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode("utf-8", "surrogatepass")).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_200, help="texts (default 100,200: the scale benchmark's 100k + 200)")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    args = parser.parse_args()
    texts, vectors, digest = corpus(load_locomo(args.data), args.size)
    print(f"{len(texts)} texts, vectors {vectors.shape}, sha256 {digest}")


if __name__ == "__main__":
    main()
