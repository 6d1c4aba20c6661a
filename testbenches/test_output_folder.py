"""The CLI's output-folder check from parallel workers (``neartrain verilog`` checks it from every
elaboration process): one worker must never see another's probe vanish."""

from concurrent.futures import ProcessPoolExecutor

from scripts.cli.common import writable_folder


def _check_many(folder):
    for _ in range(300):
        writable_folder(folder)
    return True


def test_writable_folder_from_parallel_processes(tmp_path):
    with ProcessPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(_check_many, [tmp_path] * 4))
    assert list(tmp_path.iterdir()) == []
