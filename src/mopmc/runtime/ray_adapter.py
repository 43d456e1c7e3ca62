"""The only module that imports Ray (the ``cluster`` extra): run sweep jobs as Ray tasks.

``address``: ``local`` starts a local Ray instance (``num_cpus`` CPUs, default all); anything else
is passed to ``ray.init(address=...)`` (``auto``, ``ray://HOST:10001``, ``HOST:6379``). If Ray is
already initialised in this process (a test's ``ray.init(num_cpus=1)``), that instance is used and
left running. Workers must be able to import ``mopmc`` (install it on every node).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mopmc.errors import ConfigError, DependencyError


def run_jobs(
    address: str, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], *, num_cpus: int | None = None
) -> Iterator[Any]:
    """Yield ``fn(*job)`` for every job, in the order they finish, computed as Ray tasks."""
    try:
        import ray
    except ImportError:
        raise DependencyError('--ray needs Ray: pip install "mopmc[cluster]"') from None
    started = False
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        try:
            if address == "local":
                ray.init(num_cpus=num_cpus or None, **kwargs)
            else:
                ray.init(address=address, **kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(f"--ray {address}: cannot connect to Ray ({' '.join(str(exc).split())})") from None
        started = True
    try:
        remote = ray.remote(fn)
        pending = [remote.remote(*job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()
