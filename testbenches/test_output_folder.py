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


def test_an_installed_package_builds_under_the_cache_home_not_site_packages(tmp_path, monkeypatch):
    """Without a pyproject.toml beside the package (a non-editable install), the build folder is
    ``$XDG_CACHE_HOME/neartrain/build``; in a checkout, the checkout's ``build/``."""
    import pathlib

    from scripts.flow import cache

    checkout = pathlib.Path(cache.__file__).resolve().parents[2]
    assert cache.build_root({}) == checkout / "build"
    real_is_file = pathlib.Path.is_file
    monkeypatch.setattr(pathlib.Path, "is_file",
                        lambda path: False if path.name == "pyproject.toml" else real_is_file(path))
    assert cache.build_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "neartrain" / "build"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.build_root({}) == tmp_path / "home" / ".cache" / "neartrain" / "build"
