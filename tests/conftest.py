"""Shared fixtures: the real ONNX model (loaded once), a fresh database per test, a clock tests can move."""
import shutil
import sys
from pathlib import Path

import pytest

import yourmemory
from yourmemory import Embedder, YourMemory

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
DAY = 86400.0
# A memory of five sentences, one of which answers "Which instrument is Lee learning?", and two one-sentence ones
# that its whole vector ranks below the first (test_recall, test_mcp_server).
LEES_NEWS = ["Lee: Hi! Long time no see. Things have been hectic, we moved flats in March and the new place still has "
             "boxes everywhere. Work is fine, a bit boring. My parents visited in April and stayed three weeks. I "
             "have also started cello lessons on Tuesday evenings.",
             "Lee: Music was always a big part of my family when I was growing up.",
             "Lee: We moved flats in March and I am still unpacking."]


def installed_entry_point() -> str:
    """The `yourmemory` command installed next to this Python (tests talk to it as clients do)."""
    installed = Path(sys.executable).parent / "yourmemory"
    found = str(installed) if installed.is_file() else shutil.which("yourmemory")
    if not found:
        pytest.fail("the `yourmemory` entry point is not installed next to this Python: pip install -e '.[test]'")
    return str(Path(found).absolute())


class Clock:
    """Unix seconds that only move when a test says so."""

    def __init__(self, start: float = 1_800_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real all-mpnet-base-v2 ONNX model; `yourmemory setup` must have installed it."""
    if not yourmemory.model_installed():
        pytest.fail(f"the embedding model is not installed in {yourmemory.model_dir()}: run `yourmemory setup`")
    return Embedder().load()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db_path, clock, embedder):
    """A fresh store for user "ada" on a real SQLite + sqlite-vec database and the real model."""
    with YourMemory(db_path, user="ada", clock=clock, embedder=embedder) as store:
        yield store


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """No test touches the real ~/.yourmemory."""
    monkeypatch.setenv("YOURMEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("YOURMEMORY_DB", raising=False)
    monkeypatch.delenv("YOURMEMORY_USER", raising=False)
    monkeypatch.delenv("YOURMEMORY_SQLITE", raising=False)


@pytest.fixture
def parses(monkeypatch):
    """The texts spaCy parses from here on (the parse cache emptied first)."""
    seen = []
    real = yourmemory.parse

    def counting(text):
        seen.append(text)
        return real(text)
    real.cache_clear()
    monkeypatch.setattr(yourmemory, "parse", counting)
    return seen
