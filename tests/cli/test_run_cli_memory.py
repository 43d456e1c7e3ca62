"""Running out of memory is a one-line error, not an internal error (a bug) with a traceback."""

import pytest

from mopmc.cli.common import run_cli


def test_memory_error_is_one_line(capsys):
    def body():
        raise MemoryError()

    with pytest.raises(SystemExit) as stop:
        run_cli(body, json_out=False)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: out of memory")
