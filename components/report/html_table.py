"""The HTML table and number formats report.html uses in every section."""

from __future__ import annotations

from html import escape


def n(value: int) -> str:
    return f"{value:,}"


def table(headers: list[str], rows: list[list[str]], left: int = 1, left_last: bool = False) -> str:
    """Numbers right-aligned; the first `left` columns (and the last with `left_last`) are text. Cells are HTML."""
    def is_text(i: int) -> bool:
        return i < left or (left_last and i == len(headers) - 1)

    head = "".join(f"<th{' class=l' if is_text(i) else ''}>{escape(h)}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f"<td{' class=l' if is_text(i) else ''}>{cell}</td>" for i, cell in enumerate(row))
                   + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
