"""The package list in pyproject.toml covers every package, and data/ ships with it."""
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "toolkit").rglob("__init__.py")
    }
    assert found - listed == set(), f"add to pyproject.toml packages: {sorted(found - listed)}"
    assert config["package-dir"]["toolkit._data"] == "data"


def test_spec_sheets_are_reachable_installed_or_not():
    from toolkit.roofline import load_spec_sheets

    sheets = load_spec_sheets()
    assert "NVIDIA H100 SXM5 80GB" in sheets
