#!/usr/bin/env python3
"""Extracts kite-tiny's English training corpus from Debian packages installed on this machine.

Packages (install with: apt-get install bible-kjv bible-kjv-text fortunes fortunes-min
jargon-text dict-devil dict-gcide wordnet-base linux-doc-6.1 debian-reference-en):
each source becomes a list of documents; every document goes to train or held-out by a stable
hash of (source, index), so the split never changes between runs. Writes
  OUT/train.txt, OUT/heldout.txt   documents separated by a blank line and "\n\n"
  OUT/sources.json                 per-source document / byte counts and licence
Only the Python standard library is used.
"""
import argparse
import glob
import gzip
import hashlib
import html
import json
import os
import re
import subprocess

HELDOUT_PERCENT = 1  # of documents, per source


def clean(text):
    text = text.replace("\r\n", "\n").replace("\t", "    ")
    text = re.sub(r"[ \u00a0]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def kjv():
    """The King James Bible, one chapter per document (verse numbers dropped)."""
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    chapters, current, key = [], [], None
    for line in out.splitlines():
        m = re.match(r"^(\w+?)(\d+):(\d+) (.*)$", line)
        if not m:
            if current and line.strip():
                current[-1] += " " + line.strip()
            continue
        ch = (m.group(1), m.group(2))
        if ch != key and current:
            chapters.append(" ".join(current))
            current = []
        key = ch
        current.append(m.group(4).strip())
    if current:
        chapters.append(" ".join(current))
    return chapters


def fortunes():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if path.endswith((".dat", ".u8")) or os.path.isdir(path) or os.path.islink(path):
            continue
        if "/off/" in path:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for item in f.read().split("\n%\n"):
                item = clean(item)
                if len(item) > 20:
                    docs.append(item)
    return docs


def strip_html(text):
    text = re.sub(r"(?is)<(script|style).*?</\1>", " ", text)
    text = re.sub(r"(?i)<br\s*/?>|</p>|</h\d>|</li>|</dt>|</dd>|</pre>|</div>", "\n\n", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = html.unescape(text)
    text = re.sub(r"[ \t]+", " ", text)
    return clean(re.sub(r"\n\s*\n\s*", "\n\n", text))


def jargon():
    with gzip.open("/usr/share/doc/jargon-text/jargon.txt.gz", "rt", encoding="utf-8",
                   errors="replace") as f:
        text = clean(f.read())
    return [p for p in re.split(r"\n\s*\n", text) if len(p) > 80]


def dictd(path):
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        text = f.read()
    entries = [clean(e) for e in re.split(r"\n\s*\n", text)]
    return [e for e in entries if len(e) > 40 and not e.startswith("00-database")]


def gcide():
    """Every third entry of Webster's 1913 (it would otherwise dominate the corpus), with the
    pronunciation keys and cross-reference braces removed so the text reads as prose."""
    docs = []
    for i, e in enumerate(dictd("/usr/share/dictd/gcide.dict.dz")):
        if i % 3:
            continue
        e = re.sub(r"\\[^\\]*\\", "", e)
        e = re.sub(r"\[1913 Webster\]|\[WordNet 1.5\]|\[PJC\]", "", e)
        e = e.replace("{", "").replace("}", "")
        e = re.sub(r"\s+", " ", e).strip()
        if len(e) > 80:
            docs.append(e)
    return docs


def wordnet():
    docs = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = f"/usr/share/wordnet/data.{pos}"
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                words = line.split(" ")[4:5]
                gloss = line.split("|", 1)[1].strip()
                word = words[0].replace("_", " ") if words else ""
                docs.append(f"{word}: {gloss}")
    return docs


def linux_doc():
    docs = []
    base = "/usr/share/doc/linux-doc-6.1/Documentation"
    for path in sorted(glob.glob(base + "/**/*.rst.gz", recursive=True)):
        if "/translations/" in path:
            continue
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            text = clean(f.read())
        if len(text) > 200:
            docs.append(text)
    return docs


def debian_reference():
    with gzip.open("/usr/share/debian-reference/debian-reference.en.txt.gz", "rt",
                   encoding="utf-8", errors="replace") as f:
        text = clean(f.read())
    return [p for p in re.split(r"\n\n(?=\d+\.\d+)", text) if len(p) > 200]


SOURCES = {
    # name: (function, package, licence)
    "kjv": (kjv, "bible-kjv-text", "public domain"),
    "fortunes": (fortunes, "fortunes, fortunes-min", "BSD-4-clause and public domain (per file)"),
    "jargon": (jargon, "jargon-text", "public domain"),
    "devil": (lambda: dictd("/usr/share/dictd/devil.dict.dz"), "dict-devil", "public domain"),
    "gcide": (gcide, "dict-gcide", "GPL-3+"),
    "wordnet": (wordnet, "wordnet-base", "WordNet 3.0 licence (BSD-like)"),
    "linux_doc": (linux_doc, "linux-doc-6.1", "GPL-2"),
    "debian_reference": (debian_reference, "debian-reference-en", "GPL-2+"),
}


def is_heldout(source, index):
    h = hashlib.sha256(f"{source}:{index}".encode()).digest()
    return int.from_bytes(h[:4], "little") % 100 < HELDOUT_PERCENT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    stats = {}
    with open(os.path.join(args.out, "train.txt"), "w", encoding="utf-8") as train, \
         open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as held:
        for name, (fn, package, licence) in SOURCES.items():
            docs = fn()
            n_train = n_held = b_train = b_held = 0
            for i, doc in enumerate(docs):
                if is_heldout(name, i):
                    held.write(doc + "\n\n")
                    n_held += 1
                    b_held += len(doc.encode())
                else:
                    train.write(doc + "\n\n")
                    n_train += 1
                    b_train += len(doc.encode())
            stats[name] = dict(package=package, licence=licence, train_docs=n_train,
                               heldout_docs=n_held, train_bytes=b_train, heldout_bytes=b_held)
            print(f"{name:18s} {n_train:7d} docs {b_train/1e6:7.2f} MB train, "
                  f"{n_held:5d} docs {b_held/1e3:7.1f} KB held-out")
    with open(os.path.join(args.out, "sources.json"), "w") as f:
        json.dump(stats, f, indent=1)


if __name__ == "__main__":
    main()
