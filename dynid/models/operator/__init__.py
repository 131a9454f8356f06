"""Operator-theoretic models: the Koopman operator on a dictionary of observables."""
