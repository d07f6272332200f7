"""Screening scoring ideas on the LoCoMo turns protocol in seconds instead of half an hour.

    python benchmarks/fusion_lab.py            # every variant, evidence recall@5/10/20

The lab scores every turn of a conversation against each question with the product's own
pieces: the cached model vectors (benchmarks/common.py CachedEmbedder), the product's FTS5
tokenizer and query-term rules, and its BM25 formula. It leaves out what only the real store
path has (dedup, graph edges, strength, reinforcement by earlier questions), so its figures
screen ideas; only benchmarks/locomo.py --units turns measures the product. Each idea that
looked useful here was then built and measured there (BENCHMARKS.md, optimisation log).
"""
from __future__ import annotations

import argparse
import functools
import math
import re
from collections import Counter

import numpy as np

from common import CachedEmbedder, load_locomo
from locomo import evidence_targets, questions, turn_units

import yourmemory


class Bm25:
    """The product's BM25 over a fixed set of texts, all at once (numpy over term counts)."""

    def __init__(self, texts: list[str], conn):
        self.terms = [Counter(yourmemory.fts_terms(conn, text)) for text in texts]
        self.lengths = np.array([sum(t.values()) for t in self.terms], dtype=float)
        self.document_frequency = Counter(term for t in self.terms for term in t)

    def bm25(self, terms: list[str], k1: float | None = None, b: float | None = None) -> np.ndarray:
        """BM25 of every text for ``terms``; ``k1`` and ``b`` default to the product's."""
        k1 = yourmemory.BM25_K1 if k1 is None else k1
        b = yourmemory.BM25_B if b is None else b
        n, average = len(self.terms), self.lengths.mean()
        scores = np.zeros(n)
        for term in terms:
            df = self.document_frequency.get(term, 0)
            if not df:
                continue
            idf = max(1e-6, math.log((n - df + 0.5) / (df + 0.5)))
            tf = np.array([t.get(term, 0) for t in self.terms], dtype=float)
            k = k1 * (1 - b + b * self.lengths / average)
            scores += idf * tf * (k1 + 1) / (tf + k)
        return scores


class Conversation(Bm25):
    """One conversation's turns: vectors, FTS terms, and BM25 statistics."""

    def __init__(self, sample: dict, embedder, conn):
        self.units = [(unit_id, content) for unit_id, content in turn_units(sample)
                      if not yourmemory.is_pure_question(content)]
        self.ids = [unit_id for unit_id, _ in self.units]
        self.vectors = np.stack([embedder.embed_one(content) for _, content in self.units])
        self.sessions = [int(unit_id[1:].split(":")[0]) for unit_id in self.ids]
        self.texts = [content for _, content in self.units]
        self.asks = np.array([yourmemory.question_share(text) for text in self.texts])
        self._embedder, self._statement_vectors = embedder, None
        super().__init__(self.texts, conn)

    def statement_vectors(self) -> np.ndarray:
        """Each turn's vector without its questions: a turn that asks and states ("Sorry about your knee. Any
        ways to stay active?") embedded as its statements alone; other turns keep their own vector."""
        if self._statement_vectors is None:
            parts = [statement_part(text) for text in self.texts]
            self._statement_vectors = np.stack([self._embedder.embed_one(part) if part else vector
                                                for part, vector in zip(parts, self.vectors)])
        return self._statement_vectors


def statement_part(text: str) -> str | None:
    """A turn's speaker and its sentences that do not ask, if it has both kinds; else None."""
    speaker = yourmemory._SPEAKER.match(text)
    prefix = speaker.group(0) if speaker else ""
    sentences = [s.strip() for s in yourmemory._SENTENCE.findall(text[len(prefix):]) if s.strip(" .!?")]
    kept = [s for s in sentences if not s.endswith("?")]
    return prefix + " ".join(kept) if kept and len(kept) < len(sentences) else None


def hybrid(cosine, bm25, vector_weight=0.6):
    top = bm25.max()
    return vector_weight * cosine + (1 - vector_weight) * (bm25 / top if top > 0 else 0 * bm25)


def smoothed(relevance, sessions, beta, window=1):
    """Each turn also scores ``beta`` times its best neighbour within ``window`` turns of the same session."""
    sessions, n = np.asarray(sessions), len(relevance)
    best = np.zeros(n)
    for offset in range(1, window + 1):
        same = sessions[offset:] == sessions[:-offset]
        before, after = np.zeros(n), np.zeros(n)
        before[offset:] = np.where(same, relevance[:-offset], 0.0)
        after[:-offset] = np.where(same, relevance[offset:], 0.0)
        best = np.maximum(best, np.maximum(before, after))
    return relevance + beta * best


