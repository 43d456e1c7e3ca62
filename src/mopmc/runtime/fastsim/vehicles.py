"""highway-env's per-vehicle behaviour (IDM, MOBIL, steering, kinematic bicycle) in plain float code.

Stock highway-env spends almost all of a 50-vehicle tick in the vehicles' own Python code, and most
of that in numpy calls on scalars (``np.clip``, ``np.dot`` of 2-vectors, ``np.arcsin``, array
allocation for every velocity) and in the per-call lane lookups. This module re-states the same
formulas on Python floats with :mod:`math`, in the same order of operations, over one table of lane
coordinates per tick (positions do not change while the vehicles decide):

- :class:`Tick` holds every vehicle's ``(s, lateral)`` on every lane (straight lanes only: the
  closed form ``(p - start) . direction``), the on-lane flags of the neighbour search and the
  vehicles' speeds and heading directions;
- :func:`idm_act` is ``IDMVehicle.act`` (follow road, MOBIL lane change with its timer and abort
  rule, steering controller, IDM on the current and target lane, clipping);
- :func:`kinematic_step` is ``Vehicle.step`` (with ``IDMVehicle.step``'s timer): action clipping,
  bicycle update, impact, and ``get_closest_lane_index`` as the same arg-min over all lanes.

Anything outside what is re-stated here returns ``False`` from :func:`idm_act` /
:func:`kinematic_step` and the caller runs the stock method for that vehicle: a vehicle at the end
of its lane (``follow_road`` draws from the road's RNG), one with a route, an unknown vehicle class.
The differences to stock are only in the last bits of transcendental functions (``math`` against
numpy's loops), far below the 1e-6 the tests demand. No highway-env import: classes are recognised
by their qualified names.
"""

from __future__ import annotations

import math
from typing import Any

_PI = math.pi
_TWO_PI = 2 * math.pi
_QUARTER_PI = math.pi / 4

_IDM = "highway_env.vehicle.behavior.IDMVehicle"
_STEP_TYPES = {
    "highway_env.vehicle.kinematics.Vehicle",
    "highway_env.vehicle.controller.ControlledVehicle",
    "highway_env.vehicle.controller.MDPVehicle",
    _IDM,
}
_CONTROLLED = "highway_env.vehicle.controller.ControlledVehicle"
_VEHICLE = "highway_env.vehicle.kinematics.Vehicle"
_names: dict[type, tuple[str, bool, bool]] = {}


def _kind(cls: type) -> tuple[str, bool, bool]:
    """(qualified name, is a ControlledVehicle, is a Vehicle), cached per class."""
    k = _names.get(cls)
    if k is None:
        mro = {f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__}
        k = (f"{cls.__module__}.{cls.__qualname__}", _CONTROLLED in mro, _VEHICLE in mro)
        _names[cls] = k
    return k


def is_idm(v: Any) -> bool:
    return _kind(type(v))[0] == _IDM


def steps_fast(v: Any) -> bool:
    return _kind(type(v))[0] in _STEP_TYPES


def _not_zero(x: float, eps: float = 1e-2) -> float:
    if abs(x) > eps:
        return x
    elif x >= 0:
        return eps
    return -eps


def _wrap(x: float) -> float:
    return ((x + _PI) % _TWO_PI) - _PI


def _clip(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)  # np.clip: minimum(maximum(x, lo), hi)


class Lanes:
    """The straight lanes of a road network in graph order, as floats."""

    def __init__(self, network: Any) -> None:
        self.index: list[tuple] = []
        self.lanes: list[Any] = []
        for _from, to_dict in network.graph.items():
            for _to, lanes in to_dict.items():
                for _id, lane in enumerate(lanes):
                    self.index.append((_from, _to, _id))
                    self.lanes.append(lane)
        self.k_of_index = {ix: k for k, ix in enumerate(self.index)}
        self.k_of_lane = {id(lane): k for k, lane in enumerate(self.lanes)}
        self.geometry = [
            (
                float(lane.start[0]), float(lane.start[1]),
                float(lane.direction[0]), float(lane.direction[1]),
                float(lane.direction_lateral[0]), float(lane.direction_lateral[1]),
                float(lane.length), float(lane.width), float(lane.heading), float(lane.VEHICLE_LENGTH),
            )
            for lane in self.lanes
        ]
        self.sides = {ix: network.side_lanes(ix) for ix in self.index}

    def closest(self, x: float, y: float, heading: float) -> int:
        """``RoadNetwork.get_closest_lane_index`` (heading weight 1) as a lane number."""
        best = -1
        best_d = 0.0
        for k, (sx, sy, d0, d1, l0, l1, length, _w, lh, _vl) in enumerate(self.geometry):
            dx, dy = x - sx, y - sy
            s = dx * d0 + dy * d1
            r = dx * l0 + dy * l1
            d = abs(r) + max(s - length, 0) + max(0 - s, 0) + 1.0 * abs(_wrap(heading - lh))
            if best < 0 or d < best_d:
                best, best_d = k, d
        return best


