"""Ebbinghaus decay, checked by its numbers.

strength = importance * e^(-lambda_eff * days) * (1 + 0.2 * recall_count), capped at 1.0, with
lambda_eff = base_lambda * (1 - 0.8 * importance) and base_lambda 0.10 strategy, 0.16 fact,
0.20 assumption, 0.35 failure; days count from the last store, recall or update. A recall counts only when
spaced: an hour or more after the memory was last stored, recalled or updated.
"""
import math
import threading

import pytest

import yourmemory
from yourmemory import InvalidInput, NotFound, YourMemory

DAY = 86400.0
T0 = 1_800_000_000.0
EXACT = 5e-5  # get() and recall() round strength to 4 decimals


@pytest.mark.parametrize("category, importance, days, recalls, expected", [
    ("strategy", 0.5, 10, 0, 0.5 * math.exp(-0.10 * (1 - 0.8 * 0.5) * 10)),
    ("fact", 0.5, 10, 0, 0.5 * math.exp(-0.16 * (1 - 0.8 * 0.5) * 10)),
    ("assumption", 0.5, 10, 0, 0.5 * math.exp(-0.20 * (1 - 0.8 * 0.5) * 10)),
    ("failure", 0.5, 10, 0, 0.5 * math.exp(-0.35 * (1 - 0.8 * 0.5) * 10)),
    ("fact", 1.0, 30, 0, 1.0 * math.exp(-0.16 * (1 - 0.8 * 1.0) * 30)),
    ("strategy", 0.2, 45, 2, 0.2 * math.exp(-0.10 * (1 - 0.8 * 0.2) * 45) * (1 + 0.2 * 2)),
    ("assumption", 0.3, 7, 2, 0.3 * math.exp(-0.20 * (1 - 0.8 * 0.3) * 7) * (1 + 0.2 * 2)),
    ("failure", 0.8, 3.5, 1, 0.8 * math.exp(-0.35 * (1 - 0.8 * 0.8) * 3.5) * (1 + 0.2 * 1)),
    ("failure", 0.1, 60, 0, 0.1 * math.exp(-0.35 * (1 - 0.8 * 0.1) * 60)),
    ("fact", 0.8, 0, 1, 0.8 * (1 + 0.2 * 1)),
    ("assumption", 0.0, 5, 3, 0.0),
])
def test_strength_follows_the_ebbinghaus_formula(category, importance, days, recalls, expected):
    value = yourmemory.strength(importance, category, recalls, T0 - days * DAY, T0)
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("category, importance, days, recalls", [
    ("fact", 0.9, 0, 1),         # 0.9 * 1.2 = 1.08
    ("fact", 0.9, 0, 3),         # 0.9 * 1.6 = 1.44
    ("strategy", 0.9, 1, 1),     # 0.9 * e^-0.028 * 1.2 = 1.05
    ("failure", 1.0, 0.5, 2),    # 1.0 * e^-0.035 * 1.4 = 1.35
])
def test_strength_is_capped_at_one(category, importance, days, recalls):
    assert yourmemory.strength(importance, category, recalls, T0 - days * DAY, T0) == 1.0


def test_stored_memory_decays_by_the_formula_over_ten_idle_days(memory, clock):
    stored = memory.store("The production database runs PostgreSQL 16 on a dedicated host", 0.6, "fact")
    assert memory.get(stored["id"])["strength"] == pytest.approx(0.6, abs=EXACT)
    clock.advance(days=10)
    expected = 0.6 * math.exp(-0.16 * (1 - 0.8 * 0.6) * 10)
    assert memory.get(stored["id"])["strength"] == pytest.approx(expected, abs=EXACT)


@pytest.mark.parametrize("importance, after_recall", [(0.7, 0.7 * (1 + 0.2)), (0.9, 1.0)])
def test_recall_counts_once_and_restarts_the_decay_clock(memory, clock, importance, after_recall):
    stored = memory.store("Ada's laptop is a ThinkPad X1 Carbon running Fedora", importance, "fact")
    clock.advance(days=10)
    recalled = memory.recall("What laptop does Ada use?", top_k=1)["memories"]
    assert [m["id"] for m in recalled] == [stored["id"]]
    assert recalled[0]["strength"] == pytest.approx(after_recall, abs=EXACT)
    now = memory.get(stored["id"])
    assert now["recall_count"] == 1
    assert now["strength"] == pytest.approx(after_recall, abs=EXACT)
    clock.advance(days=5)
    expected = min(1.0, importance * math.exp(-0.16 * (1 - 0.8 * importance) * 5) * (1 + 0.2 * 1))
    assert memory.get(stored["id"])["strength"] == pytest.approx(expected, abs=EXACT)


