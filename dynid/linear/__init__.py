"""Linear-algebra building blocks shared by the linear backends (``dynid.models``) and the
regression-based causal methods (``dynid.causal``): lagged designs (``design``), (ridge) least
squares VAR(X) fits (``least_squares``), linear rollout (``dynamics``), singular-value
truncation (``rank``), exact DMD and DMDc (``dmd``), the Kalman filter and RTS smoother with
missing values (``kalman``) and subspace identification of a state-space model (``subspace``).
Imports only ``dynid.data`` and ``dynid.errors`` from the package."""
