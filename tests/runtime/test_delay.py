import math

import numpy as np
import pytest

from mopmc.errors import ConfigError
from mopmc.runtime.delay import (
    EmpiricalDelay, ExponentialDelay, FixedDelay, UniformDelay, parse_delay_spec,
)


@pytest.mark.parametrize(
    "spec, cls",
    [("0", FixedDelay), ("0.15", FixedDelay), ("exp:0.2", ExponentialDelay),
     ("exp:0.2:0.5", ExponentialDelay), ("uniform:0.1:0.3", UniformDelay)],
)
def test_valid_specs(spec, cls):
    d = parse_delay_spec(spec)
    assert isinstance(d, cls) and d.spec == spec


def test_fixed_is_exact():
    assert parse_delay_spec("0.05").sample(np.random.default_rng(1)) == 0.05


def test_exponential_cdf_matches_paper_probabilities():
    d = parse_delay_spec("exp:0.2")
    # Pr(delay >= t) for the thresholds of the reference model (p2et = e^-0.5).
    assert 1 - d.cdf(0.1) == pytest.approx(math.exp(-0.5))
    assert 1 - d.cdf(0.2) == pytest.approx(math.exp(-1.0))


def test_seeded_samples_repeat_and_truncation_holds():
    d = parse_delay_spec("exp:0.2:0.3")
    a = [d.sample(np.random.default_rng(7)) for _ in range(3)]
    b = [d.sample(np.random.default_rng(7)) for _ in range(3)]
    assert a == b
    rng = np.random.default_rng(0)
    xs = np.array([d.sample(rng) for _ in range(2000)])
    assert xs.max() <= 0.3 and xs.min() >= 0
    assert abs(np.mean(xs <= 0.1) - d.cdf(0.1)) < 0.04


def test_uniform_and_exp_means():
    rng = np.random.default_rng(3)
    u = parse_delay_spec("uniform:0.1:0.3")
    assert np.mean([u.sample(rng) for _ in range(4000)]) == pytest.approx(0.2, abs=0.01)
    e = parse_delay_spec("exp:0.2")
    assert np.mean([e.sample(rng) for _ in range(8000)]) == pytest.approx(0.2, abs=0.01)


def test_empirical(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("delay\n0.1\n0.2\n0.2\n")
    d = parse_delay_spec(f"empirical:{f}")
    assert isinstance(d, EmpiricalDelay) and d.values == (0.1, 0.2, 0.2)
    assert d.cdf(0.15) == pytest.approx(1 / 3)
    assert d.sample(np.random.default_rng(0)) in (0.1, 0.2)


@pytest.mark.parametrize(
    "spec, fragment",
    [("", "empty"), ("fast", "unknown delay spec"), ("-0.1", ">= 0"), ("nan", "finite"),
     ("exp:", "not a number"), ("exp:0", "> 0"), ("exp:0.2:0", "truncation"), ("exp:1:2:3", "exp:MEAN"),
     ("uniform:0.3:0.1", "LO must be <= HI"), ("uniform:0.1", "uniform:LO:HI"), ("gamma:1", "unknown delay kind"),
     ("empirical:/no/such.csv", "does not exist")],
)
def test_bad_specs_name_the_problem(spec, fragment):
    with pytest.raises(ConfigError, match=fragment):
        parse_delay_spec(spec)


def test_bad_empirical_rows(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("0.1\nabc\n")
    with pytest.raises(ConfigError, match=r"bad.csv:2"):
        parse_delay_spec(f"empirical:{f}")
