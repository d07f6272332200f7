"""Screening sentence-level vectors for long memories on the LoCoMo summaries protocol.

    python benchmarks/chunk_lab.py

A session summary is a paragraph; a question usually matches one of its sentences. The product
embeds each memory once, whole. This lab scores every summary of a conversation against each
question (the summaries protocol's 1,534 questions) with: the whole-summary cosine (as the
product does), the best cosine of its sentences, or a mix, each fused with the product's BM25
and its episode share as the product would (all summaries stored in one burst). It reports the
protocol's hit rate (benchmarks/locomo.py answer_hit on the top 5) and evidence recall@5.
The ``typical 0.2`` variants score as the product does now (its typicality discount over the
conversation's summaries) and move the fusion weight and the episode share.
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


def product(cosine, bm25, vector_weight=0.6, episode_share=0.5):
    return smoothed(hybrid(cosine, bm25, vector_weight), ALL_ONE_SESSION(cosine), episode_share, 2)


def typical(cosine, vectors, penalty=0.2):
    """The product's typicality discount: the cosine less ``penalty`` times the memory's closeness to the
    centre of all of them (the mean of the vectors' signs) above the average closeness."""
    direction = np.sign(vectors).sum(axis=0)
    closeness = vectors @ (direction / np.linalg.norm(direction))
    return cosine - penalty * (closeness - closeness.mean())


VARIANTS = {
    "whole-memory cosine (the product before typicality)": lambda whole, best, bm25, **_: product(whole, bm25),
    "best sentence cosine": lambda whole, best, bm25, **_: product(best, bm25),
    "mean of the two": lambda whole, best, bm25, **_: product((whole + best) / 2, bm25),
    "the larger of the two": lambda whole, best, bm25, **_: product(np.maximum(whole, best), bm25),
}
# The product's scoring now (typicality discount 0.2), then with the fusion weight and the episode share moved:
# summaries are stored in one burst, so each lends its neighbours a share of its relevance.
for weight, share in [(0.6, 0.5), (0.6, 0.25), (0.6, 0.0), (0.8, 0.5), (0.8, 0.25), (0.8, 0.0)]:
    VARIANTS[f"typical 0.2, vector weight {weight:g}, episode share {share:g}"
             + (" (the product)" if (weight, share) == (0.6, 0.5) else "")] = (
        lambda whole, best, bm25, summaries, weight=weight, share=share:
            product(typical(whole, summaries.whole), bm25, weight, share))


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
                top = np.argsort(-score(whole, best, bm25, summaries=summaries))[:5]
                hits[name] += answer_hit(q["answer"], [summaries.contents[i] for i in top])
                if targets:
                    recall[name] += len(targets & {summaries.ids[i] for i in top}) / len(targets)
        progress.step()
    for name in VARIANTS:
        print(f"{name:<36} hits {hits[name]}/{count} = {hits[name] / count:.1%}   evidence recall@5 "
              f"{recall[name] / count:.3f}")


if __name__ == "__main__":
    main()
