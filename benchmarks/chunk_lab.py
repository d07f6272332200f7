"""Screening sentence-level vectors for long memories on the LoCoMo summaries protocol.

    python benchmarks/chunk_lab.py

A session summary is a paragraph; a question usually matches one of its sentences. The product
embeds each memory once, whole. This lab scores every summary of a conversation against each
question (the summaries protocol's 1,534 questions) with: the whole-summary cosine (as the
product does), the best cosine of its sentences, or a mix, each fused with the product's BM25
and its episode share as the product would (all summaries stored in one burst). It reports the
protocol's hit rate (benchmarks/locomo.py answer_hit on the top 5) and evidence recall@5.
Sentence vectors come from the same cached one-text embedding calls as everything else
(benchmarks/common.py CachedEmbedder); the first run embeds the sentences once.
"""
from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from common import CachedEmbedder, Progress, load_locomo
from fusion_lab import ALL_ONE_SESSION, Bm25, hybrid, smoothed
from locomo import answer_hit, evidence_targets, questions, summary_units

import yourmemory


class Summaries(Bm25):
    """One conversation's summaries: whole vectors, sentence vectors, FTS terms and BM25 statistics."""

    def __init__(self, sample: dict, embedder, conn):
        self.units = summary_units(sample)
        self.ids = [unit_id for unit_id, _ in self.units]
        self.contents = [content for _, content in self.units]
        self.whole = np.stack([embedder.embed_one(content) for content in self.contents])
        self.sentences = [np.stack([embedder.embed_one(s.text.strip()) for s in yourmemory.parse(content).sents
                                    if any(t.is_alpha for t in s)]) for content in self.contents]
        super().__init__(self.contents, conn)


def product(cosine, bm25):
    return smoothed(hybrid(cosine, bm25, 0.6), ALL_ONE_SESSION(cosine), 0.5, 2)


VARIANTS = {
    "whole-memory cosine (the product)": lambda whole, best, bm25: product(whole, bm25),
    "best sentence cosine": lambda whole, best, bm25: product(best, bm25),
    "mean of the two": lambda whole, best, bm25: product((whole + best) / 2, bm25),
    "the larger of the two": lambda whole, best, bm25: product(np.maximum(whole, best), bm25),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    args = parser.parse_args()
    samples = load_locomo(args.data)[:args.limit]
    embedder, conn = CachedEmbedder(), yourmemory.connect(":memory:")
    hits, recall, count = Counter(), Counter(), 0
    progress = Progress(len(samples), "chunk lab")
    for sample in samples:
        summaries = Summaries(sample, embedder, conn)
        for _, q in questions(sample, "summaries"):
            query = embedder.embed_one(q["question"])
            whole = summaries.whole @ query
            best = np.array([float((vectors @ query).max()) for vectors in summaries.sentences])
            bm25 = summaries.bm25(yourmemory.query_terms(conn, q["question"]))
            targets, count = evidence_targets(q, "summaries"), count + 1
            for name, score in VARIANTS.items():
                top = np.argsort(-score(whole, best, bm25))[:5]
                hits[name] += answer_hit(q["answer"], [summaries.contents[i] for i in top])
                if targets:
                    recall[name] += len(targets & {summaries.ids[i] for i in top}) / len(targets)
        progress.step()
    for name in VARIANTS:
        print(f"{name:<36} hits {hits[name]}/{count} = {hits[name] / count:.1%}   evidence recall@5 "
              f"{recall[name] / count:.3f}")


if __name__ == "__main__":
    main()
