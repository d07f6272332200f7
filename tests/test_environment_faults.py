"""Environment faults: a read-only database, a full disk, a missing or damaged model, corrupted
vectors and a database from a newer YourMemory.

Each fault is driven through the surfaces where it matters: the library (a YourMemoryError whose
message says what is wrong), the installed CLI (non-zero exit, one `yourmemory: error:` line on
stderr, no traceback) and the stdio MCP server (an is_error tool result that says what is wrong,
and the server keeps answering; or, where it cannot start at all, a clear stderr line and a
non-zero exit). Afterwards the database is reopened with a healthy setup: every earlier row is
still there unchanged, PRAGMA integrity_check and the FTS index check pass, and recall works.

How the faults are made, honestly and without touching the product:
- read-only: chmod 444/555 for a normal user; root ignores file modes, so for root the data
  folder is seen through a read-only bind mount (EROFS), or the test is skipped if that fails;
- disk full: a 16 MiB tmpfs filled to the last byte (real ENOSPC) where this process may mount
  one; else (and always in one library test) SQLite's max_page_count on the product's own
  connection, so the real SQLITE_FULL path fires; for the CLI and the server that limit is set by
  a sitecustomize put on PYTHONPATH. YM_FAULTS_NO_MOUNT=1 forces the fallback;
- the model: a folder beside the installed one (links to its files, copies where the product may
  write) pointed to by YOURMEMORY_MODEL_DIR, with one file missing, cut short or garbage; the
  installed model is only ever read;
- corrupted vectors: bytes of the sqlite-vec shadow tables rewritten with plain SQL, and the
  product run in a child process so a segfault shows as a signal;
- newer schema: PRAGMA user_version = SCHEMA_VERSION + 1, and the file hashed before and after.
"""
import errno
import gc
import hashlib
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from conftest import installed_entry_point
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import yourmemory
from yourmemory import ModelMissing, SchemaTooNew, StorageError, YourMemory, YourMemoryError

USER = "ada"
MEMORIES = [  # (content, importance, category); ids 1..5 in this order
    ("The project database is Postgres 16", 0.8, "fact"),
    ("The Postgres database runs on the db-01 host in Frankfurt", 0.8, "fact"),
    ("The deploy script lives in tools/deploy.sh", 0.7, "fact"),
    ("The nightly backup failed because the S3 bucket policy changed", 0.9, "failure"),
    ("Always run the migrations before deploying the API", 0.6, "strategy"),
]
ENTITY = {"name": "Ada", "entityType": "person", "observations": ["Ada leads the platform team"]}
ACTIVE = len(MEMORIES) + len(ENTITY["observations"])  # an observation is a memory too
QUERY = "which database does the project use"  # MEMORIES[0] answers it
NEW_MEMORY = "The project cache is Redis 7"
# Thousands of distinct words: storing it needs new pages in the table, the FTS index and the WAL.
BIG_MEMORY = " ".join(f"Capacity note {i}: rack r{i} in hall h{i % 7} holds {i * 3} servers of batch b{i * 13}."
                      for i in range(110))
assert len(BIG_MEMORY) < yourmemory.MAX_CONTENT_CHARS

# What a message must say (checked with file paths blanked out: a tmp path holds test names).
READ_ONLY = r"read[- ]?only|readonly|permission denied|writable"
FULL = r"\bfull\b|no space|out of space"
RUN_SETUP = r"yourmemory setup"
CORRUPT = r"corrupt|damaged|broken|rebuil|repair|reindex|doctor"  # says the data is damaged, or what fixes it
FLOW_LIMIT_S = 300  # a hang guard, not a timing assertion
HEALTHY_MODEL = yourmemory.model_dir()


# -- what "intact" means ------------------------------------------------------------------------

def snapshot(conn, vectors: bool = True) -> dict:
    """Every row a fault could damage, without the fields a recall legitimately moves."""
    def rows(sql):
        return sorted(tuple(row) for row in conn.execute(sql).fetchall())
    tables = {
        "memories": rows("SELECT id, user_id, agent_id, visibility, content, category, importance, status, "
                         "superseded_by, source FROM memories"),
        "fts": rows("SELECT id, sz FROM memory_fts_docsize"),
        "edges": rows("SELECT source_id, target_id, weight, relation FROM memory_edges"),
        "history": rows("SELECT memory_id, content, importance, reason FROM memory_history"),
        "audit": rows("SELECT user_id, actor, action, memory_id, detail FROM audit_log"),
        "agents": rows("SELECT user_id, agent_id, key_hash, can_read, can_write, revoked_at FROM agents"),
        "entities": rows("SELECT id, user_id, name, entity_type FROM entities"),
        "observations": rows("SELECT entity_id, content, memory_id FROM observations"),
    }
    if vectors:
        tables["vectors"] = rows("SELECT memory_id, embedding, scope, active FROM memory_vectors")
    return tables


def read_snapshot(db: Path, vectors: bool = True) -> dict:
    conn = yourmemory.connect(db)
    try:
        return snapshot(conn, vectors)
    finally:
        conn.close()


def assert_intact(db: Path, before: dict, embedder, *, recall: bool = True) -> dict:
    """Reopened healthy: the file checks out and every row of ``before`` is still there, unchanged."""
    conn = yourmemory.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")  # raises if out of step
        after = snapshot(conn, vectors="vectors" in before)
    finally:
        conn.close()
    for table, rows in before.items():
        lost = [row for row in rows if row not in after[table]]
        assert not lost, f"{table}: {len(lost)} earlier rows lost or changed, e.g. {str(lost[0])[:300]}"
    if recall:
        with YourMemory(db, user=USER, embedder=embedder) as memory:
            found = memory.recall(QUERY)["memories"]
        assert found and found[0]["content"] == MEMORIES[0][0], found
    return after


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- how errors must look --------------------------------------------------------------------------

def plain(message: str) -> str:
    """``message`` with file paths blanked out, so a word in a path cannot pass for an explanation."""
    return re.sub(r"/[^\s;,()'\"`]*", "<path>", message)


