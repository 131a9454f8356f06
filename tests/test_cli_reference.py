"""The command reference docs/cli.md and the man pages are generated from the CLI: stale files
fail, and the reference says what users need (every command, JSON kind and exit code)."""

import re
from pathlib import Path

from dynid import documents
from dynid.cli.app import app
from dynid.cli.manpages import EXIT_STATUS, command_docs
from dynid.cli.reference import MAN_DIRECTORY, REFERENCE_PATH, generated_files

ROOT = Path(__file__).resolve().parent.parent


def test_generated_references_are_current():
    generated = generated_files(app)
    on_disk_pages = {f"{MAN_DIRECTORY}/{p.name}" for p in (ROOT / MAN_DIRECTORY).glob("*.1")}
    assert on_disk_pages == {name for name in generated if name.endswith(".1")}, "run: python man/generate.py"
    for name, text in generated.items():
        path = ROOT / name
        assert path.exists() and path.read_text() == text, f"{name} is stale; run: python man/generate.py"


def test_reference_covers_commands_kinds_exit_codes_and_data():
    text = generated_files(app)[REFERENCE_PATH]
    for doc in command_docs(app)[1:]:
        assert f"\n### {doc.name}\n" in text
        for option in doc.options:
            assert f"`{option.names}`" in text or option.names.split(" <")[0] in text
    for kind in documents.KINDS:
        assert f"| `{kind}` |" in text
    for code, _ in EXIT_STATUS:
        assert re.search(rf"^\| {code} \| ", text, flags=re.M)
    for needed in ("`--json`", '"kind"', "`--nan", "HDF5", "stdin", "NO_COLOR"):
        assert needed in text


def test_readme_links_the_reference_inside_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert f"]({REFERENCE_PATH})" in readme
    assert "../shared" not in readme
