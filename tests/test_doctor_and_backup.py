"""`yourmemory doctor` finds every kind of disagreement between the memories and their indexes;
`yourmemory backup` / `restore-backup` copy and bring back a whole database without losing the current one.

Memories are made through the library with the real model and real SQLite + sqlite-vec; damage is done
behind the product's back with plain SQL, the way a crash or a buggy tool would leave it.
"""
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from pathlib import Path
from conftest import installed_entry_point

import yourmemory
from yourmemory import InvalidInput, YourMemory

FACTS = ("The staging cluster runs on three Hetzner machines in Falkenstein",
         "Ada prefers reviewing pull requests in the morning",
         "The billing service retries failed webhooks five times with exponential backoff")


@pytest.fixture
def filled(memory):
    ids = [memory.store(text, importance=0.8)["id"] for text in FACTS]
    memory.graph.create_entities([{"name": "Ada", "entityType": "person", "observations": ["Writes Rust at work"]}])
    memory.lessons.create_lesson({
        "name": "pip-timeout", "entityType": "lesson", "observations": ["pip install timed out behind the proxy"],
        "errorPattern": {"type": "network", "message": "ReadTimeoutError", "context": "pip install"},
        "metadata": {"severity": "low", "environment": {}}, "verificationSteps": []})
    return memory, ids


def run_cli(db, *args):
    env = {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": "ada"}
    return subprocess.run([installed_entry_point(), *args], env=env, capture_output=True, text=True, timeout=300)


def contents(db) -> list[str]:
    with YourMemory(db, user="ada", embedder=None) as store:
        return sorted(row[0] for row in store.db.execute("SELECT content FROM memories WHERE status = 'active'"))


# -- doctor --------------------------------------------------------------------------

def test_a_healthy_database_is_clean_and_counted(filled):
    memory, _ = filled
    report = memory.doctor()
    assert report["ok"], report["problems"]
    # the facts, Ada's observation, and the lesson's observation and error pattern
    assert report["counts"]["memories"] == report["counts"]["memory_vectors"] == len(FACTS) + 3
    assert report["counts"]["entities"] == 2 and report["counts"]["lessons"] == 1
    assert report["notes"] == []  # every memory, the graph's and the lesson's too, has its token sketches


@pytest.mark.parametrize("damage, expected", [
    ("DELETE FROM memory_vectors WHERE memory_id = {first}", "memory {first} has no vector"),
    ("UPDATE memory_vectors SET active = 0 WHERE memory_id = {first}", "active flag disagrees"),
    ("UPDATE memory_vectors SET scope = 'mallory' WHERE memory_id = {first}", "scope or active flag"),
    ("UPDATE memory_vectors SET embedding = vec_f32(zeroblob(3072)) WHERE memory_id = {first}", "vector is damaged"),
    ("INSERT INTO memory_fts (memory_fts, rowid, content) VALUES ('delete', {first}, '{first_content}')",
     "full-text index does not match"),
    ("DELETE FROM observations", "no observation or lesson refers to it"),
    ("UPDATE memory_counts SET tokens = tokens + 1", "BM25 counts for 'ada'"),
    ("INSERT INTO memory_vectors (memory_id, embedding, scope, active) "
     "SELECT 999, embedding, scope, active FROM memory_vectors WHERE memory_id = {first}", "vector 999 has no memory"),
    ("UPDATE memory_sentences SET vectors = x'0001020304' WHERE memory_id = {first}",
     "memory {first}: its sentence vectors are damaged"),
])
def test_doctor_names_each_kind_of_damage(filled, damage, expected):
    memory, ids = filled
    values = {"first": ids[0], "first_content": FACTS[0]}
    memory.db.execute(damage.format(**values))
    report = memory.doctor()
    assert not report["ok"]
    assert any(expected.format(**values) in problem for problem in report["problems"]), report["problems"]


def test_doctor_command_exits_1_on_damage_and_0_when_clean(filled, db_path):
    memory, ids = filled
    clean = run_cli(db_path, "doctor")
    assert clean.returncode == 0, clean.stderr
    assert "OK:" in clean.stdout
    memory.db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (ids[1],))
    damaged = run_cli(db_path, "doctor", "--json")
    assert damaged.returncode == 1
    assert f"memory {ids[1]} has no vector" in json.loads(damaged.stdout)["problems"]


