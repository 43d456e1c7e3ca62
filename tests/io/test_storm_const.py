"""Loading a PRISM model with ``--const`` reads the file once: Storm's parse and the constants'
substitution both scan it for divisions by zero, from the one text :func:`mopmc.io.load.load` read."""

from pathlib import Path

import pytest

from mopmc.errors import UndefinedConstantsError
from mopmc.io import storm
from mopmc.io.load import load

TEXT = ("mdp\nconst int N;\nconst double Z;\nmodule m\n s:[0..N] init 0;\n"
        " [] s<N -> 1/Z:(s'=s+1) + 1-1/Z:(s'=s);\n [] s=N -> true;\nendmodule\n")


@pytest.fixture
def reads(tmp_path, monkeypatch):
    """The model file and a counter of the reads of it (any ``Path.read_text`` of that path)."""
    src = tmp_path / "c.nm"
    src.write_text(TEXT)
    count = {"n": 0}
    original = Path.read_text

    def counting(self, *args, **kwargs):
        if Path(self) == src:
            count["n"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    return src, count


def test_constants_read_the_model_once(reads):
    src, count = reads
    model = load(src, {"N": "3", "Z": "2"}, builder="storm").model
    assert count["n"] == 1
    # exact: a chain 0 -> 1 -> 2 -> 3 with self-loops of probability 1/2, 4 states, 7 choices' transitions
    assert model.n_states == 4 and model.n_choices == 4 and model.n_transitions == 7


def test_errors_after_the_single_read_are_unchanged(reads):
    src, count = reads
    with pytest.raises(UndefinedConstantsError, match=r"c.nm: undefined constants Z; define them with --const Z=VALUE"):
        load(src, {"N": "3"}, builder="storm")
    with pytest.raises(UndefinedConstantsError, match=r"c.nm: --const nope: no constant 'nope'"):
        load(src, {"nope": "1"}, builder="storm")
    assert count["n"] == 2  # one per load


def test_define_constants_still_reads_when_not_given_the_text(reads):
    """Callers that do not pass the text (mopmc's own builder) keep the old behaviour."""
    src, count = reads
    program = storm.parse_program(src)
    assert count["n"] == 1
    program = storm.define_constants(program, src, {"N": "2", "Z": "4"})
    assert count["n"] == 2 and not storm.constant_names(program)
    program = storm.define_constants(storm.parse_program(src, TEXT), src, {"N": "2", "Z": "4"}, TEXT)
    assert count["n"] == 2 and not storm.constant_names(program)


def test_our_builder_reads_the_model_once_with_constants(reads):
    src, count = reads
    model = load(src, {"N": "3", "Z": "2"}, builder="mopmc").model
    assert count["n"] == 1
    assert model.n_states == 4 and model.n_choices == 4 and model.n_transitions == 7