class Tick:
    """Lane coordinates and kinematics of all vehicles at one instant (one ``road.act``)."""

    def __init__(self, lanes: Lanes, vehicles: list[Any]) -> None:
        self.lanes = lanes
        self.vehicles = vehicles
        self.row = {id(v): i for i, v in enumerate(vehicles)}
        n = len(vehicles)
        self.speed = [float(v.speed) for v in vehicles]
        hs = [float(v.heading) for v in vehicles]
        self.cos = [math.cos(h) for h in hs]
        self.sin = [math.sin(h) for h in hs]
        xs = [float(v.position[0]) for v in vehicles]
        ys = [float(v.position[1]) for v in vehicles]
        self.s: list[list[float]] = []
        self.lat: list[list[float]] = []
        self.members: list[list[int]] = []
        for sx, sy, d0, d1, l0, l1, length, width, _h, vl in lanes.geometry:
            s = [(xs[i] - sx) * d0 + (ys[i] - sy) * d1 for i in range(n)]
            lat = [(xs[i] - sx) * l0 + (ys[i] - sy) * l1 for i in range(n)]
            half = width / 2 + 1
            self.members.append([i for i in range(n) if abs(lat[i]) <= half and -vl <= s[i] < length + vl])
            self.s.append(s)
            self.lat.append(lat)
        self.own = [lanes.k_of_lane.get(id(v.lane), -1) for v in vehicles]  # v.lane: lane distances
        self.own_ix = [lanes.k_of_index.get(v.lane_index, -1) for v in vehicles]  # v.lane_index: searches

    def neighbours(self, i: int, k: int) -> tuple[int, int]:
        """``Road.neighbour_vehicles`` of vehicle ``i`` on lane ``k``: (front, rear), -1 for none."""
        sk = self.s[k]
        s = sk[i]
        front = rear = -1
        s_front = s_rear = 0.0
        for j in self.members[k]:
            if j == i:
                continue
            s_v = sk[j]
            if s <= s_v and (front < 0 or s_v <= s_front):
                s_front, front = s_v, j
            if s_v < s and (rear < 0 or s_v > s_rear):
                s_rear, rear = s_v, j
        return front, rear

    def desired_gap(self, caller: Any, e: int, f: int) -> float:
        """``IDMVehicle.desired_gap(ego, front)`` with the caller's parameters."""
        se, sf = self.speed[e], self.speed[f]
        ce, sne = self.cos[e], self.sin[e]
        dv = (se * ce - sf * self.cos[f]) * ce + (se * sne - sf * self.sin[f]) * sne
        ab = -caller.COMFORT_ACC_MAX * caller.COMFORT_ACC_MIN
        return caller.DISTANCE_WANTED + se * caller.TIME_WANTED + se * dv / (2 * math.sqrt(ab))

    def acceleration(self, caller: Any, e: int, f: int) -> float:
        """``IDMVehicle.acceleration(ego_vehicle=e, front_vehicle=f)`` with the caller's parameters."""
        if e < 0:
            return 0
        ego = self.vehicles[e]
        if not _kind(type(ego))[2]:
            return 0
        target = getattr(ego, "target_speed", 0)
        lane = ego.lane
        if lane and lane.speed_limit is not None:
            target = _clip(target, 0, lane.speed_limit)
        try:
            ratio = math.pow(max(self.speed[e], 0) / abs(_not_zero(float(target))), float(caller.DELTA))
        except OverflowError:
            ratio = math.inf
        acc = caller.COMFORT_ACC_MAX * (1 - ratio)
        if f >= 0:
            k = self.own[e]
            if k >= 0:
                d = self.s[k][f] - self.s[k][e]
            else:  # a lane outside the network's table: the stock lane_distance_to
                d = ego.lane_distance_to(self.vehicles[f])
            g = self.desired_gap(caller, e, f) / _not_zero(d)
            acc -= caller.COMFORT_ACC_MAX * (g * g)
        return acc

    def mobil(self, me: Any, i: int, k: int) -> bool:
        """``IDMVehicle.mobil(lane k)`` for a vehicle without a route."""
        new_preceding, new_following = self.neighbours(i, k)
        new_following_a = self.acceleration(me, new_following, new_preceding)
        new_following_pred_a = self.acceleration(me, new_following, i)
        if new_following_pred_a < -me.LANE_CHANGE_MAX_BRAKING_IMPOSED:
            return False
        old_preceding, old_following = self.neighbours(i, self.own_ix[i])
        self_pred_a = self.acceleration(me, i, new_preceding)
        self_a = self.acceleration(me, i, old_preceding)
        old_following_a = self.acceleration(me, old_following, i)
        old_following_pred_a = self.acceleration(me, old_following, old_preceding)
        jerk = self_pred_a - self_a + me.POLITENESS * (
            new_following_pred_a - new_following_a + old_following_pred_a - old_following_a
        )
        return not jerk < me.LANE_CHANGE_MIN_ACC_GAIN