def test_doctor_notes_memories_without_token_sketches_and_reindex_adds_them(filled, db_path):
    """A database from before sketches were kept is healthy (exit 0), but recall compares its memories by vector
    and words only: doctor says so and names the command; `yourmemory reindex` gives them their sketches."""
    memory, _ = filled
    memory.db.execute("DELETE FROM memory_tokens")
    before = run_cli(db_path, "doctor")
    assert before.returncode == 0, before.stderr
    assert "NOTE: 6 memories have no token sketches" in before.stdout and "`yourmemory reindex`" in before.stdout
    reindex = run_cli(db_path, "reindex")
    assert reindex.returncode == 0 and "Traceback" not in reindex.stderr, reindex.stderr
    assert reindex.stdout == "Added token sketches to 6 of 6 memories that had none.\n"
    after = run_cli(db_path, "doctor")
    assert after.returncode == 0 and "NOTE" not in after.stdout and "OK:" in after.stdout
    assert (run_cli(db_path, "reindex").stdout
            == "Every memory already has its token sketches and its sentences embedded.\n")


def test_doctor_notes_memories_whose_sentences_wait_and_reindex_embeds_them(filled, db_path):
    """A memory of several sentences stored through the library waits for them to be embedded one by one (the
    server does it in the background): doctor says so, healthy, and names the command that does it now."""
    memory, _ = filled
    memory.store("Ada: The staging cluster moved to Helsinki. Its old machines were sold in June.")
    before = run_cli(db_path, "doctor")
    assert before.returncode == 0, before.stderr
    assert ("NOTE: 1 memory waits for its sentences to be embedded one by one" in before.stdout
            and "`yourmemory reindex` embeds them now" in before.stdout), before.stdout
    reindex = run_cli(db_path, "reindex")
    assert reindex.returncode == 0 and "Traceback" not in reindex.stderr, reindex.stderr
    assert reindex.stdout == "Embedded the sentences of 1 of 1 memories that waited for it.\n"
    after = run_cli(db_path, "doctor")
    assert after.returncode == 0 and "NOTE" not in after.stdout and "OK:" in after.stdout


def test_doctor_on_a_file_that_is_not_a_database_says_so(tmp_path):
    bogus = tmp_path / "memory.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    result = run_cli(bogus, "doctor")
    assert result.returncode == 1
    assert "damaged" in result.stderr and "Traceback" not in result.stderr


# -- backup and restore ----------------------------------------------------------------

def test_backup_is_a_checked_standalone_copy(filled, tmp_path):
    memory, _ = filled
    target = memory.backup(tmp_path / "backups" / "monday.db")
    assert target.is_file() and not (tmp_path / "backups" / "monday.db.partial").exists()
    assert not (tmp_path / "backups" / "monday.db-wal").exists()
    plain = sqlite3.connect(target)
    assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert plain.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    plain.close()
    with YourMemory(target, user="ada", embedder=memory.embedder) as copy:
        assert copy.doctor()["ok"]
        assert copy.recall("where does staging run?", top_k=1)["memories"][0]["content"] == FACTS[0]


def test_backup_never_overwrites(filled, tmp_path):
    memory, _ = filled
    existing = tmp_path / "taken.db"
    existing.write_text("keep me")
    with pytest.raises(InvalidInput, match="already exists"):
        memory.backup(existing)
    assert existing.read_text() == "keep me"