def failure(action) -> Exception:
    """The exception ``action`` raised; the test fails if it did not raise."""
    try:
        action()
    except Exception as error:  # the assertions that follow say which kind was wanted
        return error
    pytest.fail("expected this call to fail, but it succeeded")


def assert_clear(error: BaseException, pattern: str, what: str) -> None:
    assert isinstance(error, YourMemoryError), (
        f"{what}: raised {type(error).__module__}.{type(error).__name__}: {error!s:.300} - not a YourMemoryError")
    assert re.search(pattern, plain(str(error)), re.I), f"{what}: the message does not say what is wrong: {error}"


def assert_clear_cli_failure(result, pattern: str, what: str) -> str:
    """Exit non-zero (not a signal), exactly one stderr line `yourmemory: error: ...` naming the problem."""
    shown = f"{what}: exit {result.returncode}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-4000:]}"
    assert result.returncode > 0, shown
    assert "Traceback" not in result.stderr, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("yourmemory: error:"), shown
    assert re.search(pattern, plain(lines[0]), re.I), shown
    return lines[0]


def text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def assert_clear_tool_error(result, pattern: str, what: str) -> None:
    assert result.is_error, f"{what} succeeded: {text(result)[:300]}"
    detail = re.sub(r"^Error executing tool \w+:?\s*", "", text(result))
    assert re.search(pattern, plain(detail), re.I), (
        f"{what}: the tool error does not say what is wrong: {text(result)!r}")


def payload(result) -> dict:
    assert not result.is_error, text(result)
    return json.loads(result.content[0].text)


# -- running the CLI and the server ---------------------------------------------------------------------

def environment(db: Path, extra: dict | None = None) -> dict:
    return {**os.environ, "YOURMEMORY_DB": str(db), "YOURMEMORY_USER": USER, **(extra or {})}


def run_cli(db: Path, *args: str, env: dict | None = None, cwd: Path | None = None, stdin=None):
    return subprocess.run([installed_entry_point(), *args], env=environment(db, env), cwd=cwd or db.parent,
                          stdin=stdin, capture_output=True, text=True, timeout=300)


def serve(db: Path, flow, log: Path, env: dict | None = None):
    """Launch the installed server on ``db``, run ``await flow(client)``, stop it; stderr goes to ``log``."""
    params = StdioServerParameters(command=installed_entry_point(), env=environment(db, env), cwd=str(log.parent))

    async def main():
        with anyio.fail_after(FLOW_LIMIT_S):
            with open(log, "a") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as client:
                        await client.initialize()
                        return await flow(client)
    try:
        return anyio.run(main)
    except Exception as error:
        tail = log.read_text()[-4000:] if log.exists() else "(no stderr)"
        raise AssertionError(f"MCP flow failed: {error!r}\n--- server stderr ---\n{tail}") from error


def assert_no_traceback(log: Path) -> None:
    stderr = log.read_text() if log.exists() else ""
    assert "Traceback" not in stderr, f"the server printed a traceback:\n{stderr[-4000:]}"


def memories_jsonl(path: Path, content: str) -> Path:
    path.write_text(json.dumps({"type": "memory", "content": content, "category": "fact"}) + "\n")
    return path


# -- databases ------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def template(tmp_path_factory, embedder) -> Path:
    """Five memories (some linked), a knowledge-graph entity and an agent, closed cleanly."""
    db = tmp_path_factory.mktemp("environment-faults") / "memory.db"
    with YourMemory(db, user=USER, embedder=embedder) as memory:
        ids = [memory.store(content, importance=importance, category=category)["id"]
               for content, importance, category in MEMORIES]
        memory.graph.create_entities([ENTITY])
        memory.register_agent("ci-bot")
        edges = memory.stats()["edges"]
    assert ids == list(range(1, len(MEMORIES) + 1)) and edges > 0
    assert not db.with_name("memory.db-wal").exists()
    return db


def copy_template(template: Path, db: Path) -> Path:
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, db)
    return db


@pytest.fixture
def seeded_db(template, tmp_path) -> Path:
    return copy_template(template, tmp_path / "data" / "memory.db")


# -- making things read-only or full -------------------------------------------------------------------

def mount(*args: str) -> str | None:
    """Run mount(8): None when it worked, else why not."""
    if os.geteuid() != 0:
        return "mounting needs root"
    if os.environ.get("YM_FAULTS_NO_MOUNT") == "1":
        return "YM_FAULTS_NO_MOUNT=1"
    if not shutil.which("mount"):
        return "no mount command"
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def unmount(point: Path) -> None:
    if subprocess.run(["umount", str(point)], capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def _refuses_writes(directory: Path) -> bool:
    try:
        (directory / "probe").write_text("x")
    except OSError as error:
        return error.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    (directory / "probe").unlink()
    return False


@contextmanager
def read_only(directory: Path):
    """``directory`` and its files, read-only; yields the path to use them by."""
    if os.geteuid() != 0:
        modes = {path: stat.S_IMODE(path.stat().st_mode) for path in [directory, *directory.iterdir()]}
        for path in modes:
            path.chmod(0o555 if path == directory else 0o444)
        try:
            if not _refuses_writes(directory):
                pytest.skip("file modes do not stop this user from writing")
            yield directory
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    # Root ignores file modes: see the folder through a read-only bind mount instead.
    view = directory.with_name(directory.name + "-view")
    view.mkdir()
    why = mount("--bind", str(directory), str(view))
    if why:
        pytest.skip(f"running as root, which file modes do not stop, and no read-only bind mount: {why}")
    try:
        why = mount("-o", "remount,bind,ro", str(view))
        if why:
            pytest.skip(f"running as root, which file modes do not stop, and no read-only bind mount: {why}")
        if not _refuses_writes(view):
            pytest.skip("the read-only bind mount still accepts writes")
        yield view
    finally:
        unmount(view)


PAGE_LIMIT_HOOK = '''\
"""Test hook (tests/test_environment_faults.py): no YourMemory database may grow by a single page."""
import yourmemory

_connect = yourmemory.connect


def connect(path):
    conn = _connect(path)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    return conn


yourmemory.connect = connect
'''


class FullDisk:
    """A folder whose disk can run out: a real 16 MiB tmpfs, or (``real`` False) a SQLite page limit
    on every connection a child process opens, set through ``env``."""

    def __init__(self, root: Path, real: bool, env: dict):
        self.root, self.real, self.env = root, real, env
        self.filler = root / "filler"

    def fill(self) -> None:
        """Take every free byte (no-op for the page limit, which holds from the start)."""
        if not self.real:
            return
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (1 << 20, 4096, 1):
                while True:
                    try:
                        os.write(fd, b"\0" * size)
                    except OSError as error:
                        if error.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)
        assert shutil.disk_usage(self.root).free == 0

    def free(self) -> None:
        if self.real:
            self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path):
    """A real, small filesystem; skipped where this process may not mount one."""
    root = tmp_path / "disk"
    root.mkdir()
    why = mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root))
    if why:
        pytest.skip(f"no small filesystem to fill: {why} (the max_page_count tests cover SQLITE_FULL)")
    try:
        yield FullDisk(root, True, {})
    finally:
        unmount(root)


