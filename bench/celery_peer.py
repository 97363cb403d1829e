"""The peer of `switchyard bench jobs`: Celery with a Redis broker and result backend, running
the same trivial tasks as the jobs coordinator hands out.

Two roles, started by the bench (which also starts redis-server):

  python celery_peer.py worker PORT CONCURRENCY   # a Celery worker (prefork pool)
  python celery_peer.py produce PORT SECONDS WINDOW

`produce` keeps WINDOW tasks in flight for SECONDS, after a short warm-up, and prints one JSON
line: tasks completed per second, and the p50 and p99 of the time from sending a task to
having its result, in milliseconds.
"""

import json
import sys
import time

from celery import Celery


def make_app(port):
    url = f"redis://127.0.0.1:{port}"
    app = Celery("switchyard_peer", broker=f"{url}/0", backend=f"{url}/1")
    app.conf.update(
        task_acks_late=False,
        worker_prefetch_multiplier=4,
        result_expires=60,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )

    @app.task(name="noop")
    def noop(i):
        return i

    return app, noop


def worker(port, concurrency):
    app, _ = make_app(port)
    app.worker_main(
        ["worker", "--pool=prefork", f"--concurrency={concurrency}", "--loglevel=WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    )


def produce(port, seconds, window):
    _, noop = make_app(port)
    # Warm-up: the pool's processes start, the connections open.
    for r in [noop.delay(i) for i in range(window)]:
        r.get(timeout=60)
    latencies = []
    inflight = []
    done = 0
    start = time.monotonic()
    end = start + seconds
    i = 0
    while time.monotonic() < end:
        while len(inflight) < window:
            inflight.append((time.monotonic(), noop.delay(i)))
            i += 1
        sent, r = inflight.pop(0)
        r.get(timeout=60)
        latencies.append(time.monotonic() - sent)
        done += 1
    elapsed = time.monotonic() - start
    for _, r in inflight:
        r.get(timeout=60)
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3
    print(json.dumps({"rate": done / elapsed, "p50_ms": pick(0.5), "p99_ms": pick(0.99), "tasks": done}))


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]))
    elif role == "produce":
        produce(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(f"unknown role {role!r}: worker or produce")
