"""``python -m dynid`` runs the command line."""

from dynid.cli.app import run

run()
