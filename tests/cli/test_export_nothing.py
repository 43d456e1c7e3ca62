"""--export-scheduler where the query has no scheduler: the answer is printed (exit 0), nothing is
written, a note says why (it was an error that also lost the answer)."""

from support import run_mopmc

INF = """mdp
module m
 s:[0..1] init 0;
 [a] s=0 -> (s'=0);
 [b] s=0 -> (s'=1);
 [] s=1 -> true;
endmodule
rewards "r"
 [a] true : 1;
endrewards
"""
UNMEETABLE = 'multi(R{"time"}<=1 [C], R{"energy"}<=1 [C])'


def test_infinite_value(tmp_path):
    model = tmp_path / "inf.nm"
    model.write_text(INF)
    out = tmp_path / "s.json"
    res = run_mopmc("check", str(model), "--prop", 'R{"r"}max=? [C]', "--export-scheduler", str(out), "--json")
    assert res.code == 0, res.stderr
    row = res.json()[0]
    assert row["value"] == "inf" and row["scheduler"] == {"path": None, "reason": "the value is inf"}
    assert not out.exists() and any(line.startswith("note: --export-scheduler") for line in res.stderr_lines)


def test_unachievable_and_infeasible(tmp_path):
    out = tmp_path / "s.json"
    res = run_mopmc("check", "example:tradeoff", "--prop", UNMEETABLE, "--export-scheduler", str(out), "--json")
    assert res.code == 0 and res.json()[0]["achievable"] is False, res.stderr
    assert res.json()[0]["scheduler"]["path"] is None and not out.exists()
    res = run_mopmc("convex", "example:tradeoff", "--prop", UNMEETABLE, "--export-scheduler", str(out), "--json")
    assert res.code == 0, res.stderr
    doc = res.json()
    assert doc["status"] == "infeasible" and "separating_direction" in doc and doc["scheduler"]["path"] is None
    assert not out.exists() and res.stderr_lines[-1].startswith("note: --export-scheduler")
    table = run_mopmc("convex", "example:tradeoff", "--prop", UNMEETABLE, "--export-scheduler", str(out))
    assert table.code == 0 and "no achievable point in the box" in table.stdout
