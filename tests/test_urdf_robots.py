"""A robot from its own URDF (issue 22 item 4): ``robot R urdf "F" tcp LINK [offset (..)]``.

Three URDFs of pybullet_data loaded through the generic path (KUKA iiwa, Franka Panda,
xArm6): the same joints and limits as the built-in models where they overlap, the same IK
answers, a derived reach; and every kind of bad URDF as bad input naming the file and the
element (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pybullet_data
import pytest
from conftest import ROBOT_CELL

import cellspec
from cellspec.robots.custom import spec_of
from cellspec.robots.ik import solve_ik
from cellspec.robots.models import robot_spec
from cellspec.robots.twin import Twin

DATA = Path(pybullet_data.getDataPath())
CELL = ROBOT_CELL
GENERIC = {
    "kuka_iiwa": f'urdf "{DATA}/kuka_iiwa/model.urdf" tcp lbr_iiwa_link_7 offset (0, 0, 0.045)',
    "panda": f'urdf "{DATA}/franka_panda/panda.urdf" tcp panda_link8',
}
XARM = f'urdf "{DATA}/xarm/xarm6_robot.urdf" tcp link6'
TARGETS = [(0.45, 0.0, 0.20), (0.50, 0.10, 0.10), (0.35, -0.20, 0.25), (0.60, 0.05, 0.05),
           (1.50, 0.0, 0.2)]  # the last is out of reach of both
DOWN = (1.0, 0.0, 0.0, 0.0)  # tool z pointing down (x-axis half turn), xyzw


def _cell(tmp_path: Path, robot: str, name: str = "c.cell"):
    f = tmp_path / name
    f.write_text(CELL.format(robot=robot))
    return f


@pytest.mark.parametrize("model", sorted(GENERIC))
def test_generic_path_gives_the_built_in_joints_and_limits(tmp_path, model):
    cell = cellspec.load_cell(str(_cell(tmp_path, GENERIC[model])))
    r = cell.robots[0]
    assert r.model.startswith("urdf:") and r.urdf is not None
    mine, builtin = spec_of(r), robot_spec(model)
    assert mine.joint_names == builtin.joint_names
    np.testing.assert_allclose(mine.lower, builtin.lower)
    np.testing.assert_allclose(mine.upper, builtin.upper)
    assert mine.flange_link == builtin.flange_link
    assert mine.flange_xyz == pytest.approx(builtin.flange_xyz)
    assert set(builtin.strip_links) <= set(mine.strip_links)
    assert r.reach is not None and 0.8 < float(r.reach) < 1.6  # derived from the chain


@pytest.mark.parametrize("model", sorted(GENERIC))
def test_generic_path_gives_the_built_in_ik_answers(tmp_path, model):
    gen = cellspec.load_cell(str(_cell(tmp_path, GENERIC[model], "g.cell")))
    ref = cellspec.load_cell(str(_cell(tmp_path, f"model {model}", "b.cell")))
    with Twin(gen) as tg, Twin(ref) as tb:
        for pos in TARGETS:
            a = solve_ik(tg, "arm", pos, DOWN, seed=0)
            b = solve_ik(tb, "arm", pos, DOWN, seed=0)
            assert a.ok == b.ok, (pos, a.reason, b.reason)
            if a.ok:  # both put the tcp where asked: the same tool geometry
                np.testing.assert_allclose(tg.tool_pose("arm", a.q)[0], pos, atol=2e-3)
                np.testing.assert_allclose(tb.tool_pose("arm", b.q)[0], pos, atol=2e-3)


def test_xarm6_loads_reaches_and_has_a_tool_down_home(tmp_path):
    cell = cellspec.load_cell(str(_cell(tmp_path, XARM)))
    spec = spec_of(cell.robots[0])
    assert spec.dof == 6 and spec.joint_names == tuple(f"joint{i}" for i in range(1, 7))
    with Twin(cell) as t:
        pos, quat = t.tool_pose("arm", t.home("arm"))
        assert pos[2] > 0.15  # the home's tcp above the base, tool pointing down-ish
        res = solve_ik(t, "arm", (0.45, 0.0, 0.15), DOWN, seed=0)
        assert res.ok, res.reason


def test_a_urdf_robot_checks_like_any_cell(tmp_path, cli):
    f = _cell(tmp_path, XARM)
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": [{"id": "c1", "type": "cube", "pos": [0.5, 0.0, 0.025]}]}')
    r = cli("check", f, lay)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pass")


@pytest.mark.slow
def test_xarm6_sim_end_to_end(tmp_path, cli):
    f = _cell(tmp_path, XARM)
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": [{"id": "c1", "type": "cube", "pos": [0.5, 0.05, 0.025]}, '
                   '{"id": "c2", "type": "cube", "pos": [0.5, 0.05, 0.075]}], '
                   '"order": ["c1", "c2"]}')
    r = cli("sim", f, lay, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "sim: pass" in r.stdout


# --- bad URDFs: file, line and column of the element, exit 2 ---------------------------
ARM = """<?xml version="1.0"?>
<robot name="two">
  <link name="base"/>
  <link name="l1"/>
  <link name="l2"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.3"/><limit lower="-1" upper="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0.3 0 0"/><limit lower="-1" upper="1" velocity="1"/></joint>
