"""PDEs from space-time fields (``dynid symbolic --pde``): weak-form sparse regression.

``weak_form`` holds the test functions on space-time boxes, ``library`` the terms (monomials of
the fields and their spatial derivatives), ``identify`` the pipeline (``identify_pde``) with the
ODE path's held-out selection and bootstrap intervals, ``document`` the ``symbolic`` JSON of the
result; ``options.PdeParams`` its hyperparameters.
"""

from dynid.symbolic.pde.identify import PdeIdentification, identify_pde
from dynid.symbolic.pde.options import PdeParams

__all__ = ["PdeIdentification", "PdeParams", "identify_pde"]
