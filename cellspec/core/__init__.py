"""The lowest layer beside ``cellspec.core.errors``: bounded reads and safe writes."""
