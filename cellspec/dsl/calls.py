"""Lowering the calls of rule expressions (cellspec/dsl/lower.py): the built-in relations,
their arguments checked against ``ir.RELATIONS``, and the uses of a ``predicate``
(language version 2), expanded into plain IR so that no backend ever sees one.

A mixin of the expression lowering: it reads the cell's names, the consts and predicates
(cellspec/dsl/defs.py) and lowers a predicate's body with the expression methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cellspec.core import ir
from cellspec.core.names import did_you_mean

if TYPE_CHECKING:  # the lowering context owns these; the mixin only reads them
    from cellspec.dsl.build import CellBuilder
    from cellspec.dsl.defs import Const, Predicate


class CallLowering:
    """Relation calls and predicate expansion, for :class:`cellspec.dsl.lower._ExprCtx`."""

    b: CellBuilder
    zones: set[str]
    surfaces: set[str]
    robots: set[str]
    consts: dict[str, Const]
    predicates: dict[str, Predicate]
    alias: dict[str, str]

    def err(self, obj: Any, msg: str) -> None:
        raise NotImplementedError

    def name_of(self, node: Any) -> str:
        raise NotImplementedError

    def boolean(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        raise NotImplementedError

    def _const(self, name: str, node: Any) -> ir.Lin | None:
        raise NotImplementedError

    def call(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        name = node.name
        if name in self.predicates and name not in ir.RELATIONS:
            return self.expand(node, scope)
        if self.b.defs is not None and name in self.b.defs.refused:
            return None  # a recursive predicate: reported at its definition
        if name not in ir.RELATIONS:
            known = ", ".join(sorted(ir.RELATIONS))
            hint = did_you_mean(name, [*sorted(ir.RELATIONS), *sorted(self.predicates)])
            self.err(node, f"unknown relation '{name}'{hint} (built-in relations: {known})")
            return None
        sig = ir.RELATIONS[name]
        if len(node.args) != len(sig):
            self.err(node, f"{name} takes {len(sig)} argument(s), got {len(node.args)}")
            return None
        args: list[ir.Arg] = []
        for kind, a in zip(sig, node.args, strict=True):
            acls = type(a).__name__
            aname = self.name_of(a)
            if kind == "part":
                if acls != "Ref" or scope.get(aname) != "part":
                    self.err(a, f"argument of {name} must be a part variable")
                    return None
                args.append(ir.VarArg(aname))
            elif kind == "surface_or_part":
                if acls == "Ref" and scope.get(aname) == "part":
                    # on(p, q) means q supports p
                    return ir.Rel("supports", (ir.VarArg(aname), args[0]))
                if acls == "Ref" and aname in self.surfaces:
                    args.append(ir.NameArg(aname))
                else:
                    known = ", ".join(sorted(self.surfaces)) or "none defined"
                    self.err(a, f"second argument of on must be a part variable or a surface "
                             f"(surfaces: {known})")
                    return None
            elif kind == "zone":
                if acls == "Ref" and scope.get(aname) == "keepout":
                    args.append(ir.VarArg(aname))
                elif acls == "Ref" and (aname in self.zones or aname == "workspace"):
                    args.append(ir.NameArg(aname))
                else:
                    known = ", ".join(["workspace", *sorted(self.zones)])
                    self.err(a, f"argument of {name} must be a zone ({known}) or a keep-out "
                             "variable")
                    return None
            elif kind in ("length", "robot"):
                arg = (self._length_arg if kind == "length" else self._robot_arg)(name, a, scope)
                if arg is None:
                    return None
                args.append(arg)
            elif kind == "axis":
                if acls != "Ref" or aname not in ("x", "y"):
                    self.err(a, f"the axis of {name} must be x or y")
                    return None
                args.append(ir.NameArg(aname))
        return ir.Rel(name, tuple(args))

    def _length_arg(self, name: str, a: Any, scope: dict[str, str]) -> ir.Arg | None:
        """A distance argument: a number or a const, not negative."""
        aname = self.name_of(a)
        if type(a).__name__ == "Ref" and aname in self.consts and aname not in scope:
            c = self._const(aname, a)
            if c is None:
                return None
            d = c.const
        elif type(a).__name__ == "Ref" and aname not in scope:
            known = ", ".join(sorted(self.consts)) or "none defined"
            self.err(a, f"the distance of {name}: '{aname}' is not a number or a known const "
                     f"(consts: {known})")
            return None
        elif type(a).__name__ != "NumLit":
            self.err(a, f"the distance of {name} must be a number")
            return None
        else:
            d = self.b.n(a.value)
        if d < 0:
            self.err(a, f"the distance of {name} must not be negative")
            return None
        return ir.NumArg(d)

    def _robot_arg(self, name: str, a: Any, scope: dict[str, str]) -> ir.Arg | None:
        """A robot argument: a robot variable or a robot of the cell."""
        aname = self.name_of(a)
        if type(a).__name__ == "Ref" and scope.get(aname) == "robot":
            return ir.VarArg(aname)
        if type(a).__name__ == "Ref" and aname in self.robots and aname not in scope:
            return ir.NameArg(aname)
        known = ", ".join(sorted(self.robots)) or "none defined"
        self.err(a, f"argument of {name} must be a robot (robots: {known}) or a robot "
                 "variable (forall r in robot)")
        return None

    def expand(self, node: Any, scope: dict[str, str]) -> ir.Node | None:
        """A predicate's use: its body lowered with the parameters bound to the arguments'
        domains, then renamed to the arguments (bound variables that would clash get
        fresh names). Errors inside name the definition and this use."""
        assert self.b.defs is not None
        pred = self.predicates[node.name]
        if not self.b.defs.visible(pred, node):
            return None
        if len(node.args) != len(pred.params):
            self.err(node, f"predicate '{pred.name}' (defined at {pred.source}) takes "
                     f"{len(pred.params)} argument(s), got {len(node.args)}")
            return None
        inner: dict[str, str] = {}
        names: dict[str, str] = {}
        alias: dict[str, str] = {}
        fixed = self.robots | self.zones | self.surfaces | {"workspace"}
        for k, (param, a) in enumerate(zip(pred.params, node.args, strict=True), 1):
            aname = self.name_of(a)
            if type(a).__name__ == "Ref" and aname in scope:
                inner[param] = scope[aname]
                names[param] = aname
            elif type(a).__name__ == "Ref" and aname in fixed:
                alias[param] = aname  # a robot, zone or surface of the cell, by name
            else:
                self.err(a, f"argument {k} of predicate '{pred.name}' must be a variable (of "
                         "a part, a keep-out zone or a robot) or a robot, zone or surface "
                         "of the cell")
                return None
        used = self.b.src(node)
        f = self.b.files[pred.file]
        self.b.expanding.append((pred.name, pred.source, used))
        was, self.alias = self.alias, alias
        try:
            with self.b.in_file(f):
                body = self.boolean(pred.body, inner)
        finally:
            self.alias = was
            self.b.expanding.pop()
        if body is None:
            return None
        taken = set(scope) | set(names.values())
        for v in sorted(ir.bound_vars(body)):
            if v in taken:
                k = 1
                while f"{v}_{k}" in taken or f"{v}_{k}" in ir.bound_vars(body):
                    k += 1
                names[v] = f"{v}_{k}"
                taken.add(names[v])
        return ir.rename(body, names)
