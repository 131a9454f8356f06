"""The report's page skeleton: one self-contained HTML document with a short embedded stylesheet.

No script, web font, image or stylesheet is fetched: the page opens offline and in print; only
``--interactive`` adds one small inline script of its own. Colours
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
th,td{border:1px solid #8886;padding:.2em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}
thead th{background:#8882}
th[scope=row]{white-space:nowrap;overflow-wrap:normal}
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


# --interactive: zoom (wheel), pan (drag), reset (double-click) and a read-out of the data
# coordinates under the pointer, on every figure that has axes (``svg._Frame`` marks them with
# ``data-frame``, about 40 bytes each, in every report). Hand-written, inlined once per page:
# 1.4 kB of script and 0.2 kB of style.
INTERACTIVE_JS = """
(()=>{const tip=document.createElement('div');tip.className='tip';tip.hidden=true;document.body.append(tip);
const num=v=>Math.abs(v)>=1e5||(Math.abs(v)<1e-3&&v!==0)?v.toExponential(3):String(+v.toPrecision(4));
for(const s of document.querySelectorAll('svg[data-frame]')){
const f=s.dataset.frame.split(' ').map(Number),home=s.getAttribute('viewBox');let vb=home.split(' ').map(Number),drag=null;
const at=e=>{const r=s.getBoundingClientRect();return[vb[0]+(e.clientX-r.left)/r.width*vb[2],vb[1]+(e.clientY-r.top)/r.height*vb[3]]};
const show=()=>s.setAttribute('viewBox',vb.join(' '));
s.addEventListener('wheel',e=>{e.preventDefault();const[p,q]=at(e),k=e.deltaY<0?0.8:1.25;
vb=[p-(p-vb[0])*k,q-(q-vb[1])*k,vb[2]*k,vb[3]*k];show()},{passive:false});
s.addEventListener('mousedown',e=>{drag=at(e);e.preventDefault()});
addEventListener('mouseup',()=>{drag=null});
s.addEventListener('dblclick',()=>{vb=home.split(' ').map(Number);show()});
s.addEventListener('mouseleave',()=>{tip.hidden=true});
s.addEventListener('mousemove',e=>{const[p,q]=at(e);
if(drag){vb[0]+=drag[0]-p;vb[1]+=drag[1]-q;show();return}
if(p<f[0]||p>f[1]||q<f[5]||q>f[4]){tip.hidden=true;return}
const x=f[2]+(p-f[0])/(f[1]-f[0])*(f[3]-f[2]),y=f[6]+(q-f[4])/(f[5]-f[4])*(f[7]-f[6]);
tip.textContent=num(x)+', '+num(y);tip.style.left=e.pageX+12+'px';tip.style.top=e.pageY+12+'px';tip.hidden=false})}})();
""".strip()
INTERACTIVE_CSS = (
    "svg[data-frame]{cursor:crosshair}"
    ".tip{position:absolute;pointer-events:none;background:var(--bg);border:1px solid #8888;"
    "padding:1px 5px;font:12px ui-monospace,monospace}@media print{.tip{display:none}}"
)


@dataclass(frozen=True)
class Section:
    """One top-level part of the report: ``anchor`` (an id), ``title`` (plain text) and
    ``body`` (HTML, already escaped)."""

    anchor: str
    title: str
    body: str


def render_page(
    title: str, sections: Sequence[Section], *, generated_utc: str, version: str,
    interactive: bool = False,
) -> str:
    """The whole HTML document: header, table of contents and the sections in order;
    ``interactive`` adds ``INTERACTIVE_JS`` (and its style) once, at the end."""
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
    css, script, hint = CSS, "", ""
    if interactive:
        css += "\n" + INTERACTIVE_CSS
        script = f"<script>\n{INTERACTIVE_JS}\n</script>\n"
        hint = ('<p class="meta">Figures: scroll to zoom, drag to pan, double-click to reset; the '
                "pointer's coordinates show beside it.</p>\n")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="dynid {esc(version)}">\n'
        f"<title>{esc(title)}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n"
        f"<header><h1>{esc(title)}</h1>\n"
        f'<p class="meta">Generated {esc(generated_utc)} by dynid {esc(version)}</p>\n{hint}</header>\n'
        f"{toc}\n<main>\n{body}\n</main>\n{script}</body>\n</html>\n"
    )