@pytest.fixture
def full_disk(tmp_path):
    """A real small tmpfs where possible, else the page-limit hook for child processes."""
    root = tmp_path / "disk"
    root.mkdir()
    if mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root)) is None:
        try:
            yield FullDisk(root, True, {})
        finally:
            unmount(root)
        return
    hook = tmp_path / "page-limit-hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PAGE_LIMIT_HOOK)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    yield FullDisk(root, False, {"PYTHONPATH": path})


# -- broken models ------------------------------------------------------------------------------------

MODEL_FAULTS = ("model.onnx missing", "model.onnx cut to half", "model.onnx empty",
                "tokenizer.json missing", "tokenizer.json not JSON", "tokenizer.json cut to half")


def _write_prefix(source: Path, target: Path, size: int) -> None:
    with open(source, "rb") as src, open(target, "wb") as out:
        while size > 0:
            chunk = src.read(min(size, 1 << 22))
            if not chunk:
                break
            out.write(chunk)
            size -= len(chunk)


def make_model(directory: Path, fault: str | None) -> Path:
    """A model folder like the installed one with one fault (None: healthy).

    Unbroken files are symlinks to the installed model, so nothing the product may write goes
    here (see ``writable_model``); a broken file is always a new file, never written through a link.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        entry.unlink()
    for name in yourmemory.MODEL_FILES:
        (directory / name).symlink_to(HEALTHY_MODEL / name)
    if fault is None:
        return directory
    name, _, damage = fault.partition(" ")
    target = directory / name
    target.unlink()
    if damage == "cut to half":
        _write_prefix(HEALTHY_MODEL / name, target, (HEALTHY_MODEL / name).stat().st_size // 2)
    elif damage == "empty":
        target.write_bytes(b"")
    elif damage == "not JSON":
        target.write_bytes(b'{"version": "1.0", "model": not json at all')
    else:
        assert damage == "missing", fault
    return directory


@pytest.fixture(scope="session")
def broken_model(tmp_path_factory):
    """broken_model(fault): a folder with that fault, made once per session and removed after it."""
    made: dict[str, Path] = {}
    root = tmp_path_factory.mktemp("broken-models")

    def get(fault: str) -> Path:
        if fault not in made:
            made[fault] = make_model(root / fault.replace(" ", "-"), fault)
        return made[fault]
    yield get
    shutil.rmtree(root, ignore_errors=True)  # a half model is 200+ MB


def link_model(directory: Path, source: Path) -> Path:
    """``directory`` holding links to whichever model files ``source`` has (a fault made once, reused)."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        entry.unlink()
    for name in yourmemory.MODEL_FILES:
        if os.path.lexists(source / name):
            (directory / name).symlink_to((source / name).resolve())
    return directory


def writable_model(directory: Path, source: Path) -> Path:
    """Like ``link_model``, for a folder the product may rewrite (setup): no link into the installed
    model is left, only copies or links to this session's own broken files."""
    link_model(directory, source)
    for entry in directory.iterdir():
        target = entry.resolve()
        if target.parent == HEALTHY_MODEL.resolve():
            entry.unlink()
            shutil.copyfile(target, entry)
    return directory


def same_as_installed(directory: Path) -> bool:
    """The model files in ``directory`` are the installed ones (size, head and tail compared)."""
    for name in yourmemory.MODEL_FILES:
        mine, theirs = directory / name, HEALTHY_MODEL / name
        if not mine.is_file() or mine.stat().st_size != theirs.stat().st_size:
            return False
        with open(mine, "rb") as a, open(theirs, "rb") as b:
            if a.read(1 << 22) != b.read(1 << 22):
                return False
            a.seek(-min(1 << 22, mine.stat().st_size), os.SEEK_END)
            b.seek(-min(1 << 22, theirs.stat().st_size), os.SEEK_END)
            if a.read() != b.read():
                return False
    return True


@pytest.fixture
def model_mirror(tmp_path) -> str:
    """A YOURMEMORY_MODEL_URL serving the installed model from local files (no network)."""
    hub = tmp_path / "hub"
    (hub / "onnx").mkdir(parents=True)
    (hub / "onnx" / "model.onnx").symlink_to(HEALTHY_MODEL / "model.onnx")
    (hub / "tokenizer.json").symlink_to(HEALTHY_MODEL / "tokenizer.json")
    return hub.as_uri()


# -- corrupted vectors -------------------------------------------------------------------------------

CORRUPTED_ID = 2  # "The Postgres database runs on the db-01 host": relevant to QUERY, but not its answer
CORRUPTIONS = ("one vector overwritten with NaN bytes", "one vector zeroed", "one vector cut to half",
               "one vector missing")