</robot>
"""
BAD = {
    "not_xml": (ARM.replace("</robot>", ""), "not a valid URDF (XML)"),
    "no_tcp": (ARM, "no link 'tip' (the tcp link); the links are: base, l1, l2"),
    "continuous": (ARM.replace('name="j2" type="revolute"', 'name="j2" type="continuous"'),
                   "joint 'j2' is continuous"),
    "no_limit": (ARM.replace('<limit lower="-1" upper="1" velocity="1"/></joint>\n</robot>',
                             '</joint>\n</robot>'), "joint 'j2' has no <limit>"),
    "loop": (ARM.replace("</robot>", '  <joint name="j3" type="fixed"><parent link="base"/>'
                         '<child link="l2"/></joint>\n</robot>'), "a closed loop"),
    "mesh": (ARM.replace('<link name="l1"/>', '<link name="l1"><visual><geometry>'
                         '<mesh filename="package://nopkg/m.obj"/></geometry></visual></link>'),
             "link 'l1': mesh 'package://nopkg/m.obj' does not exist"),
    "bad_parent": (ARM.replace('<parent link="l1"/>', '<parent link="lx"/>'),
                   "joint 'j2': its parent link 'lx' is not a <link> of the file"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_urdf_is_bad_input_naming_file_and_element(tmp_path, cli, case):
    text, msg = BAD[case]
    (tmp_path / "arm.urdf").write_text(text)
    tcp = "tip" if case == "no_tcp" else "l2"
    f = _cell(tmp_path, f'urdf "arm.urdf" tcp {tcp}')  # relative to the cell file
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    r = cli("check", f, lay)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{tmp_path / 'arm.urdf'}:" in r.stderr and msg in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_missing_urdf_is_reported_at_the_robot_line(tmp_path, cli):
    f = _cell(tmp_path, 'urdf "nope.urdf" tcp l2')
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    r = cli("check", f, lay)
    assert r.returncode == 2
    assert f"{f}:8:" in r.stderr and "no URDF file 'nope.urdf'" in r.stderr, r.stderr


def test_huge_and_many_link_urdfs_are_refused(tmp_path, cli):
    big = tmp_path / "big.urdf"
    with open(big, "wb") as fh:
        fh.truncate(30 * 2**20)  # a sparse 30 MiB file: refused before it is read
    many = tmp_path / "many.urdf"
    many.write_text('<robot name="m">' + "".join(f'<link name="l{i}"/>' for i in range(1200))
                    + "</robot>")
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    for name, msg in (("big.urdf", "at most 20 MiB"), ("many.urdf", "more than 127 links")):
        f = _cell(tmp_path, f'urdf "{name}" tcp l1', f"{name}.cell")
        r = cli("check", f, lay)
        assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_package_meshes_resolve_on_the_urdf_path(tmp_path, cli, monkeypatch):
    pkg = tmp_path / "share" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "m.obj").write_text("v 0 0 0\nv 0.01 0 0\nv 0 0.01 0\nf 1 2 3\n")
    (tmp_path / "cell").mkdir()
    (tmp_path / "cell" / "arm.urdf").write_text(ARM.replace(
        '<link name="l1"/>', '<link name="l1"><visual><geometry><mesh '
        'filename="package://mypkg/m.obj"/></geometry></visual></link>'))
    f = _cell(tmp_path / "cell", 'urdf "arm.urdf" tcp l2')
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    r = cli("check", f, lay)
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = cli("check", f, lay, "--urdf-path", tmp_path / "share")
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("CELLSPEC_URDF_PATH", str(tmp_path / "share"))
    r = cli("check", f, lay)
    assert r.returncode == 0, r.stderr
    assert os.environ["CELLSPEC_URDF_PATH"]
