"""The cellspec textX language: one cached metamodel built from the grammar files.

Registered through the ``textx_languages`` entry point so ``textx list-languages``
and editor tooling find it.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from textx import LanguageDesc, metamodel_from_file
from textx.metamodel import TextXMetaModel


@lru_cache(maxsize=1)
def get_metamodel() -> TextXMetaModel:
    """Build (once) the metamodel from ``grammar/cellspec.tx`` and the files it imports."""
    grammar = resources.files("cellspec.dsl").joinpath("grammar", "cellspec.tx")
    with resources.as_file(grammar) as path:
        return metamodel_from_file(str(path), autokwd=True, use_regexp_group=False)


cellspec_language = LanguageDesc(
    name="cellspec",
    pattern="*.cell",
    description="cellspec rule files: cells, physical rules and regression tests",
    metamodel=get_metamodel,
)
