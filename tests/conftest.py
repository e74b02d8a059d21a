"""Shared fixtures: the sample corpus, and an isolated cache so tests never touch the user's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def sample_dirs() -> list[Path]:
    """Every sample folder that states what tracedoc must conclude about it."""
    return sorted(p.parent for p in SAMPLES.glob("*/expected.yaml"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores go to a per-session temporary cache, never ~/.cache; and the commands a test runs run in their own
    process, never on a resident process the user may keep (tests/test_resident.py starts its own)."""
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("TRACEDOC_RESIDENT", "0")


def slow_checkpoints(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[Any]:
    """Make each checkpoint a reader starts on its helper thread (tracedoc.store.compressing) wait ``seconds`` first,
    so that it still runs while the reader goes on; return the checkpoints started, in order."""
    import time

    from tracedoc.store import compressing

    started: list[Any] = []
    checkpoint = compressing._Checkpoint._checkpoint

    def slowly(running: compressing._Checkpoint) -> None:
        started.append(running)
        time.sleep(seconds)
        checkpoint(running)

    monkeypatch.setattr(compressing._Checkpoint, "_checkpoint", slowly)
    return started


def checkpoints_running() -> list[Any]:
    """The readers' checkpoint threads still alive (tracedoc.store.compressing), each given a moment to end once done:
    0.05 s, far less than a checkpoint that ``slow_checkpoints`` makes slow."""
    import threading

    helpers = [thread for thread in threading.enumerate() if thread.name == "tracedoc-compress"]
    for thread in helpers:
        thread.join(0.05)
    return [thread for thread in helpers if thread.is_alive()]
