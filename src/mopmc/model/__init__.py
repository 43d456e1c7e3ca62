"""The analysis model: an immutable sparse MDP and its validator."""

from mopmc.model.sparse_mdp import SparseMDP, StateValuations
from mopmc.model.validate import validate

__all__ = ["SparseMDP", "StateValuations", "validate"]
