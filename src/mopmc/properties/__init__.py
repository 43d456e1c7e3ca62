"""Properties: PRISM/Storm property syntax parsed into typed objectives."""

from mopmc.properties.objectives import Objective, Property
from mopmc.properties.parse import parse_properties, read_property_file

__all__ = ["Objective", "Property", "parse_properties", "read_property_file"]
