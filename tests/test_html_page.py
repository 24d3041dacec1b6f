"""The HTML handout as a page (issue 24, item 4): semantic HTML5, MathML, inline SVG, a print style sheet.

The page is parsed with :mod:`html.parser` into a small tree (:class:`Node`), checked by a validator
written here (balanced tags, unique ids, every table with a caption and ``<th scope>`` headers, every
``aria-labelledby`` naming an element of the page) and read back: each step's table holds the
numbers of the engine's solution (``step.exact`` as text, ``step.value`` to 4 decimals, computed here
with :func:`format`, not with the renderer's helpers), and the two hand-checked numbers of the
classic example (the module docstring of ``tests/test_handouts.py``): the first weight
``1/(1 + 2e^√2) ≈ 0.1084`` and the first output entry ``≈ 1.8916``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from tutor.base.errors import TutorError
from tutor.base.messages import t, use_language
from tutor.exact.numbers import Rat
from tutor.exercise.catalog import resolve
from tutor.production.view import production_view
from tutor.render.markdown import annotation, formula, render_markdown
from tutor.render.mathml import latex_mathml
from tutor.render.page import page, wrap
from tutor.render.text import pretty
from tutor.steps import KINDS, solve

from .conftest import REPO

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "embed", "source", "track", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None]
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str) -> list[Node]:
        out = []
        for c in self.children:
            if isinstance(c, Node):
                if c.tag == tag:
                    out.append(c)
                out += c.all(tag)
        return out

    def kids(self, tag: str) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node) and c.tag == tag]

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()


class Tree(HTMLParser):
    """The page as a tree; an end tag that does not close the element open last is an error."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]
        self.errors: list[str] = []
        self.doctype = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):  # <rect/> in SVG: open and closed at once
        self.stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if len(self.stack) == 1 or self.stack[-1].tag != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1].tag}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(text: str) -> Node:
    tree = Tree()
    tree.feed(text)
    tree.close()
    assert tree.errors == [], tree.errors[:5]
    assert [n.tag for n in tree.stack] == ["#document"], "elements left open"
    assert tree.doctype == "DOCTYPE html"
    return tree.root


