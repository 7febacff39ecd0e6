"""The Ray executor's stop: every run still on Ray is cancelled; what ``ray.cancel`` raises for a run it
cannot cancel is passed over, anything else is raised."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from statetrack.runs.executors import RayExecutor, cancel_errors

ray = pytest.importorskip("ray")


def _executor(cancel) -> RayExecutor:
    ex = object.__new__(RayExecutor)  # no Ray started, no database: stop reads only these two
    ex.ray = SimpleNamespace(cancel=cancel, exceptions=ray.exceptions)
    ex.rows = {f"ref{i}": None for i in range(4)}
    return ex


def test_ray_cancel_when_not_connected_raises_what_stop_passes_over(monkeypatch):
    """Ray's own cancel, with no Ray in this process (its automatic ``ray.init`` turned off, as it would
    start a local instance; with one started, a ref no worker owns is refused with a TypeError)."""
    from ray._private import auto_init_hook

    monkeypatch.setattr(auto_init_hook, "enable_auto_connect", False)
    assert not ray.is_initialized()
    with pytest.raises(cancel_errors(ray)) as e:
        ray.cancel(ray.ObjectRef.from_random(), force=True)
    assert isinstance(e.value, ray.exceptions.RaySystemError)
    assert not ray.is_initialized()


def test_stop_cancels_every_run_past_ray_errors():
    errors = iter(
        [ray.exceptions.RaySystemError("Ray has not been started yet"), TypeError("x"), ValueError("y")]
    )
    seen = []

    def cancel(ref, force):
        seen.append((ref, force))
        if (err := next(errors, None)) is not None:
            raise err

    _executor(cancel).stop()
    assert seen == [(f"ref{i}", True) for i in range(4)]


def test_stop_raises_an_error_that_is_not_rays():
    def cancel(ref, force):  # noqa: ARG001 - ray.cancel's signature
        raise AttributeError("a bug in the caller")

    with pytest.raises(AttributeError, match="a bug"):
        _executor(cancel).stop()
