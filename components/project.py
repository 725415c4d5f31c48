"""Where the project is: the folder the commands read stacks/ and __main__.py from."""

from __future__ import annotations

from pathlib import Path


def project_root(start: Path | None = None) -> Path:
    """The folder holding this project's Pulumi.yaml: from the working directory up, else the package's."""
    for folder in [(start or Path.cwd()).resolve(), *(start or Path.cwd()).resolve().parents]:
        if (folder / "Pulumi.yaml").is_file() and (folder / "__main__.py").is_file():
            return folder
    return Path(__file__).resolve().parent.parent
