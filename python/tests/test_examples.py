"""The example scripts run (each skipped where its plotting or SimPy package is missing)."""

import subprocess
import sys

import pytest


def test_mmc_beside_simpy(repo):
    pytest.importorskip("simpy")
    out = subprocess.run([sys.executable, repo / "examples/python/mmc_vs_simpy.py", "20000", "2"],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    assert "Erlang C" in out and "x SimPy's customers per second" in out


def test_place_sim_plot_writes_a_png(repo, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "report.png"
    subprocess.run([sys.executable, repo / "examples/python/place_sim_plot.py", png], cwd=repo, check=True,
                   capture_output=True, timeout=600)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
