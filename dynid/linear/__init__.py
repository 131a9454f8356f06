"""Linear-algebra building blocks shared by the linear backends (``dynid.models``) and the
regression-based causal methods (``dynid.causal``): lagged designs (``design``), (ridge) least
squares VAR(X) fits (``least_squares``), linear rollout (``dynamics``) and singular-value
truncation (``rank``). Imports only ``dynid.data`` and ``dynid.errors`` from the package."""
