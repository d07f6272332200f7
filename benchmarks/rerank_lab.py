"""Re-ranking lab: the product's own LoCoMo candidates, after late interaction, ranked again with one more signal.

    python benchmarks/rerank_lab.py                  # LoCoMo turns, every way below (the first run: about an hour)
    python benchmarks/rerank_lab.py --ways sentence  # only the ways whose name starts with "sentence"
    python benchmarks/rerank_lab.py --limit 2        # the first 2 conversations, for a quick look

Runs locomo.py's turns protocol once (the same databases, stores and questions) and keeps, for every question,
recall's candidates just after late interaction (their ``score``). Each way then adds one signal to those scores
and reports the evidence recall@5 / @10 / @20 the protocol would give; the first row ranks by the product's score
alone, so it must give about the product's figures (the graph walk, left out here, brings a neighbour into the
first 20 of a few questions; the run prints for how many the first 20 are exactly the product's). The ways, tried
in the forty-first session (BENCHMARKS.md, optimisation log), none built; "sentence" is the one that gained
(0.8337 -> 0.8411 at 10), at the cost of a second model run at store:

- expansion (RM3-like): the index terms of the first ``F`` candidates, weighed by term frequency times idf over
  the conversation, the query's own left out; the ``N`` heaviest scored by the product's BM25 and added at
  ``w`` times BM25's weight, scaled by the best candidate's;
- length: ``g`` times the log of a candidate's word count, less the candidates' mean (longer turns are more
  often evidence: 6% of turns under 10 words, 41% of those of 30-39);
- kind: ``g`` for a candidate among the first 100 that names a value of the kind the question asks for
  (``asked_kind``: a time for "When ...", an amount, a number, a place, a name; ``kind_values``);
- sentence: for a candidate among the first 100 with two or more sentences of at least ``m`` words, ``g`` times
  the cosine's weight times what the best of them adds to the whole memory's cosine, each sentence embedded on
  its own by the model ("Speaker: sentence"): a greeting no longer dilutes the sentence that answers. Its first
  run embeds about 9,000 sentences (some 15 minutes here); the cache keeps them;
- pooled: the same, with each sentence's vector pooled from the token states of the memory's own model run (the
  mean of its tokens' states, as the model pools the whole text), so that a store would need no model run more.
  The memories' token states are not cached: each run runs the model once for each multi-sentence candidate.
"""
from __future__ import annotations

import argparse
import math
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from common import CachedEmbedder, Progress, load_locomo
from late_lab import Recorder
from locomo import evidence_recall, evidence_targets, questions, store_units, turn_units

import yourmemory
from yourmemory import YourMemory

WAYS = {"the product's score": None,
        **{f"expansion F{f} N{n} w{w}": ("expansion", f, n, w)
           for f in (3, 5, 10) for n in (5, 10, 20) for w in (0.1, 0.2, 0.3)},
        **{f"length {g}": ("length", g) for g in (0.005, 0.01, 0.02, 0.03, 0.05)},
        **{f"kind {g}": ("kind", g) for g in (0.03, 0.05, 0.08, 0.12, 0.2)},
        **{f"sentence {g} m{m}": ("sentence", g, m) for g in (0.25, 0.5, 1.0, 1.5) for m in (3, 5)},
        **{f"pooled {g} m{m}": ("pooled", g, m) for g in (0.5, 1.0, 2.0, 3.0, 5.0) for m in (3, 5)}}