def test_backup_while_another_process_writes(filled, db_path, tmp_path):
    """The online backup API copies a consistent snapshot while a second process keeps writing."""
    memory, _ = filled
    writer = subprocess.Popen([sys.executable, "-c", f"""
import sqlite_vec, yourmemory
conn = yourmemory.connect({str(db_path)!r})
for i in range(300):
    with yourmemory.transaction(conn):
        conn.execute("INSERT INTO audit_log (at, user_id, actor, action) VALUES (?, 'ada', 'user:ada', 'probe')", (i,))
"""])
    try:
        copies = [memory.backup(tmp_path / f"copy-{i}.db") for i in range(5)]
    finally:
        assert writer.wait(timeout=120) == 0
    for copy in copies:
        with YourMemory(copy, user="ada", embedder=None) as store:
            assert store.doctor()["ok"]


def test_restore_backup_brings_the_copy_back_and_keeps_the_replaced_database(filled, db_path, tmp_path):
    memory, _ = filled
    backup = memory.backup(tmp_path / "before.db")
    memory.store("The on-call rotation changes every Tuesday at noon", importance=0.9)
    memory.forget(memory.recall("staging cluster machines", top_k=1)["memories"][0]["id"])
    after_changes = contents(db_path)
    memory.close()

    result = run_cli(db_path, "restore-backup", str(backup))
    assert result.returncode == 0, result.stderr
    assert FACTS[0] in contents(backup) and not any("on-call" in text for text in contents(backup))
    assert contents(db_path) == contents(backup)
    saved = [path for path in tmp_path.iterdir() if path.name.startswith("memory.db.before-restore-")]
    assert len(saved) == 1 and contents(saved[0]) == after_changes
    with YourMemory(db_path, user="ada", embedder=None) as restored:
        assert restored.doctor()["ok"]


def test_restore_backup_refuses_what_is_not_a_yourmemory_backup(filled, db_path, tmp_path):
    memory, _ = filled
    before = contents(db_path)
    memory.close()
    stranger = tmp_path / "other.db"
    plain = sqlite3.connect(stranger)
    plain.execute("CREATE TABLE notes (text)")
    plain.commit()
    plain.close()
    for path, message in [(tmp_path / "missing.db", "is not a file"), (stranger, "is not a YourMemory database")]:
        result = run_cli(db_path, "restore-backup", str(path))
        assert result.returncode == 1 and message in result.stderr, result.stderr
    assert contents(db_path) == before
    assert not [path for path in tmp_path.iterdir() if "before-restore" in path.name]


def test_restore_backup_refuses_a_newer_schema(filled, db_path, tmp_path):
    memory, _ = filled
    backup = memory.backup(tmp_path / "future.db")
    plain = sqlite3.connect(backup)
    plain.execute(f"PRAGMA user_version = {yourmemory.SCHEMA_VERSION + 1}")
    plain.commit()
    plain.close()
    memory.close()
    result = run_cli(db_path, "restore-backup", str(backup))
    assert result.returncode == 1 and "schema version" in result.stderr


def test_a_faded_observation_is_purged_with_its_memory_and_doctor_stays_clean(memory, clock, monkeypatch):
    monkeypatch.setenv("YOURMEMORY_GRAPH_DECAY", "1")
    memory.graph.create_entities([{"name": "Kiosk", "entityType": "project", "observations": ["Runs on a Pi 4"]}])
    clock.advance(days=400)
    assert memory.prune()["pruned"], "the observation should fade under graph decay"
    clock.advance(days=40)
    assert memory.prune()["purged"] == 1
    assert memory.db.execute("SELECT count(*) FROM observations").fetchone()[0] == 0
    assert memory.doctor()["ok"], memory.doctor()["problems"]


def test_doctor_reports_an_observation_without_its_memory(filled):
    memory, _ = filled
    memory.db.execute("PRAGMA foreign_keys = OFF")
    memory.db.execute("UPDATE observations SET memory_id = NULL WHERE id = (SELECT min(id) FROM observations)")
    assert any("has no memory (it cannot be searched)" in problem for problem in memory.doctor()["problems"])


