"""What the browser tests and the real tier hold only while a process runs them one after
the other (``tests/support.HeldByAFolder``): released after a test of the
folder whose next test is not one (so that, say, Playwright's event loop is gone before a
test that calls ``asyncio.run``), and after the process's last test; kept between two of
them, the next in another module of the folder."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.support import HeldByAFolder


def test_released_when_the_next_test_is_not_the_folders_and_after_the_last(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "e2e"
    released: list[str] = []

    @contextlib.contextmanager
    def entered() -> Iterator[str]:
        yield "the thing"
        released.append("released")

    held = HeldByAFolder(folder, entered)
    hook = held.teardown_hook()

    def torn_down(test: str, following: str | None) -> list[str]:
        item: Any = SimpleNamespace(path=tmp_path / test)
        nextitem: Any = SimpleNamespace(path=tmp_path / following) if following else None
        assert held.get() == "the thing"  # entered by the test (again, after a release)
        teardown: Any = hook(item, nextitem)
        next(teardown)  # the test's own teardown runs here
        assert released == []  # never before it
        with contextlib.suppress(StopIteration):
            teardown.send(None)
        done = list(released)
        released.clear()
        return done

    assert torn_down("e2e/test_a.py", "e2e/test_a.py") == []
    assert torn_down("e2e/test_a.py", "e2e/test_b.py") == []  # another module of the folder
    assert torn_down("e2e/test_b.py", "unit/test_asyncio.py") == ["released"]
    assert torn_down("e2e/test_b.py", "e2e2/test_c.py") == ["released"]  # a sibling's name
    assert torn_down("e2e/test_b.py", None) == ["released"]  # the process's last test
    held.get()
    held.release()  # as its session fixture does when the run's fixtures are torn down
    assert released == ["released"]
    held.release()  # nothing held: nothing to release
    assert released == ["released"]
