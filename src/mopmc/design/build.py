"""One call from a spec to files: convert, write the model (.prism or .umb) and the binding.

>>> r = build_design("paper-switch", "/tmp/sw2.prism")  # doctest: +SKIP
>>> r.model.n_states  # doctest: +SKIP
92017
"""

from __future__ import annotations

import json
import os
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


def check_output(path: str | Path, option: str, *, inputs=(), outputs=()) -> Path:
    """``path`` as an output file, checked before the work: not empty, not a folder (nor named as
    one, with a trailing slash), in a folder that exists and is writable, and not the same file as
    one of the command's ``inputs`` or other ``outputs``: pairs ``(name, path)``, e.g. ``("the
    model", "m.nm")`` or ``("--plot", "front.png")`` (a ``None`` path is skipped)."""
    text = str(path)
    if not text.strip():
        raise ConfigError(f"{option}: the path is empty; give a file name")
    path = Path(path)
    try:
        if path.is_dir():
            raise ConfigError(f"{option} {path}: is a directory; give a file name")
        if text.endswith(("/", os.sep)):
            raise ConfigError(f"{option} {text}: ends with a slash, as a folder does; give a file name")
        parent = path.parent
        if not parent.is_dir():
            what = "is not a directory" if parent.exists() else "does not exist"
            raise ConfigError(f"{option} {path}: the folder {parent} {what}")
    except OSError as e:  # e.g. a name too long for the file system
        raise ConfigError(f"{option} {path}: not a usable file name ({e.strerror})") from None
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{option} {path}: cannot write in the folder {parent}")
    for output, pairs in ((False, inputs), (True, outputs)):
        for name, other in pairs:
            if other is not None and _same_file(path, Path(other), output):
                raise ConfigError(f"{option} {path} is the same file as {name} {other}: it would overwrite it; "
                                  "give another file name")
    return path


def _same_file(path: Path, other: Path, output: bool) -> bool:
    """Whether ``path`` and ``other`` name one file: an existing one (links included), or, for an
    ``output`` (not written yet), the same resolved name. An input that does not exist (e.g. a
    built-in ``paper-switch``) is no file."""
    try:
        if path.exists() and other.exists():
            return os.path.samefile(path, other)
        return output and path.resolve() == other.resolve()
    except (OSError, RuntimeError):  # a symlink loop, an unreadable folder: not known to be the same
        return False


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
    inputs = (("the spec", spec), ("--params", params))
    if out is not None:  # (a folder first: its empty suffix is no format to complain of)
        out = check_output(out, "--out", inputs=inputs)
    if out is not None and out.suffix.lower() not in FORMATS:
        raise ConfigError(f"{out}: unknown model format {out.suffix!r}; use .prism or .umb")
    if binding_path is not None:
        check_output(binding_path, "--binding", inputs=inputs, outputs=(("--out", out),))
    design = load_design(spec, params)
    if design.parameters is None:
        for option, value in (("--n", n), ("--binding", binding_path)):
            if value is not None:
                raise ConfigError(f"{option} applies to switch specs only; {spec} is a network of automata")
    if n is not None:
        design = switch_design(design.parameters.with_n(n))
    bpath = None
    if design.binding is not None and out is not None:
        bpath = Path(binding_path) if binding_path is not None else out.with_name(out.name + ".binding.json")
        if binding_path is None:  # the default beside the model: not an input either
            check_output(bpath, "the default --binding", inputs=inputs)
    conv = convert_design(design)
    if out is not None:
        write_model(conv, out)
    if bpath is not None:
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
