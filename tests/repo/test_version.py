"""One version source: rlrecipes/__init__.py; pyproject.toml reads it through setuptools' dynamic metadata."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools.config.pyprojecttoml import read_configuration

import rlrecipes

REPO = Path(__file__).resolve().parents[2]


def test_package_metadata_takes_the_version_from_the_package(tmp_path, monkeypatch):
    # a copy whose package says 9.8.7: the metadata setuptools builds must follow it
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "rlrecipes").mkdir()
    init = (REPO / "rlrecipes" / "__init__.py").read_text()
    assert f'__version__ = "{rlrecipes.__version__}"' in init
    (tmp_path / "rlrecipes" / "__init__.py").write_text(init.replace(rlrecipes.__version__, "9.8.7"))
    monkeypatch.chdir(tmp_path)
    config = read_configuration(tmp_path / "pyproject.toml")
    assert config["project"]["version"] == "9.8.7"


def test_cli_version_is_the_package_version(capsys):
    from rlrecipes.cli import main

    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"rlrecipes {rlrecipes.__version__}"