def corrupt_vectors(db: Path, kind: str, memory_id: int = CORRUPTED_ID) -> None:
    """Damage one row of memory_vectors under the product: plain SQL on valid SQLite pages.

    A vector of the wrong length needs ``ignore_check_constraints``: the table refuses one, but a
    file written by another tool (or a bug) can still hold it.
    """
    conn = yourmemory.connect(db)
    try:
        width = yourmemory.EMBEDDING_DIM * 4
        damaged = {"one vector overwritten with NaN bytes": b"\xff" * width, "one vector zeroed": bytes(width),
                   "one vector cut to half": bytes(width // 2)}
        if kind == "one vector missing":
            conn.execute("DELETE FROM memory_vectors WHERE memory_id = ?", (memory_id,))
        else:
            conn.execute("PRAGMA ignore_check_constraints = ON")
            conn.execute("UPDATE memory_vectors SET embedding = ? WHERE memory_id = ?", (damaged[kind], memory_id))
    finally:
        conn.close()


CHILD = r'''
"""Runs the product on corrupted databases; one JSON line per database."""
import json, sys
import yourmemory
from yourmemory import YourMemory, YourMemoryError

def outcome(action):
    try:
        return {"ok": action()}
    except Exception as error:
        return {"error": type(error).__module__ + "." + type(error).__name__,
                "yourmemory_error": isinstance(error, YourMemoryError), "message": str(error)}

embedder = yourmemory.Embedder().load()
for kind, db in json.loads(sys.argv[1]):
    result = {"kind": kind}
    opened = outcome(lambda: YourMemory(db, user="ada", embedder=embedder))
    if "ok" in opened:
        memory = opened.pop("ok")
        opened["ok"] = True
        result["recall"] = outcome(lambda: [
            {key: m[key] for key in ("id", "content", "similarity", "bm25", "score", "strength")}
            for m in memory.recall(sys.argv[2])["memories"]])
        result["store"] = outcome(lambda: memory.store(sys.argv[3])["action"])
        result["update"] = outcome(lambda: memory.update(int(sys.argv[4]), sys.argv[5])["action"])
        memory.close()
    result["open"] = opened
    print(json.dumps(result), flush=True)
'''
UPDATED = "The Postgres database runs on the db-02 host in Frankfurt"


@pytest.fixture(scope="module")
def corrupted_runs(template, tmp_path_factory):
    """One child process runs recall, store and update on a copy of the database per corruption."""
    root = tmp_path_factory.mktemp("corrupted")
    jobs = []
    for kind in CORRUPTIONS:
        db = copy_template(template, root / kind.replace(" ", "-") / "memory.db")
        corrupt_vectors(db, kind)
        jobs.append((kind, str(db)))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(jobs), QUERY, NEW_MEMORY, str(CORRUPTED_ID), UPDATED],
        capture_output=True, text=True, timeout=300, cwd=root)
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            results[record["kind"]] = record
    return done, results, {kind: Path(db) for kind, db in jobs}


def assert_clear_or(outcome: dict, what: str, check_ok) -> None:
    """A clear YourMemoryError naming the damage, or a result that passes ``check_ok``."""
    if "ok" in outcome:
        check_ok(outcome["ok"])
        return
    assert outcome["yourmemory_error"], f"{what}: raised {outcome['error']}: {outcome['message'][:300]}"
    assert re.search(CORRUPT, plain(outcome["message"]), re.I), f"{what}: unclear message: {outcome['message']}"


def assert_degraded_recall(memories: list[dict], what: str) -> None:
    """A usable answer: the intact answer to QUERY is found and every number is a real number."""
    for memory in memories:
        for key in ("similarity", "bm25", "score", "strength"):
            value = memory[key]
            assert value is None or math.isfinite(value), f"{what}: memory {memory['id']} has {key} {value}"
    assert MEMORIES[0][0] in [m["content"] for m in memories], f"{what}: the intact answer is missing: {memories}"


def assert_memories_kept(db: Path, before: dict, changed: set[int]) -> None:
    """Rows of the memories table (other than ``changed``) unchanged; the file itself sound."""
    conn = yourmemory.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('integrity-check')")
        after = snapshot(conn, vectors=False)
    finally:
        conn.close()
    for table in ("memories", "entities", "observations", "agents"):
        kept = [row for row in before[table] if not (table == "memories" and row[0] in changed)]
        lost = [row for row in kept if row not in after[table]]
        assert not lost, f"{table}: earlier rows lost or changed: {lost[:2]}"


# =====================================================================================================
# Read-only database
# =====================================================================================================

def test_library_read_only_database_refuses_writes_with_a_clear_message(seeded_db, embedder):
    before = read_snapshot(seeded_db)
    errors = {}
    with read_only(seeded_db.parent) as folder:
        db = folder / seeded_db.name
        try:
            memory = YourMemory(db, user=USER, embedder=embedder)
        except Exception as error:  # refusing to open at all is acceptable if it says why
            errors["opening"] = error
            memory = None
        if memory is not None:
            with memory:
                writes = {"store": lambda: memory.store(NEW_MEMORY),
                          "update": lambda: memory.update(3, "The deploy script lives in scripts/deploy.sh"),
                          "forget": lambda: memory.forget(4),
                          "register_agent": lambda: memory.register_agent("backup-bot")}
                errors.update((name, failure(write)) for name, write in writes.items())
    assert_intact(seeded_db, before, embedder)
    assert read_snapshot(seeded_db) == before
    for name, error in errors.items():
        assert_clear(error, READ_ONLY, f"{name} on a read-only database")