def test_doctor_reports_damaged_token_sketches_which_recall_passes_by(filled):
    memory, _ = filled
    damaged = memory.db.execute("SELECT min(memory_id) FROM memory_tokens").fetchone()[0]
    memory.db.execute("UPDATE memory_tokens SET sketches = x'00' WHERE memory_id = ?", (damaged,))
    assert any(f"memory {damaged}: its token sketches are damaged" in p for p in memory.doctor()["problems"])
    assert memory.recall("What do we use?", top_k=3)["memoriesFound"] == 3


def test_doctor_reports_a_value_left_superseded_by_a_memory_that_is_gone_and_restore_brings_it_back(memory):
    """Earlier versions forgot a memory without handing on what it had superseded."""
    old = memory.store("The project database is Postgres 15")
    new = memory.store("The project database is Postgres 16")
    memory.db.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (new["id"],))  # what forget used to do
    memory.db.execute("UPDATE memories SET superseded_by = NULL WHERE superseded_by = ?", (new["id"],))
    memory.db.execute("DELETE FROM memories WHERE id = ?", (new["id"],))
    report = memory.doctor()
    assert not report["ok"]
    assert [p for p in report["problems"] if "no longer exists" in p] == [
        f"memory {old['id']} is superseded by a memory that no longer exists (forgotten by an earlier version); "
        f"`yourmemory restore {old['id']}` makes it active again"]
    assert memory.restore(old["id"])["memory"]["status"] == "active"
    assert memory.recall("Which database does the project use?", top_k=1)["memories"][0]["id"] == old["id"]
    assert memory.doctor()["ok"]


@pytest.mark.parametrize("target, message", [
    (None, "path: must be a file path"),
    ("", "path: must be a file path"),
])
def test_a_backup_without_a_file_name_is_refused(memory, target, message):
    with pytest.raises(InvalidInput, match=message):
        memory.backup(target)


