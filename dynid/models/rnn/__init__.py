"""Piecewise-linear recurrent networks for dynamical-systems reconstruction, trained by
generalized teacher forcing: ``plrnn`` (the clipped shallow PLRNN) and ``alrnn`` (the
almost-linear RNN). ``cells`` holds the torch maps, ``gtf`` the training strategy, ``backend``
what both backends share."""