def test_library_read_only_database_still_answers_reads(seeded_db, embedder):
    with read_only(seeded_db.parent) as folder:
        db = folder / seeded_db.name
        error = None
        try:
            # Two days on: a recall that could reinforce would count and reset the clock (the checks below).
            memory = YourMemory(db, user=USER, embedder=embedder, clock=lambda: time.time() + 2 * 86400)
        except Exception as caught:
            error = caught
        assert error is None, f"a read-only database cannot even be opened for reading: {error!r}"
        with memory:
            assert memory.stats()["memories"]["active"] == ACTIVE
            assert memory.doctor()["ok"], memory.doctor()["problems"]
            assert memory.get(1)["content"] == MEMORIES[0][0]
            before = memory.get(1)
            found = memory.recall(QUERY)["memories"]
            assert found and found[0]["content"] == MEMORIES[0][0]
            # Nothing was reinforced, so the reply reports the memory as stored, as get() does.
            assert (found[0]["recall_count"], found[0]["last_accessed_at"]) == \
                (before["recall_count"], before["last_accessed_at"])
            assert found[0]["strength"] == pytest.approx(before["strength"], abs=1e-3)  # a moment's decay


def test_cli_write_to_a_read_only_database_fails_with_one_clear_line(seeded_db, embedder):
    before = read_snapshot(seeded_db)
    with read_only(seeded_db.parent) as folder:
        result = run_cli(folder / seeded_db.name, "agent", "register", "backup-bot", cwd=seeded_db.parent.parent)
    assert assert_intact(seeded_db, before, embedder, recall=False) == before
    assert_clear_cli_failure(result, READ_ONLY, "`yourmemory agent register` on a read-only database")


def test_cli_stats_reads_a_read_only_database(seeded_db):
    with read_only(seeded_db.parent) as folder:
        result = run_cli(folder / seeded_db.name, "stats", "--json", cwd=seeded_db.parent.parent)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (
            f"exit {result.returncode}\nstderr:\n{result.stderr[-3000:]}")
        assert json.loads(result.stdout)["memories"]["active"] == ACTIVE


def test_server_on_a_read_only_database_refuses_writes_clearly_and_keeps_answering(seeded_db, embedder, tmp_path):
    before = read_snapshot(seeded_db)
    log = tmp_path / "server-stderr.log"
    out = None
    with read_only(seeded_db.parent) as folder:
        db = folder / seeded_db.name
        started = run_cli(db, "serve", stdin=subprocess.DEVNULL, cwd=tmp_path)  # EOF at once: a healthy server exits 0
        if started.returncode == 0:
            async def flow(client):
                return {"store": await client.call_tool("store_memory", {"content": NEW_MEMORY}),
                        "recall": await client.call_tool("recall_memory", {"query": QUERY}),
                        "graph": await client.call_tool("read_graph", {})}
            out = serve(db, flow, log)
    assert assert_intact(seeded_db, before, embedder) == before
    if out is None:  # it cannot start at all: then it must say why, in one line
        assert_clear_cli_failure(started, READ_ONLY, "the server on a read-only database")
        return
    assert_clear_tool_error(out["store"], READ_ONLY, "store_memory on a read-only database")
    assert payload(out["recall"])["memories"][0]["content"] == MEMORIES[0][0]
    assert [e["name"] for e in payload(out["graph"])["entities"]] == [ENTITY["name"]]
    assert_no_traceback(log)


# =====================================================================================================
# Disk full
# =====================================================================================================

def test_library_store_when_the_database_may_not_grow_fails_cleanly_and_writes_nothing(seeded_db, embedder):
    """SQLite's max_page_count on the product's own connection: the real SQLITE_FULL path."""
    before = read_snapshot(seeded_db)
    with YourMemory(seeded_db, user=USER, embedder=embedder) as memory:
        pages = memory.db.execute("PRAGMA page_count").fetchone()[0]
        assert memory.db.execute(f"PRAGMA max_page_count = {pages}").fetchone()[0] == pages
        store_error = failure(lambda: memory.store(BIG_MEMORY))
        assert snapshot(memory.db) == before, "a failed store left part of its write behind"
        update_error = failure(lambda: memory.update(3, BIG_MEMORY))
        assert snapshot(memory.db) == before, "a failed update left part of its write behind"
        # Reads still answer.
        assert memory.stats()["memories"]["active"] == ACTIVE
        assert memory.get(3)["content"] == MEMORIES[2][0]
        # Room again (the analogue of freeing disk space): the same store now works.
        memory.db.execute("PRAGMA max_page_count = 2147483646")
        assert memory.store(BIG_MEMORY)["action"] == "store"
    after = assert_intact(seeded_db, before, embedder)
    assert len(after["memories"]) == len(before["memories"]) + 1
    assert_clear(store_error, FULL, "store on a full database")
    assert_clear(update_error, FULL, "update on a full database")


def test_library_store_on_a_full_filesystem_fails_cleanly_and_recovers_when_space_returns(
        small_disk, template, embedder):
    db = copy_template(template, small_disk.root / "memory.db")
    before = read_snapshot(db)
    recall_error = None
    with YourMemory(db, user=USER, embedder=embedder) as memory:
        assert memory.recall(QUERY)["memories"][0]["content"] == MEMORIES[0][0]
        small_disk.fill()
        store_error = failure(lambda: memory.store(BIG_MEMORY))
        assert snapshot(memory.db) == before, "a failed store left part of its write behind"
        try:  # recall reinforces (a write): answering or a clear "full" are both fine
            memory.recall(QUERY)
        except Exception as error:
            recall_error = error
        small_disk.free()
        assert memory.store(BIG_MEMORY)["action"] == "store", "no recovery once space was freed"
    after = assert_intact(db, before, embedder)
    assert len(after["memories"]) == len(before["memories"]) + 1
    assert_clear(store_error, FULL, "store on a full disk")
    if recall_error is not None:
        assert_clear(recall_error, FULL, "recall on a full disk")


def test_library_opening_a_database_on_a_full_filesystem_says_the_disk_is_full(small_disk, template, embedder):
    db = copy_template(template, small_disk.root / "memory.db")
    before = read_snapshot(db)
    small_disk.fill()
    try:
        memory = YourMemory(db, user=USER, embedder=embedder)
    except Exception as caught:
        error = caught
    else:
        with memory:
            error = failure(lambda: memory.store(BIG_MEMORY))
    small_disk.free()
    assert assert_intact(db, before, embedder) == before
    assert_clear(error, FULL, "opening a database on a full disk (or storing in it)")


