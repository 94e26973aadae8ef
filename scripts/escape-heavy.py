#!/usr/bin/env python3
"""Rewrites a snapshot so that its text is full of escapes and non-ASCII.

Every string attribute that is free text (titles, descriptions, contents,
names, notes, transcript text) gets quotes, backslashes, newlines, tabs,
accented letters, CJK and emoji; `--ascii` writes the non-ASCII as \\uXXXX
escapes (surrogate pairs for emoji) instead of raw UTF-8. Ids, timestamps
and filter values are left alone, so the file loads and serves as the
original does. For load benchmarks on text that is not the generator's
plain ASCII.

    scripts/escape-heavy.py bench-data/medium/medium.json bench-data/escapes/medium-escapes.json
"""
import json
import sys

SPICE = ' «Ünïcödé» "quoted" \\ back\\slash\nline\ttab 漢字かな 🚀 €'
TEXT_KEYS = {"title", "description", "content", "headline", "name", "notes",
             "text", "problem", "solution", "icp", "value_text"}


def spice(value, key=None):
    if isinstance(value, dict):
        return {k: spice(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [spice(v, key) for v in value]
    if isinstance(value, str) and key in TEXT_KEYS:
        return value + SPICE
    return value


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    ascii_only = "--ascii" in sys.argv
    src, dst = args
    with open(src, encoding="utf-8") as f:
        doc = json.load(f)
    for key, records in doc.items():
        if isinstance(records, list) and key != "api_keys":
            doc[key] = [dict(r, attributes=spice(r.get("attributes"))) if isinstance(r, dict) else r
                        for r in records]
    doc["version"] = doc.get("version", "x") + "-escapes"
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=ascii_only, separators=(",", ":"))


if __name__ == "__main__":
    main()
