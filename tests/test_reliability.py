"""No memory is lost or corrupted when servers share a database or are killed with SIGKILL.

The work is done by benchmarks/reliability.py (see its docstring for what each part does); these
tests run it small by default (4 real server processes x 40 writes; 10 kill trials, about 2-3
minutes on 2 CPUs) and at full size (4 x 500 writes; 114 kill trials) only with
YOURMEMORY_LONG_TESTS=1:

    YOURMEMORY_LONG_TESTS=1 pytest -m long tests/test_reliability.py

The kill trials' forked writers embed with a deterministic stand-in for the model (said so in the
harness): they test storage. The server trials and the stress part use the real model.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import reliability  # noqa: E402

LONG = os.environ.get("YOURMEMORY_LONG_TESTS") == "1"
long_only = pytest.mark.skipif(not LONG, reason="full-size reliability run; set YOURMEMORY_LONG_TESTS=1")

SHORT_STRESS = {"processes": 4, "writes": 40, "seeded": 10, "contested_every": 10}
# One upgrade trial from every older schema version there is.
SHORT_CRASH = {"write": 3, "server": 1, "migration": reliability.yourmemory.SCHEMA_VERSION - 1, "prune": 2}
SHORT_SIZES = {"memories": 120, "entities": 10, "purge": 40, "faded": 300, "fresh": 40}


def listing(lines, limit=30) -> str:
    lines = list(lines)
    more = f"\n... {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(str(line) for line in lines[:limit]) + more


# ============================================================================
# Several servers on one database
# ============================================================================

@pytest.fixture(scope="module")
def stress_run(tmp_path_factory, embedder):
    return reliability.stress(**SHORT_STRESS, seed=1, workdir=tmp_path_factory.mktemp("stress"), embedder=embedder,
                              time_limit_s=1200, quiet=True)


def test_every_write_a_server_acknowledged_is_in_the_database_exactly_once(stress_run):
    r = stress_run
    assert r["writes_attempted"] == SHORT_STRESS["processes"] * SHORT_STRESS["writes"]
    assert r["writes_acknowledged"] == r["writes_attempted"], listing(r["error_samples"])
    assert r["acknowledged_writes_checked"] == r["writes_acknowledged"]
    assert r["acknowledged_writes_present"] == r["writes_acknowledged"], listing(r["problems"])
    assert r["problems"] == [], listing(r["problems"])


def test_the_mix_covers_every_kind_of_write_and_read(stress_run):
    kinds = set(reliability.WRITE_OPS) | set(reliability.READ_OPS) | set(reliability.PROBE_OPS)
    assert {k for k, n in stress_run["operations"].items() if n} == kinds, stress_run["operations"]


def test_no_client_ever_sees_an_error_least_of_all_a_locked_database(stress_run):
    r = stress_run
    assert r["lock_errors"] == 0, listing(r["error_samples"] + r["decay_failure_samples"])
    assert r["errors"] == 0, listing(r["error_samples"])
    assert r["reads_acknowledged"] == r["reads_attempted"] > 0
    assert r["probes_rejected_as_expected"] == r["probes_attempted"]


def test_the_full_text_index_vectors_and_graph_agree_with_the_memories(stress_run):
    r = stress_run
    assert r["doctor_rc"] == 0, listing(r["doctor_problems"])
    assert r["doctor_problems"] == []
    assert r["cross_check_problems"] == [], listing(r["cross_check_problems"])


def test_the_decay_job_runs_throughout_beside_the_writers_and_never_fails(stress_run):
    r = stress_run
    assert r["decay_runs_observed"] >= 3
    assert r["decay_job_failures"] == 0, listing(r["decay_failure_samples"])
    assert r["reader_errors"] == 0
    assert r["seeded_to_purge"] > 0 and r["seeded_not_purged"] == 0


def test_racing_creations_of_one_entity_are_acknowledged_to_exactly_one_server(stress_run):
    assert stress_run["contested_entities"] == SHORT_STRESS["writes"] // SHORT_STRESS["contested_every"]
    assert [p for p in stress_run["problems"] if "contested" in p.lower()] == []


def test_lesson_uses_recorded_by_several_servers_are_all_counted(stress_run):
    assert stress_run["final_state"]["lesson_uses"] > 0
    assert [p for p in stress_run["problems"] if "lesson" in p] == []


def test_no_server_hands_out_the_id_of_a_forgotten_memory_again(stress_run):
    assert stress_run["ids_reused"] == 0, listing(stress_run["id_reuse_samples"])


def test_servers_starting_together_create_or_upgrade_one_database_without_a_failure(tmp_path):
    r = reliability.open_race(6, 2, workdir=tmp_path, memories=100, quiet=True)
    assert r["opens_succeeded"] == r["opens_attempted"] == 24, listing(r["failures"])
    assert r["failures"] == []


# ============================================================================
# Ids are handles clients keep: a forgotten one must never name another memory
# ============================================================================

def test_retrying_a_forget_never_deletes_a_memory_stored_since(memory):
    memory.store("Amara repaired the lighthouse lamp on Tuesday.")
    forgotten = memory.store("Bjorn tuned the harp in the chapel yard.")["id"]
    memory.forget(forgotten)
    newer = memory.store("Chidi oiled the windmill gears after the storm.")["id"]
    assert newer != forgotten
    with pytest.raises(reliability.yourmemory.NotFound):
        memory.forget(forgotten)  # forget_memory is annotated idempotent: clients may retry it
    assert memory.get(newer)["content"] == "Chidi oiled the windmill gears after the storm."


# ============================================================================
# kill -9
# ============================================================================

@pytest.fixture(scope="module")
def crash_run(tmp_path_factory):
    return reliability.crash(**SHORT_CRASH, seed=1, workdir=tmp_path_factory.mktemp("crash"), sizes=SHORT_SIZES,
                             quiet=True)


def trials(run, *kinds):
    return [r for r in run["records"] if r["kind"] in kinds]


def test_every_trial_ran_and_killed_its_process(crash_run):
    assert crash_run["trials"] == sum(SHORT_CRASH.values())
    for kind, count in SHORT_CRASH.items():
        assert crash_run["by_kind"][kind]["trials"] == count
    assert all(r["killed"] for r in trials(crash_run, "write", "server")), [
        (r["kind"], r["trial"]) for r in trials(crash_run, "write", "server") if not r["killed"]]


def test_the_database_opens_with_integrity_ok_after_every_kill(crash_run):
    bad = [(r["kind"], r["trial"], r["integrity"]) for r in crash_run["records"] if r["integrity"] != "ok"]
    assert bad == []
    assert [f for f in crash_run["failures"] if "cannot open" in f or "cannot read" in f] == []


def test_doctor_is_clean_after_every_kill(crash_run):
    assert [(r["kind"], r["trial"]) for r in crash_run["records"] if r["doctor_rc"] != 0] == [], listing(
        crash_run["failures"])


def test_no_kill_makes_the_database_hand_out_a_forgotten_id_again(crash_run):
    assert [(r["kind"], r["trial"]) for r in trials(crash_run, "write", "server") if r.get("ids_reused")] == []


def test_every_write_acknowledged_before_a_kill_survives_it_and_the_next_ones(crash_run):
    writers = trials(crash_run, "write", "server")
    assert sum(r["acknowledged_this_trial"] for r in writers) > 0
    for r in writers:
        assert r["present"] == r["acknowledged"], (r["kind"], r["trial"], listing(r["problems"]))
    assert [f for f in crash_run["failures"] if f.startswith(("write", "server"))] == [], listing(crash_run["failures"])


def test_the_operation_in_flight_at_a_kill_is_applied_whole_or_not_at_all(crash_run):
    # A half-applied operation shows as a missing or phantom row in the trial's problems.
    writers = trials(crash_run, "write", "server")
    assert any(r["in_flight_op"] for r in writers)
    assert all(r.get("in_flight") in ("applied", "not applied", "none") for r in writers)
    assert [(r["kind"], r["trial"], r["problems"]) for r in writers if r["problems"]] == []


def test_a_kill_during_an_upgrade_leaves_a_whole_schema_version_that_reopening_completes(crash_run):
    upgrades = trials(crash_run, "migration")
    assert {r["from_version"] for r in upgrades} == set(range(1, reliability.yourmemory.SCHEMA_VERSION))
    assert any(r["killed"] and not r["finished"] for r in upgrades), upgrades
    assert [(r["trial"], r["problems"]) for r in upgrades if r["problems"]] == []


def test_a_kill_during_a_prune_leaves_all_of_it_or_none_of_it(crash_run):
    prunes = trials(crash_run, "prune")
    assert crash_run["prune_reference"]["pruned"] > 0 and crash_run["prune_reference"]["purged"] > 0
    assert {r["outcome"] for r in prunes} <= {"all", "none"}
    assert any(r["killed"] and not r["finished"] for r in prunes), prunes
    assert [(r["trial"], r["problems"]) for r in prunes if r["problems"]] == []


# ============================================================================
# Full size (YOURMEMORY_LONG_TESTS=1)
# ============================================================================

@pytest.mark.long
@long_only
def test_full_stress_four_servers_five_hundred_writes_each(tmp_path, embedder):
    r = reliability.stress(4, 500, seed=1, workdir=tmp_path, embedder=embedder, time_limit_s=3600, quiet=True)
    assert r["writes_attempted"] == 2000
    assert r["writes_acknowledged"] == r["acknowledged_writes_present"] == r["writes_attempted"], listing(
        r["problems"] + r["error_samples"])
    assert r["errors"] == r["lock_errors"] == r["decay_job_failures"] == 0, listing(r["error_samples"])
    assert r["problems"] == [] and r["cross_check_problems"] == [], listing(r["problems"] + r["cross_check_problems"])
    assert r["doctor_rc"] == 0, listing(r["doctor_problems"])
    assert r["decay_runs_observed"] >= 10 and r["seeded_not_purged"] == 0


@pytest.mark.long
@long_only
def test_full_simultaneous_opens(tmp_path):
    # Rare: in about 1 round in 200, PRAGMA journal_mode = WAL on a new file fails with "database is locked".
    r = reliability.open_race(8, 100, workdir=tmp_path, quiet=True)
    assert r["lock_errors"] == 0, listing(r["failures"])
    assert r["opens_succeeded"] == r["opens_attempted"] == 1600, listing(r["failures"])


@pytest.mark.long
@long_only
def test_full_kill_trials(tmp_path):
    r = reliability.crash(70, 20, 12, 12, seed=1, workdir=tmp_path, quiet=True)
    assert r["trials"] >= 100
    assert r["by_kind"]["migration"]["trials"] >= 10 and r["by_kind"]["prune"]["trials"] >= 10
    assert r["failures"] == [], listing(r["failures"], 60)