def test_cli_import_on_a_full_disk_fails_with_one_clear_line_and_writes_nothing(full_disk, template, embedder,
                                                                                 tmp_path):
    db = copy_template(template, full_disk.root / "memory.db")
    before = read_snapshot(db)
    source = memories_jsonl(tmp_path / "memories.jsonl", BIG_MEMORY)
    full_disk.fill()
    result = run_cli(db, "import", str(source), env=full_disk.env, cwd=tmp_path)
    full_disk.free()
    assert assert_intact(db, before, embedder) == before
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode > 0 and "Traceback" not in result.stderr, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(FULL, plain(lines[0]), re.I), shown


def test_server_on_a_full_disk_reports_it_keeps_answering_and_recovers(full_disk, template, embedder, tmp_path):
    db = copy_template(template, full_disk.root / "memory.db")
    before = read_snapshot(db)
    log = tmp_path / "server-stderr.log"

    async def flow(client):
        out = {"warm": await client.call_tool("recall_memory", {"query": QUERY})}
        full_disk.fill()
        out["store"] = await client.call_tool("store_memory", {"content": BIG_MEMORY})
        out["graph"] = await client.call_tool("read_graph", {})
        full_disk.free()
        if full_disk.real:
            out["again"] = await client.call_tool("store_memory", {"content": BIG_MEMORY})
        return out

    out = serve(db, flow, log, env=full_disk.env)
    assert_intact(db, before, embedder)
    assert payload(out["warm"])["memories"][0]["content"] == MEMORIES[0][0]
    assert_clear_tool_error(out["store"], FULL, "store_memory on a full disk")
    assert [e["name"] for e in payload(out["graph"])["entities"]] == [ENTITY["name"]]
    if full_disk.real:
        assert payload(out["again"])["action"] == "store", "the server did not recover once space was freed"
    assert_no_traceback(log)


# =====================================================================================================
# Missing or damaged model
# =====================================================================================================

@pytest.mark.parametrize("fault", MODEL_FAULTS)
def test_library_with_a_broken_model_says_run_setup_and_everything_else_works(
        fault, broken_model, seeded_db, embedder, monkeypatch):
    before = read_snapshot(seeded_db)
    monkeypatch.setenv("YOURMEMORY_MODEL_DIR", str(broken_model(fault)))
    with YourMemory(seeded_db, user=USER) as memory:  # its own Embedder, from YOURMEMORY_MODEL_DIR
        errors = {name: failure(needs_model) for name, needs_model in {
            "store": lambda: memory.store(NEW_MEMORY),
            "recall": lambda: memory.recall(QUERY),
            "update": lambda: memory.update(3, "The deploy script lives in scripts/deploy.sh"),
            "find_similar_errors": lambda: memory.lessons.find_similar_errors(
                {"type": "TimeoutError", "message": "backup timed out", "context": "cron"}),
        }.items()}
        assert memory.stats()["memories"]["active"] == ACTIVE
        assert memory.get(1)["content"] == MEMORIES[0][0]
        assert memory.graph.open_nodes([ENTITY["name"]])["entities"][0]["name"] == ENTITY["name"]
        assert memory.forget(5)["action"] == "forget"  # needs no model
    expected = {table: rows for table, rows in before.items()}
    expected["memories"] = [row for row in before["memories"] if row[0] != 5]
    expected["vectors"] = [row for row in before["vectors"] if row[0] != 5]
    expected["fts"] = [row for row in before["fts"] if row[0] != 5]
    expected["edges"] = [row for row in before["edges"] if 5 not in row[:2]]
    assert_intact(seeded_db, expected, embedder)
    for name, error in errors.items():
        assert_clear(error, RUN_SETUP, f"{name} with {fault}")
        assert isinstance(error, ModelMissing), f"{name} with {fault}: {type(error).__name__}"


@pytest.mark.parametrize("fault", ["model.onnx cut to half", "tokenizer.json missing", "tokenizer.json not JSON"])
def test_cli_import_with_a_broken_model_says_run_setup_without_a_traceback(fault, broken_model, seeded_db, embedder,
                                                                           tmp_path):
    before = read_snapshot(seeded_db)
    source = memories_jsonl(tmp_path / "memories.jsonl", NEW_MEMORY)
    result = run_cli(seeded_db, "import", str(source), env={"YOURMEMORY_MODEL_DIR": str(broken_model(fault))},
                     cwd=tmp_path)
    assert assert_intact(seeded_db, before, embedder) == before
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode > 0 and "Traceback" not in result.stderr, shown
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.search(RUN_SETUP, plain(lines[0])), shown


def test_server_with_a_broken_model_says_run_setup_keeps_answering_and_recovers_once_repaired(
        seeded_db, embedder, tmp_path, broken_model):
    before = read_snapshot(seeded_db)
    log = tmp_path / "server-stderr.log"
    faults = ["tokenizer.json not JSON", "model.onnx cut to half"]
    directory = link_model(tmp_path / "model", broken_model(faults[0]))

    async def flow(client):
        out = {}
        for fault in faults:
            link_model(directory, broken_model(fault))  # the server retries the model on each call
            out[fault] = {
                "store": await client.call_tool("store_memory", {"content": NEW_MEMORY}),
                "recall": await client.call_tool("recall_memory", {"query": QUERY}),
                "graph": await client.call_tool("open_nodes", {"names": [ENTITY["name"]]}),
                "forget": await client.call_tool("forget_memory", {"memory_id": 999999}),
            }
        link_model(directory, HEALTHY_MODEL)
        out["repaired"] = {"store": await client.call_tool("store_memory", {"content": NEW_MEMORY}),
                           "recall": await client.call_tool("recall_memory", {"query": QUERY})}
        return out

    try:
        out = serve(seeded_db, flow, log, env={"YOURMEMORY_MODEL_DIR": str(directory)})
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert_intact(seeded_db, before, embedder)
    for fault in faults:
        calls = out[fault]
        assert_clear_tool_error(calls["store"], RUN_SETUP, f"store_memory with {fault}")
        assert_clear_tool_error(calls["recall"], RUN_SETUP, f"recall_memory with {fault}")
        assert [e["name"] for e in payload(calls["graph"])["entities"]] == [ENTITY["name"]], fault
        assert calls["forget"].is_error and "memory_id" in text(calls["forget"]), fault
    assert payload(out["repaired"]["store"])["action"] == "store"
    assert payload(out["repaired"]["recall"])["memories"][0]["content"] == MEMORIES[0][0]
    assert_no_traceback(log)


