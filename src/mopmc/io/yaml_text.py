"""YAML files of mopmc (parameter files, design specs, runtime and training configs), read one way:
a key given twice in one mapping is an error instead of the last one silently winning, and numbers
with an exponent (``1e-3``) are numbers, as in JSON and YAML 1.2 (PyYAML reads YAML 1.1, where
they are text)."""

from __future__ import annotations

import re
from typing import Any

from mopmc.errors import ConfigError

#: numbers with an exponent that YAML 1.1 (PyYAML) reads as text: ``1e-3``, ``2E5``, ``1.5e3`` (it needs
#: a dot and a signed exponent, ``1.5e+3``); JSON and YAML 1.2 read them as numbers, and so do we
_EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML (JSON too); a syntax error or a key given twice in one mapping is a :class:`ConfigError`.
    Numbers with an exponent are numbers (``p: 1e-3``), as in JSON and YAML 1.2."""
    import yaml

    class _Unique(yaml.SafeLoader):
        pass

    _Unique.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+0123456789."))

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            k = loader.construct_object(key_node, deep=deep)
            try:
                dup = k in seen
                seen.add(k)
            except TypeError:  # an unhashable key: the mapping constructor reports it
                continue
            if dup:
                raise ConfigError(f"{source}: line {key_node.start_mark.line + 1}: key {k!r} is given twice")
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    _Unique.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=_Unique)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {' '.join(str(e).split())}") from None
