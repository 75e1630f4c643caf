"""The lowest layer beside ``cellspec.dsl.errors``: bounded reads and safe writes."""
