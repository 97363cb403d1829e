import subprocess

import pytest

import switchyard
from switchyard import _report, reproduce


def test_names_are_the_simulated_reproductions():
    names = reproduce.names()
    assert "dpi-affinity" in names and "dou-rgedf" in names
    assert "iwashima-m" not in names and "yates-clp" not in names
    for name in names:
        assert callable(getattr(reproduce, name.replace("-", "_")))


def test_dou_rgedf_is_the_binarys_report(binary):
    ours = reproduce.dou_rgedf(runs=1, seed=3, threads=2)
    cli = subprocess.run(
        [binary, "reproduce", "dou-rgedf", "--runs", "1", "--seed", "3", "--format", "json"],
        capture_output=True, text=True, check=True,
    ).stdout
    theirs = _report.frames(cli)
    assert set(ours) == set(theirs)
    for name in ours:
        assert ours[name].to_csv(index=False) == theirs[name].to_csv(index=False), name


def test_claims_put_ours_beside_the_published_figure():
    r = reproduce.run("ko-worker-centric", runs=1, scale=0.02)
    claims = r["claims"]
    assert list(claims.columns) == _report.CLAIM_COLUMNS
    assert len(claims) > 0
    both = claims.dropna(subset=["published", "ours", "difference"])
    assert len(both) > 0
    for row in both.itertuples():
        assert row.difference == pytest.approx(row.ours / row.published - 1)
    assert {"capacity", "workers_per_site", "unit_cost", "parameters"} <= set(r)


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("dpi-afinity", {}, "no reproduction `dpi-afinity`; the simulated ones are: dpi-affinity"),
        ("iwashima-m", {}, "runs real sockets (iwashima-m needs root); run it with the binary"),
        ("dou-rgedf", {"scale": 2.0}, "reproduce dou-rgedf: unexpected option scale; it takes runs, seed and threads"),
        ("dou-rgedf", {"color": 1}, "reproduce dou-rgedf: unexpected option color"),
        ("figurehead", {"requests": 0}, "requests=0: a run needs at least one request"),
        ("yates-cache", {"tables": ["9.9"]}, "9.9"),
        ("yates-cache", {"neighbourhood": "far:x"}, "neighbourhood:"),
    ],
)
def test_bad_options_raise_one_line_messages(name, options, message):
    with pytest.raises(switchyard.SwitchyardError) as e:
        reproduce.run(name, **options)
    assert message in str(e.value)
    assert "\n" not in str(e.value)
