#!/usr/bin/env python3
"""Every relative Markdown link in README.md, docs/ and the other READMEs names a file or
directory that exists and, where it is a .md file with a #fragment, a heading of that
file.

Anchors follow GitHub's rule: the heading's text (a link in it counts as its text)
lowercased, every character but letters, digits, '_', '-' and spaces dropped, spaces made
'-'; a repeated anchor gets -1, -2, ... Headings inside ``` fences are not headings. Links
inside ``` fences and inline code are not links. Links to a fragment of the same file
(`(#x)`) are checked against that file. Exit 0 when every link resolves, 1 naming each
one that does not.
"""
import os
import re
import sys

S = os.environ.get("top_srcdir", ".")
FILES = ["README.md", "collector/README.md", "tests/simgpu/README.md"]
DOCS = os.path.join(S, "docs")
FILES += sorted("docs/" + f for f in os.listdir(DOCS) if f.endswith(".md"))

LINK = re.compile(r"\]\(([^)\s#]*)(#[^)\s]*)?\)")


def slug(text):
    """The anchor GitHub gives a heading's text (before de-duplication)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def prose_lines(path):
    """The lines of PATH outside ``` fences, with their line numbers."""
    fence = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if not fence:
                yield n, line


ANCHORS = {}


def anchors(path):
    """The set of anchors of PATH's headings, read once."""
    if path not in ANCHORS:
        seen = {}
        out = set()
        for _, line in prose_lines(path):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                out.add(s if k == 0 else "%s-%d" % (s, k))
        ANCHORS[path] = out
    return ANCHORS[path]


def main():
    bad = 0
    checked = 0
    for rel in FILES:
        src = os.path.join(S, rel)
        if not os.path.exists(src):
            print("test_doc_links: %s: missing" % rel)
            bad += 1
            continue
        for n, line in prose_lines(src):
            line = re.sub(r"`[^`]*`", "", line)
            for m in LINK.finditer(line):
                target, frag = m.group(1), m.group(2)
                if target and ("://" in target or target.startswith("mailto:")):
                    continue
                if not target and not frag:
                    continue
                dst = os.path.normpath(os.path.join(os.path.dirname(src), target)) if target else src
                checked += 1
                if not os.path.exists(dst):
                    print("test_doc_links: %s:%d: no file %s" % (rel, n, target))
                    bad += 1
                elif frag and dst.endswith(".md") and frag[1:] not in anchors(dst):
                    print("test_doc_links: %s:%d: no heading for %s%s" % (rel, n, target, frag))
                    bad += 1
    print("test_doc_links: %d links checked, %d broken" % (checked, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
