"""The CLI's help reads as prose: a docstring's paragraph, wrapped at the source's line
length, is one paragraph on the terminal, wrapped where the terminal is, never broken where
the source was."""

from __future__ import annotations

import inspect

import typer
from typer.testing import CliRunner

from memoryd.workers.cli import app


def commands() -> list[tuple[list[str], str]]:
    """Every command and command group, with its help's first paragraph as written."""
    found: list[tuple[list[str], str]] = []

    def walk(group: object, path: list[str]) -> None:
        for name, sub in getattr(group, "commands", {}).items():
            found.append(([*path, name], inspect.cleandoc(sub.help or "").split("\n\n")[0]))
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_each_commands_summary_is_one_line_in_a_wide_terminal() -> None:
    listed = commands()
    assert any("\n" in first for _, first in listed), "no summary is wrapped in its source"
    runner = CliRunner()
    for path, first in listed:
        # As the terminal shows it: one line, code spans without their backticks.
        shown = " ".join(first.replace("`", "").split())
        parent = runner.invoke(app, [*path[:-1], "--help"], env={"COLUMNS": "250"})
        assert parent.exit_code == 0, parent.output
        lines = [" ".join(line.strip("│ ").split()) for line in parent.output.splitlines()]
        assert any(line.endswith(shown) for line in lines), (path, shown, parent.output)
