"""Collision checks of robot configurations: ``getClosestPoints`` over precomputed pairs.

Pairs (built once per checker, the world lists refreshed when the twin's bodies change):

* self: every two links of a robot with geometry, minus adjacent links (parent and child,
  looking through links without geometry such as ``tool0``) and the spec's disabled pairs;
* arm × arm: every two robots;
* arm × world: each robot against parts, keep-outs, obstacles and surfaces (a robot's
  ``base_links`` rest on the surfaces and are not checked against them);
* carried part × world: a part attached to a robot against the other robots, the world
  and the carrying robot's links other than its gripper and flange;
* carried part × carried part: parts held by two different robots.

Before each ``getClosestPoints`` call the two AABBs (``getAABB``, inflated by the margin)
are compared, and far-apart pairs are skipped; the static bodies' AABBs are cached until
the twin's ``version`` or ``moves`` counter changes (move bodies with ``Twin.set_pose``).
A pair is in contact when its distance is below ``margin - TOUCH_TOL``: touching (a part
resting on the table, a stacked cube) is not a collision. Contacts are reported by name
(``irb120/link_3``, ``part:c1``), sorted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pybullet as p

TOUCH_TOL = 1e-4  # metres of penetration tolerated as touching


@dataclass(frozen=True)
class Contact:
    """Two named bodies or links closer than the margin (distance < 0: penetration)."""

    a: str
    b: str
    distance: float


class _FirstHit(Exception):
    def __init__(self, contact: Contact) -> None:
        self.contact = contact


def _overlap(a, b, m: float) -> bool:
    (alo, ahi), (blo, bhi) = a, b
    return (alo[0] - m <= bhi[0] and blo[0] - m <= ahi[0] and alo[1] - m <= bhi[1]
            and blo[1] - m <= ahi[1] and alo[2] - m <= bhi[2] and blo[2] - m <= ahi[2])


class CollisionChecker:
    """Checks configurations of the twin's robots against themselves, each other and the world."""

    def __init__(self, twin, margin: float = 0.0) -> None:
        """Precompute the pair lists of the twin's robots."""
        self.twin = twin
        self.margin = float(margin)
        self.checks = 0
        self.cid = twin.client
        self._robots = [twin.robot(r) for r in twin.robot_names]
        self._self_pairs: dict[str, list[tuple[int, int]]] = {}
        self._flange: dict[str, frozenset[int]] = {}
        for rb in self._robots:
            self._self_pairs[rb.name] = self._make_self_pairs(rb)
            idx = {v: k for k, v in rb.link_names.items()}
            near = {idx[rb.spec.flange_link], idx.get("tool0", -2)}
            self._flange[rb.name] = frozenset(rb.gripper_links | near)
        self._version = -1
        self._world: list[tuple[str, int, str]] = []
        self._world_key: tuple[int, int] = (-1, -1)
        self._world_boxes: list[tuple[str, int, str, tuple]] = []

    def _geom_parent(self, rb, li: int) -> int | None:
        """The nearest ancestor of link li that has collision geometry."""
        geom = set(rb.geom_links)
        cur = li
        while cur != -1:
            cur = rb.parent[cur]
            if cur in geom:
                return cur
        return None

    def _make_self_pairs(self, rb) -> list[tuple[int, int]]:
        links = list(rb.geom_links)
        adjacent = set()
        for li in links:
            if li == -1:
                continue
            gp = self._geom_parent(rb, li)
            if gp is not None:
                adjacent.add((min(li, gp), max(li, gp)))
        pairs = []
        for i, a in enumerate(links):
            for b in links[i + 1:]:
                if (a, b) in adjacent:
                    continue
                if rb.spec.is_disabled(rb.link_names[a], rb.link_names[b]):
                    continue
                pairs.append((a, b))
        # links rigidly fixed to each other (all gripper links and the flange) never move
        # relative to each other; pairs among them are never checked
        fixed = rb.gripper_links
        return [(a, b) for a, b in pairs if not (a in fixed and b in fixed)]

    def self_pairs(self, robot: str) -> list[tuple[str, str]]:
        """The self-collision link pairs checked for a robot, by link name."""
        rb = self.twin.robot(robot)
        return [(rb.link_names[a], rb.link_names[b]) for a, b in self._self_pairs[robot]]

    def _refresh(self) -> None:
        if self._version == self.twin.version:
            return
        t = self.twin
        carried = {v[0] for v in t.attached.values()}
        self._world = [(k, t.bodies[k], t.kinds[k]) for k in t.bodies if k not in carried]
        self._carried = [(rname, key, t.bodies[key]) for rname, (key, _, _) in
                         t.attached.items()]
        self._version = t.version

    def _aabbs(self, body: int, links) -> dict[int, tuple]:
        cid = self.cid
        return {li: p.getAABB(body, li, physicsClientId=cid) for li in links}

    def contacts(self, q: dict[str, np.ndarray] | None = None,
                 ignore: frozenset[str] = frozenset()) -> list[Contact]:
        """All contacts at configuration q, by name. The robots in q are left at q (the
        others keep their joints); ``ignore`` holds body names or whole robot names."""
        return self._contacts(q, ignore, first=False)

    def _contacts(self, q: dict[str, np.ndarray] | None, ignore: frozenset[str],
                  first: bool) -> list[Contact]:
        try:
            return self._scan(q, ignore, first)
        except _FirstHit as h:
            return [h.contact]

    # complexity: the hot loop over pybullet contact points, kept inline for speed
    def _scan(self, q: dict[str, np.ndarray] | None, ignore: frozenset[str],
              first: bool) -> list[Contact]:
        """Every pair closer than the margin (``first``: raise at the first one), pair by
        pair kind, AABB-pruned before asking for closest points."""
        t = self.twin
        if q:
            for r, qq in q.items():
                t.set_q(r, qq)
        self._refresh()
        self.checks += 1
        out: dict[tuple[str, str], float] = {}

        def hit(a: str, b: str, d: float) -> None:
            key = (a, b) if a <= b else (b, a)
            if first:
                raise _FirstHit(Contact(key[0], key[1], round(d, 9)))
            if d < out.get(key, np.inf):
                out[key] = d

        robots = [rb for rb in self._robots if rb.name not in ignore]
        boxes = {rb.name: self._aabbs(rb.body, rb.geom_links) for rb in robots}
        whole = {}
        for rb in robots:
            bx = boxes[rb.name].values()
            whole[rb.name] = (tuple(map(min, *(b[0] for b in bx))),
                              tuple(map(max, *(b[1] for b in bx))))
        if self._world_key != (t.version, t.moves):
            self._world_boxes = [(k, b, kind, p.getAABB(b, -1, physicsClientId=self.cid))
                                 for k, b, kind in self._world]
            self._world_key = (t.version, t.moves)
        world = [w for w in self._world_boxes if w[0] not in ignore]
        self._scan_arms(robots, boxes, whole, hit)
        self._scan_world(robots, boxes, whole, world, hit)
        self._scan_carried(robots, boxes, world, ignore, hit)
        return [Contact(a, b, round(d, 9)) for (a, b), d in sorted(out.items())]

    def _scan_arms(self, robots: list, boxes: dict, whole: dict,
                   hit: Callable[[str, str, float], None]) -> None:
        """The arms' pairs: self pairs, arm x arm."""
        cid, m = self.cid, self.margin
        lim = m - TOUCH_TOL
        # self pairs
        for rb in robots:
            bb = boxes[rb.name]
            for a, b in self._self_pairs[rb.name]:
                if not _overlap(bb[a], bb[b], m):
                    continue
                for pt in p.getClosestPoints(rb.body, rb.body, m, a, b, physicsClientId=cid):
                    if pt[8] < lim:
                        hit(f"{rb.name}/{rb.link_names[a]}", f"{rb.name}/{rb.link_names[b]}",
                            pt[8])
        # arm x arm
        for i, ra in enumerate(robots):
            for rb in robots[i + 1:]:
                if not _overlap(whole[ra.name], whole[rb.name], m):
                    continue
                for la, ba in boxes[ra.name].items():
                    if not _overlap(ba, whole[rb.name], m):
                        continue
                    for lb, bbx in boxes[rb.name].items():
                        if not _overlap(ba, bbx, m):
                            continue
                        for pt in p.getClosestPoints(ra.body, rb.body, m, la, lb,
                                                     physicsClientId=cid):
                            if pt[8] < lim:
                                hit(f"{ra.name}/{ra.link_names[la]}",
                                    f"{rb.name}/{rb.link_names[lb]}", pt[8])

    def _scan_world(self, robots: list, boxes: dict, whole: dict, world: list,
                    hit: Callable[[str, str, float], None]) -> None:
        """Each arm's links against the world (a base link not against a surface)."""
        cid, m = self.cid, self.margin
        lim = m - TOUCH_TOL
        for rb in robots:
            wb = whole[rb.name]
            for key, body, kind, box in world:
                if not _overlap(wb, box, m):
                    continue
                for li, lb in boxes[rb.name].items():
                    if kind == "surface" and li in rb.base_links:
                        continue
                    if not _overlap(lb, box, m):
                        continue
                    for pt in p.getClosestPoints(rb.body, body, m, li, -1,
                                                 physicsClientId=cid):
                        if pt[8] < lim:
                            hit(f"{rb.name}/{rb.link_names[li]}", key, pt[8])

    def _scan_carried(self, robots: list, boxes: dict, world: list, ignore: frozenset[str],
                      hit: Callable[[str, str, float], None]) -> None:
        """The carried parts' pairs: with the world, the arms (not their own flange) and
        one another (two arms each holding one)."""
        cid, m = self.cid, self.margin
        lim = m - TOUCH_TOL
        for rname, key, body in self._carried:
            if key in ignore:
                continue
            pbox = p.getAABB(body, -1, physicsClientId=cid)
            for okey, obody, _kind, box in world:
                if _overlap(pbox, box, m):
                    for pt in p.getClosestPoints(body, obody, m, -1, -1, physicsClientId=cid):
                        if pt[8] < lim:
                            hit(key, okey, pt[8])
            for rb in robots:
                skip = self._flange[rb.name] if rb.name == rname else frozenset()
                for li, lb in boxes[rb.name].items():
                    if li in skip or not _overlap(pbox, lb, m):
                        continue
                    for pt in p.getClosestPoints(body, rb.body, m, -1, li,
                                                 physicsClientId=cid):
                        if pt[8] < lim:
                            hit(key, f"{rb.name}/{rb.link_names[li]}", pt[8])
        for i, (ra, ka, ba) in enumerate(self._carried):
            for rb_, kb, bb in self._carried[i + 1:]:
                if ra == rb_ or ka in ignore or kb in ignore:
                    continue
                if not _overlap(p.getAABB(ba, -1, physicsClientId=cid),
                                p.getAABB(bb, -1, physicsClientId=cid), m):
                    continue
                for pt in p.getClosestPoints(ba, bb, m, -1, -1, physicsClientId=cid):
                    if pt[8] < lim:
                        hit(ka, kb, pt[8])

    def free(self, q: dict[str, np.ndarray] | None = None,
             ignore: frozenset[str] = frozenset()) -> bool:
        """Whether configuration q is collision-free (stops at the first contact)."""
        return not self._contacts(q, ignore, first=True)
