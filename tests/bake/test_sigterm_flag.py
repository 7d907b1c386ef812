"""A SIGTERM whose KeyboardInterrupt Python drops still ends the bake.

Python discards an exception raised while a finalizer or a weakref callback runs ("Exception ignored in ...": seen
once in a full test run as a KeyboardInterrupt inside ``WeakSet._remove``). The bake's SIGTERM handler raises
KeyboardInterrupt so that the builder is deleted; if that one is dropped, ``wait_baked`` must still stop at its next
look at the console instead of following the builder until the bake timeout."""

from __future__ import annotations

import pytest

from provisioner.bake import run


class _Console:
    """The builder's console: always 'still installing'. The first read plays a SIGTERM whose exception was lost."""

    def __init__(self) -> None:
        self.reads = 0

    def console(self, name: str, start: int = 0) -> tuple[str, int]:
        self.reads += 1
        if self.reads == 1:
            run._TERMINATED.set()  # what the handler does before its (here: lost) raise
        text = "2026-11-27T10:00:00+0000 trainvm packages: phase start\nTRAINVM_STATUS=running:packages\n"
        return (text, start + len(text)) if start == 0 else ("", start)


def test_a_lost_keyboardinterrupt_still_stops_the_wait_at_the_next_look() -> None:
    builder = _Console()
    with run._sigterm_interrupts():
        with pytest.raises(KeyboardInterrupt):
            run.wait_baked(builder, "b", timeout=30, interval=0.01)
    assert builder.reads == 1


def test_a_new_bake_starts_with_the_flag_clear() -> None:
    run._TERMINATED.set()
    with run._sigterm_interrupts():
        assert not run._TERMINATED.is_set()
