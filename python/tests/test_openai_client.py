"""`trajwiki serve` as an OpenAI embeddings endpoint, driven by the official `openai` package (which
scripts/test.sh installs): the client finds the model's name with `GET /v1/models`, then embeds
several texts with it, as it does against OpenAI (vectors asked for as base64, the client's
default, and as floats), through the server's bearer token."""

from __future__ import annotations

import math
import subprocess
from array import array
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from conftest import REPO

TOKEN = "a-token-for-the-openai-client"

TEXTS = [
    "Maya signed up for a pottery class.",
    "Tom trains for the Porto marathon.",
    "Maya signed up for a pottery class.",
    "",
    "Ann moved to Oslo last week.",
]


@pytest.fixture()
def client(cli: Path, tmp_path: Path) -> Iterator[openai.OpenAI]:
    """An `openai.OpenAI` client of a `trajwiki serve --model hashing` on a free port."""
    store = tmp_path / "store"
    done = subprocess.run(
        [str(cli), "ingest", "--store", str(store), str(REPO / "tests/fixtures/demo.jsonl"), "-q"],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    server = subprocess.Popen(
        [str(cli), "serve", "--store", str(store), "--port", "0", "--model", "hashing",
         "--token", TOKEN],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        url = None
        assert server.stderr is not None
        for line in server.stderr:
            if "http://" in line:
                url = line[line.index("http://"):].strip()
                break
        assert url, "the server says where it listens"
        yield openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=30)
    finally:
        server.kill()
        server.wait()


def served_model(client: openai.OpenAI) -> str:
    """The one model `GET /v1/models` lists."""
    models = list(client.models.list())
    assert len(models) == 1, models
    model = models[0]
    assert model.object == "model"
    assert model.owned_by == "trajwiki"
    assert model.created > 1_600_000_000
    assert client.models.retrieve(model.id).id == model.id
    return model.id


def test_the_client_finds_the_model_and_embeds_with_it(client: openai.OpenAI) -> None:
    model = served_model(client)
    assert model == "hashing-384"
    # The client's default: vectors sent as base64 and decoded by the client.
    answer = client.embeddings.create(model=model, input=TEXTS)
    assert answer.model == model
    assert [item.index for item in answer.data] == list(range(len(TEXTS)))
    vectors = [item.embedding for item in answer.data]
    assert all(len(v) == 384 for v in vectors)
    # In the order given: each text alone gives its row, equal texts equal rows.
    for text, vector in zip(TEXTS, vectors):
        alone = client.embeddings.create(model=model, input=text).data[0].embedding
        assert alone == vector, text
    assert vectors[0] == vectors[2]
    assert vectors[0] != vectors[1]
    for vector in vectors:
        norm = math.sqrt(sum(x * x for x in vector))
        assert norm == 0 or abs(norm - 1) < 1e-5, norm
    # Floats asked for: the same 32-bit values (each written as the shortest text that reads
    # back as it).
    floats = client.embeddings.create(model=model, input=TEXTS, encoding_format="float")
    assert [array("f", item.embedding).tolist() for item in floats.data] == vectors
    assert answer.usage.prompt_tokens == sum(len(t.split()) for t in TEXTS)


def test_the_server_refuses_what_it_does_not_serve(client: openai.OpenAI) -> None:
    model = served_model(client)
    with pytest.raises(openai.BadRequestError, match=model):
        client.embeddings.create(model="text-embedding-3-small", input="x")
    with pytest.raises(openai.NotFoundError, match=model):
        client.models.retrieve("text-embedding-3-small")
    with pytest.raises(openai.BadRequestError, match="384"):
        client.embeddings.create(model=model, input="x", dimensions=256)
    wrong = openai.OpenAI(base_url=str(client.base_url), api_key="not-the-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
