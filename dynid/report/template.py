"""The report's page skeleton: one self-contained HTML document with a short embedded stylesheet.

No script, web font, image or stylesheet is fetched: the page opens offline and in print. Colours
are a light and a dark palette chosen by ``prefers-color-scheme`` (figures draw in
``currentColor`` and translucent greys, so they follow), and print is forced light.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dynid.report.svg import esc

CSS = """
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1d1f23;--link:#1f5fa8}
@media (prefers-color-scheme:dark){:root{--bg:#17191d;--fg:#e3e5e8;--link:#8ab8ff}}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;background:var(--bg);color:var(--fg)}
a{color:var(--link)}
nav ol{margin:.3em 0}
h1,h2,h3{line-height:1.2}
h2{border-bottom:1px solid #8888;padding-bottom:.2em;margin-top:2.2em;overflow-wrap:anywhere}
h3{margin-top:1.5em}
table{border-collapse:collapse;margin:.4em 0 1em;font-variant-numeric:tabular-nums}
th,td{border:1px solid #8886;padding:.2em .6em;text-align:left;vertical-align:top;overflow-wrap:anywhere}
thead th{background:#8882}
td.num{text-align:right}
pre,code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;border:1px solid #8886;padding:.5em .7em;margin:.4em 0}
td pre{border:0;padding:0;margin:0}
figure{margin:.5em 0;display:inline-block;vertical-align:top}
figcaption{font-size:13px;opacity:.8}
svg{max-width:100%;height:auto}
.equations math{display:block;text-align:left;font-size:1.2em;margin:.35em 0}
.meta,.note{opacity:.8}
.error{border-left:4px solid #d62728;padding:.3em .8em}
@media print{:root{color-scheme:light;--bg:#fff;--fg:#000;--link:#000}body{max-width:none;margin:0;font-size:10pt}
nav{break-after:page}section{break-before:auto}figure,table,pre{break-inside:avoid}h2,h3{break-after:avoid}}
""".strip()


@dataclass(frozen=True)
class Section:
    """One top-level part of the report: ``anchor`` (an id), ``title`` (plain text) and
    ``body`` (HTML, already escaped)."""

    anchor: str
    title: str
    body: str


def render_page(
    title: str, sections: Sequence[Section], *, generated_utc: str, version: str
) -> str:
    """The whole HTML document: header, table of contents and the sections in order."""
    contents = "".join(
        f'<li><a href="#{esc(s.anchor)}">{esc(s.title)}</a></li>' for s in sections
    )
    toc = (
        f'<nav><h2>Contents</h2><ol>{contents}</ol></nav>'
        if sections
        else '<p class="note">Nothing to report: no model files or results were given.</p>'
    )
    body = "\n".join(
        f'<section id="{esc(s.anchor)}"><h2>{esc(s.title)}</h2>\n{s.body}\n</section>'
        for s in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="dynid {esc(version)}">\n'
        f"<title>{esc(title)}</title>\n<style>\n{CSS}\n</style>\n</head>\n<body>\n"
        f"<header><h1>{esc(title)}</h1>\n"
        f'<p class="meta">Generated {esc(generated_utc)} by dynid {esc(version)}</p></header>\n'
        f"{toc}\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )
