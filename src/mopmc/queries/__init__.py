"""Queries on top of a weighted-optimisation oracle: achievability, numerical, Pareto (and convex)."""
