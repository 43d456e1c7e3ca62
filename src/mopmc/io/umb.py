"""UMB archives (the binary model format Storm 2 reads and writes), read and written with numpy.

A UMB file is a tar archive: ``index.json`` describes the model; flat little-endian arrays hold the
CSR structure (``state-to-choices``, ``choice-to-branches``, ``branch-to-target``,
``branch-to-probability``), bit-packed Boolean annotations (labels), reward annotations per state,
choice or branch, choice actions (an index per choice plus a string table) and bit-packed state
valuations.
"""

from __future__ import annotations

import io
import json
import lzma
import mmap
import tarfile
import time
import zlib
from pathlib import Path

import numpy as np

from mopmc.errors import ModelFileError, UnsupportedModelError
from mopmc.model.sparse_mdp import SparseMDP, StateValuations


#: what a truncated or corrupt (compressed) tar archive raises while it is read
_CORRUPT = (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError)


class _Archive:
    """A UMB tar archive; plain (uncompressed) archives are read straight into numpy arrays."""

    def __init__(self, path: Path, *, mapped: bool = False):
        self.path = path
        self.mapping = None
        try:
            self.tar = tarfile.open(path, "r:")
            self.plain = True
        except tarfile.ReadError:
            self.plain = False
            try:
                self.tar = tarfile.open(path, "r:*")
            except (*_CORRUPT, OSError) as exc:
                raise ModelFileError(f"{path}: not a UMB archive ({exc})") from None
        except OSError as exc:
            raise ModelFileError(f"{path}: not a UMB archive ({exc})") from None
        try:
            self.members = {m.name.lstrip("./"): m for m in self.tar.getmembers() if m.isfile()}
        except _CORRUPT as exc:
            raise ModelFileError(f"{path}: the UMB archive is truncated or corrupt ({exc or type(exc).__name__})") from None
        if mapped and self.plain:
            with open(path, "rb") as f:
                self.mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def has(self, name: str) -> bool:
        return name in self.members

    def _member(self, name: str) -> tarfile.TarInfo:
        try:
            return self.members[name]
        except KeyError:
            raise ModelFileError(f"{self.path}: UMB archive lacks {name}") from None

    def read(self, name: str) -> bytes:
        member = self._member(name)
        try:
            data = self.tar.extractfile(member).read()
        except _CORRUPT as exc:
            raise ModelFileError(f"{self.path}: the UMB archive is truncated or corrupt at {name} ({exc or type(exc).__name__})") from None
        if len(data) != member.size:
            raise ModelFileError(f"{self.path}: the UMB archive is truncated: {name} has {len(data)} of its {member.size} bytes")
        return data

    def array(self, name: str, dtype) -> np.ndarray:
        """A little-endian array; from a plain archive one read into the array (no bytes copy)."""
        dtype = np.dtype(dtype).newbyteorder("<")
        member = self._member(name)
        if member.size % dtype.itemsize:
            raise ModelFileError(f"{self.path}: {name} has {member.size} bytes, not a multiple of {dtype.itemsize}")
        if self.mapping is not None and not member.sparse:
            return np.frombuffer(self.mapping, dtype=dtype, count=member.size // dtype.itemsize, offset=member.offset_data)
        if self.plain and not member.sparse:
            count = member.size // dtype.itemsize
            arr = np.fromfile(self.path, dtype=dtype, count=count, offset=member.offset_data)
            if len(arr) != count:
                raise ModelFileError(f"{self.path}: the UMB archive is truncated: {name} has {len(arr)} of its {count} entries")
            return arr
        return np.frombuffer(self.read(name), dtype=dtype)

    def index_array(self, name: str) -> np.ndarray:
        """An array of uint64 indices as int64, without a copy (larger values turn negative: the validator rejects them)."""
        return self.array(name, np.int64)

    def close(self) -> None:
        self.tar.close()


def _bits(raw: np.ndarray | bytes, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(bytes(raw), dtype=np.uint8), bitorder="little")[:n].astype(bool)


def _state_bits(ar: "_Archive", name: str, n: int) -> np.ndarray:
    """A bit-packed Boolean per state, or an error naming the file when it is too short."""
    raw = ar.read(name)
    if len(raw) * 8 < n:
        raise ModelFileError(f"{ar.path}: {name} has {len(raw)} bytes, too few for {n} states (one bit per state)")
    return _bits(raw, n)


def _object(value, where: str, key: str) -> dict:
    """``value`` (index.json's entry ``key``), which must be a JSON object."""
    if not isinstance(value, dict):
        raise ModelFileError(f"{where}: index.json: {key} must be a JSON object, not {json.dumps(value)[:40]}")
    return value


def _count(ts: dict, key: str, where: str, default: int | None = None) -> int:
    """A non-negative integer entry of index.json's transition-system."""
    value = ts.get(key, default)
    if key not in ts and value is None:
        raise ModelFileError(f"{where}: index.json has no transition-system sizes ({key} is missing)")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelFileError(f"{where}: index.json: transition-system {key} must be a non-negative integer, not {json.dumps(value)[:40]}")
    return value


def _applies_to(spec: dict, where: str, what: str) -> list:
    applies = spec.get("applies-to", [])
    if not isinstance(applies, list) or not all(isinstance(a, str) for a in applies):
        raise ModelFileError(f"{where}: index.json: {what} applies-to must be a list of strings, not {json.dumps(applies)[:40]}")
    return applies


def _counts(pointers: np.ndarray, name: str, what: str, where: str) -> np.ndarray:
    """How many entries each CSR row owns, or an error where the pointers go back (a malformed file;
    numpy's repeat would fail on it)."""
    counts = np.diff(pointers)
    if counts.size and counts.min() < 0:
        k = int(np.flatnonzero(counts < 0)[0])
        raise ModelFileError(f"{where}: {name} decreases at {what} {k} ({int(pointers[k])} then {int(pointers[k + 1])})")
    return counts


def _non_decreasing(pointers: np.ndarray, name: str, what: str, where: str) -> np.ndarray:
    """``pointers`` (a CSR file), or an error naming the file where an entry goes back: a row would
    own a negative number of entries (the validator would call it a deadlock, or a choice without
    transitions). One comparison pass, no arithmetic: cheap beside the read."""
    if len(pointers) > 1 and np.any(pointers[1:] < pointers[:-1]):
        k = int(np.flatnonzero(pointers[1:] < pointers[:-1])[0])
        a, b = (int(pointers[i]) % (1 << 64) for i in (k, k + 1))  # (the file's uint64 values; the reader views them as int64)
        if b >= a:
            raise ModelFileError(f"{where}: {name}: entry {k + 1} ({b}) is larger than any index (2^63 - 1): a corrupt CSR file")
        raise ModelFileError(f"{where}: {name}: the pointers are not non-decreasing: entry {k + 1} ({b}) is below entry "
                             f"{k} ({a}), so {what} {k} would own a negative number of entries (a corrupt CSR file)")
    return pointers


def _length(arr: np.ndarray, expected: int, name: str, what: str, where: str) -> np.ndarray:
    if len(arr) != expected:
        raise ModelFileError(f"{where}: {name} has {len(arr)} entries for {expected} {what}")
    return arr


def _packbits(mask: np.ndarray) -> bytes:
    n = len(mask)
    words = -(-n // 64) * 8
    out = np.zeros(words, dtype=np.uint8)
    packed = np.packbits(mask.astype(np.uint8), bitorder="little")
    out[: len(packed)] = packed
    return out.tobytes()


def _value_dtype(spec: dict, where: str):
    if not isinstance(spec, dict):
        raise ModelFileError(f"{where}: index.json: a value type must be a JSON object such as "
                             f'{{"type": "double", "size": 64}}, not {json.dumps(spec)[:40]}')
    kind, size = spec.get("type"), spec.get("size", 64)
    if kind == "double" and size == 64:
        return np.float64
    raise UnsupportedModelError(f"{where}: unsupported UMB value type {kind}/{size} (mopmc reads 64-bit doubles)")


def read_umb(path: Path, *, valuations: bool = False, source: str | None = None, mapped: bool = False) -> SparseMDP:
    """Read a UMB archive into a :class:`SparseMDP` (no validation; see :func:`mopmc.model.validate`).

    ``mapped``: map the file's arrays into memory instead of copying them; only for private files
    that nobody changes afterwards (the loader's temporary export, which it deletes at once).
    """
    ar = _Archive(path, mapped=mapped)
    where = source or str(path)
    try:
        index = _object(json.loads(ar.read("index.json")), str(path), "the top level")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"{path}: index.json is not JSON ({exc})") from None
    _format_version(index, str(path))
    ts = _object(index.get("transition-system", {}), str(path), "transition-system")
    n, c = _count(ts, "#states", str(path)), _count(ts, "#choices", str(path))
    if ts.get("time", "discrete") != "discrete" or _count(ts, "#players", str(path), 1) > 1:
        raise UnsupportedModelError(f"{path}: only discrete-time single-player models (MDPs, DTMCs) are supported")
    if "branch-probability-type" in ts:
        _value_dtype(ts["branch-probability-type"], str(path))
    indptr = _length(ar.index_array("choice-to-branches.bin"), c + 1, "choice-to-branches.bin", f"choices (#choices {c}, plus one)", where)
    _non_decreasing(indptr, "choice-to-branches.bin", "choice", where)
    if ar.has("state-to-choices.bin"):
        row_groups = _length(ar.index_array("state-to-choices.bin"), n + 1, "state-to-choices.bin", f"states (#states {n}, plus one)", where)
        _non_decreasing(row_groups, "state-to-choices.bin", "state", where)
    elif n == c:  # one choice per state (a DTMC)
        row_groups = np.arange(n + 1, dtype=np.int64)
    else:
        raise ModelFileError(f"{where}: UMB archive lacks state-to-choices.bin (needed where #states {n} != #choices {c})")
    targets = ar.index_array("branch-to-target.bin")
    probs = _length(ar.array("branch-to-probability.bin", np.float64), len(targets), "branch-to-probability.bin",
                    f"branches (branch-to-target.bin has {len(targets)})", where)
    if "#branches" in ts:
        _length(targets, _count(ts, "#branches", str(path)), "branch-to-target.bin", "branches (#branches)", where)
    init_mask = _state_bits(ar, "state-is-initial.bin", n)
    initial_states = np.flatnonzero(init_mask)
    if "#initial-states" in ts and _count(ts, "#initial-states", str(path)) != len(initial_states):
        raise ModelFileError(f"{where}: index.json says #initial-states {ts['#initial-states']}, but state-is-initial.bin "
                             f"marks {len(initial_states)} state(s) initial")
    if len(initial_states) != 1:
        listed = ", ".join(map(str, initial_states[:10])) + (" ..." if len(initial_states) > 10 else "")
        raise UnsupportedModelError(
            f"{where}: the model has {len(initial_states)} initial states ({listed}); mopmc needs exactly one "
            "(add an init block or a fresh initial state)"
        )
    annotations = _object(index.get("annotations", {}), where, "annotations")
    labels = {}
    for key, spec in _object(annotations.get("aps", {}), where, "annotations.aps").items():
        spec = _object(spec, where, f"annotations.aps.{key}")
        if "states" in _applies_to(spec, where, f"annotations.aps.{key}"):
            labels[spec.get("alias", key)] = _state_bits(ar, f"annotations/aps/{key}/states/values.bin", n)
    labels.setdefault("init", init_mask)
    rewards = {}
    choice_of_branch = None
    for key, spec in _object(annotations.get("rewards", {}), where, "annotations.rewards").items():
        spec = _object(spec, where, f"annotations.rewards.{key}")
        name = spec.get("alias", key)
        if name in rewards:
            raise ModelFileError(f"{where}: two reward annotations are named {name!r} (alias of {key}); reward names must be unique")
        parts = []
        applies = _applies_to(spec, where, f"annotations.rewards.{key}")
        unknown = sorted(set(applies) - {"states", "choices", "branches"})
        if unknown:
            raise UnsupportedModelError(f"{where}: reward {name!r} applies to {', '.join(unknown)}; mopmc reads rewards on states, choices and branches")
        dtype = _value_dtype(spec.get("type", {"type": "double", "size": 64}), f"{where}: reward {key}")
        base = f"annotations/rewards/{key}"
        if "states" in applies:
            per_state = _length(ar.array(f"{base}/states/values.bin", dtype), n, f"{base}/states/values.bin", "states", where)
            parts.append(np.repeat(per_state, _counts(row_groups, "state-to-choices.bin", "state", where)))
        if "choices" in applies:
            parts.append(ar.array(f"{base}/choices/values.bin", dtype))
        if "branches" in applies:
            branch = _length(ar.array(f"{base}/branches/values.bin", dtype), len(probs), f"{base}/branches/values.bin", "branches", where)
            if choice_of_branch is None:
                choice_of_branch = np.repeat(np.arange(c), _counts(indptr, "choice-to-branches.bin", "choice", where))
            parts.append(np.bincount(choice_of_branch, weights=branch * probs, minlength=c))
        if any(len(part) != c for part in parts):
            raise ModelFileError(f"{where}: reward {name!r} has {[len(q) for q in parts]} entries for {c} choices")
        vec = parts[0].astype(np.float64, copy=False) if len(parts) == 1 else np.sum(parts, axis=0) if parts else np.zeros(c)
        rewards[name] = vec
    action_names: tuple[str, ...] = ()
    actions = None
    if ar.has("actions/choices/values.bin"):
        actions, action_names = _read_actions(ar, c, where)
    vals = _read_valuations(ar, index, n, where) if valuations else _check_valuations_size(ar, index, n, where)
    ar.close()
    # The arrays are ours alone: seal them, so that SparseMDP adopts them without a copy.
    for arr in (row_groups, indptr, targets, probs, actions, *rewards.values(), *labels.values()):
        if arr is not None and arr.base is None:
            arr.setflags(write=False)
    return SparseMDP(
        row_groups=row_groups,
        indptr=indptr,
        targets=targets,
        probs=probs,
        initial=int(initial_states[0]),
        rewards=rewards,
        labels=labels,
        action_names=action_names,
        actions=actions,
        valuations=vals,
        source=where,
    )


def _read_actions(ar: _Archive, c: int, where: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each choice's action index and the action names, checked against each other."""
    actions = _length(ar.array("actions/choices/values.bin", np.uint32).astype(np.int64), c,
                      "actions/choices/values.bin", "choices", where)
    offsets = ar.index_array("actions/choices/string-mapping.bin")
    blob = ar.read("actions/choices/strings.bin")
    if len(offsets) == 0 or offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != len(blob):
        raise ModelFileError(f"{where}: actions/choices/string-mapping.bin does not cut strings.bin's {len(blob)} bytes "
                             "into strings (offsets from 0, non-decreasing, ending at its length)")
    try:
        names = tuple(blob[offsets[i] : offsets[i + 1]].decode() for i in range(len(offsets) - 1))
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{where}: actions/choices/strings.bin is not UTF-8 ({exc})") from None
    bad = np.flatnonzero(actions >= len(names))
    if bad.size:
        raise ModelFileError(f"{where}: choice {int(bad[0])} has action {int(actions[bad[0]])}, but there are "
                             f"{len(names)} action names (actions/choices/values.bin)")
    return actions, names


#: the inner file of the state valuations
VALUATIONS = "valuations/states/valuations.bin"
#: the UMB format version (index.json's format-version) this reader understands; format-revision
#: (additions that break nothing) may be anything
FORMAT_VERSION = 1

_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)
#: the size in bits of a UMB type whose ``size`` is left out (the UMB specification's defaults)
_DEFAULT_SIZE = {"bool": 1, "int": 64, "uint": 64, "int-interval": 128, "uint-interval": 128, "double": 64,
                 "double-interval": 128, "rational": 128, "rational-interval": 256, "string": 64}
#: the valuation types mopmc decodes; variables of other types (a JANI model's transient ``double``
#: reward variables, as Storm exports them) are skipped, as padding is
_DISCRETE = ("bool", "int", "uint")


def _size(variable: dict) -> int:
    """The bits a valuation entry takes: padding, or its type's size (by default the type's default)."""
    if "padding" in variable:
        return variable["padding"]
    kind = variable["type"]["type"]
    return variable["type"]["size"] if "size" in variable["type"] else _DEFAULT_SIZE[kind]


def _format_version(index: dict, where: str) -> None:
    """Refuse an index.json of another major format version (or none): its layout may differ."""
    version = index.get("format-version")
    if "format-version" not in index:
        raise ModelFileError(f"{where}: index.json has no format-version (mopmc reads UMB format version {FORMAT_VERSION})")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ModelFileError(f"{where}: index.json: format-version must be an integer, not {json.dumps(version)[:40]}")
    if version != FORMAT_VERSION:
        raise UnsupportedModelError(f"{where}: UMB format version {version} is not supported (mopmc reads version "
                                    f"{FORMAT_VERSION}); export the model again with a tool that writes version {FORMAT_VERSION}")


def _valuation_layout(ar: _Archive, index: dict, where: str) -> tuple[list, int] | None:
    """index.json's state valuation variables and the bytes per state, or ``None`` without valuations."""
    spec = index.get("valuations", {}).get("states")
    if not spec or not ar.has(VALUATIONS):
        return None
    classes = spec.get("classes", [])
    if len(classes) != 1:
        raise UnsupportedModelError(f"{where}: state valuations with {len(classes)} classes are not supported")
    variables = classes[0]["variables"]
    if any(v.get("is-optional") for v in variables):
        raise UnsupportedModelError(f"{where}: state valuations with optional variables (is-optional) are not supported")
    width = sum(_size(v) for v in variables)
    if width % 8:
        raise ModelFileError(f"{where}: index.json: the state valuation's variables and padding take {width} bits, "
                             "not a whole number of bytes (add padding)")
    return variables, width // 8


def _short_valuations(size: int, n: int, nbytes: int, where: str) -> None:
    if size < n * nbytes:
        raise ModelFileError(f"{where}: {VALUATIONS} has {size} bytes, too few for {n} states of {nbytes} bytes each "
                             "(as index.json's variables say)")


def _check_valuations_size(ar: _Archive, index: dict, n: int, where: str) -> None:
    """Where valuations are not decoded: the file still has to hold them (a truncated file is refused
    by every command, not only by those that read valuations). A layout mopmc cannot decode is
    reported only where valuations are read."""
    try:
        layout = _valuation_layout(ar, index, where)
    except UnsupportedModelError:
        return None
    except _MALFORMED as exc:
        raise ModelFileError(f"{where}: index.json: malformed state valuations ({type(exc).__name__}: {exc})") from None
    if layout is not None:
        _short_valuations(ar.members[VALUATIONS].size, n, layout[1], where)
    return None


def _read_valuations(ar: _Archive, index: dict, n: int, where: str) -> StateValuations | None:
    try:
        return _decode_valuations(ar, index, n, where)
    except _MALFORMED as exc:
        # hand-edited or foreign index.json: any shape of it we do not read is the file's defect
        raise ModelFileError(f"{where}: index.json: malformed state valuations ({type(exc).__name__}: {exc})") from None


def _decode_valuations(ar: _Archive, index: dict, n: int, where: str) -> StateValuations | None:
    """The state valuations, checked: each value within its variable's declared ``lower``/``upper``,
    and no two states with the same valuation (mopmc names states by their valuations: scheduler
    files, messages)."""
    layout = _valuation_layout(ar, index, where)
    if layout is None:
        return None
    variables, nbytes = layout
    if nbytes == 0 or not any("padding" not in v and v["type"]["type"] in _DISCRETE for v in variables):
        return None
    raw = ar.array(VALUATIONS, np.uint8)
    _short_valuations(raw.size, n, nbytes, where)
    rows = raw[: n * nbytes].reshape(n, nbytes)
    if nbytes <= 8:  # one little-endian word per state: fields by shifts and masks (no bit matrix)
        padded = np.zeros((n, 8), np.uint8)
        padded[:, :nbytes] = rows
        words = padded.view("<u8").reshape(n)
        del padded

        def field(pos: int, size: int) -> np.ndarray:
            return ((words >> np.uint64(pos)) & np.uint64((1 << size) - 1)).astype(np.int64)
    else:
        bits = np.unpackbits(rows, axis=1, bitorder="little")

        def field(pos: int, size: int) -> np.ndarray:
            return bits[:, pos : pos + size].astype(np.int64) @ (1 << np.arange(size, dtype=np.int64))
    names, kinds, cols, ranges = [], [], [], []
    pos = 0
    for v in variables:
        if "padding" in v or v["type"]["type"] not in _DISCRETE:
            pos += _size(v)
            continue
        size, kind = _size(v), v["type"]["type"]
        value = field(pos, size)
        if kind in ("int",) and v.get("offset") is None:
            value = np.where(value >= 1 << (size - 1), value - (1 << size), value)
        value = value + int(v.get("offset", 0) or 0)
        ranges.append(_within_bounds(value, v, where))
        names.append(v["name"])
        kinds.append("bool" if kind == "bool" else "int")
        cols.append(value)
        pos += size
    _unique_valuations(cols, ranges, names, where)
    values = np.stack(cols, axis=1)
    return StateValuations(tuple(names), tuple(kinds), values)


def _within_bounds(value: np.ndarray, spec: dict, where: str) -> tuple[int, int]:
    """The least and the greatest value of a variable, or an error where they leave its declared
    ``lower``/``upper`` bounds."""
    lo, hi = spec.get("lower"), spec.get("upper")
    least, greatest = (int(value.min()), int(value.max())) if value.size else (0, 0)
    bad = np.zeros(0, np.int64)
    if isinstance(lo, int) and least < lo:
        bad = np.flatnonzero(value < lo)
    elif isinstance(hi, int) and greatest > hi:
        bad = np.flatnonzero(value > hi)
    if bad.size:
        s = int(bad[0])
        raise ModelFileError(f"{where}: {VALUATIONS}: state {s} has {spec['name']} = {int(value[s])}, outside the bounds "
                             f"[{lo}..{hi}] index.json declares ({bad.size} state(s) out of bounds: a corrupt valuations file)")
    return least, greatest


def _unique_valuations(cols: list[np.ndarray], ranges: list[tuple[int, int]], names: list[str], where: str) -> None:
    """Refuse two states with the same valuation. Vectorised: each valuation as one integer (mixed
    radix over the observed ranges), marked in a table of all keys where the valuation space is at
    most 16 times the state count (one scatter), else sorted; the columns are sorted together only
    where the key would not fit 62 bits."""
    n = len(cols[0])
    if n < 2:
        return
    space = 1
    for a, b in ranges:
        space *= b - a + 1
    if space < 1 << 62:
        keys = np.zeros(n, np.int64)
        stride = 1
        for col, (a, b) in zip(reversed(cols), reversed(ranges)):
            keys += (col - a) * stride
            stride *= b - a + 1
        if space <= 16 * n:
            seen = np.zeros(space, bool)
            seen[keys] = True
            if np.count_nonzero(seen) == n:
                return
        else:
            ordered_keys = np.sort(keys)
            if not np.any(ordered_keys[1:] == ordered_keys[:-1]):
                return
        order = np.argsort(keys, kind="stable")  # (a repeat: only to name the states)
        same = keys[order[1:]] == keys[order[:-1]]
    else:
        order = np.lexsort(cols[::-1])
        same = np.ones(n - 1, bool)
        for col in cols:
            ordered = col[order]
            same &= ordered[1:] == ordered[:-1]
        if not same.any():
            return
    k = int(np.flatnonzero(same)[0])
    a, b = sorted((int(order[k]), int(order[k + 1])))
    count = int(same.sum())
    shown = ", ".join(f"{name}={int(col[a])}" for name, col in zip(names, cols))
    raise ModelFileError(f"{where}: {VALUATIONS}: states {a} and {b} have the same valuation ({shown}); "
                         f"{count} state(s) repeat another's valuation. mopmc tells states apart by their valuations "
                         "(scheduler files, messages): a corrupt valuations file, or a model whose valuations leave "
                         "out a variable")


def write_umb(model: SparseMDP, path: str | Path) -> Path:
    """Write a :class:`SparseMDP` as an uncompressed UMB archive that Storm reads.

    Rewards are written per choice; labels as bit-packed state annotations; action labels and state
    valuations when the model has them.

    >>> write_umb(model, "model.umb")  # doctest: +SKIP
    """
    path = Path(path)
    n, c, t = model.n_states, model.n_choices, model.n_transitions
    files: dict[str, bytes] = {}
    u64 = np.dtype("<u8")
    files["state-to-choices.bin"] = model.row_groups.astype(u64).tobytes()
    files["choice-to-branches.bin"] = model.indptr.astype(u64).tobytes()
    files["branch-to-target.bin"] = model.targets.astype(u64).tobytes()
    files["branch-to-probability.bin"] = model.probs.astype("<f8").tobytes()
    init = np.zeros(n, dtype=bool)
    init[model.initial] = True
    files["state-is-initial.bin"] = _packbits(init)
    aps, rewards = {}, {}
    for i, (name, mask) in enumerate(sorted(l for l in model.labels.items() if l[0] != "init")):
        key = f"ap{i}"
        aps[key] = {"alias": name, "applies-to": ["states"], "type": {"size": 1, "type": "bool"}}
        files[f"annotations/aps/{key}/states/values.bin"] = _packbits(mask)
    for i, (name, vec) in enumerate(sorted(model.rewards.items())):
        key = f"r{i}"
        spec = {"alias": name, "applies-to": ["choices"], "type": {"size": 64, "type": "double"}}
        if vec.size:
            spec["lower"], spec["upper"] = float(vec.min()), float(vec.max())
        rewards[key] = spec
        files[f"annotations/rewards/{key}/choices/values.bin"] = vec.astype("<f8").tobytes()
    ts = {
        "#branch-actions": 0,
        "#branches": t,
        "#choice-actions": len(model.action_names),
        "#choices": c,
        "#initial-states": 1,
        "#observations": 0,
        "#players": 1,
        "#states": n,
        "branch-probability-type": {"size": 64, "type": "double"},
        "time": "discrete",
    }
    index: dict = {
        "format-version": 1,
        "format-revision": 0,
        "file-data": {"creation-date": int(time.time()), "tool": "mopmc"},
        "transition-system": ts,
    }
    if aps or rewards:
        index["annotations"] = {}
        if aps:
            index["annotations"]["aps"] = aps
        if rewards:
            index["annotations"]["rewards"] = rewards
    if model.actions is not None and model.action_names:
        files["actions/choices/values.bin"] = model.actions.astype("<u4").tobytes()
        encoded = [a.encode() for a in model.action_names]
        offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(u64)
        files["actions/choices/string-mapping.bin"] = offsets.tobytes()
        files["actions/choices/strings.bin"] = b"".join(encoded)
    if model.valuations is not None and model.valuations.names:
        index["valuations"], files["valuations/states/valuations.bin"] = _encode_valuations(model.valuations)
    files = {"index.json": json.dumps(index, indent=1).encode(), **files}
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(path)
    return path


def _encode_valuations(vals: StateValuations) -> tuple[dict, bytes]:
    n = vals.values.shape[0]
    variables, columns = [], []
    for j, (name, kind) in enumerate(zip(vals.names, vals.kinds)):
        col = vals.values[:, j].astype(np.int64)
        if kind == "bool":
            variables.append({"name": name, "type": {"size": 1, "type": "bool"}})
            columns.append((col, 1))
            continue
        lo, hi = (int(col.min()), int(col.max())) if n else (0, 0)
        size = max(1, int(hi - lo).bit_length())
        variables.append({"lower": lo, "name": name, "offset": lo, "type": {"size": size, "type": "uint"}, "upper": hi})
        columns.append((col - lo, size))
    width = sum(s for _, s in columns)
    pad = (-width) % 8
    if pad:
        variables.append({"padding": pad})
    bits = np.zeros((n, width + pad), dtype=np.uint8)
    pos = 0
    for col, size in columns:
        bits[:, pos : pos + size] = (col[:, None] >> np.arange(size)) & 1
        pos += size
    data = np.packbits(bits, axis=1, bitorder="little").tobytes()
    return {"states": {"classes": [{"variables": variables}], "unique": False}}, data
