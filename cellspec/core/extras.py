"""Optional extras: the packages only some verbs need, and the one message when one is missing.

``pip install cellspec`` gives check, lint, explain, repair, plan, generate, test and design;
the pybullet twin, the browser review page and the OpenAI client are extras
(``[twin]``, ``[review]``, ``[llm]``, ``[all]`` in pyproject.toml). A verb that needs a
missing extra says which one and how to install it (exit 2), never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from cellspec.core.errors import CellspecError

# extra -> the modules it provides (what pyproject.toml's [project.optional-dependencies] installs)
EXTRAS: dict[str, tuple[str, ...]] = {
    "twin": ("pybullet", "pybullet_data"),
    "review": ("viser", "trimesh"),
    "llm": ("openai",),
}
# module -> extra, for the modules above
EXTRA_OF: dict[str, str] = {m: extra for extra, mods in EXTRAS.items() for m in mods}


class MissingExtra(CellspecError):
    """A verb needs an optional extra that is not installed (bad input: exit 2)."""

    def __init__(self, module: str, extra: str, verb: str | None = None):
        self.module = module
        self.extra = extra
        self.verb = verb
        who = f"cellspec {verb}" if verb else "this part of cellspec"
        super().__init__(f"{who} needs the {extra} extra ({module} is not installed): "
                         f"pip install 'cellspec[{extra}]'")


def require(module: str, *, extra: str | None = None, verb: str | None = None) -> ModuleType:
    """Import ``module`` and return it; when it is missing raise :class:`MissingExtra` naming
    the extra that installs it (``extra`` defaults to the one :data:`EXTRA_OF` lists) and the
    verb that needs it. A module that is installed but fails to import raises as it is (a
    broken install is not a missing extra)."""
    extra = extra or EXTRA_OF.get(module.split(".")[0])
    if extra is None:
        raise ValueError(f"{module} belongs to no extra; import it directly")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing and missing != module.split(".")[0]:
            raise  # the module is there, one of its own dependencies is not: a broken install
        raise MissingExtra(module, extra, verb) from None


def require_extra(extra: str, *, verb: str | None = None) -> None:
    """Check, at the start of a verb and before any work, that every module of ``extra`` is
    installed; nothing is imported (pybullet prints a banner on import, and start-up stays
    cheap), so the verb imports them where it uses them."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a None placeholder
            found = False
        if not found:
            raise MissingExtra(module, extra, verb)
