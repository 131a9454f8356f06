"""Latent stochastic differential equations: ``gpsde`` (a Gaussian-process drift fitted by
SING's natural-gradient variational inference). ``chain.py`` holds the Gaussian Markov chain
in natural parameters, ``kernels.py`` the RBF expectations, ``sing.py`` the inference,
``initialise.py`` the start, ``field.py`` the learned drift and its paths."""