def min_max(values):
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else 0 * values


def reciprocal_rank(cosine, bm25, k=60):
    ranks = lambda scores: np.argsort(np.argsort(-scores))
    return 1 / (k + ranks(cosine)) + 1 / (k + ranks(bm25))


def neighbour_sum(relevance, beta, window=2):
    """Adds beta/d of every neighbour at distance d (instead of the best neighbour's share)."""
    out = relevance.copy()
    for offset in range(1, window + 1):
        out[offset:] += beta / offset * relevance[:-offset]
        out[:-offset] += beta / offset * relevance[offset:]
    return out


ALL_ONE_SESSION = lambda sessions: [0] * len(sessions)  # what the product sees: one burst of stores


def feedback(c, b, s, *, vectors, query, alpha, top=3, **_):
    """Pseudo-relevance feedback (Rocchio): the query vector plus ``alpha`` times the mean vector of the
    product's first ``top`` results, then the product's scoring again with the new cosines."""
    first = np.argsort(-smoothed(hybrid(c, b, 0.6), s, 0.5, 2))[:top]
    moved = query + alpha * vectors[first].mean(axis=0)
    return smoothed(hybrid(vectors @ (moved / np.linalg.norm(moved)), b, 0.6), s, 0.5, 2)


TIME_WORDS = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|last|next|ago|this (morning|week|month|year|weekend)|"
    r"(mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august|september|"
    r"october|november|december|\d{1,2}(:\d\d)?\s?(am|pm)|\d{1,2}:\d\d|\d{4}|weekend|week|month|year)s?\b", re.I)
WHEN_QUESTION = re.compile(r"\s*(when|what time|what date|how long ago)\b", re.I)


def answer_type(c, b, s, *, question, texts, boost, **_):
    """Answer-type matching: a "when" question adds ``boost`` to every turn that names a time."""
    relevance = hybrid(c, b, 0.6)
    if WHEN_QUESTION.match(question):
        relevance = relevance + boost * np.array([bool(TIME_WORDS.search(t)) for t in texts], dtype=float)
    return smoothed(relevance, s, 0.5, 2)


def bm25_parameters(c, b, s, *, rescored, k1, length_weight, **_):
    """The product's scoring with BM25's saturation ``k1`` and length normalisation ``b`` changed."""
    return smoothed(hybrid(c, rescored(k1, length_weight), 0.6), s, 0.5, 2)


def questions_answered(c, b, s, *, asks, discount, answer_share, vectors=None, gate=None, context_cosine=None, **_):
    """A question is not an answer: a turn's own relevance is cut by ``discount`` times the share of it that
    asks, and the next turn of the session takes 0.5 + ``answer_share`` times that share of the question's
    relevance (instead of 0.5) as its context. ``gate``: the share also scaled by the two turns' own cosine
    over ``gate`` (at most 1), so that unrelated memories stored in one burst lend each other nothing."""
    relevance, sessions, n = hybrid(c, b, 0.6), np.asarray(s), len(c)
    lent = relevance if context_cosine is None else hybrid(context_cosine, b, 0.6)  # what neighbours take
    best = np.zeros(n)
    for offset in (1, 2):
        same = sessions[offset:] == sessions[:-offset]
        if gate:
            pair = np.clip(np.sum(vectors[offset:] * vectors[:-offset], axis=1) / gate, 0.0, 1.0)
            same = np.where(same, pair, 0.0)
        from_before = 0.5 + (answer_share * asks[:-offset] if offset == 1 else 0.0)
        before, after = np.zeros(n), np.zeros(n)
        before[offset:] = same * from_before * lent[:-offset]
        after[:-offset] = same * 0.5 * lent[offset:]
        best = np.maximum(best, np.maximum(before, after))
    return relevance * (1 - discount * asks) + best


def diverse(c, b, s, *, penalty, **_):
    """The product's order, but a turn within one step of a turn already ranked loses ``penalty``."""
    scores = smoothed(hybrid(c, b, 0.6), s, 0.5, 2)
    pool, ranked = list(np.argsort(-scores)[:60]), []
    while pool and len(ranked) < 20:
        pick = max(pool, key=lambda i: scores[i] - penalty * any(abs(i - j) <= 1 for j in ranked))
        pool.remove(pick)
        ranked.append(pick)
    out = np.full(len(scores), -1e9)
    out[ranked] = np.arange(len(ranked), 0, -1)
    return out


