"""clingo's warnings go to Python logging (``cellspec.clingo``, DEBUG), never to stderr."""

import logging

from cellspec.solver.asp.backend import solve_program


def test_an_undefined_atom_is_logged_not_printed(caplog, capfd):
    with caplog.at_level(logging.DEBUG, logger="cellspec.clingo"):
        res = solve_program(["a :- b. #show a/0."], None)
    assert res.satisfiable is True and res.atoms == ()
    msgs = [r.getMessage() for r in caplog.records if r.name == "cellspec.clingo"]
    assert any("AtomUndefined" in m and "b" in m for m in msgs), msgs
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_no_record_without_a_warning(caplog):
    with caplog.at_level(logging.DEBUG, logger="cellspec.clingo"):
        res = solve_program(["a. #show a/0."], None)
    assert res.satisfiable is True
    assert not [r for r in caplog.records if r.name == "cellspec.clingo"]