def test_cli_setup_does_not_call_a_truncated_model_ready(seeded_db, tmp_path, model_mirror, broken_model):
    """`yourmemory setup` over a model that cannot load: repair it, or fail saying so; never "cached, Ready"."""
    directory = writable_model(tmp_path / "model", broken_model("model.onnx cut to half"))
    try:
        result = run_cli(seeded_db, "setup", cwd=tmp_path,
                         env={"YOURMEMORY_MODEL_DIR": str(directory), "YOURMEMORY_MODEL_URL": model_mirror})
        shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-2000:]}"
        assert "Traceback" not in result.stderr, shown
        if result.returncode == 0:
            assert "(cached)" not in result.stdout, f"setup kept a model that does not load as cached:\n{shown}"
            assert same_as_installed(directory), f"setup said ready but did not repair the model:\n{shown}"
        else:
            assert re.search(r"--force|damaged|corrupt|cannot be loaded", plain(result.stderr)), shown
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_setup_command_a_model_error_suggests_repairs_the_model(seeded_db, tmp_path, model_mirror, broken_model):
    fault = "model.onnx cut to half"
    directory = writable_model(tmp_path / "model", broken_model(fault))
    try:
        error = failure(lambda: yourmemory.Embedder(directory).load())
        assert_clear(error, RUN_SETUP, fault)
        command = re.search(r"`yourmemory ([^`]+)`", str(error)).group(1).split()
        result = run_cli(seeded_db, *command, cwd=tmp_path,
                         env={"YOURMEMORY_MODEL_DIR": str(directory), "YOURMEMORY_MODEL_URL": model_mirror})
        assert result.returncode == 0 and "Traceback" not in result.stderr, (
            f"`yourmemory {' '.join(command)}`: exit {result.returncode}\n{result.stderr[-3000:]}")
        assert same_as_installed(directory), f"`yourmemory {' '.join(command)}` left the model broken"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# =====================================================================================================
# Corrupted vectors
# =====================================================================================================

@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_library_on_corrupted_vectors_never_crashes_and_fails_clearly_or_degrades(kind, corrupted_runs, template):
    done, results, dbs = corrupted_runs
    tail = f"\n--- child stderr ---\n{done.stderr[-3000:]}"
    assert done.returncode >= 0, f"the child process died of signal {-done.returncode} (segfault?){tail}"
    assert kind in results, f"the child never finished {kind!r} (exit {done.returncode}){tail}"
    result = results[kind]
    assert_memories_kept(dbs[kind], read_snapshot(template, vectors=False), changed={CORRUPTED_ID})
    assert_clear_or(result["open"], f"opening with {kind}", lambda ok: None)
    if "recall" in result:
        assert_clear_or(result["recall"], f"recall with {kind}", lambda found: assert_degraded_recall(found, kind))
        assert_clear_or(result["store"], f"store with {kind}", lambda action: None)
        assert_clear_or(result["update"], f"update of the damaged memory with {kind}", lambda action: None)
    assert done.returncode == 0, f"exit {done.returncode}{tail}"


def test_cli_import_on_corrupted_vectors_fails_clearly_or_imports(seeded_db, embedder, tmp_path):
    before = read_snapshot(seeded_db, vectors=False)
    corrupt_vectors(seeded_db, "one vector overwritten with NaN bytes")
    source = memories_jsonl(tmp_path / "memories.jsonl", NEW_MEMORY)
    result = run_cli(seeded_db, "import", str(source), cwd=tmp_path)
    assert_memories_kept(seeded_db, before, changed=set())
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-1500:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode >= 0 and "Traceback" not in result.stderr, shown
    if result.returncode == 0:
        assert "1 memories" in result.stdout, shown
    else:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and re.search(CORRUPT, plain(lines[0]), re.I), shown


def test_server_on_corrupted_vectors_fails_clearly_or_degrades_and_keeps_answering(seeded_db, tmp_path):
    before = read_snapshot(seeded_db, vectors=False)
    corrupt_vectors(seeded_db, "one vector overwritten with NaN bytes")
    log = tmp_path / "server-stderr.log"

    async def flow(client):
        return {"recall": await client.call_tool("recall_memory", {"query": QUERY}),
                "store": await client.call_tool("store_memory", {"content": NEW_MEMORY}),
                "graph": await client.call_tool("read_graph", {})}

    out = serve(seeded_db, flow, log)
    assert_memories_kept(seeded_db, before, changed=set())
    if out["recall"].is_error:
        assert_clear_tool_error(out["recall"], CORRUPT, "recall_memory on corrupted vectors")
    else:
        assert_degraded_recall(payload(out["recall"])["memories"], "recall_memory on corrupted vectors")
    if out["store"].is_error:
        assert_clear_tool_error(out["store"], CORRUPT, "store_memory on corrupted vectors")
    assert [e["name"] for e in payload(out["graph"])["entities"]] == [ENTITY["name"]]
    assert_no_traceback(log)


# =====================================================================================================
# A database from a newer YourMemory
# =====================================================================================================

def make_newer(db: Path, journal_mode: str = "wal") -> int:
    conn = yourmemory.connect(db)
    try:
        newer = yourmemory.SCHEMA_VERSION + 1
        conn.execute(f"PRAGMA user_version = {newer}")
        if journal_mode != "wal":
            assert conn.execute(f"PRAGMA journal_mode = {journal_mode}").fetchone()[0] == journal_mode
    finally:
        conn.close()
    return newer


