"""Placeholder; replaced by the Typer layer."""


def main() -> None:  # pragma: no cover
    raise SystemExit(0)