def bm25_floor(c, b, s, *, floor, **_):
    """The product's scoring with BM25 scaled by max(best BM25, ``floor``): a weak best match stays weak."""
    return smoothed(0.6 * c + 0.4 * b / max(b.max(), floor), s, 0.5, 2)


def z_scored_cosine(c, b, s, **_):
    """Cosine as a z-score over the conversation, scaled to a maximum of 1, fused with BM25 as before."""
    z = (c - c.mean()) / c.std()
    return smoothed(hybrid(z / z.max(), b, 0.6), s, 0.5, 2)


def neighbour_vectors(c, b, s, *, vectors, query, mix, **_):
    """Each turn's vector plus ``mix`` times its neighbours' (one step either side), renormalised."""
    mixed = vectors.copy()
    mixed[1:] += mix * vectors[:-1]
    mixed[:-1] += mix * vectors[1:]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return smoothed(hybrid(mixed @ query, b, 0.6), s, 0.5, 2)


def query_without_question_words(c, b, s, *, question, vectors, embed, **_):
    """The cosine averaged with that of the question's content words only ("Evan knee heals")."""
    words = [w for w in re.findall(r"[\w']+", question) if w.lower() not in yourmemory.STOPWORDS]
    plain = embed(" ".join(words) or question)
    return smoothed(hybrid(0.5 * c + 0.5 * (vectors @ plain), b, 0.6), s, 0.5, 2)


def short_turns_penalised(c, b, s, *, texts, **kw):
    """On top of the question rule: a turn with fewer than 5 content words loses up to 40% of its score."""
    count = np.array([len(yourmemory.content_words(yourmemory.strip_speaker(t))) for t in texts], dtype=float)
    scores = questions_answered(c, b, s, texts=texts, discount=0.5, answer_share=0.4, **kw)
    return scores * (1 - 0.4 * np.clip((5 - count) / 5, 0, 1))


def typical_discounted(c, b, s, *, vectors, asks, penalty, centre="signs", **kw):
    """On top of the question rule: a turn's cosine less ``penalty`` times its closeness to what every turn
    shares (above the candidates' average; candidates: the 40 best by cosine and by BM25, as in recall).
    ``centre``: "signs" (the mean of the vectors' signs, what the product keeps), "mean" (of the vectors),
    or "neighbours" (instead of a centre, each turn's mean cosine to its 10 nearest turns)."""
    if centre == "neighbours":
        similar = vectors @ vectors.T
        np.fill_diagonal(similar, -1.0)
        closeness = -np.sort(-similar, axis=1)[:, :10].mean(axis=1)
    else:
        direction = (np.sign(vectors) if centre == "signs" else vectors).sum(axis=0)
        closeness = vectors @ (direction / np.linalg.norm(direction))
    candidates = np.union1d(np.argsort(-c)[:40], np.argsort(-b)[:40])
    return questions_answered(c - penalty * (closeness - closeness[candidates].mean()), b, s, asks=asks,
                              discount=0.5, answer_share=0.4, vectors=vectors, gate=kw.get("gate"))


def questions_left_out(c, b, s, *, vectors, asks, conversation, query, whole_for_context, **kw):
    """``typical 0.2 signs`` with each turn's own cosine taken from its vector without its questions
    (``Conversation.statement_vectors``); what it lends its neighbours from that vector too (one vector a
    memory), or, ``whole_for_context``, from the whole turn's (two vectors a memory)."""
    statements = conversation.statement_vectors()
    own = statements @ query
    centre_from = vectors if whole_for_context else statements
    direction = np.sign(centre_from).sum(axis=0)
    closeness = centre_from @ (direction / np.linalg.norm(direction))
    candidates = np.union1d(np.argsort(-c)[:40], np.argsort(-b)[:40])
    typical = 0.2 * (closeness - closeness[candidates].mean())
    return questions_answered(own - typical, b, s, asks=asks, discount=0.5, answer_share=0.4,
                              context_cosine=(c - typical) if whole_for_context else None)


