"""Shell completion of option values: backend names for --model, causal methods for --method,
catalogued systems for ``simulate SYSTEM``, a command's --format choices, man page names.

Each function runs only when the shell asks (``_DYNID_COMPLETE=...``), so the registries are
imported there, never when ``dynid --help`` builds the app.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

# fit's search over the applicable backends, accepted by --model beside the registry names.
AUTO_MODEL = "auto"


def _starting(values: Iterable[str], incomplete: str) -> list[str]:
    return [value for value in values if value.startswith(incomplete)]


def models(incomplete: str) -> list[str]:
    """--model: every registered backend, and ``auto``."""
    from dynid.models import registry

    return _starting([*registry.names(), AUTO_MODEL], incomplete)


def causal_methods(incomplete: str) -> list[str]:
    """--method of discover-causal: every registered causal method."""
    from dynid.causal import registry

    return _starting(registry.names(), incomplete)


def systems(incomplete: str) -> list[str]:
    """SYSTEM of simulate: the catalogue's names."""
    from dynid.systems.catalogue import SYSTEMS

    return _starting(SYSTEMS, incomplete)


def commands(incomplete: str) -> list[str]:
    """COMMAND of ``dynid man``: the commands that have a page."""
    from dynid.cli.manpages import page_commands

    return _starting(page_commands(), incomplete)


def choices(values: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Completion from a fixed tuple (a command's --format choices)."""

    def complete(incomplete: str) -> list[str]:
        return _starting(values, incomplete)

    return complete