class Conversation:
    """One conversation's database, with what the ways need of it counted once."""

    def __init__(self, memory: YourMemory, embedder):
        self.memory, self.db, self.embedder = memory, memory.db, embedder
        self.documents = self.db.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()[0]
        self.frequency: dict[str, int] = {}
        self.terms: dict[int, Counter] = {}
        self.kinds: dict[tuple[int, str], bool] = {}
        self.sentences: dict[tuple[int, int, str], float] = {}
        self.pooled: dict[tuple[int, int], object] = {}

    def idf(self, term: str) -> float:
        if term not in self.frequency:
            self.frequency[term] = self.db.execute(
                "SELECT count(DISTINCT doc) FROM memory_fts_terms WHERE term = ?", (term,)).fetchone()[0]
        f = self.frequency[term]
        return max(1e-6, math.log((self.documents - f + 0.5) / (f + 0.5)))

    def terms_of(self, c: dict) -> Counter:
        if c["id"] not in self.terms:
            self.terms[c["id"]] = Counter(yourmemory.fts_terms(self.db, c["row"]["content"]))
        return self.terms[c["id"]]

    def names_kind(self, c: dict, kind: str, asked_words: set[str]) -> bool:
        if (c["id"], kind) not in self.kinds:
            doc = yourmemory.parsed(c["row"]["content"], c["row"]["parse"])
            self.kinds[(c["id"], kind)] = bool(yourmemory.kind_values(doc, kind, asked_words))
        return self.kinds[(c["id"], kind)]

    def sentence_spans(self, content: str, least_words: int) -> list[tuple[int, int]]:
        """The character spans, in ``content``, of its sentences of at least ``least_words`` words (after a
        speaker's label); none unless there are two or more."""
        label = yourmemory._SPEAKER.match(content)
        start = label.end() if label else 0
        spans = [(start + m.start(), start + m.end()) for m in yourmemory._SENTENCE.finditer(content[start:])
                 if len(m.group(0).split()) >= least_words]
        return spans if len(spans) > 1 else []

    def pooled_sentences(self, c: dict, least_words: int):
        """Unit vectors of the memory's sentences pooled from the token states of one model run on it."""
        key = (c["id"], least_words)
        if key not in self.pooled:
            content = c["row"]["content"]
            spans = self.sentence_spans(content, least_words)
            vectors = []
            if spans:
                model = self.embedder.model
                _, hidden, encodings = model._run([content])
                offsets, special = encodings[0].offsets, encodings[0].special_tokens_mask
                for low, high in spans:
                    rows = [i for i, (a, b) in enumerate(offsets) if not special[i] and b > a and low <= a < high]
                    if rows:
                        pooled = hidden[0][rows].mean(axis=0)
                        vectors.append(pooled / np.linalg.norm(pooled))
            self.pooled[key] = vectors
        return self.pooled[key]

    def pooled_sentence_gain(self, c: dict, asked, least_words: int) -> float:
        whole = c["similarity"] or 0.0
        return max([whole] + [float(v @ asked) for v in self.pooled_sentences(c, least_words)]) - whole

    def best_sentence_gain(self, c: dict, query: str, least_words: int) -> float:
        """How much the best sentence's cosine to the query exceeds the whole memory's (0 for one sentence)."""
        key = (c["id"], least_words, query)
        if key not in self.sentences:
            content, whole = c["row"]["content"], c["similarity"] or 0.0
            label = content.split(":", 1)[0] + ": " if yourmemory.speaker(content) else ""
            body = yourmemory._SPEAKER.sub("", content).strip()
            sentences = [s.strip() for s in yourmemory._SENTENCE.findall(body) if len(s.split()) >= least_words]
            best = whole
            if len(sentences) > 1:
                asked = np.asarray(self.embedder.embed_one(query), dtype=np.float64)
                for sentence in sentences:
                    vector = np.asarray(self.embedder.embed_one(label + sentence), dtype=np.float64)
                    best = max(best, float(vector @ asked / (np.linalg.norm(vector) * np.linalg.norm(asked))))
            self.sentences[key] = best - whole
        return self.sentences[key]


