"""Draw a 2- or 3-objective Pareto front: the under-approximation (what the vertices found
achieve, with everything they dominate) and the over-approximation (the supporting halfspaces).

Axes are in original units and property order; for an objective to minimise the achievable region
extends upwards (larger values are worse). matplotlib is imported here only, and lazily.

>>> plot_pareto(result, "front.png")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mopmc.errors import DependencyError, PropertyError


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise DependencyError('--plot needs matplotlib: pip install "mopmc[plot]"') from None
    return plt


def check_plottable(kind: str, m: int, where: str) -> None:
    """Raise :class:`PropertyError` unless a Pareto query with 2 or 3 objectives."""
    if kind != "pareto":
        raise PropertyError(f"--plot: {where} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} query; --plot draws Pareto queries (2 or 3 objectives with =?)")
    if m not in (2, 3):
        raise PropertyError(f"--plot: {where} has {m} objectives; --plot draws 2 or 3")


def regions(points, halfspaces, sign) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Corners (original units) of the under- and over-approximation, cut at a common floor (one
    unit beyond the worst vertex in every objective), and that floor (maximisation space)."""
    from scipy.spatial import ConvexHull, HalfspaceIntersection

    sign = np.asarray(sign, float)
    Y = np.asarray(points, float).reshape(-1, len(sign)) * sign
    m = Y.shape[1]
    span = np.maximum(Y.max(axis=0) - Y.min(axis=0), 1e-9)
    floor = Y.min(axis=0) - 0.25 * span
    # inner: hull of the vertices and their projections onto the floor (downward closure, cut)
    pts = [Y]
    for mask in range(1, 2 ** m):
        low = Y.copy()
        for j in range(m):
            if mask >> j & 1:
                low[:, j] = floor[j]
        pts.append(low)
    P = np.unique(np.vstack(pts), axis=0)
    try:
        inner = P[ConvexHull(P).vertices]
    except Exception:  # degenerate (e.g. a single vertex): the box corners are the region
        inner = P
    W = np.array([np.asarray(h["normal"], float) * sign for h in halfspaces]).reshape(-1, m)
    b = np.array([float(h["offset"]) for h in halfspaces])
    hs = np.vstack([np.hstack([W, -b[:, None]]), np.hstack([-np.eye(m), floor[:, None]])])
    interior = (Y.mean(axis=0) + floor) / 2
    outer = HalfspaceIntersection(hs, interior, qhull_options="QJ").intersections
    return inner * sign, outer * sign, floor * sign


def plot_pareto(result, path: str | Path, title: str | None = None) -> Path:
    """Write a PNG of ``result`` (a Pareto :class:`~mopmc.queries.multi.MultiResult`) to ``path``."""
    objectives = result.objectives
    check_plottable(result.kind, len(objectives), "the property")
    sign = [1.0 if o.sense == "max" else -1.0 for o in objectives]
    inner, outer, _ = regions(result.points, result.halfspaces, sign)
    plt = _pyplot()
    names = [f"{o.name} ({o.sense})" for o in objectives]
    pts = np.asarray(result.points, float)
    if len(objectives) == 2:
        fig, ax = plt.subplots(figsize=(6, 5))
        for corners, style in ((outer, dict(color="tab:red", alpha=0.15, label="over-approximation")),
                               (inner, dict(color="tab:blue", alpha=0.35, label="under-approximation"))):
            c = corners - corners.mean(axis=0)
            order = np.argsort(np.arctan2(c[:, 1], c[:, 0]))
            ax.fill(corners[order, 0], corners[order, 1], **style)
        ax.plot(pts[:, 0], pts[:, 1], "o", color="black", ms=4, label="vertices")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    else:
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection
        from scipy.spatial import ConvexHull

        fig = plt.figure(figsize=(7, 6))
        ax = fig.add_subplot(projection="3d")
        for corners, color, alpha, label in ((outer, "tab:red", 0.12, "over-approximation"),
                                             (inner, "tab:blue", 0.35, "under-approximation")):
            hull = ConvexHull(corners, qhull_options="QJ")
            ax.add_collection3d(Poly3DCollection([corners[s] for s in hull.simplices], facecolor=color,
                                                 alpha=alpha, edgecolor="none", label=label))
        ax.scatter(pts[:, 0], pts[:, 1], pts[:, 2], color="black", s=10, label="vertices")
        lo, hi = np.minimum(inner.min(axis=0), outer.min(axis=0)), np.maximum(inner.max(axis=0), outer.max(axis=0))
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_zlim(lo[2], hi[2])
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
        ax.set_zlabel(names[2])
    ax.set_title(title or f"Pareto front: {len(pts)} vertices")
    ax.legend(loc="best", fontsize=8)
    return _save(plt, fig, path)


def _save(plt, fig, path: str | Path) -> Path:
    """Write and close ``fig``; an OS error (permissions, a read-only folder, a full disk) is one line."""
    path = Path(path)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as e:
        raise PropertyError(f"--plot {path}: cannot write the picture ({e.strerror or e})") from None
    finally:
        plt.close(fig)
    return path


PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def check_plot_path(path: str | Path, option: str = "--plot", *, inputs=(), outputs=()) -> Path:
    """A picture file name matplotlib writes (by its suffix), checked before the work as any output
    (:func:`mopmc.design.build.check_output`: a writable folder, not one of the command's ``inputs``
    or other ``outputs``); an existing file must be writable (matplotlib writes it in place)."""
    from mopmc.design.build import check_output

    path = check_output(path, option, inputs=inputs, outputs=outputs)
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise PropertyError(f"{option} {path}: give a {', '.join(PLOT_SUFFIXES)} file")
    if path.exists() and not os.access(path, os.W_OK):
        raise PropertyError(f"{option} {path}: the file cannot be written")
    return path


def plot_convex(result, path: str | Path, title: str | None = None) -> Path:
    """Convergence of a convex query (a :class:`~mopmc.queries.convex.ConvexResult`): its certified
    bounds and gap per iteration; with two objectives also the objective space (the vertices found,
    their hull, the box, the answer and the last lower point)."""
    plt = _pyplot()
    h = result.history
    two = len(result.objectives) == 2 and len(result.vertices)
    fig, axes = plt.subplots(1, 3 if two else 2, figsize=(13 if two else 9, 3.8), squeeze=False)
    ax = axes[0][0]
    it = [r["iteration"] for r in h]
    up = np.array([r["upper"] for r in h], float)
    low = np.array([r["lower"] for r in h], float)
    low = np.minimum(low, up)  # the certified lower bound (a lower program a hair above the loss: the loss)
    ax.plot(it, np.where(np.isfinite(up), up, np.nan), "o-", ms=3, color="tab:blue", label="upper bound (loss at the answer)")
    ax.plot(it, low, "s-", ms=3, color="tab:orange", label="lower bound")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"loss ({result.loss_name})")
    for a in axes[0][:2]:
        a.set_xlim(-0.5, max(it, default=0) + 0.5)
        a.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize=7)
    ax = axes[0][1]
    gap = up - low
    tol = np.maximum(result.eps_abs, result.eps_rel * np.abs(up))
    shown = np.isfinite(gap) & (gap > 0)
    if shown.any():
        ax.semilogy(np.array(it)[shown], gap[shown], "o-", ms=3, color="tab:green", label="gap")
        ax.semilogy(np.array(it)[shown], tol[shown], "--", color="gray", label="tolerance")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "gap 0 from the start", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("iteration")
    ax.set_ylabel("upper - lower")
    if two:
        _objective_space(axes[0][2], result)
    fig.suptitle(title or f"convex query: {result.status}, {result.iterations} iterations", fontsize=10)
    fig.tight_layout()
    return _save(plt, fig, path)


def _objective_space(ax, result) -> None:
    from scipy.spatial import ConvexHull

    V = np.asarray(result.vertices, float)
    ax.plot(V[:, 0], V[:, 1], "o", color="black", ms=3, label="vertices found")
    hull = None
    if len(V) >= 3:
        try:
            hull = V[ConvexHull(V).vertices]
        except Exception:  # collinear: drawn as a segment below
            hull = None
    if hull is not None:
        ax.fill(hull[:, 0], hull[:, 1], color="tab:blue", alpha=0.2, label="their hull")
    elif len(V) >= 2:
        ends = V[np.lexsort((V[:, 1], V[:, 0]))][[0, -1]]
        ax.plot(ends[:, 0], ends[:, 1], "-", color="tab:blue", alpha=0.5, lw=3, label="their hull")
    lo, up = result.box
    if lo is not None and up is not None:
        span = np.maximum(V.max(axis=0) - V.min(axis=0), 1e-9)
        a = np.where(np.isfinite(lo), lo, V.min(axis=0) - span)
        b = np.where(np.isfinite(up), up, V.max(axis=0) + span)
        if np.isfinite(lo).any() or np.isfinite(up).any():
            ax.plot([a[0], b[0], b[0], a[0], a[0]], [a[1], a[1], b[1], b[1], a[1]], "--", color="tab:red", lw=1, label="box")
    if result.lower_point is not None:
        ax.plot(*result.lower_point, "x", color="tab:orange", ms=8, label="lower point")
    if result.point is not None:
        ax.plot(*result.point, "*", color="tab:green", ms=12, label="answer")
    names = [o.text for o in result.objectives]
    ax.set_xlabel(names[0], fontsize=8)
    ax.set_ylabel(names[1], fontsize=8)
    seen = [V] + [np.asarray(q, float).reshape(1, 2) for q in (result.point, result.lower_point) if q is not None]
    for bound in (lo, up):
        if bound is not None:
            b = np.asarray(bound, float)
            seen.append(np.where(np.isfinite(b), b, V[0]).reshape(1, 2))
    P = np.vstack(seen)
    pad = 0.1 * np.maximum(P.max(axis=0) - P.min(axis=0), 1e-9)
    ax.set_xlim(P[:, 0].min() - pad[0], P[:, 0].max() + pad[0])
    ax.set_ylim(P[:, 1].min() - pad[1], P[:, 1].max() + pad[1])
    ax.legend(fontsize=7)
