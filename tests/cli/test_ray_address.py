"""``--ray ADDRESS``: an address that does not parse, or where nothing listens, is one line before the
command starts, instead of Ray waiting for a cluster that is not there."""

from __future__ import annotations

import socket
import time

import pytest

from support import assert_one_line_error, run_mopmc
from mopmc.runtime import ray_adapter
from mopmc.runtime.ray_adapter import check_address as check_ray_address, ray_host_port
from mopmc.errors import ConfigError


def _closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", [
    ["rt", "experiment", "table1"],
    ["rt", "experiment", "table4"],
    ["design", "sensitivity"],
])
def test_a_ray_address_where_nothing_listens_is_one_line_and_fast(command, tmp_path):
    port = _closed_port()
    start = time.monotonic()
    r = run_mopmc(*command, "--out", tmp_path / "out", "--ray", f"127.0.0.1:{port}", timeout=60)
    assert time.monotonic() - start < 30
    assert_one_line_error(r, f"--ray 127.0.0.1:{port}", "cannot connect", code=2)
    assert not (tmp_path / "out").exists()  # refused before the command started


@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1:port", "127.0.0.1:0", "127.0.0.1:70000", "http://head:6379",
                                     ":6379", "a:b:c", "[::1"])
def test_an_unparsable_ray_address_is_one_line(address, tmp_path):
    r = run_mopmc("rt", "experiment", "table1", "--out", tmp_path / "out", "--ray", address, timeout=60)
    assert_one_line_error(r, f"--ray {address!r}", "HOST:PORT", code=2)


@pytest.mark.parametrize("address, target", [
    ("local", None), ("auto", None), ("head:6379", ("head", 6379)), ("10.0.0.5:6379", ("10.0.0.5", 6379)),
    ("ray://head", ("head", 10001)), ("ray://head:20001", ("head", 20001)), ("[::1]:6379", ("::1", 6379)),
])
def test_ray_host_port(address, target):
    assert ray_host_port(address) == target


def test_a_listening_address_passes_and_a_silent_one_times_out(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        check_ray_address(f"127.0.0.1:{server.getsockname()[1]}", timeout=5)

    def silent(address, timeout):
        raise TimeoutError("timed out")

    monkeypatch.setattr(ray_adapter.socket, "create_connection", silent)
    with pytest.raises(ConfigError, match=r"--ray 192\.0\.2\.1:6379: no answer from 192\.0\.2\.1:6379 within 0\.5 s"):
        check_ray_address("192.0.2.1:6379", timeout=0.5)
    check_ray_address("local")  # local and auto are Ray's to resolve: no probe
    check_ray_address("auto")


def test_the_library_call_checks_the_address_before_ray_init():
    """``run_jobs`` (behind ``run_sweep`` and ``sensitivity.run`` called from Python) refuses the
    address too, instead of ``ray.init`` waiting for a cluster that is not there."""
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(ConfigError, match=rf"--ray 127\.0\.0\.1:{port}: cannot connect to 127\.0\.0\.1:{port}"):
        list(ray_adapter.run_jobs(f"127.0.0.1:{port}", abs, [(-1,)]))
    assert time.monotonic() - start < 30


def _fake_cluster(monkeypatch):
    """A TCP listener (the address probe passes) and a ``ray.init`` that logs to fd 2, as Ray's C++
    core does while it retries, then fails as Ray does against something that is not a Ray cluster."""
    import os

    ray = pytest.importorskip("ray")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def init(**kwargs):
        os.write(2, b"[2026-01-01 W 1 1] gcs_client.cc:210: Failed to get cluster ID from GCS server\n")
        raise ConnectionError(f"Failed to connect to Ray cluster at {kwargs['address']}")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    return server


def test_a_failed_ray_connection_is_one_line_without_rays_log(monkeypatch, capfd):
    server = _fake_cluster(monkeypatch)
    address = f"127.0.0.1:{server.getsockname()[1]}"
    with server, pytest.raises(ConfigError, match=rf"--ray {address}: cannot connect to Ray \(Failed to connect"):
        ray_adapter.connect(address)
    assert capfd.readouterr().err == ""  # Ray's C++ lines did not reach stderr


@pytest.mark.parametrize("command", [
    ["design", "sensitivity", "--n", "3", "--no-plot"],
    ["rt", "experiment", "table4", "--episodes", "1"],
])
def test_a_ray_address_that_is_not_a_cluster_fails_before_the_output_folder(monkeypatch, capfd, tmp_path, command):
    """(sensitivity wrote OUT/spec.json, and both printed Ray's retry lines, before the error line)"""
    import sys

    from mopmc.cli.main import main

    server = _fake_cluster(monkeypatch)
    address = f"127.0.0.1:{server.getsockname()[1]}"
    monkeypatch.setattr(sys, "argv", ["mopmc", *command, "--out", str(tmp_path / "out"), "--ray", address])
    with server, pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capfd.readouterr().err
    assert err.splitlines() == [f"error: --ray {address}: cannot connect to Ray (Failed to connect to Ray cluster at "
                                f"{address})"], err
    assert not (tmp_path / "out").exists()
