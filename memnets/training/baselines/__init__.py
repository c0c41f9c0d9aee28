"""Baselines the trained components are compared against."""