def test_massed_recalls_restart_the_clock_but_only_a_spaced_one_counts(memory, clock):
    stored = memory.store("Ada's laptop is a ThinkPad X1 Carbon running Fedora", 0.6, "fact")
    for _ in range(3):
        clock.advance(seconds=60)
        recalled = memory.recall("What laptop does Ada use?", top_k=1)["memories"][0]
        assert recalled["id"] == stored["id"] and recalled["recall_count"] == 0
        assert recalled["strength"] == pytest.approx(0.6, abs=EXACT)
    clock.advance(seconds=yourmemory.SPACED_RECALL_SECONDS - 1)
    assert memory.recall("What laptop does Ada use?", top_k=1)["memories"][0]["recall_count"] == 0
    clock.advance(days=2)
    recalled = memory.recall("What laptop does Ada use?", top_k=1)["memories"][0]
    assert recalled["recall_count"] == 1 and recalled["strength"] == pytest.approx(0.6 * 1.2, abs=EXACT)
    assert memory.get(stored["id"])["recall_count"] == 1
    clock.advance(seconds=60)
    assert memory.recall("What laptop does Ada use?", top_k=1)["memories"][0]["recall_count"] == 1


def test_a_burst_of_recalls_does_not_lift_what_it_touched_above_a_better_answer(memory, clock):
    # Twenty questions at a task's start touch some memories many times; none of them may outrank, for the next
    # question, a memory that answers it better (counted, each recall added 0.2 × importance to strength, up to 1.0).
    touched = memory.store("The user's cat is named Biscuit and sleeps on the sofa", 0.6, "fact")
    answer = memory.store("The user's dog is called Pepper", 0.6, "fact")
    for _ in range(4):
        clock.advance(seconds=30)
        assert memory.recall("Biscuit the cat on the sofa", top_k=1)["memories"][0]["id"] == touched["id"]
    ranked = memory.recall("What is the user's dog called?", top_k=2)["memories"]
    assert [m["id"] for m in ranked] == [answer["id"], touched["id"]]


def test_faded_memory_ranks_below_fresh_one_even_when_it_matches_slightly_better(memory, clock):
    old = memory.store("Our staging server runs on a Hetzner machine in Falkenstein", 0.5, "fact")
    clock.advance(days=60)
    new = memory.store("The staging environment is hosted by Hetzner in the Falkenstein datacenter", 0.5, "fact")
    assert new["action"] == "store" and new["id"] != old["id"]
    found = memory.recall("Hetzner staging server in Falkenstein", top_k=5)["memories"]
    by_id = {m["id"]: m for m in found}
    assert set(by_id) == {old["id"], new["id"]}
    # On content alone the old memory is the better match ...
    assert by_id[old["id"]]["similarity"] >= by_id[new["id"]]["similarity"]
    assert by_id[old["id"]]["bm25"] >= by_id[new["id"]]["bm25"]
    # ... but 60 days of decay (strength 0.5 * e^-5.76 ~ 0.002) put it below the fresh one.
    assert [m["id"] for m in found] == [new["id"], old["id"]]


def test_recall_moves_a_linked_neighbours_decay_clock_part_way(memory, clock):
    first = memory.store("The team deploys the billing service every Tuesday afternoon", 0.5, "fact")
    second = memory.store("Billing service releases go out on Tuesdays after lunch", 0.5, "fact")
    assert second["action"] == "store"
    edges = dict(((s, t), w) for s, t, w in memory.db.execute(
        "SELECT source_id, target_id, weight FROM memory_edges"))
    assert (first["id"], second["id"]) in edges and (second["id"], first["id"]) in edges
    clock.advance(days=20)
    found = memory.recall("When do billing deploys happen?", top_k=1)["memories"]
    assert len(found) == 1 and found[0]["id"] in (first["id"], second["id"])
    recalled = found[0]["id"]
    other = second["id"] if recalled == first["id"] else first["id"]

    rate = 0.16 * (1 - 0.8 * 0.5)
    idle_20_days = 0.5 * math.exp(-rate * 20)
    weight = edges[(recalled, other)]
    moved = min(1.0, 0.5 * weight)  # RECALL_PROPAGATION share of the edge weight
    expected = 0.5 * math.exp(-rate * 20 * (1 - moved))
    neighbour = memory.get(other)
    assert neighbour["recall_count"] == 0
    assert neighbour["strength"] == pytest.approx(expected, abs=EXACT)
    assert idle_20_days < neighbour["strength"] < memory.get(recalled)["strength"]
    assert memory.get(recalled)["strength"] == pytest.approx(0.5 * 1.2, abs=EXACT)


