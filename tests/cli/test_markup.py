

def test_no_markup_tags_in_the_source() -> None:
    """Consoles never parse markup, so a `[red]...[/red]` in a printed string would show literally:
    style with provisioner.output.styled instead."""
    import re

    tag = re.compile(r"""["'][^"'\n]*\[/?(bold|dim|red|green|yellow|blue|cyan|magenta|italic|{s}|{style})\][^"'\n]*["']""")
    offenders = [f"{p.relative_to(REPO)}:{n}" for p in sorted((REPO / "provisioner").rglob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if tag.search(line)]
    assert offenders == []
