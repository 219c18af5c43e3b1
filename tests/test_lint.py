"""The linter, configured in pyproject.toml ([tool.ruff]): lines of at most 100 characters,
no unused imports or undefined names, nothing Python itself would warn about."""
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def _ruff(*paths) -> subprocess.CompletedProcess:
    pytest.importorskip("ruff", reason="ruff is installed by pip install '.[test]'")
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--config", str(CONFIG),
                           "--no-cache", "--output-format", "concise", *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT)


def test_the_package_and_the_tests_pass_the_linter():
    result = _ruff(ROOT / "toolkit", ROOT / "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_catches_a_long_line(tmp_path):  # a test that cannot fail is a defect
    source = tmp_path / "long.py"
    source.write_text("x = " + "1 + " * 30 + "1\n")  # 125 characters
    result = _ruff(source)
    assert result.returncode == 1 and "E501" in result.stdout, result.stdout
