import subprocess

import pytest

import switchyard
from switchyard import inspect


def test_a_row_per_connection_as_the_binarys_results(binary, repo, tmp_path):
    capture = repo / "data" / "traces" / "sample.pcap"
    frame = inspect.connections(capture, workers=2, guess=True)
    assert list(frame.columns) == inspect.COLUMNS
    out = tmp_path / "conns.csv"
    subprocess.run([binary, "inspect", capture, "--workers", "2", "--guess", "--results", out], check=True,
                   capture_output=True)
    assert frame.to_csv(index=False) == out.read_text()
    assert len(frame) == frame["id"].nunique() > 100


def test_the_policy_does_not_change_the_verdicts(repo):
    capture = repo / "data" / "traces" / "labelled.pcap"
    a = inspect.connections(capture, workers=1)
    b = inspect.connections(capture, workers=3, policy="hrw")
    assert a.to_csv(index=False) == b.to_csv(index=False)


@pytest.mark.parametrize(
    "args, message",
    [
        (("no/such.pcap",), "cannot open capture `no/such.pcap`: No such file or directory"),
        (("README.md",), "reading `README.md`"),
        (("x.pcap", 0), "workers=0: at least one worker is needed"),
        (("x.pcap", 1, "hwr"), "unknown policy `hwr`"),
    ],
)
def test_bad_input_raises_the_binarys_message(repo, monkeypatch, args, message):
    monkeypatch.chdir(repo)
    with pytest.raises(switchyard.SwitchyardError) as e:
        inspect.connections(*args)
    assert message in str(e.value)
    assert "\n" not in str(e.value)
