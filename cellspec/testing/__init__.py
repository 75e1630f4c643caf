"""cellspec.testing.runner."""