def recalled_ids(memory, query):
    return {m["id"] for m in memory.recall(query, top_k=10)["memories"]}


def test_prune_hides_a_faded_memory_until_it_is_restored(memory, clock):
    faded = memory.store("The nightly backup job crashed because the disk quota was exceeded", 0.1, "failure")
    strong = memory.store("Ada prefers dark roast coffee from the corner cafe", 0.9, "strategy")
    assert memory.db.execute("SELECT count(*) FROM memory_edges").fetchone()[0] == 0
    clock.advance(days=60)
    assert memory.get(faded["id"])["strength"] < 0.05 <= memory.get(strong["id"])["strength"]

    report = memory.prune()
    assert report["ran"] is True
    assert report["pruned"] == [faded["id"]]
    assert memory.get(faded["id"])["status"] == "pruned"
    assert memory.get(strong["id"])["status"] == "active"
    assert faded["id"] not in recalled_ids(memory, "nightly backup job disk quota")

    restored = memory.restore(faded["id"])
    assert restored["memory"]["status"] == "active"
    assert memory.get(faded["id"])["strength"] == pytest.approx(0.1, abs=EXACT)
    assert faded["id"] in recalled_ids(memory, "nightly backup job disk quota")


def test_restoring_an_active_memory_is_invalid_input_naming_memory_id(memory):
    stored = memory.store("Ada prefers dark roast coffee from the corner cafe", 0.9, "strategy")
    with pytest.raises(InvalidInput, match="memory_id") as error:
        memory.restore(stored["id"])
    assert error.value.field == "memory_id"
    assert memory.get(stored["id"])["status"] == "active"


def test_prune_spares_a_faded_memory_linked_to_a_strong_one(memory, clock):
    faded = memory.store("The CI pipeline fails on flaky network tests", 0.1, "failure")
    strong = memory.store("The CI pipeline fails when network tests are flaky so we retry them", 0.9, "strategy")
    assert faded["action"] == strong["action"] == "store"
    assert memory.db.execute("SELECT count(*) FROM memory_edges WHERE source_id = ? AND target_id = ?",
                             (faded["id"], strong["id"])).fetchone()[0] == 1
    clock.advance(days=60)
    assert memory.get(faded["id"])["strength"] < 0.05 <= memory.get(strong["id"])["strength"]

    report = memory.prune()
    assert report["ran"] and faded["id"] not in report["pruned"]
    assert memory.get(faded["id"])["status"] == "active"

    memory.forget(strong["id"])  # without its strong neighbour the faded memory goes
    assert memory.prune()["pruned"] == [faded["id"]]


def test_pruned_memory_is_purged_after_thirty_more_days(memory, clock):
    doomed = memory.store("The zeppelin telemetry importer crashed on malformed altitude readings", 0.1, "failure")
    clock.advance(days=60)
    assert memory.prune()["pruned"] == [doomed["id"]]

    clock.advance(days=29)
    assert memory.prune()["purged"] == 0
    assert memory.get(doomed["id"])["status"] == "pruned"

    clock.advance(days=2)
    assert memory.prune()["purged"] >= 1
    with pytest.raises(NotFound):
        memory.get(doomed["id"])
    assert memory.db.execute("SELECT count(*) FROM memory_vectors WHERE memory_id = ?",
                             (doomed["id"],)).fetchone()[0] == 0
    assert memory.db.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH 'zeppelin'").fetchall() == []


def test_unforced_prune_runs_at_most_once_a_day(memory, clock):
    assert memory.prune(force=False)["ran"] is True
    assert memory.prune(force=False)["ran"] is False
    clock.advance(days=23 / 24)
    assert memory.prune(force=False)["ran"] is False
    clock.advance(days=2 / 24)  # 25 hours after the first run
    assert memory.prune(force=False)["ran"] is True
    assert memory.prune(force=True)["ran"] is True


