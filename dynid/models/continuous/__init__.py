"""Continuous-time models learned as vector fields: ``node``, ``phnn``, ``hnn``."""
