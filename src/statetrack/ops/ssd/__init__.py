"""Mamba-2's state space duality: a scalar transition per head, run on Mamba's scan."""