def diverse_by_meaning(c, b, s, *, vectors, asks, penalty, **kw):
    """Maximal marginal relevance over the typicality-discounted scores: the 20 results are picked one by one
    from the best 60, each losing ``penalty`` times its highest cosine to a turn already picked."""
    scores = typical_discounted(c, b, s, vectors=vectors, asks=asks, penalty=0.2)
    pool = np.argsort(-scores)[:60]
    similar, picked, closest = vectors[pool] @ vectors[pool].T, [], np.zeros(len(pool))
    for _ in range(20):
        adjusted = scores[pool] - penalty * closest
        adjusted[picked] = -np.inf
        best = int(np.argmax(adjusted))
        picked.append(best)
        closest = np.maximum(closest, similar[best])
    ranked = np.full(len(c), -np.inf)
    ranked[pool[picked]] = -np.arange(len(picked), dtype=float)
    return ranked


def session_prior(c, b, s, *, vectors, asks, share, best, **kw):
    """The typicality-discounted scores plus ``share`` times the mean of the ``best`` scores of the turn's
    session: a session about the question lifts all its turns."""
    scores = typical_discounted(c, b, s, vectors=vectors, asks=asks, penalty=0.2)
    sessions = np.asarray(s)
    lifted = scores.copy()
    for session in np.unique(sessions):
        inside = sessions == session
        lifted[inside] += share * np.sort(scores[inside])[::-1][:best].mean()
    return lifted


def expanded_query(c, b, s, *, vectors, asks, conversation, terms, count, weight, by_idf=True, **kw):
    """Query expansion from pseudo-relevant results (RM3-like): the ``count`` terms of the 5 best turns
    that weigh most (term frequency x idf, terms with idf > 1; or, without idf, the terms most of the 5 share,
    stopwords left out) join the query's BM25 at ``weight``; scored as ``typical 0.2 signs``."""
    scores = typical_discounted(c, b, s, vectors=vectors, asks=asks, penalty=0.2)
    documents, weights = len(conversation.terms), Counter()
    for i in np.argsort(-scores)[:5]:
        for term, frequency in conversation.terms[i].items():
            df = conversation.document_frequency[term]
            idf = math.log((documents - df + 0.5) / (df + 0.5))
            if term in terms or (idf <= 1.0 if by_idf else term in _STOP_TERMS):
                continue
            weights[term] += frequency * idf if by_idf else 1 + 0.01 * frequency
    extra = [term for term, _ in weights.most_common(count)]
    return typical_discounted(c, b + weight * conversation.bm25(extra), s, vectors=vectors, asks=asks, penalty=0.2)


def token_states(model, texts: list[str]) -> list[np.ndarray]:
    """Each text's token states from the product's ONNX model (the hidden states it mean-pools into the
    vector), unit rows, without <s>, </s> and tokens that hold no letter or digit."""
    states = []
    for text in texts:
        encoding = model._tokenizer.encode(text)
        hidden = model._session.run(None, {"input_ids": np.array([encoding.ids], dtype=np.int64),
                                           "attention_mask": np.array([encoding.attention_mask], dtype=np.int64)})[0][0]
        keep = [i for i, token in enumerate(encoding.tokens) if 0 < i < len(encoding.tokens) - 1
                and any(ch.isalnum() for ch in token)] or list(range(len(encoding.tokens)))
        rows = hidden[keep]
        states.append(rows / np.linalg.norm(rows, axis=1, keepdims=True))
    return states


def late_interaction(c, b, s, *, vectors, asks, conversation, question, weight, z_scored=False, **kw):
    """``typical 0.2 signs`` plus ``weight`` times MaxSim (ColBERT-style: each question token's best cosine to a
    turn's tokens, averaged), from the model's own token states; z-scored over the conversation if asked."""
    model = conversation._embedder.model
    if getattr(conversation, "_token_states", None) is None:
        conversation._token_states = token_states(model, conversation.texts)
    query = token_states(model, [question])[0]
    maxsim = np.array([(query @ turn.T).max(axis=1).mean() for turn in conversation._token_states])
    if z_scored:
        maxsim = (maxsim - maxsim.mean()) / (maxsim.std() + 1e-9)
    return typical_discounted(c, b, s, vectors=vectors, asks=asks, penalty=0.2) + weight * maxsim


_STOP_TERMS = set(yourmemory.fts_terms(yourmemory.connect(":memory:"), " ".join(sorted(yourmemory.STOPWORDS))))


