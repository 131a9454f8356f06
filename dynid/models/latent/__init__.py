"""Latent-state models: hidden states inferred by filtering and smoothing."""
