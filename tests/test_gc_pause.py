"""gc_paused stops cycle collection inside its block and restores the caller's setting."""

from __future__ import annotations

import gc

from llmfleet.gc_pause import gc_paused


def test_collection_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_caller_that_turned_collection_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collection_comes_back_when_the_block_raises() -> None:
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()


def test_a_block_whose_objects_live_until_exit_is_frozen_not_collected() -> None:
    before = gc.get_freeze_count()
    try:
        with gc_paused(until_exit=True):
            kept = [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= before + len(kept)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