VARIANTS = {
    "cosine": lambda c, b, s, **_: c,
    "bm25": lambda c, b, s, **_: b,
    "hybrid 0.6 (the product before episodes)": lambda c, b, s, **_: hybrid(c, b, 0.6),
    "hybrid 0.5": lambda c, b, s, **_: hybrid(c, b, 0.5),
    "hybrid 0.7": lambda c, b, s, **_: hybrid(c, b, 0.7),
    "reciprocal rank fusion": lambda c, b, s, **_: reciprocal_rank(c, b),
    "hybrid 0.6 + neighbour 0.35 w1": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.35, 1),
    "hybrid 0.6 + neighbour 0.5 w1": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.5, 1),
    "hybrid 0.6 + neighbour 0.35 w2": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.35, 2),
    "hybrid 0.6 + neighbour 0.5 w2 (the product before questions)": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.5, 2),
    "hybrid 0.6 + neighbour 0.7 w2": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.7, 2),
    "hybrid 0.6 + neighbour 0.5 w3": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), s, 0.5, 3),
    "hybrid 0.7 + neighbour 0.5 w2": lambda c, b, s, **_: smoothed(hybrid(c, b, 0.7), s, 0.5, 2),
    "hybrid 0.6 + neighbour 0.5 w2, across sessions":
        lambda c, b, s, **_: smoothed(hybrid(c, b, 0.6), ALL_ONE_SESSION(s), 0.5, 2),
    "min-max cosine 0.5 + neighbour 0.5 w2":
        lambda c, b, s, **_: smoothed(0.5 * min_max(c) + 0.5 * (b / b.max() if b.max() > 0 else b), s, 0.5, 2),
    "reciprocal rank fusion + neighbour 0.5 w2": lambda c, b, s, **_: smoothed(reciprocal_rank(c, b), s, 0.5, 2),
    "hybrid 0.7 + neighbour sum 0.3 w2": lambda c, b, s, **_: neighbour_sum(hybrid(c, b, 0.7), 0.3),
    "the product + feedback 0.25 top 3": lambda c, b, s, **kw: feedback(c, b, s, alpha=0.25, **kw),
    "the product + feedback 0.5 top 3": lambda c, b, s, **kw: feedback(c, b, s, alpha=0.5, **kw),
    "the product + feedback 0.5 top 5": lambda c, b, s, **kw: feedback(c, b, s, alpha=0.5, top=5, **kw),
    "the product + feedback 1.0 top 3": lambda c, b, s, **kw: feedback(c, b, s, alpha=1.0, **kw),
    "the product + time words for when-questions 0.1":
        lambda c, b, s, **kw: answer_type(c, b, s, boost=0.1, **kw),
    "the product with BM25 k1 1.2 b 0.3": lambda c, b, s, **kw: bm25_parameters(c, b, s, k1=1.2, length_weight=0.3, **kw),
    "the product with BM25 k1 0.9 b 0.4": lambda c, b, s, **kw: bm25_parameters(c, b, s, k1=0.9, length_weight=0.4, **kw),
    "the product with BM25 k1 1.5 b 0.75": lambda c, b, s, **kw: bm25_parameters(c, b, s, k1=1.5, length_weight=0.75, **kw),
    "the product with BM25 k1 2.0 b 0.75": lambda c, b, s, **kw: bm25_parameters(c, b, s, k1=2.0, length_weight=0.75, **kw),
    "the product with BM25 k1 1.2 b 1.0": lambda c, b, s, **kw: bm25_parameters(c, b, s, k1=1.2, length_weight=1.0, **kw),
    "episode diversity 0.05": lambda c, b, s, **kw: diverse(c, b, s, penalty=0.05, **kw),
    "episode diversity 0.1": lambda c, b, s, **kw: diverse(c, b, s, penalty=0.1, **kw),
    "the product before questions with BM25 over max(best 10)": lambda c, b, s, **kw: bm25_floor(c, b, s, floor=10, **kw),
    "the product before questions with z-scored cosine": z_scored_cosine,
    "the product before questions with neighbour vectors 0.2":
        lambda c, b, s, **kw: neighbour_vectors(c, b, s, mix=0.2, **kw),
    "the product before questions + query without question words": query_without_question_words,
    "the product + short turns penalised": short_turns_penalised,
}
for discount, answer_share in [(0.3, 0.0), (0.5, 0.0), (0.0, 0.4), (0.5, 0.2), (0.5, 0.4), (0.5, 0.6), (0.7, 0.4)]:
    name = f"questions discounted {discount:g} answers take {answer_share:g}"
    VARIANTS[name + (" (the product)" if (discount, answer_share) == (0.5, 0.4) else "")] = functools.partial(
        questions_answered, discount=discount, answer_share=answer_share)
