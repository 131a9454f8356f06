"""dynid/man/man1/ holds one page per command, generated from the CLI; malformed pages fail (stale ones
fail in test_cli_reference.py, with docs/cli.md)."""

import shutil
import subprocess

import pytest

from dynid.cli.app import app
from dynid.cli.manpages import pages, pages_directory

MAN = pages_directory()


def test_every_command_has_a_page():
    names = set(pages(app))
    for command in ("fit", "forecast", "score", "symbolic", "discover-causal", "report", "simulate", "models", "info"):
        assert f"dynid-{command}.1" in names


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
@pytest.mark.parametrize("page", sorted(p.name for p in MAN.glob("*.1")))
def test_pages_render_without_warnings(page):
    result = subprocess.run(
        ["groff", "-man", "-ww", "-z", str(MAN / page)], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stderr == ""