def test_two_processes_on_one_database_prune_once_per_day(memory, db_path, clock, embedder):
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as other:
        for _ in range(2):
            barrier, results = threading.Barrier(2), []

            def run(store):
                barrier.wait()
                results.append(store.prune(force=False)["ran"])

            threads = [threading.Thread(target=run, args=(store,)) for store in (memory, other)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(results) == [False, True]
            clock.advance(days=25 / 24)


def test_knowledge_graph_observations_do_not_decay_unless_opted_in(memory, clock, monkeypatch):
    """A knowledge-graph user expects persistence: observations keep full strength (in recall's ranking,
    get and stats too) and are never pruned by default."""
    memory.graph.create_entities([{"name": "Ada", "entityType": "person", "observations": ["Ada is allergic to peanuts"]}])
    observation = memory.db.execute("SELECT memory_id FROM observations").fetchone()[0]
    clock.advance(days=400)
    memory.store("Ada mentioned she enjoys peanut butter cookies")  # fresh, and close to the question too
    assert memory.get(observation)["strength"] == 1.0
    assert memory.stats()["strength"]["0.80-1.00"] == 1 and memory.stats()["strength"]["0.00-0.05"] == 0
    top = memory.recall("Is Ada allergic to peanuts?", top_k=1)["memories"][0]
    assert top["id"] == observation and top["strength"] == 1.0
    assert observation not in memory.prune()["pruned"]
    assert memory.graph.open_nodes(["Ada"])["entities"][0]["observations"] == ["Ada is allergic to peanuts"]
    monkeypatch.setenv("YOURMEMORY_GRAPH_DECAY", "1")
    clock.advance(days=400)
    assert memory.get(observation)["strength"] < yourmemory.PRUNE_BELOW
    assert observation in memory.prune()["pruned"]


def test_purging_a_memory_purges_the_older_values_it_had_superseded(memory, clock):
    """With the memory that replaced them gone, superseded values could never be reached again: they go
    with it, and nothing is left superseded by a memory that no longer exists."""
    old = memory.store("The zeppelin hangar door code is 4411", 0.1, "fact")
    new = memory.store("The zeppelin hangar door code is 5522", 0.1, "fact")
    assert new["supersededId"] == old["id"]
    clock.advance(days=400)
    assert new["id"] in memory.prune()["pruned"]
    clock.advance(days=31)
    assert memory.prune()["purged"] == 2
    for memory_id in (old["id"], new["id"]):
        with pytest.raises(NotFound):
            memory.get(memory_id)
    assert memory.doctor()["ok"]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "1e400", str(400 * 86400)])
def test_an_impossible_decay_interval_is_refused_by_name(monkeypatch, value):
    """An interval the timer cannot wait (inf overflowed it and killed the decay thread) is refused up front."""
    monkeypatch.setenv("YOURMEMORY_DECAY_INTERVAL", value)
    with pytest.raises(InvalidInput, match="YOURMEMORY_DECAY_INTERVAL: must be"):
        yourmemory.decay_interval()


def test_a_decay_interval_in_seconds_is_taken(monkeypatch):
    monkeypatch.setenv("YOURMEMORY_DECAY_INTERVAL", "90.5")
    assert yourmemory.decay_interval() == 90.5


def test_a_decay_run_cut_short_by_shutdown_is_no_failure_but_a_closed_store_otherwise_is(db_path, embedder, capsys):
    """A server stops its timer, then closes the store; a run already under way then met the closed store
    and logged 'decay job failed', which the reliability stress counts as a failure."""
    memory = YourMemory(db_path, user="ada", embedder=embedder)
    memory.close()
    stopping = yourmemory.DecayTimer(memory, interval=3600)
    stopping.stopped.is_set = iter([False, True]).__next__  # the run starts before stop() lands, fails after it
    stopping.stopped.wait = lambda timeout: None  # never wait out the interval here, whatever the code does
    stopping.run()
    assert "decay job failed" not in capsys.readouterr().err
    running = yourmemory.DecayTimer(memory, interval=3600)
    running.stopped.is_set = iter([False, False, True]).__next__
    running.stopped.wait = lambda timeout: None
    running.run()
    assert "decay job failed: this YourMemory was closed" in capsys.readouterr().err
