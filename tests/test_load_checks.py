"""Issue 28 item 6: what every verb refuses at load time (exit 2, file:line:col): an unknown
robot model (with the closest known one), and a URDF pybullet would crash on."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROBOT_CELL

from cellspec.cli import main

ROOT = Path(__file__).resolve().parent.parent
PANDA = (ROOT / "rules" / "cells" / "panda_table.cell").read_text()
CELL = ROBOT_CELL


def _run(capsys, *args: str | Path) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return rc, cap.err


@pytest.mark.parametrize("verb", ["check", "test", "lint"])
def test_unknown_robot_model_is_a_load_error(tmp_path, capsys, verb) -> None:
    f = tmp_path / "c.cell"
    f.write_text(PANDA.replace("model panda", "model abb_irb12O"))
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": [{"id": "c1", "type": "cube", "pos": [0.5, 0.05, 0.025]}]}')
    rc, err = _run(capsys, verb, f, *([lay] if verb == "check" else []))
    line = next(i for i, s in enumerate(f.read_text().splitlines(), 1) if "abb_irb12O" in s)
    assert rc == 2
    assert (f"{f}:{line}:5: error: robot arm: unknown robot model 'abb_irb12O' (did you mean "
            "'abb_irb120'?); known models: panda, kuka_iiwa, abb_irb120, abb_irb1600, ur5e"
            ) in err


ARM = """<?xml version="1.0"?>
<robot name="two">
  <link name="base"/>
  <link name="l1">LINK1</link>
  <link name="l2"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 0 1"/><limit lower="-1" upper="1" velocity="1"/></joint>
  <joint name="J2" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0.3 0 0"/><limit lower="-1" upper="1" velocity="1"/></joint>
</robot>
"""
INERTIAL = ('<inertial><mass value="{m}"/><inertia ixx="{i}" ixy="0" ixz="0" iyy="0.1" '
            'iyz="0" izz="0.1"/></inertial>')
MESH = '<collision><geometry><mesh filename="{fn}"/></geometry></collision>'
BAD = {  # name: (urdf text, the element's line, message)
    "two_joints_of_one_name": (ARM.replace('name="J2"', 'name="j1"'), 8,
                               "joint 'j1' is defined twice"),
    "limits_1e308": (ARM.replace('lower="-1" upper="1" velocity="1"/></joint>\n</robot>',
                                 'lower="-1e308" upper="1e308" velocity="1"/></joint>\n'
                                 '</robot>'), 9,
                     "joint 'J2': <limit lower=\"-1e308\">: a position limit must be a finite "
                     "number within +-12.57 rad"),
    "negative_mass": (ARM.replace("LINK1", INERTIAL.format(m=-1, i=0.1)), 4,
                      "link 'l1': <mass value=\"-1\">: a mass must be a finite number in "
                      "[0, 10000] kg"),
    "negative_inertia": (ARM.replace("LINK1", INERTIAL.format(m=1, i=-0.1)), 4,
                         "link 'l1': <inertia ixx=\"-0.1\">: an inertia must be finite, its "
                         "diagonal >= 0"),
    "origin_1e308": (ARM.replace('<origin xyz="0.3 0 0"/>', '<origin xyz="1e308 0 0"/>'), 9,
                     "joint 'J2': <origin xyz=\"1e308 0 0\">: an origin must be three finite "
                     "numbers within +-100 m"),
    "nan_origin": (ARM.replace("LINK1", '<visual><origin xyz="0 nan 0"/><geometry><box '
                               'size="0.1 0.1 0.1"/></geometry></visual>'), 4,
                   "link 'l1': <origin xyz=\"0 nan 0\">: an origin must be three finite"),
    "nan_axis": (ARM.replace('<axis xyz="0 0 1"/>', '<axis xyz="nan 0 1"/>'), 7,
                 "joint 'j1': <axis xyz=\"nan 0 1\">: an axis must be three finite numbers"),
    "zero_axis": (ARM.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'), 7,
                  "joint 'j1': <axis xyz=\"0 0 0\">: the axis is zero"),
    "mesh_not_a_mesh": (ARM.replace("LINK1", MESH.format(fn="notes.stl")), 4,
                        "link 'l1': mesh 'notes.stl' is not a mesh: not an STL file"),
    "mesh_of_text": (ARM.replace("LINK1", MESH.format(fn="notes.txt")), 4,
                     "link 'l1': mesh 'notes.txt' is not a mesh: its suffix is '.txt'"),
}


def _cell(tmp_path: Path, urdf: str) -> Path:
    (tmp_path / "arm.urdf").write_text(urdf)
    (tmp_path / "notes.stl").write_text("these are my notes, not a mesh\n")
    (tmp_path / "notes.txt").write_text("v 0 0 0\n")
    f = tmp_path / "c.cell"
    f.write_text(CELL.format(robot='urdf "arm.urdf" tcp l2'))
    return f


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_urdf_pybullet_would_crash_on_is_a_load_error(tmp_path, capsys, case) -> None:
    text, line, msg = BAD[case]
    f = _cell(tmp_path, text.replace("LINK1", ""))
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    rc, err = _run(capsys, "check", f, lay)
    assert rc == 2, err
    assert f"{tmp_path / 'arm.urdf'}:{line}:" in err and msg in err, err


def test_a_urdf_of_128_links_is_a_load_error(tmp_path, capsys) -> None:
    def links(n: int) -> str:
        return "".join(f'<link name="x{i}"/>' for i in range(n))

    f = _cell(tmp_path, ARM.replace("LINK1", "").replace("</robot>", links(125) + "</robot>"))
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    rc, err = _run(capsys, "check", f, lay)
    assert rc == 2 and "more than 127 links" in err, err
    f = _cell(tmp_path, ARM.replace("LINK1", "").replace("</robot>", links(124) + "</robot>"))
    assert _run(capsys, "check", f, lay)[0] == 0  # 3 + 124 = 127 links load


def test_package_path_never_leaves_the_urdf_path(tmp_path, capsys) -> None:
    share = tmp_path / "share"
    (share / "pkg").mkdir(parents=True)
    obj = "v 0 0 0\nv 0.01 0 0\nv 0 0.01 0\nf 1 2 3\n"
    (tmp_path / "secret.obj").write_text(obj)  # outside every --urdf-path root
    (share / "pkg" / "m.obj").write_text(obj)
    cell = tmp_path / "cell"
    cell.mkdir()
    lay = tmp_path / "l.json"
    lay.write_text('{"parts": []}')
    for fn, rc_want in (("package://pkg/m.obj", 0), ("package://pkg/../../secret.obj", 2),
                        ("package://pkg/../../../../../../../..", 2)):
        f = _cell(cell, ARM.replace("LINK1", MESH.format(fn=fn)))
        rc, err = _run(capsys, "check", f, lay, "--urdf-path", share)
        assert rc == rc_want, (fn, err)
        if rc_want == 2:
            assert f"link 'l1': mesh '{fn}' leaves its package" in err, err
