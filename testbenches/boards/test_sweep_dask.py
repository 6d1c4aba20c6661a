"""``neartrain sweep`` on ``dask.distributed``: the serial numbers, killed workers, a separate scheduler.

Each test synthesises a few ``skid_buffer`` widths on ``ecp5`` (seconds each), widths that no
other test uses, so that under pytest-xdist no other test warms or clears their cache entries.
Every wait is bounded by :data:`TIMEOUT` and fails with a message saying what it waited for.
"""

import concurrent.futures
import io
import json
import os
import pathlib
import pickle
import subprocess
import sys
import time

import dask
import pytest
from distributed import Client, LocalCluster, WorkerPlugin

from rtl.elaborate import to_verilog
from rtl.registry import get_block
from scripts.cli import main
from scripts.flow.cache import Cache
from scripts.flow.sweep import _failure, parse_vary, run_sweep, synthesise_point
from scripts.flow.sweep_cluster import CLUSTER_CONFIG, DaskRunner
from scripts.flow.synth import CACHE, SynthesisError, cache_key, forget_resources

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 180


def _verilog(width):
    return to_verilog(get_block("skid_buffer").build({"width": width}))


def _forget(widths):
    for width in widths:
        forget_resources(_verilog(width), "ecp5")


def _sweep(widths, **options):
    """``run_sweep`` of ``skid_buffer`` over ``widths``, failing clearly if it takes over TIMEOUT."""
    block = get_block("skid_buffer")
    varied = parse_vary(block, ["width=" + ",".join(map(str, widths))])
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(run_sweep, block, varied, target="ecp5", stream=io.StringIO(), **options)
    try:
        return future.result(timeout=TIMEOUT)
    except concurrent.futures.TimeoutError:
        pytest.fail(f"the sweep of widths {widths} did not finish within {TIMEOUT} s")
    finally:
        pool.shutdown(wait=False)


def _numbers(result):
    return [(point["params"], point["status"], point["resources"]) for point in result.points]


def _local_cluster():
    with dask.config.set(CLUSTER_CONFIG):
        return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")


def test_a_local_cluster_gets_the_serial_numbers_and_a_second_run_is_cached():
    widths = (33, 34, 35)
    _forget(widths)
    cluster = _sweep(widths, workers=2)
    assert [point["status"] for point in cluster.points] == ["ok"] * 3 and cluster.cached == 0
    # A skid buffer holds two payloads plus two valid bits in flip-flops.
    assert [point["resources"]["FF"] for point in cluster.points] == [2 * width + 2 for width in widths]

    again = _sweep(widths, workers=2)
    assert again.cached == 3 and _numbers(again) == _numbers(cluster)

    _forget(widths)
    serial = _sweep(widths, workers=1)
    assert serial.cached == 0
    assert _numbers(serial) == _numbers(cluster)


class _KillWorkers(WorkerPlugin):
    """Ends the worker process the moment it starts a point: the first point once, ``doomed`` always.

    The marker file, created exclusively, makes "once" hold across both workers and their restarts.
    """

    def __init__(self, marker, doomed=()):
        self.marker = str(marker)
        self.doomed = set(doomed)

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith("synth-"):
            return
        if key not in self.doomed:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        os._exit(1)


