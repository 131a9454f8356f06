"""Regenerate the man pages in this folder from the CLI: ``python man/generate.py``."""

from pathlib import Path

from dynid.cli.manpages import write_all

if __name__ == "__main__":
    for name in write_all(str(Path(__file__).resolve().parent)):
        print(name)