def test_a_backup_into_a_folder_that_cannot_be_made_names_that_folder(memory, tmp_path):
    """The problem is the target's folder (here a file stands in its way), not the database being copied."""
    blocker = tmp_path / "backups"
    blocker.write_text("not a folder")
    with pytest.raises(InvalidInput, match=f"path: cannot create the folder {blocker}"):
        memory.backup(blocker / "copy.db")
    assert not list(tmp_path.glob("backups*.partial"))


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
def test_restore_backup_replaces_a_damaged_database_and_keeps_its_bytes(filled, db_path, tmp_path, damage):
    """Every damage message sends the user to `restore-backup`; it must then work on the damaged file."""
    memory, _ = filled
    backup = memory.backup(tmp_path / "good.db")
    memory.close()
    broken = b"this is not a database\n" * 100 if damage == "not a database" else backup.read_bytes()[:10000]
    for companion in (Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        companion.unlink(missing_ok=True)
    db_path.write_bytes(broken)
    result = run_cli(db_path, "restore-backup", str(backup))
    assert result.returncode == 0, result.stderr
    assert contents(db_path) == contents(backup)
    saved = [path for path in tmp_path.iterdir() if path.name.startswith("memory.db.before-restore-")]
    assert len(saved) == 1 and saved[0].read_bytes() == broken, "the damaged file is kept as it was"
    with YourMemory(db_path, user="ada", embedder=None) as restored:
        assert restored.doctor()["ok"]


def test_restore_backup_leaves_the_database_alone_when_the_backup_cannot_be_brought_up_to_date(filled, db_path,
                                                                                              tmp_path):
    memory, _ = filled
    backup = memory.backup(tmp_path / "odd.db")
    before = contents(db_path)
    memory.close()
    plain = sqlite3.connect(backup)  # a YourMemory database a migration cannot handle
    plain.execute("PRAGMA user_version = 1")
    plain.commit()
    plain.close()
    result = run_cli(db_path, "restore-backup", str(backup))
    assert result.returncode == 1 and "nothing was restored" in result.stderr, result.stderr
    assert contents(db_path) == before
    assert not [path for path in tmp_path.iterdir() if "before-restore" in path.name or "restoring" in path.name]


def test_two_restores_in_one_second_keep_both_replaced_databases(filled, db_path, tmp_path, monkeypatch):
    memory, _ = filled
    backup = memory.backup(tmp_path / "good.db")
    memory.close()
    monkeypatch.setattr(yourmemory.time, "strftime", lambda *_: "20261201-120000")  # the same second
    for _ in range(2):
        yourmemory.restore_backup(backup, db_path)
    assert len([path for path in tmp_path.iterdir() if path.name.startswith("memory.db.before-restore-")]) == 2


def test_ids_given_out_after_a_backup_are_not_given_again_after_restoring_it(filled, db_path, tmp_path):
    """A client may still hold an id from after the backup: forget_memory(that id) must not hit a new memory."""
    memory, _ = filled
    backup = memory.backup(tmp_path / "before.db")
    later = memory.store("Hank owns the billing service")["id"]
    memory.close()
    yourmemory.restore_backup(backup, db_path)
    with YourMemory(db_path, user="ada", embedder=filled[0].embedder) as restored:
        assert restored.store("Ivy manages the payroll system")["id"] > later


@pytest.mark.parametrize("table", ["memory_edges", "jobs", "memory_counts"])
def test_doctor_reports_a_missing_table_instead_of_failing_on_it(filled, db_path, table):
    memory, _ = filled
    memory.close()
    plain = sqlite3.connect(db_path)
    plain.execute(f"DROP TABLE {table}")
    plain.commit()
    plain.close()
    result = run_cli(db_path, "doctor")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"PROBLEM: the table {table} is missing" in result.stdout, result.stdout + result.stderr


def test_restore_backup_refuses_a_sound_database_of_a_newer_schema_and_leaves_it_alone(filled, db_path, tmp_path):
    """Only a damaged database is replaced file and all: a newer version's database (or a locked one) is
    in someone's use, and swapping its file would orphan that process's writes."""
    memory, _ = filled
    backup = memory.backup(tmp_path / "good.db")
    memory.close()
    plain = sqlite3.connect(db_path)
    plain.execute(f"PRAGMA user_version = {yourmemory.SCHEMA_VERSION + 1}")
    plain.commit()
    plain.close()
    before = db_path.read_bytes()
    with pytest.raises(yourmemory.SchemaTooNew):
        yourmemory.restore_backup(backup, db_path)
    assert db_path.read_bytes() == before
    assert not [path for path in tmp_path.iterdir() if "before-restore" in path.name or "restoring" in path.name]


def test_restore_backup_into_a_folder_that_is_gone_creates_it(filled, tmp_path):
    memory, _ = filled
    backup = memory.backup(tmp_path / "good.db")
    target = tmp_path / "gone" / "again" / "memory.db"
    yourmemory.restore_backup(backup, target)
    assert contents(target) == contents(backup)


def test_a_damaged_database_and_its_wal_are_saved_untouched_before_the_restore(filled, db_path, tmp_path):
    memory, _ = filled
    backup = memory.backup(tmp_path / "good.db")
    memory.close()
    for companion in (Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        companion.unlink(missing_ok=True)
    broken, log = b"not a database at all\n" * 50, b"\x00" * 100
    db_path.write_bytes(broken)
    Path(f"{db_path}-wal").write_bytes(log)
    yourmemory.restore_backup(backup, db_path)
    saved = next(path for path in tmp_path.iterdir() if path.name.startswith("memory.db.before-restore-")
                 and not path.name.endswith("-wal"))
    assert saved.read_bytes() == broken and Path(f"{saved}-wal").read_bytes() == log
    assert contents(db_path) == contents(backup)
