"""highway-env's ``KinematicObservation.observe`` without pandas: the same array, bit for bit.

The stock method builds a DataFrame per call and normalises it column by column through pandas;
at 5 policy steps per second that is over half of an episode's time. :func:`kinematics` follows it
line by line on numpy arrays: the same ``to_dict`` rows, the same ``close_objects_to`` call, the same
lazily set ``features_range``, the same ``lmap`` formula (``y0 + (v - x0) * (y1 - y0) / (x1 - x0)``,
float64, in that order) and ``clip``, zero rows, the optional shuffle, then float32 (tested equal to
the stock array). :func:`observe` uses it only for exactly ``KinematicObservation``; anything else keeps its
own ``observe``. No highway-env import: the classes come with the env.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def _is_kinematics(obs_type: Any) -> bool:
    cls = type(obs_type)
    return cls.__module__ == "highway_env.envs.common.observation" and cls.__qualname__ == "KinematicObservation"


def _default_ranges(obs: Any) -> dict[str, list[float]]:
    """The ``features_range`` stock ``normalize_obs`` sets on first use (its own constants)."""
    stock = sys.modules[type(obs).__module__]  # the constants exactly as the stock method names them
    max_speed, width = stock.Vehicle.MAX_SPEED, stock.AbstractLane.DEFAULT_WIDTH
    sides = len(obs.env.road.network.all_side_lanes(obs.observer_vehicle.lane_index))
    return {
        "x": [-5.0 * max_speed, 5.0 * max_speed],
        "y": [-width * sides, width * sides],
        "vx": [-2 * max_speed, 2 * max_speed],
        "vy": [-2 * max_speed, 2 * max_speed],
    }


def kinematics(obs: Any) -> np.ndarray:
    """``obs.observe()`` of a ``KinematicObservation``, computed without pandas."""
    env = obs.env
    shape = (obs.vehicles_count, len(obs.features))
    if not env.road:
        return np.zeros(shape)
    ego = obs.observer_vehicle
    rows = [ego.to_dict()]
    close = env.road.close_objects_to(
        ego, env.PERCEPTION_DISTANCE, count=obs.vehicles_count - 1, see_behind=obs.see_behind,
        sort=obs.order == "sorted", vehicles_only=not obs.include_obstacles,
    )
    if close:
        origin = ego if not obs.absolute else None
        rows += [v.to_dict(origin, observe_intentions=obs.observe_intentions) for v in close[-obs.vehicles_count + 1:]]
    table = np.array([[row[f] for f in obs.features] for row in rows], dtype=np.float64)
    if obs.normalize:
        if not obs.features_range:
            obs.features_range = _default_ranges(obs)
        for feature, (x0, x1) in obs.features_range.items():
            if feature in obs.features:
                j = obs.features.index(feature)
                column = -1 + (table[:, j] - x0) * (1 - -1) / (x1 - x0)  # utils.lmap(v, [x0, x1], [-1, 1])
                table[:, j] = np.clip(column, -1, 1) if obs.clip else column
    if table.shape[0] < obs.vehicles_count:
        table = np.vstack([table, np.zeros((obs.vehicles_count - table.shape[0], len(obs.features)))])
    if obs.order == "shuffled":
        env.np_random.shuffle(table[1:])
    return table.astype(obs.space().dtype)


def observe(obs_type: Any) -> Any:
    """:func:`kinematics` for exactly a ``KinematicObservation``, else the type's own ``observe``."""
    if _is_kinematics(obs_type) and len(set(obs_type.features)) == len(obs_type.features):
        return kinematics(obs_type)
    return obs_type.observe()