def test_a_worker_killed_mid_point_is_retried_and_a_point_that_kills_twice_fails_alone(tmp_path):
    # Five points on two one-thread workers: more than twice the threads, so Dask holds the points
    # on the scheduler and a worker never has an innocent point queued behind the doomed one.
    widths, doomed_width = (36, 37, 43, 44), 38
    doomed = f"synth-ecp5-{cache_key(_verilog(doomed_width), 'ecp5')}"
    marker = tmp_path / "killed-once"
    _forget((*widths, doomed_width))
    with _local_cluster() as cluster, Client(cluster) as client:
        client.register_plugin(_KillWorkers(marker, [doomed]))
        result = _sweep((*widths, doomed_width), client=client)
        assert marker.exists(), "no worker was killed: the test did not test a retry"
        # Both workers are back after their deaths (the nanny restarts them).
        client.wait_for_workers(2, timeout=TIMEOUT)
        broken = f"// {tmp_path}\nmodule top(input a;\n"  # unique text: never in a cache
        runner = DaskRunner(synthesise_point, workers=2, client=client)
        runner.submit("synth-broken", broken, "ecp5")
        [(key, error)] = list(runner.results())
        runner.close()

    assert key == "synth-broken" and isinstance(error, SynthesisError), error
    assert "ERROR" in error.log  # Yosys's log travelled back with the error
    # As on a remote worker, the client has no log of its own: it writes the one that came back.
    CACHE.path("ecp5", cache_key(broken, "ecp5"), "-failed.log").unlink(missing_ok=True)
    reason = _failure(error, broken, "ecp5")
    kept = pathlib.Path(reason.rpartition("log: ")[2])
    assert kept.read_text() == error.log
    kept.unlink()

    by_width = {point["params"]["width"]: point for point in result.points}
    assert by_width[doomed_width]["status"] == "failed"
    assert "KilledWorker" in by_width[doomed_width]["reason"], by_width[doomed_width]["reason"]
    _forget(widths)
    serial = _sweep(widths, workers=1)
    assert _numbers(serial) == [(point["params"], point["status"], point["resources"])
                                for point in result.points[:len(widths)]]


@pytest.fixture
def scheduler_address(tmp_path):
    """A Dask scheduler and one worker, each a separate process on localhost; their address."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                           os.environ.get("PYTHONPATH")]))}
    scheduler_file = tmp_path / "scheduler.json"
    logs = tmp_path / "dask.log"
    processes = []
    with open(logs, "w") as log:
        try:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                 "--no-dashboard", "--dashboard-address", ":0", "--scheduler-file", str(scheduler_file)],
                env=environment, stdout=log, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + TIMEOUT
            address = None
            while address is None:
                if time.monotonic() > deadline or processes[0].poll() is not None:
                    pytest.fail(f"the scheduler wrote no address within {TIMEOUT} s:\n{logs.read_text()}")
                try:
                    address = json.loads(scheduler_file.read_text())["address"]
                except (FileNotFoundError, json.JSONDecodeError, KeyError):
                    time.sleep(0.2)
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                 "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1"],
                env=environment, stdout=log, stderr=subprocess.STDOUT))
            with Client(address, timeout="30s") as client:
                client.wait_for_workers(1, timeout=TIMEOUT)
            yield address
        finally:
            for process in reversed(processes):
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def test_the_cli_sweeps_on_a_scheduler_started_as_a_separate_process(scheduler_address, tmp_path, capsys):
    widths = (39, 40)
    _forget(widths)
    argv = ["sweep", "skid_buffer", "--vary", "width=" + ",".join(map(str, widths)), "--target", "ecp5",
            "--scheduler", scheduler_address, "-o", str(tmp_path / "sweep")]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "2 points, 0 served from the cache, 0 failed" in first.out
    assert "cached 0, failed 0" in first.err  # the progress display's counts
    assert [f"| width={width} |" in first.out for width in widths] == [True, True]
    assert main(argv) == 0
    assert "2 points, 2 served from the cache, 0 failed" in capsys.readouterr().out


def test_a_yosys_failure_pickles_with_its_log():
    sent = SynthesisError("yosys failed for target ecp5; log: x.log", "ERROR: line 3")
    error = pickle.loads(pickle.dumps(sent))
    assert str(error) == "yosys failed for target ecp5; log: x.log" and error.log == "ERROR: line 3"


def test_an_interrupted_cache_write_leaves_the_old_entry_whole(tmp_path, monkeypatch):
    cache = Cache("unused")
    cache.folder = tmp_path
    cache.put("entry", "k", {"value": 1})

    def interrupted(source, destination):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.put("entry", "k", {"value": 2, "padding": "x" * 100_000})
    assert cache.get("entry", "k") == {"value": 1}
    assert [path.name for path in tmp_path.iterdir()] == ["entry-k.json"]