def _change_lane_policy(t: Tick, me: Any, i: int) -> None:
    lanes = t.lanes
    if me.lane_index != me.target_lane_index:
        target = me.target_lane_index
        if me.lane_index[:2] == target[:2]:
            for j, v in enumerate(t.vehicles):
                if (
                    j != i
                    and v.lane_index != target
                    and _kind(type(v))[1]
                    and v.target_lane_index == target
                ):
                    d = t.s[t.own[i]][j] - t.s[t.own[i]][i]  # own[i] >= 0: checked in idm_act
                    d_star = t.desired_gap(me, i, j)
                    if 0 < d < d_star:
                        me.target_lane_index = me.lane_index
                        break
        return
    if not me.LANE_CHANGE_DELAY < me.timer:
        return
    me.timer = 0
    for lane_index in lanes.sides[lanes.index[t.own_ix[i]]]:
        k = lanes.k_of_index[lane_index]
        lane = lanes.lanes[k]
        if lane.forbidden:
            continue
        s, lat = t.s[k][i], t.lat[k][i]
        _sx, _sy, _d0, _d1, _l0, _l1, length, width, _h, vl = lanes.geometry[k]
        if not (abs(lat) <= 2 * width and 0 <= s < length + vl):
            continue
        if abs(t.speed[i]) < 1:
            continue
        if t.mobil(me, i, k):
            me.target_lane_index = lane_index


def idm_act(t: Tick, me: Any) -> bool:
    """Run ``IDMVehicle.act`` for ``me``; ``False`` (nothing changed) where the stock code must."""
    if me.crashed:
        return True
    i = t.row.get(id(me), -1)
    lanes = t.lanes
    kt = lanes.k_of_index.get(me.target_lane_index, -1)
    if i < 0 or kt < 0 or t.own[i] < 0 or t.own_ix[i] < 0 or me.route or me.road is None:
        return False
    _sx, _sy, _d0, _d1, _l0, _l1, length, _w, _h, vl = lanes.geometry[kt]
    if t.s[kt][i] > length - vl / 2:  # follow_road would switch lanes (and may draw from the RNG)
        return False
    if me.enable_lane_change:
        _change_lane_policy(t, me, i)
    kt = lanes.k_of_index.get(me.target_lane_index, -1)
    if kt < 0:
        raise RuntimeError("fastsim: a lane change left the road network")  # cannot happen: side lanes
    # steering_control(target_lane_index)
    speed = t.speed[i]
    r = t.lat[kt][i]
    lane_heading = lanes.geometry[kt][8]
    lateral_speed_command = -me.KP_LATERAL * r
    heading_command = math.asin(_clip(lateral_speed_command / _not_zero(speed), -1, 1))
    heading_ref = lane_heading + _clip(heading_command, -_QUARTER_PI, _QUARTER_PI)
    heading_rate_command = me.KP_HEADING * _wrap(heading_ref - float(me.heading))
    slip = math.asin(_clip(me.LENGTH / 2 / _not_zero(speed) * heading_rate_command, -1, 1))
    steering = math.atan(2 * math.tan(slip))
    steering = _clip(steering, -me.MAX_STEERING_ANGLE, me.MAX_STEERING_ANGLE)  # (act clips again: a no-op)
    # IDM on the current lane, and on the target lane while changing
    front, _rear = t.neighbours(i, t.own_ix[i])
    acc = t.acceleration(me, i, front)
    if me.lane_index != me.target_lane_index:
        front, _rear = t.neighbours(i, kt)
        acc = min(acc, t.acceleration(me, i, front))
    acc = _clip(acc, -me.ACC_MAX, me.ACC_MAX)
    me.action = {"steering": steering, "acceleration": acc}
    return True


def kinematic_step(lanes: Lanes, v: Any, dt: float) -> bool:
    """``Vehicle.step`` (and ``IDMVehicle.step``'s timer) for ``v``; ``False`` if stock must run."""
    road = v.road
    if road is None or road.record_history:
        return False
    if _kind(type(v))[0] == _IDM:
        v.timer += dt
    action = v.action
    if v.crashed:
        action["steering"] = 0
        action["acceleration"] = -1.0 * v.speed
    steering = action["steering"] = float(action["steering"])
    acc = action["acceleration"] = float(action["acceleration"])
    speed = float(v.speed)
    if speed > v.MAX_SPEED:
        acc = action["acceleration"] = min(acc, 1.0 * (v.MAX_SPEED - speed))
    elif speed < v.MIN_SPEED:
        acc = action["acceleration"] = max(acc, 1.0 * (v.MIN_SPEED - speed))
    beta = math.atan(1 / 2 * math.tan(steering))
    heading = float(v.heading)
    p = v.position
    x = float(p[0]) + speed * math.cos(heading + beta) * dt
    y = float(p[1]) + speed * math.sin(heading + beta) * dt
    p[0] = x
    p[1] = y
    if v.impact is not None:
        p += v.impact
        v.crashed = True
        v.impact = None
        x, y = float(p[0]), float(p[1])
    heading = heading + speed * math.sin(beta) / (v.LENGTH / 2) * dt
    v.heading = heading
    v.speed = speed + acc * dt
    k = lanes.closest(x, y, heading)
    v.lane_index = lanes.index[k]
    v.lane = lanes.lanes[k]
    return True