for penalty in (0.1, 0.2, 0.3, 0.4):
    VARIANTS[f"typical {penalty:g} signs"] = functools.partial(typical_discounted, penalty=penalty)
for penalty, centre in [(0.2, "mean"), (0.3, "mean"), (0.4, "neighbours"), (0.6, "neighbours")]:
    VARIANTS[f"typical {penalty:g} {centre}"] = functools.partial(typical_discounted, penalty=penalty, centre=centre)

for gate in (0.1, 0.2, 0.3, 0.4):
    VARIANTS[f"typical 0.2 + context gated by the pair's cosine / {gate:g}"] = functools.partial(
        typical_discounted, penalty=0.2, gate=gate)
for gate in (0.2, 0.3):
    VARIANTS[f"typical 0.2 + context gated by the pair's cosine / {gate:g} across sessions"] = (
        lambda c, b, s, gate=gate, **kw: typical_discounted(c, b, ALL_ONE_SESSION(s), penalty=0.2, gate=gate, **kw))
VARIANTS["typical 0.2 signs across sessions"] = (
    lambda c, b, s, **kw: typical_discounted(c, b, ALL_ONE_SESSION(s), penalty=0.2, **kw))

for penalty in (0.02, 0.05, 0.1):
    VARIANTS[f"typical 0.2 + diversity {penalty:g}"] = functools.partial(diverse_by_meaning, penalty=penalty)
for share, best in [(0.1, 1), (0.1, 3), (0.2, 3)]:
    VARIANTS[f"typical 0.2 + session prior {share:g} best {best}"] = functools.partial(session_prior, share=share,
                                                                                     best=best)

for count, weight in [(5, 0.2), (10, 0.2), (20, 0.1)]:
    VARIANTS[f"typical 0.2 + expansion {count} terms {weight:g}"] = functools.partial(
        expanded_query, count=count, weight=weight)
    VARIANTS[f"typical 0.2 + expansion {count} terms {weight:g} without idf"] = functools.partial(
        expanded_query, count=count, weight=weight, by_idf=False)


VARIANTS["typical 0.2 + questions left out of the vector"] = functools.partial(questions_left_out,
                                                                          whole_for_context=False)
VARIANTS["typical 0.2 + questions left out of the vector (the whole turn lent)"] = functools.partial(
    questions_left_out, whole_for_context=True)

for weight in (0.5, 1.0):
    VARIANTS[f"typical 0.2 + late interaction {weight:g}"] = functools.partial(late_interaction, weight=weight)
VARIANTS["typical 0.2 + late interaction z-scored 0.1"] = functools.partial(late_interaction, weight=0.1,
                                                                              z_scored=True)


def evaluate(samples, embedder, variants) -> dict[str, dict[int, float]]:
    conn = yourmemory.connect(":memory:")
    totals = {name: Counter() for name in variants}
    count = 0
    for sample in samples:
        conversation = Conversation(sample, embedder, conn)
        for _, q in questions(sample, "turns"):
            query = embedder.embed_one(q["question"])
            cosine = conversation.vectors @ query
            terms = yourmemory.query_terms(conn, q["question"])
            bm25 = conversation.bm25(terms)
            targets = evidence_targets(q, "turns")
            count += 1
            for name, score in variants.items():
                scores = score(cosine, bm25, conversation.sessions, vectors=conversation.vectors, query=query,
                               rescored=lambda k1, b: conversation.bm25(terms, k1, b), question=q["question"],
                               texts=conversation.texts, asks=conversation.asks, embed=embedder.embed_one,
                               conversation=conversation, terms=terms)
                ranked = [conversation.ids[i] for i in np.argsort(-scores)[:20]]
                for k in (5, 10, 20):
                    totals[name][k] += len(targets & set(ranked[:k])) / len(targets)
    return {name: {k: total[k] / count for k in (5, 10, 20)} for name, total in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/data/locomo10.json)")
    parser.add_argument("--only", help="comma-separated variant names")
    parser.add_argument("--limit", type=int, help="only the first N conversations")
    args = parser.parse_args()
    variants = {n: v for n, v in VARIANTS.items() if not args.only or n in args.only.split(",")}
    results = evaluate(load_locomo(args.data)[:args.limit], CachedEmbedder(), variants)
    for name, recall in results.items():
        print(f"{name:<50} " + "  ".join(f"@{k} {recall[k]:.3f}" for k in (5, 10, 20)))


if __name__ == "__main__":
    main()
