"""Generated documentation: the README's table of passes and pipelines.

    python -m pxla_mlir.tools.docs     # prints the table; tests/test_readme.py checks README.md has it
"""

from __future__ import annotations

import typing

from ..pass_infra import registry


def _signature(cls) -> str:
    choices = [f"{i.name}={'|'.join(typing.get_args(i.type))}" for i in cls.options()
               if typing.get_origin(i.type) is typing.Literal]
    return cls.argument + ("{" + " ".join(choices) + "}" if choices else "")


def pass_table() -> str:
    rows = ["| pass | what it does |", "|---|---|"]
    for name in [*registry.PASSES, *registry.PIPELINES]:
        cls = registry.load(name)
        signature = _signature(cls).replace("|", "\\|")  # a pipe inside a table cell must be escaped
        rows.append(f"| `{signature}` | {cls.summary} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(pass_table())
