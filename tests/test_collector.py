"""The collector setting a run holds (pacopt.infra.collector)."""

import gc
import threading
import weakref

import pytest

from pacopt.infra.collector import RUN_THRESHOLD, fewer_collections


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_a_run_freezes_and_raises_the_threshold_then_restores_both():
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold()[0] == max(RUN_THRESHOLD, before[0])
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_nested_and_failing_blocks_restore_once_at_the_outermost():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        with fewer_collections():
            pass
        assert gc.get_threshold()[0] == max(RUN_THRESHOLD, before[0])  # the outer still holds
        assert gc.get_freeze_count() > 0
        raise RuntimeError("a method failed")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_are_still_collected_inside_and_after():
    old = _Node()
    old_ref = weakref.ref(old)
    with fewer_collections():
        young = _Node()
        young_ref = weakref.ref(young)
        del young, old  # the old cycle is frozen until the block ends
        gc.collect()
        assert young_ref() is None
        assert old_ref() is not None
    gc.collect()
    assert old_ref() is None


def test_threads_share_one_setting():
    before = gc.get_threshold()
    inside, leave = threading.Barrier(2), threading.Event()

    def run():
        with fewer_collections():
            inside.wait()
            leave.wait()

    worker = threading.Thread(target=run)
    worker.start()
    with fewer_collections():
        inside.wait()
        leave.set()
        worker.join()
        assert gc.get_freeze_count() > 0  # the other thread's exit did not unfreeze this one
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_alone():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with fewer_collections():
            assert gc.get_threshold()[0] >= RUN_THRESHOLD
        assert gc.get_freeze_count() == frozen  # still the caller's
    finally:
        gc.unfreeze()
