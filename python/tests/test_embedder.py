"""Embedder: NumPy output, the hashing and MiniLM models, agreement with `trajwiki embed`, and the
GIL released while it works."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from trajwiki import Embedder, InputError


def test_hashing_rows_are_normalised_float32() -> None:
    e = Embedder("hashing-64")
    assert e.dim == 64 and e.device == "auto" and e.backend == "cpu"
    a = e.embed(["I moved to Oslo.", "Bergen is rainy.", "I moved to Oslo."])
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (3, 64)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a[0], a[2]) and not np.array_equal(a[0], a[1])
    # The array owns no copy: it views the vectors Rust produced.
    assert not a.flags["OWNDATA"] and a.base is not None and a.flags["C_CONTIGUOUS"]
    assert e.embed([]).shape == (0, 64)


def test_bad_arguments() -> None:
    e = Embedder("hashing-8")
    with pytest.raises(InputError, match="not a single str"):
        e.embed("one text")
    with pytest.raises(InputError, match="list of str"):
        e.embed([1, 2])
    with pytest.raises(InputError, match="kind"):
        e.embed(["x"], kind="passage")


def test_minilm_matches_the_command_line(minilm: str, cli: Path, tmp_path: Path) -> None:
    texts = ["Caroline went to the LGBTQ support group.", "What did Melanie paint?"]
    e = Embedder(minilm, device="cpu")
    assert e.dim == 384
    for kind in ("document", "query"):
        ours = e.embed(texts, kind=kind)
        (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
        out = tmp_path / f"{kind}.npy"
        subprocess.run(
            [str(cli), "embed", "--model", minilm, "--kind", kind, "--input",
             str(tmp_path / "in.txt"), "--format", "npy", "--output", str(out)],
            check=True,
        )
        theirs = np.load(out)
        assert theirs.shape == ours.shape
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    related = e.embed(["I adopted a dog.", "We got a puppy.", "The stock market fell."])
    sims = related @ related.T
    assert sims[0, 1] > sims[0, 2]


def test_the_gil_is_released_while_embedding() -> None:
    """The main thread runs Python while another thread is inside a long embedding call."""
    e = Embedder("hashing-256")
    texts = [f"message number {i} about hiking in the mountains near Bergen" for i in range(60_000)]
    inside = threading.Event()
    finished: list[float] = []

    def work() -> None:
        inside.set()
        e.embed(texts)
        finished.append(time.perf_counter())

    worker = threading.Thread(target=work)
    worker.start()
    inside.wait()
    time.sleep(0.05)  # let the worker convert its arguments and enter Rust
    sum(range(10_000))
    main_done = time.perf_counter()
    worker.join()
    assert finished and main_done < finished[0], "the embedding held the GIL"


def test_a_model_that_stays_on_the_cpu_under_cuda_says_so() -> None:
    with pytest.warns(UserWarning, match="runs on the CPU"):
        e = Embedder("hashing-32", device="cuda")
    assert e.device == "cuda" and e.backend == "cpu"
    assert e.embed(["x"]).shape == (1, 32)


def short_texts(n: int) -> list[str]:
    """`n` distinct short texts of varied length (4 to 13 words)."""
    words = ["we", "hiked", "near", "Bergen", "with", "the", "kids", "and", "painted", "a",
             "sunset", "after", "pottery", "class"]
    return [
        f"note {i}: " + " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(2 + i % 10))
        for i in range(n)
    ]


def test_ten_thousand_texts_are_identical_to_the_command_line(
    minilm: str, cli: Path, tmp_path: Path
) -> None:
    texts = short_texts(10_000)
    ours = Embedder(minilm, device="cpu").embed(texts)
    assert ours.dtype == np.float32 and ours.shape == (10_000, 384)
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "cli.npy"
    subprocess.run(
        [str(cli), "embed", "--model", minilm, "--input", str(tmp_path / "in.txt"),
         "--format", "npy", "--output", str(out)],
        check=True,
    )
    theirs = np.load(out)
    assert theirs.dtype == np.float32
    # The same batches through the same kernels: bit for bit.
    assert np.array_equal(ours, theirs)