def assert_schema_message(message: str, newer: int) -> None:
    assert re.search(rf"schema version {newer}\b", message), message
    assert str(yourmemory.SCHEMA_VERSION) in message and re.search(r"upgrade", message, re.I), message


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_library_refuses_a_newer_schema_and_leaves_the_file_byte_identical(journal_mode, seeded_db, embedder):
    """A newer YourMemory may keep its file in another journal mode; opening must not convert it."""
    newer = make_newer(seeded_db, journal_mode)
    digest, files = sha256(seeded_db), sorted(os.listdir(seeded_db.parent))
    error = failure(lambda: YourMemory(seeded_db, user=USER, embedder=embedder))
    assert isinstance(error, SchemaTooNew), f"{type(error).__name__}: {error}"
    assert_schema_message(str(error), newer)
    del error
    gc.collect()
    assert sha256(seeded_db) == digest, "refusing a newer database changed its file"
    assert sorted(os.listdir(seeded_db.parent)) == files, "refusing a newer database left files beside it"


def test_cli_and_server_refuse_a_newer_schema_in_one_line_and_change_nothing(seeded_db, tmp_path):
    newer = make_newer(seeded_db)
    digest = sha256(seeded_db)
    for args in (["stats"], ["agent", "register", "backup-bot"], ["serve"]):
        result = run_cli(seeded_db, *args, stdin=subprocess.DEVNULL, cwd=tmp_path)
        line = assert_clear_cli_failure(result, r"schema version", f"`yourmemory {' '.join(args)}` on a newer schema")
        assert_schema_message(line, newer)
        assert sha256(seeded_db) == digest, f"`yourmemory {' '.join(args)}` changed a newer database"


def test_a_read_only_database_with_changes_still_in_its_wal_is_refused_not_read_stale(seeded_db, embedder):
    """Opened read-only, SQLite reads the file as immutable and would not see what a crashed writer left in
    the -wal file: a forgotten memory would come back and new ones would be missing. Say so instead."""
    change = ("import os, sys, yourmemory\n"
              "conn = yourmemory.connect(sys.argv[1])\n"
              "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
              "conn.execute(\"UPDATE memories SET importance = 0.99 WHERE id = 1\")\n"
              "os._exit(0)  # like a crash: no checkpoint, the change stays in the -wal file\n")
    subprocess.run([sys.executable, "-c", change, str(seeded_db)], check=True, timeout=120)
    assert Path(f"{seeded_db}-wal").stat().st_size > 0
    with read_only(seeded_db.parent) as folder:
        with pytest.raises(StorageError, match="-wal"):
            YourMemory(folder / seeded_db.name, user=USER, embedder=embedder)
        result = run_cli(folder / seeded_db.name, "stats", cwd=seeded_db.parent.parent)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "-wal" in result.stderr, result.stderr
    with YourMemory(seeded_db, user=USER, embedder=embedder) as memory:  # writable again: the change is there
        assert memory.get(1)["importance"] == 0.99


def test_export_onto_the_database_itself_is_refused(seeded_db):
    before = seeded_db.read_bytes()
    for target in (seeded_db, Path(f"{seeded_db}-wal"), seeded_db.parent / "." / seeded_db.name):
        result = run_cli(seeded_db, "export", "--format", "memories", "-o", str(target))
        assert result.returncode == 1 and "output" in result.stderr and "database itself" in result.stderr, \
            result.stderr
    assert seeded_db.read_bytes() == before


def test_an_import_into_a_database_that_cannot_take_it_stops_at_the_first_failure(seeded_db, tmp_path):
    """A read-only (or full, or locked) database refuses every record alike: the import stops at the first,
    says where and how to go on, rather than embedding every line and printing one error per line."""
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(json.dumps({"type": "memory", "content": f"Fact number {i} about the project"})
                                for i in range(40)), encoding="utf-8")
    with read_only(seeded_db.parent) as folder:
        result = run_cli(folder / seeded_db.name, "import", str(source), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("not imported:") == 1, result.stderr
    assert "Stopped at memories.jsonl:1" in result.stderr and "run the same import again" in result.stderr


def test_a_backup_onto_a_full_disk_names_that_disk_and_leaves_no_partial_file(small_disk, seeded_db, embedder):
    small_disk.fill()
    try:
        with YourMemory(seeded_db, user=USER, embedder=embedder) as memory:
            error = failure(lambda: memory.backup(small_disk.root / "copy.db"))
        leftovers = sorted(path.name for path in small_disk.root.iterdir() if path.name != "filler")
    finally:
        small_disk.free()
    assert_clear(error, FULL, "a backup onto a full disk")
    assert str(small_disk.root / "copy.db") in str(error) and str(seeded_db) not in str(error), str(error)
    assert leftovers == [], leftovers


def test_what_only_reads_still_works_on_a_full_disk(small_disk, template, embedder):
    """A normal open must create the -wal and -shm files, which a full disk cannot hold: stats, export and
    doctor open such a database read-only instead, so the data can still be looked at and moved off."""
    db = copy_template(template, small_disk.root / "memory.db")
    small_disk.fill()
    try:
        stats = run_cli(db, "stats", "--json")
        export = run_cli(db, "export", "--format", "memories")
        doctor = run_cli(db, "doctor")
        store = run_cli(db, "agent", "register", "backup-bot")
    finally:
        small_disk.free()
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["memories"]["active"] == ACTIVE
    assert export.returncode == 0 and MEMORIES[0][0] in export.stdout, export.stderr
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert_clear_cli_failure(store, FULL, "a write on a full disk")


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_read_only_must_be_true_false_or_none(seeded_db, embedder, value):
    with pytest.raises(yourmemory.InvalidInput, match="read_only") as error:
        YourMemory(seeded_db, user=USER, embedder=embedder, read_only=value)
    assert error.value.field == "read_only"
