"""The only module that imports Ray (the ``cluster`` extra): run sweep jobs as Ray tasks.

``address``: ``local`` starts a local Ray instance (``num_cpus`` CPUs, default all); anything else
is passed to ``ray.init(address=...)`` (``auto``, ``ray://HOST:10001``, ``HOST:6379``). If Ray is
already initialised in this process (a test's ``ray.init(num_cpus=1)``), that instance is used and
left running. Workers must be able to import ``mopmc`` (install it on every node).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mopmc.errors import ConfigError, DependencyError


#: seconds to wait for a Ray address to accept a TCP connection (``--ray HOST:PORT``)
CONNECT_TIMEOUT = 5.0
CLIENT_PORT = 10001  # Ray's default for ``ray://HOST``


def ray_host_port(address: str) -> tuple[str, int] | None:
    """The host and port a ``--ray`` address connects to: None for ``local`` and ``auto`` (no
    address given), ``(host, port)`` for ``HOST:PORT``, ``[IPv6]:PORT`` and ``ray://HOST[:PORT]``;
    a ConfigError for anything else.

    >>> ray_host_port("ray://head:10001"), ray_host_port("10.0.0.5:6379"), ray_host_port("auto")
    (('head', 10001), ('10.0.0.5', 6379), None)
    """
    if address in ("local", "auto"):
        return None
    usage = f"--ray {address!r}: expected local, auto, HOST:PORT or ray://HOST[:PORT]"
    rest, default_port = address, None
    if address.startswith("ray://"):
        rest, default_port = address[len("ray://"):].rstrip("/"), CLIENT_PORT
    elif "://" in address:
        raise ConfigError(usage)
    if rest.startswith("["):  # [IPv6]:PORT
        host, sep, port = rest[1:].partition("]")
        if not sep or (port and not port.startswith(":")):
            raise ConfigError(usage)
        port = port[1:]
    elif rest.count(":") == 1:
        host, port = rest.split(":")
    elif ":" not in rest:
        host, port = rest, ""
    else:
        raise ConfigError(usage)
    if not port and default_port is not None:
        port = str(default_port)
    if not host or any(c.isspace() or c in "/@?#" for c in host) or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(usage)
    return host, int(port)


def check_address(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuse a ``--ray`` address that does not parse, or where nothing accepts a TCP connection
    within ``timeout`` seconds: ``ray.init`` would wait for such a cluster for minutes. ``local``
    and ``auto`` are left to Ray."""
    target = ray_host_port(address)
    if target is None:
        return
    host, port = target
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror:
        raise ConfigError(f"--ray {address}: unknown host {host!r}") from None
    except TimeoutError:
        raise ConfigError(f"--ray {address}: no answer from {host}:{port} within {timeout:g} s; "
                          "is the Ray cluster running and reachable from here?") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"--ray {address}: cannot connect to {host}:{port} ({reason.lower()}); "
                          "is the Ray cluster running there?") from None


def connect(address: str, num_cpus: int | None = None) -> bool:
    """Initialise Ray for ``address`` unless this process already has it; True when it was started
    here (the caller shuts it down). Ray's own log lines (its C++ core writes them to fd 2 while it
    retries) are kept off stderr while connecting, so a failure is our one line."""
    check_address(address)  # (ray.init waits minutes for an address where nothing listens)
    try:
        import ray
    except ImportError:
        raise DependencyError('--ray needs Ray: pip install "mopmc[cluster]"') from None
    if ray.is_initialized():
        return False
    from mopmc.io.quiet import native_output

    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    try:
        with native_output():
            if address == "local":
                ray.init(num_cpus=num_cpus or None, **kwargs)
            else:
                ray.init(address=address, **kwargs)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ConfigError(f"--ray {address}: cannot connect to Ray ({' '.join(str(exc).split())})") from None
    return True


def run_jobs(
    address: str, fn: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], *, num_cpus: int | None = None
) -> Iterator[Any]:
    """Yield ``fn(*job)`` for every job, in the order they finish, computed as Ray tasks."""
    started = connect(address, num_cpus)
    import ray

    try:
        remote = ray.remote(fn)
        pending = [remote.remote(*job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started:
            ray.shutdown()
