"""One call from a spec to files: convert, write the model (.prism or .umb) and the binding.

>>> r = build_design("paper-switch", "/tmp/sw2.prism")  # doctest: +SKIP
>>> r.model.n_states  # doctest: +SKIP
92017
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mopmc.design.explore import Conversion, convert
from mopmc.design.spec import Design, load_design, switch_design
from mopmc.errors import ConfigError, DependencyError
from mopmc.model import SparseMDP

FORMATS = (".prism", ".nm", ".umb")


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_design` made."""

    conversion: Conversion
    design: Design
    out: Path | None
    binding_path: Path | None

    @property
    def model(self) -> SparseMDP:
        return self.conversion.model

    def summary(self) -> dict:
        m = self.model
        return {"states": m.n_states, "choices": m.n_choices, "transitions": m.n_transitions,
                "reward_models": sorted(m.rewards), "binding": str(self.binding_path) if self.binding_path else None}


def convert_design(design: Design) -> Conversion:
    """The MDP of a design."""
    return convert(design.network, design.provider)


def check_output(path: str | Path, option: str) -> Path:
    """``path`` as an output file: not a folder, in a folder that exists (checked before the work)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; give a file name")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise ConfigError(f"{option} {path}: the folder {parent} {what}")
    return path


def write_text(path: Path, text: str, option: str) -> Path:
    """Write ``text``; an OS error (permissions, full disk) is a :class:`ConfigError` naming ``option``."""
    try:
        path.write_text(text)
    except OSError as e:
        raise ConfigError(f"{option} {path}: cannot write ({e.strerror})") from None
    return path


def build_design(spec: str | Path, out: str | Path | None = None, *, params: str | Path | None = None,
                 n: int | None = None, binding_path: str | Path | None = None) -> BuildResult:
    """Load ``spec``, convert it, write ``out`` (``.prism``/``.nm`` text or ``.umb``) and the binding JSON."""
    out = Path(out) if out is not None else None
    if out is not None:
        check_output(out, "--out")  # (a folder first: its empty suffix is no format to complain of)
    if out is not None and out.suffix.lower() not in FORMATS:
        raise ConfigError(f"{out}: unknown model format {out.suffix!r}; use .prism or .umb")
    if binding_path is not None:
        check_output(binding_path, "--binding")
    design = load_design(spec, params)
    if design.parameters is None:
        for option, value in (("--n", n), ("--binding", binding_path)):
            if value is not None:
                raise ConfigError(f"{option} applies to switch specs only; {spec} is a network of automata")
    if n is not None:
        design = switch_design(design.parameters.with_n(n))
    conv = convert_design(design)
    if out is not None:
        write_model(conv, out)
    bpath = None
    if design.binding is not None and out is not None:
        bpath = Path(binding_path) if binding_path is not None else out.with_name(out.name + ".binding.json")
        write_text(bpath, json.dumps(design.binding, indent=2) + "\n", "--binding")
    return BuildResult(conv, design, out, bpath)


def write_model(conv: Conversion, out: Path) -> Path:
    """Write PRISM text or a UMB archive (through the io layer's writer)."""
    if out.suffix.lower() in (".prism", ".nm"):
        from mopmc.design.prism_export import to_prism

        return write_text(out, to_prism(conv), "--out")
    try:
        from mopmc.io import umb
    except ImportError:  # pragma: no cover - the io layer is part of the package
        raise DependencyError("UMB export needs mopmc.io.umb; write .prism instead") from None
    writer = getattr(umb, "save_umb", None) or getattr(umb, "write_umb", None)
    if writer is None:
        raise DependencyError("mopmc.io.umb has no UMB writer yet; write .prism instead")
    try:
        writer(conv.model, out)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write ({e.strerror})") from None
    return out
