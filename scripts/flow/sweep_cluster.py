"""The sweep's points as tasks on ``dask.distributed``: a local cluster or an existing one.

Each point is one task (for a sweep, :func:`scripts.flow.sweep.synthesise_point`), submitted under
the key its caller gives (for a sweep, ``synth-<target>-<cache key>``, the content hash of its
Verilog and tool versions), so that two clients sweeping the same point on one cluster share
its computation.

Faults: a task that raises is retried once (``retries=1``), so a point that fails twice is
reported, with its Yosys log, and the others go on. A worker that dies mid-point has its
task moved to another worker by the scheduler, up to ``allowed-failures`` deaths per task:
set to :data:`ALLOWED_FAILURES` on the local cluster; an existing cluster keeps its own
setting (Dask's default is 3). The scheduler counts a death against every task assigned to the
dead worker, not only the one running. So that a point that kills its worker cannot take a
point queued behind it down too, the points go to the scheduler in one batch (one task group)
and the local cluster holds every task on the scheduler until a worker thread is free
(``worker-saturation`` 1.0, :data:`CLUSTER_CONFIG`). Dask queues a group this way only when it
has more than twice as many tasks as the cluster has threads; a smaller sweep has at most two
points on a worker at once. On Ctrl-C the outstanding tasks are cancelled; the cache
stays consistent because :meth:`scripts.flow.cache.Cache.put` is atomic.
"""

import logging
import os
import signal
import threading

from distributed import WorkerPlugin

__all__ = ["DaskRunner", "ALLOWED_FAILURES", "CLUSTER_CONFIG", "RETRIES"]

RETRIES = 1
ALLOWED_FAILURES = 1
#: Scheduler settings of a local cluster; the scheduler reads them when it starts.
CLUSTER_CONFIG = {
    "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
    "distributed.scheduler.worker-saturation": 1.0,
}


class _QuietInterrupt(WorkerPlugin):
    """Ctrl-C ends a local worker at once, without a traceback.

    The terminal sends Ctrl-C to the local cluster's worker processes as well as to the client
    (one process group); the client reports the interruption once, and the Yosys child of a
    busy worker gets the same signal and stops too.
    """

    def setup(self, worker):
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, lambda signum, frame: os._exit(128 + signum))


class DaskRunner:
    """Submits tasks of one function to Dask and hands back their answers as they finish.

    Parameters
    ----------
    function : callable
        What every task runs; importable by its module's name on the workers.
    workers : int
        Worker processes of the ``LocalCluster`` started when neither ``scheduler`` nor
        ``client`` is given (one thread each: Yosys is single-threaded).
    scheduler : str, optional
        Address of an existing scheduler.
    client : distributed.Client, optional
        An open client, used and left open.

    Raises
    ------
    ConnectionError
        From the first :meth:`submit`, when ``scheduler`` cannot be reached.
    """

    def __init__(self, function, *, workers, scheduler=None, client=None):
        self.function = function
        self.workers = workers
        self.scheduler = scheduler
        self.pending = []  # (key, arguments) added but not started
        self.futures = []
        self.cluster = None
        self.client = client
        self.owns_client = client is None

    def _connect(self):
        # Only once a point needs synthesising: a sweep served from the cache starts no cluster.
        import dask
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            try:
                self.client = Client(self.scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as error:
                raise ConnectionError(f"cannot reach the Dask scheduler at {self.scheduler}: "
                                      f"{error}") from None
        else:
            # The scheduler reads its settings when it starts, so they must wrap its creation.
            # Its HTTP server (which it starts even without a dashboard) takes any free port, not
            # 8787, which another cluster on this machine may hold.
            with dask.config.set(CLUSTER_CONFIG):
                self.cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                            dashboard_address=":0", silence_logs=logging.ERROR)
            self.client = Client(self.cluster)
            self.client.register_plugin(_QuietInterrupt())

    def submit(self, key, *args):
        """Add the task ``key``, the function on ``args``; :meth:`results` starts the tasks added."""
        if self.client is None:
            self._connect()
        self.pending.append((key, args))

    def results(self):
        """Yield ``(key, answer)`` as tasks finish: the task's dict, or the exception it ended with."""
        from distributed import as_completed

        if self.pending:
            keys, arguments = zip(*self.pending, strict=True)
            self.pending.clear()
            self.futures.extend(self.client.map(self.function, *zip(*arguments, strict=True), key=list(keys),
                                                retries=RETRIES))
        if not self.futures:
            return
        for future in as_completed(self.futures):
            try:
                answer = future.result()
            except Exception as error:  # noqa: BLE001 - a failed or killed point fails that point only
                answer = error
            future.release()
            yield future.key, answer

    def cancel(self):
        """Cancel every task not finished yet."""
        self.pending.clear()
        if self.futures:
            self.client.cancel(self.futures, force=True)

    def close(self):
        """Release the tasks; close the client and the local cluster if this runner opened them."""
        self.pending.clear()
        self.futures.clear()
        if self.owns_client and self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