def extra_signal(way: tuple, found: dict[int, dict], order: list[dict], query: str,
                 conversation: Conversation) -> dict[int, float]:
    """What ``way`` adds to each candidate's score."""
    if way[0] == "expansion":
        _, first, count, weight = way
        asked = set(yourmemory.query_terms(conversation.db, query))
        heft = Counter()
        for c in order[:first]:
            for term, frequency in conversation.terms_of(c).items():
                if term not in asked and not term.isdigit():
                    heft[term] += frequency * conversation.idf(term)
        caller = conversation.memory._caller(None, None)
        expanded = yourmemory.bm25_scores(conversation.db, [t for t, _ in heft.most_common(count)], caller.sql())
        best = max((expanded.get(i, 0.0) for i in found), default=0.0)
        return {i: weight * yourmemory.BM25_WEIGHT * yourmemory.normalised(expanded.get(i, 0.0), best) for i in found}
    if way[0] == "length":
        lengths = {i: math.log(1 + len(c["row"]["content"].split())) for i, c in found.items()}
        mean = sum(lengths.values()) / len(lengths)
        return {i: way[1] * (value - mean) for i, value in lengths.items()}
    if way[0] == "pooled":
        asked = np.asarray(conversation.embedder.embed_one(query), dtype=np.float64)
        asked /= np.linalg.norm(asked)
        return {c["id"]: way[1] * yourmemory.VECTOR_WEIGHT * conversation.pooled_sentence_gain(c, asked, way[2])
                for c in order[:100]}
    if way[0] == "sentence":
        return {c["id"]: way[1] * yourmemory.VECTOR_WEIGHT * conversation.best_sentence_gain(c, query, way[2])
                for c in order[:100]}
    kind = yourmemory.asked_kind(query)
    if kind is None:
        return {}
    asked_words = yourmemory.with_short_forms(yourmemory.plain_words(query))
    return {c["id"]: way[1] for c in order[:100] if conversation.names_kind(c, kind, asked_words)}


def run_conversation(sample: dict, embedder, workdir: Path, progress: Progress, recorder: Recorder) -> list[dict]:
    memory = YourMemory(workdir / f"{sample['sample_id']}.db", user="bench", embedder=embedder)
    unit_of, _ = store_units(memory, turn_units(sample), progress)
    conversation, scored = Conversation(memory, embedder), []
    for _, q in questions(sample, "turns"):
        product = [m["id"] for m in memory.recall(q["question"], top_k=20)["memories"]]
        found = recorder.compared()  # recall's candidates after late interaction, before the graph walk
        order = sorted(found.values(), key=lambda c: -c["score"])
        row = {"category": q["category"], "faithful": product == [c["id"] for c in order[:20]]}
        targets = evidence_targets(q, "turns")
        for name, way in WAYS.items():
            extra = extra_signal(way, found, order, q["question"], conversation) if way else {}
            ids = [c["id"] for c in sorted(order, key=lambda c: -(c["score"] + extra.get(c["id"], 0.0)))[:20]]
            got = [unit_of.get(i) for i in ids]
            row[name] = [evidence_recall(targets, got, k) for k in (5, 10, 20)]
        scored.append(row)
        progress.step()
    memory.close()
    return scored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--limit", type=int, help="only the first N conversations (for a quick look)")
    parser.add_argument("--ways", help="only the ways whose name starts with this (the product's row always)")
    args = parser.parse_args()
    if args.ways:
        for name in [n for n in WAYS if n != "the product's score" and not n.startswith(args.ways)]:
            del WAYS[name]
    samples = load_locomo(args.data)[:args.limit]
    progress = Progress(sum(len(turn_units(s)) + len(questions(s, "turns")) for s in samples), "rerank lab")
    embedder, recorder, scored = CachedEmbedder(), Recorder(), []
    try:
        with tempfile.TemporaryDirectory(prefix="yourmemory-rerank-lab-") as workdir:
            for sample in samples:
                scored += run_conversation(sample, embedder, Path(workdir), progress, recorder)
    finally:
        recorder.close()
    print(f"the product's score gave the product's first 20 for {sum(s['faithful'] for s in scored)} "
          f"of {len(scored)} questions")
    by_category = defaultdict(list)
    for s in scored:
        by_category[s["category"]].append(s)
    for name in WAYS:
        values = np.array([r[name] for r in scored]).mean(axis=0)
        print(f"{name:>28}: " + " / ".join(f"{v:.4f}" for v in values))


if __name__ == "__main__":
    main()
