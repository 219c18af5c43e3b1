"""toolkit's environment variables: a bad value warns once, names itself and falls back; it
never breaks ``import toolkit`` or a compile."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import toolkit as tk
from toolkit import config
from toolkit.backends.cpu.executor import available_cores, num_threads

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )


def test_a_size_with_units_does_not_break_import():
    proc = _run("from toolkit.backends.cpu import row_groups; print(row_groups.MIN_GROUP_BYTES)",
                TOOLKIT_ROW_GROUP_MIN_BYTES="4MB")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4000000"]


def test_a_meaningless_size_warns_and_uses_the_default():
    proc = _run("from toolkit.backends.cpu import row_groups; print(row_groups.MIN_GROUP_BYTES)",
                TOOLKIT_ROW_GROUP_MIN_BYTES="lots")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(4 << 20)]
    assert "TOOLKIT_ROW_GROUP_MIN_BYTES='lots'" in proc.stderr and "4MiB" in proc.stderr


def test_a_bad_debug_level_does_not_break_import():
    proc = _run("import toolkit", TOOLKIT_DEBUG="verbose")
    assert proc.returncode == 0 and "TOOLKIT_DEBUG='verbose'" in proc.stderr


@pytest.mark.parametrize("value", ["abc", "2.5", "-3"])
def test_bad_thread_counts_warn_and_compiles_still_work(monkeypatch, value):
    monkeypatch.setenv("TOOLKIT_NUM_THREADS", value)
    config._warned.clear()
    with pytest.warns(config.ConfigWarning, match="TOOLKIT_NUM_THREADS"):
        n = num_threads()
    assert 1 <= n <= available_cores()
    out = tk.jit(lambda v: v * 2, backend="cpu")(np.arange(3.0))
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_more_threads_than_cores_are_clamped(monkeypatch):
    monkeypatch.setenv("TOOLKIT_NUM_THREADS", "20000")
    config._warned.clear()
    with pytest.warns(config.ConfigWarning, match="using"):
        assert num_threads() == available_cores()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4194304", 4194304),
        ("4MiB", 4 << 20),
        ("4 MB", 4_000_000),
        ("2GiB", 2 << 30),
        ("1.5k", 1500),
        ("0", 0),
    ],
)
def test_sizes(text, expected):
    assert config.parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "4 parsecs", "-1", "1e9"])
def test_not_sizes(text):
    with pytest.raises(ValueError):
        config.parse_bytes(text)
