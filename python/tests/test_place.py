import csv
import io
import subprocess

import numpy as np
import pytest

import switchyard
from switchyard import place


def test_every_policy_the_binary_names_places_an_array():
    keys = np.arange(1000, dtype=np.uint64)
    names = place.policies()
    assert {"hrw", "jump", "maglev", "bounded", "h-ahrw", "ps-hrw"} <= set(names)
    for name in names:
        out = place.Placer(name, workers=8).place(keys)
        assert out.dtype == np.uint32 and out.shape == (1000,), name
        assert out.max() < 8, name


def test_same_keys_same_workers_and_text_keys_match_numbers():
    a = place.Placer("hrw", workers=16).place(np.arange(500, dtype=np.uint64))
    b = place.Placer("hrw", workers=16).place([str(i) for i in range(500)])
    c = place.Placer("hrw", workers=16).place(np.arange(500, dtype=np.int64))
    assert (a == b).all() and (a == c).all()
    assert len(set(a.tolist())) == 16


def test_removing_a_worker_moves_only_its_keys_under_hrw():
    keys = np.arange(5000, dtype=np.uint64)
    p = place.Placer("hrw", workers=8)
    before = p.place(keys)
    p.remove_worker(3)
    p.reset_load()
    after = p.place(keys)
    moved = before != after
    assert (before[moved] == 3).all()
    assert 3 not in set(after.tolist())
    assert [w for w, _ in p.workers] == [0, 1, 2, 4, 5, 6, 7]
    p.add_worker(3)
    assert (3, 1.0) in p.workers
    w = place.Placer("weighted-hrw", weights=[1, 1])
    w.set_weight(1, 3.0)
    assert w.workers == [(0, 1.0), (1, 3.0)]
    with pytest.raises(switchyard.SwitchyardError, match="hrw"):
        p.add_worker(9, 2.0)


def test_weights_and_topology():
    p = place.Placer("weighted-hrw", weights=[1, 1, 1, 5])
    out = p.place(np.arange(20000, dtype=np.uint64))
    share = np.bincount(out, minlength=4) / len(out)
    assert share[3] > 0.5
    t = place.Placer("h-ahrw", topology="xeon-e5335")
    assert len(t.workers) == 8
    loads = t.load()
    assert list(loads.columns) == ["units", "bytes"]


def test_load_aware_policies_see_the_load_placed():
    p = place.Placer("jsq", workers=4)
    out = p.place(np.zeros(8, dtype=np.uint64))
    assert np.bincount(out, minlength=4).tolist() == [2, 2, 2, 2]
    assert p.load()["units"].tolist() == [2, 2, 2, 2]


def test_measure_has_the_columns_and_figures_of_place_csv(binary):
    frame = place.measure("hrw,jump,maglev", workers=8, keys="uniform:5000")
    out = subprocess.run(
        [binary, "place", "--policy", "hrw,jump,maglev", "--workers", "8", "--keys", "uniform:5000", "--format", "csv"],
        capture_output=True, text=True, check=True,
    ).stdout
    cli = list(csv.DictReader(io.StringIO(out)))
    assert list(frame.columns) == list(cli[0].keys())
    for row, theirs in zip(frame.to_dict("records"), cli):
        # Everything but the timing is deterministic.
        for col in ["policy", "workers", "keys", "max_over_mean", "cov", "jain", "moved_on_remove", "moved_on_add"]:
            assert str(row[col]) == theirs[col] or float(row[col]) == float(theirs[col]), col


def test_measure_all_with_weights_warns_and_keeps_weighted_policies():
    with pytest.warns(UserWarning, match="skipping policies that ignore weights"):
        frame = place.measure("all", weights=[1, 2, 3, 4], keys="uniform:2000")
    assert "hrw" not in frame["policy"].tolist() and "weighted-hrw" in frame["policy"].tolist()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: place.Placer("hwr"), "unknown policy `hwr`"),
        (lambda: place.Placer("hrw", workers=0), "workers must be at least 1"),
        (lambda: place.Placer("hrw", workers=4, topology="xeon-e5335"), "workers=4 but topology xeon-e5335 has 8 leaves"),
        (lambda: place.Placer("hrw", workers=2, weights=[1]), "weights has 1 values for 2 workers"),
        (lambda: place.Placer("hrw", topology="nonsense"), "nonsense"),
        (lambda: place.Placer("hrw", queue="packets"), "invalid value 'packets' for queue: possible values are units, bytes"),
        (lambda: place.Placer("hrw", vnode=3), "unexpected option vnode"),
        (lambda: place.Placer("hrw").place(np.ones(3)), "dtype float64"),
        (lambda: place.Placer("hrw").place(np.ones((2, 2), dtype=np.uint64)), "2 dimension(s)"),
        (lambda: place.Placer("hrw").place([1.5]), "keys[0]: a float cannot be a key"),
        (lambda: place.Placer("hrw").place("abc"), "keys: a str cannot be placed"),
        (lambda: place.Placer("hrw").place([1, 2], sizes=[1]), "sizes has 1 values for 2 keys"),
        (lambda: place.Placer("hrw").remove_worker(99), "99"),
        (lambda: place.measure("hrw", weights=[1] * 8), "weights given but hrw ignores weights"),
        (lambda: place.measure("hrw", keys="zipf:x"), "zipf"),
    ],
)
def test_bad_input_raises_the_binarys_message(call, message):
    with pytest.raises(switchyard.SwitchyardError) as e:
        call()
    assert message in str(e.value)
    assert "\n" not in str(e.value)
    assert isinstance(e.value, ValueError)


def test_threads_sharing_a_placer_do_not_deadlock():
    # Each place() runs without the GIL; one placer shared by threads must neither hang (a
    # thread holding the GIL waiting for the placer while another waits for the GIL) nor lose
    # a key. Run apart, so that a hang fails by the timeout instead of stopping the suite.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import threading, numpy as np
        from switchyard import place
        p = place.Placer("jsq", workers=4)
        keys = np.arange(200_000, dtype=np.uint64)
        def work():
            for _ in range(10):
                p.place(keys)
                p.workers
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(int(p.load()["units"].sum()))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == str(4 * 10 * 200_000), out
