"""Reservoir backends: a random recurrent network (``esn``) or a fixed polynomial feature map of
delayed states (``ngrc``), each with a linear ridge read-out (``readout``)."""