def validate(root: Node) -> list[str]:
    """What a small HTML5 validator finds wrong: duplicate ids, a table without a caption (first child) or
    without headers, a ``<th>`` without ``scope``, an ``aria-labelledby``/``aria-describedby`` to no element,
    an svg without a ``<title>``, anything fetched (a ``src``, ``href``, ``<link>``, ``<script>``)."""
    problems = []
    ids = [n.attrs["id"] for n in root.walk() if "id" in n.attrs]
    problems += [f"id {i!r} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for table in root.all("table"):
        kids = [c for c in table.children if isinstance(c, Node)]
        if not kids or kids[0].tag != "caption" or not kids[0].text().strip():
            problems.append("a table without a caption first")
        if not table.all("th"):
            problems.append("a table without th")
        problems += ["a th without scope" for th in table.all("th") if th.attrs.get("scope") not in ("col", "row")]
    for n in root.walk():
        for a in ("aria-labelledby", "aria-describedby"):
            if a in n.attrs and n.attrs[a] not in ids:
                problems.append(f"{a}={n.attrs[a]!r} names no element")
        if n.tag in ("link", "script", "img", "iframe", "object") or {"src", "href"} & set(n.attrs):
            problems.append(f"<{n.tag}> fetches or links")
    problems += ["an svg without a title" for svg in root.all("svg") if not svg.kids("title")]
    return problems


def decimal4(v: float) -> str:
    """``v`` to 4 decimals as the page writes it (a real minus sign), computed here with format()."""
    text = format(v, ".4f")
    return ("−" + text[1:] if text.startswith("-") else text) if text.strip("-0.") else "0.0000"


@pytest.fixture(scope="module")
def classic():
    sol = solve(resolve("single-head-3x4"))
    text = page(sol)
    return sol, text, parse(text)


def steps_of(root: Node) -> list[Node]:
    return [s for s in root.all("section") if "step" in (s.attrs.get("class") or "").split()]


# --- the page's structure ------------------------------------------------------------------------


def test_the_page_is_valid_html5_with_a_main_and_a_language(classic):
    _, text, root = classic
    assert validate(root) == []
    html_ = root.kids("html")[0]
    assert html_.attrs["lang"] == "en"
    assert [c.tag for c in html_.kids("head")[0].children if isinstance(c, Node)][:1] == ["meta"]
    assert len(root.all("main")) == 1 and root.all("title")[0].text() == "Three tokens, d_model = 4, one head with d_k = 2"


def test_the_validator_finds_what_it_looks_for():
    bad = parse("<!DOCTYPE html><html><body><p id=a></p><p id=a></p><table><tr><td>1</td></tr></table>"
                "<table><caption>c</caption><tr><th>x</th></tr></table><svg></svg>"
                '<a href="https://example.com">x</a><div aria-labelledby="nope"></div></body></html>')
    found = validate(bad)
    for piece in ("id 'a' twice", "a table without a caption first", "a table without th", "a th without scope", "names no element",
                  "<a> fetches or links", "an svg without a title"):
        assert any(piece in p for p in found), piece
    tree = Tree()
    tree.feed("<!DOCTYPE html><html><body><p><b></p></b></body></html>")
    assert tree.errors  # an end tag that closes the wrong element


def test_one_section_and_one_table_per_step_with_the_engines_numbers(classic):
    sol, _, root = classic
    sections = steps_of(root)
    assert len(sections) == len(sol.steps) == 7
    for section, step in zip(sections, sol.steps, strict=True):
        assert section.attrs["id"].startswith("step-")
        tables = section.all("table")
        assert len(tables) == 1
        table = tables[0]
        rows, cols = step.shape
        assert table.kids("caption")[0].text() == f"{step.result.name}, shape {rows} × {cols}"
        head = table.kids("thead")[0].all("th")
        assert [th.text() for th in head] == list(step.col_labels) and {th.attrs["scope"] for th in head} == {"col"}
        body = table.kids("tbody")[0].kids("tr")
        assert len(body) == rows
        for i, tr in enumerate(body):
            th = tr.kids("th")[0]
            assert (th.text(), th.attrs["scope"]) == (step.row_labels[i], "row")
            cells = tr.kids("td")
            assert len(cells) == cols
            for j, td in enumerate(cells):
                e, v = step.exact[i][j], step.value[i][j]
                spans = {s.attrs["class"]: s.text() for s in td.all("span") + td.all("code")}
                if not str(e).lstrip("-").isdigit():  # not an integer: its decimal beside it
                    assert spans["exact"] == str(e) and spans["decimal"][2:] == decimal4(v)  # the answer grammar
                    assert spans["decimal"][0] == ("=" if isinstance(e, Rat) and (e.q * 10**4).denominator == 1 else "≈")
                    assert td.all("math"), "the exact value as MathML too"
                else:
                    assert spans["exact"] == pretty(str(e))


def test_the_hand_checked_numbers(classic):
    sol, _, root = classic
    weights = steps_of(root)[5].all("table")[0]
    first = weights.kids("tbody")[0].kids("tr")[0].kids("td")[0]
    assert first.all("code")[0].text() == "1/(1 + 2*exp(sqrt(2)))" and "≈ 0.1084" in first.text()
    assert first.all("math")[0].attrs["alttext"] == "1/(1 + 2·exp(√2))"
    output = steps_of(root)[6].all("table")[0].kids("tbody")[0].kids("tr")[0].kids("td")[0]
    assert "≈ 1.8916" in output.text()


def test_formulas_are_mathml_blocks_and_exact_entries_are_mathml(classic):
    sol, _, root = classic
    for section in steps_of(root):
        blocks = [m for m in section.all("math") if m.attrs.get("display") == "block"]
        assert len(blocks) == 1 and blocks[0].attrs["alttext"]
    scaled = steps_of(root)[4]
    assert scaled.all("msqrt") or scaled.all("mfrac")  # 2√2 and 4√2 are roots
    weights = steps_of(root)[5]
    assert weights.all("mfrac") and weights.all("msup")  # 1/(1 + 2e^√2): a fraction of powers of e
    formula_ = [m for m in weights.all("math") if m.attrs.get("display") == "block"][0]
    assert formula_.all("mfrac") and formula_.all("msub")  # exp(scaled_ij) / Σ_k exp(scaled_ik)


def test_the_heat_map_is_an_svg_with_a_title_and_every_weight_written(classic):
    sol, _, root = classic
    weights = sol.steps[5]
    figures = [f for s in steps_of(root) for f in s.all("figure")]
    assert len(figures) == 1  # the weights' step only
    svg = figures[0].all("svg")[0]
    assert svg.kids("title")[0].text() == t("explain.heatmap", head=1)
    assert svg.kids("desc")[0].text() and svg.attrs["role"] == "img"
    texts = [n.text() for n in svg.kids("text")]
    assert texts[:3] == list(weights.col_labels)
    numbers = [x for x in texts if re.fullmatch(r"\d\.\d\d", x)]
    assert numbers == [format(v, ".2f") for row in weights.value for v in row]
    assert len(svg.kids("rect")) == 9


def test_the_production_view_is_an_svg_with_a_title_and_its_shapes(classic):
    sol, _, root = classic
    section = [s for s in root.all("section") if s.attrs.get("id") == "production"][0]
    svg = section.all("svg")[0]
    assert svg.kids("title")[0].text() == t("explain.production")
    texts = [n.text() for n in svg.kids("text")]
    trace, _ = production_view(sol.exercise)
    for s in trace:
        assert s.name in texts and f"{s.symbolic} = {s.concrete}" in texts
    assert "[B, H, L, L] = [1, 1, 3, 3]" in texts  # the scores of one sequence, one head, 3 queries, 3 keys


def test_masks_are_code_in_the_production_view():
    text = page(solve(resolve("two-head-causal-3x4")))
    root = parse(text)
    assert validate(root) == []
    codes = [c.text() for c in root.all("code")]
    assert "is_causal=True" in codes


def test_nothing_is_fetched_and_print_has_a_page_per_step(classic):
    _, text, _ = classic
    for fetch in ("<link", "<script", "src=", "href=", "url(", "@import", "@font-face", "http:", "https:", "//cdn"):
        assert fetch not in text, fetch
    style = text[text.index("<style>"):text.index("</style>")]
    print_rules = style[style.index("@media print"):]
    assert "section.step { break-before: page; }" in print_rules
    assert "background" not in print_rules.replace("background: none", "")


def test_the_worksheet_has_the_same_tables_with_empty_cells(classic):
    sol, key_text, key = classic
    sheet_text = page(sol, blank=True)
    sheet = parse(sheet_text)
    assert validate(sheet) == []
    key_steps, sheet_steps = steps_of(key), steps_of(sheet)
    assert [s.all("h3")[0].text() for s in sheet_steps] == [s.all("h3")[0].text() for s in key_steps]
    for step, section in zip(sol.steps, sheet_steps, strict=True):
        table = section.all("table")[0]
        rows, cols = step.shape
        assert table.kids("caption")[0].text() == f"{step.result.name}, shape {rows} × {cols}"
        cells = table.all("td")
        assert len(cells) == step.shape[0] * step.shape[1] + 1  # and the empty corner
        assert all(td.text() == "" for td in cells)
        assert {td.attrs.get("class") for td in cells} == {"blank", None}
    assert not [f for s in sheet_steps for f in s.all("figure")]  # no heat map: it would give the weights away
    assert "0.1084" not in sheet_text and "0.1084" in key_text
    inputs = sheet.all("header")[0].all("table")[0]  # X is still given
    assert [td.text() for td in inputs.kids("tbody")[0].kids("tr")[1].kids("td")] == ["0", "2", "0", "2"]


def test_the_backward_page_has_a_section_per_gradient(cli):
    code, out, err = cli("explain", "single-head-3x4", "--backward", "--format", "html")
    assert code == 0, err
    root = parse(out)
    assert validate(root) == []
    sol = solve(resolve("single-head-3x4"), backward=True)
    sections = steps_of(root)
    assert len(sections) == len(sol.steps)
    d_v = sol.step("d_v", 0)
    section = next(s for s in sections if s.all("caption")[0].text().startswith(f"{d_v.result.name},"))
    first = section.all("table")[0].kids("tbody")[0].kids("tr")[0].kids("td")[0]
    assert decimal4(d_v.value[0][0]) in first.text()
    code, out, _ = cli("explain", "single-head-3x4", "--backward", "--blank", "--format", "html")
    assert code == 0 and validate(parse(out)) == [] and len(steps_of(parse(out))) == len(sol.steps)


def test_a_chinese_page_says_every_word_from_the_chinese_catalogue(cli):
    code, out, err = cli("explain", "two-head-causal-3x4", "--format", "html", env={"ATTN_TUTOR_LANG": "zh"})
    assert code == 0, err
    root = parse(out)
    assert validate(root) == []
    assert root.kids("html")[0].attrs["lang"] == "zh-CN"
    sol = solve(resolve("two-head-causal-3x4"))
    with use_language("zh"):
        titles = [str(KINDS[s.id].title) for s in sol.steps if s.kv_head is None or s.head == s.shared[0]]
        production = t("explain.production")
        heatmap = t("explain.heatmap", head=1)
    headings = [re.sub(r"^\d+\. ", "", s.all("h3")[0].text()) for s in steps_of(root)]
    assert sorted(headings) == sorted(titles)
    assert steps_of(root)[0].all("caption")[0].text() == "Q，形状 3 × 2"
    assert [s.kids("title")[0].text() for s in root.all("svg")][-1] == production
    assert heatmap in [s.kids("title")[0].text() for s in root.all("svg")]
    assert [dt.text() for dt in steps_of(root)[0].all("dt")] == ["公式", "形状"]
    for english in ("Formula", "Shapes", ", shape ", "Worked out", "Production view"):
        assert english not in out, english


def test_the_title_is_escaped_and_control_characters_shown():
    from tutor.authoring.generate import Spec, generate
    from tutor.exercise import parse_exercise

    ex = parse_exercise(generate(Spec(seed=1, title="a <b> & {c}")), "t.yaml")
    text = page(solve(ex))
    assert "<title>a &lt;b&gt; &amp; {c}</title>" in text and "<h1>a &lt;b&gt; &amp; {c}</h1>" in text
    assert validate(parse(text)) == []


# --- the pieces --------------------------------------------------------------------------------------


def test_latex_mathml_converts_the_subset():
    assert latex_mathml(r"\frac{a}{\sqrt{2}}") == "<mfrac><mi>a</mi><msqrt><mn>2</mn></msqrt></mfrac>"
    assert latex_mathml("W_{Q}^\\top") == "<msubsup><mi>W</mi><mi>Q</mi><mi>⊤</mi></msubsup>"
    assert latex_mathml(r"\text{a\_b {x}}") == "<mtext>a_b {x}</mtext>"
    assert latex_mathml(r"x - 1") == "<mrow><mi>x</mi><mo>−</mo><mn>1</mn></mrow>"
    cases = latex_mathml(r"\begin{cases} 0 & a \\ 1 & b \end{cases}")
    assert cases.count("<mtr>") == 2 and cases.count("<mtd>") == 4 and '<mo stretchy="true">{</mo>' in cases
    assert latex_mathml(r"\text{if } i") == "<mrow><mtext>if\u00a0</mtext><mi>i</mi></mrow>"  # MathML trims spaces
    assert latex_mathml(r"\foo") == r"<merror><mtext>\foo</mtext></merror>"
    with pytest.raises(ValueError):
        latex_mathml(r"\frac{a")
    assert latex_mathml("a < b") == "<mrow><mi>a</mi><mo>&lt;</mo><mi>b</mi></mrow>"


BUNDLED = sorted(p.stem for p in (REPO / "exercises").glob("*.yaml"))


@pytest.mark.parametrize("exercise_id", BUNDLED)
def test_every_formula_and_annotation_converts_without_an_unknown_command(exercise_id):
    """Each step's formula and shapes of every bundled exercise (its backward pass too, where it has one), in
    both languages: no LaTeX command outside the converter's subset (it would show as an <merror>)."""
    ex = resolve(exercise_id)
    try:
        sol = solve(ex, backward=True)
    except TutorError:  # no backward pass through RoPE yet: the forward steps
        sol = solve(ex)
    for step in sol.steps:
        for lang in ("en", "zh"):
            with use_language(lang):
                for tex in (formula(step, ex), annotation(step)):
                    assert "merror" not in latex_mathml(tex), (step.id, lang, tex)


def test_wrap_breaks_at_spaces_and_inside_chinese():
    assert wrap("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]
    assert wrap("一二三四五", 4) == ["一二", "三四", "五"]  # two cells each
    assert wrap("", 5) == [""]


def test_the_markdown_handout_has_the_production_view():
    sol = solve(resolve("two-head-causal-3x4"))
    text = render_markdown(sol)
    assert "## Production view: the same layer as batched tensors (B = 1)" in text
    trace, _ = production_view(sol.exercise)
    for s in trace:
        assert f"- `{s.name}`: `{s.symbolic} = {s.concrete}`" in text
    assert "### The masks as PyTorch takes them (B = 1)" in text and "- `is_causal=True`" in text


# --- the trial's findings (issue 23/24 fix round) ---------------------------------------------------


def test_each_exact_value_is_read_once_by_assistive_technology(classic):
    """The MathML's alttext is what a screen reader says; the same value as text beside it is aria-hidden."""
    _, _, root = classic
    first = steps_of(root)[5].all("table")[0].kids("tbody")[0].kids("tr")[0].kids("td")[0]
    (code,) = first.all("code")
    assert code.attrs.get("aria-hidden") == "true" and first.all("math")[0].attrs["alttext"] == "1/(1 + 2·exp(√2))"
    assert all(c.attrs.get("aria-hidden") == "true" for c in root.all("code") if "exact" in (c.attrs.get("class") or ""))


def test_a4_paper_and_no_italics_for_chinese(classic):
    _, text, _ = classic
    style = text[text.index("<style>"):text.index("</style>")]
    assert re.search(r"@page \{ size: A4;[^}]*\}", style)  # every language: Letter is the US's size only
    assert ":lang(zh) .why { font-style: normal;" in style and ".why { font-style: italic; }" in style


def test_the_production_views_names_leave_room_before_their_shapes():
    """Laid out by measured widths: a name in bold 13 px monospace (0.62 em a cell at most, two cells for a Han
    character) and 12 px of room before the shape's text starts."""
    from tutor.base.cells import width

    for exercise_id in ("two-head-causal-3x4", "single-head-3x4", "gqa-four-heads-2x4"):
        root = parse(page(solve(resolve(exercise_id))))
        svg = [s for s in root.all("section") if s.attrs.get("id") == "production"][0].all("svg")[0]
        texts = svg.kids("text")
        names = [n for n in texts if n.attrs.get("font-weight") == "bold"]
        shape_x = {float(n.attrs["x"]) for n in texts if n.attrs.get("font-weight") != "bold"}
        assert len(shape_x) == 1
        if exercise_id == "two-head-causal-3x4":
            assert "transpose" in [n.text() for n in names]  # the name the trial saw run into its shape
        for name in names:
            assert float(name.attrs["x"]) + 13 * 0.62 * width(name.text()) + 12 <= min(shape_x), name.text()


def test_the_headers_source_is_one_space_from_the_id(cli, tmp_path):
    folder = tmp_path / "pack"
    folder.mkdir()
    code, _, err = cli("new", "--seed", "1", "--id", "mine", "-o", folder / "mine.yaml")
    assert code == 0, err
    for lang, expected in (("en", "Exercise mine ("), ("zh", "练习 mine（")):
        code, out, err = cli("explain", "mine", "--exercises", folder, "--format", "html", "--lang", lang)
        assert code == 0, err
        header = parse(out).all("p")[0].text()
        assert header.startswith(expected) and "  " not in header, header
