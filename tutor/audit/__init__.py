"""TODO: the package docstring."""
