"""Regenerate the man pages (dynid/man/man1/, installed with the package) and the command reference docs/cli.md from the CLI:
``python man/generate.py``."""

from pathlib import Path

from dynid.cli.reference import write_all

if __name__ == "__main__":
    for name in write_all(str(Path(__file__).resolve().parent.parent)):
        print(name)
