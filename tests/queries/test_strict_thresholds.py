"""Strict thresholds (> and <) in multi(...): met only with a positive slack. The model's exact
answers by hand: every scheduler has cost >= 0, cost 0 only by staying in s=3 forever (then
P[F goal] = 0); with cost <= 1.5 the best P[F goal] is exactly 0.525 (0.75 mixed with b;stay).
Storm treats them as non-strict (found by the multi-objective cross-check)."""

import pytest

from mopmc.io.load import load
from mopmc.queries.dispatch import multi_query

MODEL = """mdp
module m
 s:[0..5] init 0;
 [a] s=0 -> 0.5:(s'=1) + 0.5:(s'=2);
 [b] s=0 -> (s'=3);
 [stay] s=3 -> (s'=3);
 [go] s=3 -> 0.7:(s'=4)+0.3:(s'=5);
 [l] s=1 -> (s'=2);
 [r] s=1 -> (s'=4);
 [x] s=2 -> (s'=1);
 [y] s=2 -> 0.4:(s'=4)+0.6:(s'=5);
 [] s=4 -> true;
 [] s=5 -> true;
endmodule
rewards "cost"
 [go] true:2; [r] true:3; [y] true:1; s=1:0.5;
endrewards
label "goal" = s=4;
"""

ENGINES = [("kernel", None), ("lp", None), ("torch", "cpu")]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("strict") / "m.nm"
    path.write_text(MODEL)
    return path


def query(path, text, engine, device):
    loaded = load(path, properties=text)
    return multi_query(loaded.model, loaded.properties()[0], engine=engine, device=device)


@pytest.mark.parametrize("engine, device", ENGINES)
@pytest.mark.parametrize("text, achievable", [
    ('multi(P>0 [F "goal"], R{"cost"}<=0 [C])', False),   # P = 0 at cost 0
    ('multi(P>=0 [F "goal"], R{"cost"}<0 [C])', False),   # no negative cost
    ('multi(P>0.525 [F "goal"], R{"cost"}<=1.5 [C])', False),  # 0.525 is the maximum
    ('multi(P>=0.525 [F "goal"], R{"cost"}<=1.5 [C])', True),  # ... and it is attained
    ('multi(P>0.52 [F "goal"], R{"cost"}<1.5 [C])', True),
    ('multi(P>=0 [F "goal"], R{"cost"}<=0 [C])', True),
])
def test_strict_achievability(model_file, engine, device, text, achievable):
    res = query(model_file, text, engine, device)
    assert res.achievable is achievable, (res.margin, res.margin_upper)
    if achievable:  # the witness meets every threshold, the strict ones strictly
        w = res.witness
        point = [sum(lam * p[i] for lam, p in zip(w.weights, w.points)) for i in range(2)]
        for o, v in zip(res.objectives, point):
            if o.comparison == ">":
                assert v > o.threshold
            elif o.comparison == "<":
                assert v < o.threshold
            elif o.comparison == ">=":
                assert v >= o.threshold - 1e-9
            else:
                assert v <= o.threshold + 1e-9


@pytest.mark.parametrize("engine, device", ENGINES)
def test_strict_numerical(model_file, engine, device):
    assert query(model_file, 'multi(Pmax=? [F "goal"], R{"cost"}<0 [C])', engine, device).status == "infeasible"
    res = query(model_file, 'multi(Pmax=? [F "goal"], R{"cost"}<1.5 [C])', engine, device)
    assert res.status == "optimal" and res.value == pytest.approx(0.525, abs=1e-9)  # the supremum
    assert res.lower <= res.upper


@pytest.mark.parametrize("engine, device", ENGINES[:2])
def test_convex_query_bounded_by_its_box(model_file, engine, device):
    """The cost is unbounded above (the s=1/s=2 loop), but the box's cost <= 1.5 caps it: the MSE
    to the origin over P >= 0.5, cost <= 1.5 is attained at P = 0.5, cost 10/7: loss
    (0.5^2 + (10/7)^2) / 2 = 1.1454081632653 (cvxpy over the occupation measures agrees). It was
    refused ("the achievable set is unbounded"), found by the cross-check."""
    from mopmc.queries.convex import convex_query

    loaded = load(model_file, properties='multi(P>=0.5 [F "goal"], R{"cost"}<=1.5 [C])')
    res = convex_query(loaded.model, loaded.properties()[0].objectives, "mse", engine=engine)
    assert res.status == "optimal"
    assert res.loss == pytest.approx(1.1454081632653, abs=1e-8) and res.lower_bound <= res.loss + 1e-12
    assert res.point[0] == pytest.approx(0.5, abs=1e-8) and res.point[1] == pytest.approx(10 / 7, abs=1e-8)
