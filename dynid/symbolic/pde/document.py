"""The ``dynid symbolic --pde`` JSON document of a ``PdeIdentification``: the ODE result's
layout (CONTRACT.md) with ``"pde": true`` and the spatial axes in ``"space"``; each equation's
``lhs`` is the field whose time derivative it gives, its terms are named as
``library`` says (``u*u_x``, ``u_xx``, ``lap(u)``), and its ``rhs`` parses with sympy."""

from __future__ import annotations

from typing import Any

from dynid.symbolic.expressions import assemble_result
from dynid.symbolic.pde.identify import PdeIdentification


def pde_result(identification: PdeIdentification) -> dict[str, Any]:
    """The result dict (no ``kind``; see ``api``): equations with inclusion probability and
    95% interval per term when the ensemble ran, library / criterion / held-out R^2 / Pareto
    front per equation in ``metrics["equations"]``."""
    ident = identification
    names = [term.name for term in ident.terms]
    details = None
    if all(e.interval is not None for e in ident.equations):
        details = [
            [
                {"inclusion_probability": float(e.inclusion_probability[k]), "interval": [float(v) for v in e.interval[k]]}
                for k in range(len(names))
            ]
            for e in ident.equations
        ]
    equations = [
        {"library": e.library, "criterion": e.criterion, "validation_r2": e.validation_r2, "pareto": e.pareto}
        for e in ident.equations
    ]
    result = assemble_result(
        ident.fields, [], names, names, ident.coefficients, discrete=False,
        metrics={**ident.metrics, "equations": equations}, term_details=details,
    )
    return {**result, "pde": True, "space": list(ident.space)}
