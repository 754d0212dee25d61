#!/usr/bin/env python3
"""Build Channel's English training corpus from Debian main packages.

Usage:
    python3 train/build_corpus.py [--install] [--out train/data/corpus]

--install runs `apt-get install` for the packages in PACKAGES (needs root and
a prior `apt-get update`).  Only files that `dpkg -L` lists for those packages
are read, so whatever else is installed on the machine does not change the
output.  Output (all deterministic; the same package versions give the same
bytes):

    OUT/train.txt      training documents
    OUT/valid.txt      held-out documents (about 1.5 % of the pieces)
    OUT/manifest.json  package versions, byte counts, sha256 of both files

Documents are separated by a line holding only the ASCII record separator
(0x1E).  Stdlib only.
"""
import argparse
import gzip
import hashlib
import html
import html.parser
import json
import os
import re
import subprocess
import sys

# package -> short description of what is taken.  Order matters for
# deduplication (first occurrence wins), so prose sources come first.
PACKAGES = [
    ("bible-kjv-text", "King James Bible (printed with the bible-kjv program)"),
    ("bible-kjv", "program used to print bible-kjv-text"),
    ("fortunes-min", "fortune cookies"),
    ("fortunes", "fortune cookies (no ascii-art file)"),
    ("dict-devil", "Ambrose Bierce, The Devil's Dictionary"),
    ("miscfiles", "US constitution and declaration of independence only"),
    ("wordnet-base", "WordNet 3.0 glosses and example sentences"),
    ("dict-gcide", "GNU Collaborative International Dictionary of English"),
    ("dict-jargon", "The Jargon File"),
    ("dict-foldoc", "Free On-line Dictionary of Computing"),
    ("gnome-user-docs", "GNOME user help, English (C) pages"),
    ("debian-handbook", "The Debian Administrator's Handbook, en-US HTML"),
    ("debian-reference-en", "Debian Reference, English text"),
    ("doc-debian", "Debian FAQ-like documents, constitution, social contract"),
    ("developers-reference", "Debian Developer's Reference, rst sources"),
    ("maint-guide", "Debian New Maintainers' Guide, English HTML"),
    ("debmake-doc", "Guide for Debian Maintainers, English HTML"),
    ("python3.11-doc", "Python 3.11 documentation, rst sources"),
    ("perl-doc", "Perl pod documentation"),
    ("gnu-standards", "GNU coding standards and maintainer information (info)"),
    ("r-doc-info", "R manuals (info)"),
    ("git-doc", "Git documentation, asciidoc text"),
    ("vim-runtime", "Vim help files (doc/*.txt)"),
    ("postgresql-doc-15", "PostgreSQL 15 manual, HTML"),
    ("manpages", "Linux man pages, sections 4, 5, 7"),
    ("manpages-dev", "Linux man pages, sections 2, 3"),
    ("linux-doc-6.1", "Linux kernel Documentation/ (rst/txt, no translations)"),
]

RS = "\x1e"
PIECE_BYTES = 48 * 1024
HELDOUT_PER_MILLE = 15


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, **kw).stdout


def pkg_files(pkg):
    out = sh(["dpkg", "-L", pkg]).decode()
    return sorted(p for p in out.splitlines() if p and os.path.isfile(p) and not os.path.islink(p))


def pkg_version(pkg):
    return sh(["dpkg-query", "-W", "-f=${Version}", pkg]).decode()


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith((".gz", ".dz")) or data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def read_text(path):
    return read_bytes(path).decode("utf-8", errors="replace")


# ----------------------------------------------------------------- extractors

class HtmlText(html.parser.HTMLParser):
    SKIP = {"script", "style", "head", "nav", "footer", "title"}
    SKIP_CLASS = ("sphinxsidebar", "related", "navheader", "navfooter", "toc",
                  "headerlink", "footer", "navigation", "breadcrumb")
    BLOCK = {"p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "pre", "tr",
             "br", "dt", "dd", "table", "blockquote", "section", "ul", "ol",
             "dl", "hr", "article", "td", "th", "page", "title", "note",
             "item", "list", "terms", "screen", "code"}
    VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col",
            "embed", "source", "wbr", "media"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out = []
        self.stack = []  # (tag, skipping)
        self.skip = 0
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        cls = ""
        for k, v in attrs:
            if k in ("class", "role") and v:
                cls += " " + v
        skipping = tag in self.SKIP or any(c in cls for c in self.SKIP_CLASS)
        if tag not in self.VOID:
            self.stack.append((tag, skipping))
            if skipping:
                self.skip += 1
            if tag == "pre":
                self.pre += 1
        if tag in self.BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        # pop to the matching tag (tolerates unclosed tags)
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for t, s in self.stack[i:]:
                    if s:
                        self.skip -= 1
                    if t == "pre":
                        self.pre -= 1
                del self.stack[i:]
                break
        if tag in self.BLOCK:
            self.out.append("\n")

    def handle_data(self, data):
        if self.skip:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
        self.out.append(data)


def html_to_text(s):
    p = HtmlText()
    p.feed(s)
    p.close()
    text = "".join(p.out)
    text = text.replace("\u00b6", "")  # sphinx permalink pilcrows
    lines = [ln.strip() if not ln.startswith("    ") else ln.rstrip() for ln in text.split("\n")]
    return "\n".join(lines)


def paragraphs_from_lines(text):
    """Text whose paragraphs are split by blank lines: as is."""
    return text


def dictd_entries(path):
    """Entries of a dictd .dict.dz file, in file order, using its .index."""
    data = read_bytes(path)
    index = path[: -len(".dict.dz")] + ".index"
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def dec(s):
        n = 0
        for ch in s:
            n = n * 64 + b64.index(ch)
        return n

    spans = set()
    with open(index, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            head = parts[0]
            if head.startswith("00-database") or head.startswith("00database"):
                continue
            spans.add((dec(parts[1]), dec(parts[2])))
    for off, ln in sorted(spans):
        yield data[off: off + ln].decode("utf-8", errors="replace")


def clean_dict_entry(e):
    e = re.sub(r"\\[^\\\n]{0,80}\\", "", e)          # GCIDE pronunciations
    e = re.sub(r"^\s*\[[^\]\n]*\]\s*$", "", e, flags=re.M)  # [1913 Webster]
    e = re.sub(r"\{([^{}\n]*)\}", r"\1", e)            # cross-reference braces
    lines = [ln.strip() for ln in e.split("\n")]
    # re-flow: join wrapped lines; keep blank-line structure
    paras, cur = [], []
    for ln in lines:
        if not ln:
            if cur:
                paras.append(" ".join(cur))
                cur = []
        else:
            cur.append(ln)
    if cur:
        paras.append(" ".join(cur))
    return "\n".join(paras)


def dict_docs(path, per_doc=60):
    entries = [clean_dict_entry(e) for e in dictd_entries(path)]
    entries = [e for e in entries if len(e) > 20]
    for i in range(0, len(entries), per_doc):
        yield "\n\n".join(entries[i: i + per_doc])


def wordnet_docs(files):
    for path in files:
        base = os.path.basename(path)
        if not base.startswith("data."):
            continue
        out = []
        for line in read_text(path).split("\n"):
            if not line or line.startswith(" ") or " | " not in line:
                continue
            head, gloss = line.split(" | ", 1)
            f = head.split()
            n = int(f[3], 16)
            words = [f[4 + 2 * i].replace("_", " ") for i in range(n)]
            words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]
            out.append("%s: %s" % (", ".join(words), gloss.strip()))
        for i in range(0, len(out), 200):
            yield "\n".join(out[i: i + 200])


def fortune_docs(path):
    t = read_text(path)
    items = [x.strip("\n") for x in re.split(r"^%\s*$", t, flags=re.M)]
    items = [x for x in items if x.strip()]
    for i in range(0, len(items), 50):
        yield "\n\n".join(items[i: i + 50])


def bible_docs():
    out = sh(["bible", "-l1000", "Gen1:1-Rev22:21"], stdin=subprocess.DEVNULL).decode("utf-8", "replace")
    chapters = re.split(r"\n\n(?=\S[^\n]* \d+\n\n)", out)
    for ch in chapters:
        lines = []
        for j, ln in enumerate(ch.strip("\n").split("\n")):
            if j > 0:
                ln = re.sub(r"^\s*\d+ ", "", ln)
            ln = ln.strip()
            if ln:
                lines.append(ln)
        if lines:
            yield "\n".join(lines)


ROFF_ESC = [
    (r"\\f(\[[^\]]*\]|\(..|.)", ""), (r"\\s[+-]?\d", ""), (r"\\\(em", "--"),
    (r"\\\(en", "-"), (r"\\\((aq|cq)", "'"), (r"\\\((dq|lq|rq)", '"'),
    (r"\\\*\((lq|rq)", '"'), (r"\\\(bu", "*"), (r"\\\(co", "(c)"),
    (r"\\\(mu", "x"), (r"\\\(\S\S", ""), (r"\\\[[^\]]*\]", ""),
    (r"\\\*\[[^\]]*\]", ""), (r"\\\*\(..", ""), (r"\\\*.", ""), (r"\\-", "-"),
    (r"\\[&|^%:]", ""), (r"\\[ ~0]", " "), (r"\\e", "\\\\"), (r"\\c", ""),
    (r"\\n(\[[^\]]*\]|\(..|.)", ""), (r"\\\.", "."), (r"\\'", "'"),
]
ROFF_RE = [(re.compile(a), b) for a, b in ROFF_ESC]


def roff_inline(s):
    for r, b in ROFF_RE:
        s = r.sub(b, s)
    return s


def man_to_text(src):
    if re.match(r"^\.so ", src):
        return ""
    out, para, nofill = [], [], False

    def flush():
        if para:
            out.append(" ".join(para))
            para.clear()

    for raw in src.split("\n"):
        if raw.startswith((".\\\"", "'\\\"", '.\\"')):
            continue
        if raw.startswith((".", "'")):
            m = re.match(r"^[.'](\S+)\s*(.*)$", raw)
            if not m:
                continue
            mac, args = m.group(1), m.group(2)
            if mac in ("SH", "SS"):
                flush()
                out.append("")
                out.append(roff_inline(args.strip('"')).strip())
            elif mac in ("PP", "LP", "P", "TP", "IP", "sp", "br", "HP", "RS", "RE", "in", "TQ"):
                flush()
                if mac == "IP" and args:
                    a = args.split('"')
                    tag = a[1] if len(a) > 2 else args.split()[0]
                    para.append(roff_inline(tag))
            elif mac in ("nf", "EX"):
                flush()
                nofill = True
            elif mac in ("fi", "EE"):
                nofill = False
            elif mac in ("B", "I", "SM", "SB"):
                para.append(roff_inline(args.replace('"', "")))
            elif mac in ("BR", "RB", "IR", "RI", "BI", "IB"):
                parts = re.findall(r'"[^"]*"|\S+', args)
                para.append(roff_inline("".join(p.strip('"') for p in parts)))
            elif mac == "UR" or mac == "MT":
                para.append(roff_inline(args))
            continue
        line = roff_inline(raw)
        if nofill:
            flush()
            out.append(line.rstrip())
        elif line.strip():
            para.append(line.strip())
        else:
            flush()
            out.append("")
    flush()
    return "\n".join(out)


def pod_to_text(src):
    out, in_pod, verbatim_ok = [], True, True
    for block in re.split(r"\n\s*\n", src):
        b = block.strip("\n")
        if not b:
            continue
        if b.startswith("="):
            cmd = b.split(None, 1)
            name = cmd[0]
            rest = cmd[1] if len(cmd) > 1 else ""
            if name == "=cut":
                in_pod = False
                continue
            in_pod = True
            if name.startswith("=head") or name == "=item":
                rest = rest.strip()
                if rest in ("*", ""):
                    continue
                out.append(pod_inline(rest))
            continue
        if not in_pod:
            continue
        if b[0] in " \t":
            out.append(b)  # verbatim (code)
        else:
            out.append(pod_inline(" ".join(ln.strip() for ln in b.split("\n"))))
    return "\n\n".join(out)


def pod_inline(s):
    for _ in range(4):
        s = re.sub(r"[A-Z]<<+\s(.*?)\s>>+", r"\1", s)
        s = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", s)
        s = re.sub(r"E<lt>", "<", s)
        s = re.sub(r"E<gt>", ">", s)
        s = re.sub(r"E<[^<>]*>", "", s)
        s = re.sub(r"[A-Z]<([^<>]*)>", r"\1", s)
    return s


def info_to_text(src):
    src = src.split("\x1f", 1)[1] if "\x1f" in src else src
    nodes = src.split("\x1f")
    out = []
    for n in nodes:
        if n.startswith("\nTag Table:") or n.startswith("\nEnd Tag Table") or n.startswith("\nIndirect:"):
            continue
        lines = n.split("\n")
        lines = [ln for ln in lines if not ln.startswith("File: ")]
        t = "\n".join(lines)
        t = re.sub(r"\* Menu:.*?(?=\n\n[^*]|\Z)", "", t, flags=re.S)
        t = re.sub(r"\*[Nn]ote ([^:]*)::", r"\1", t)
        t = re.sub(r"\*[Nn]ote [^:]*: ([^,.;]*)[,.;]", r"\1", t)
        out.append(t)
    return "\n\n".join(out)


def reflow(text):
    """Join hard-wrapped prose lines; keep indented/code lines as they are."""
    out, para = [], []
    for ln in text.split("\n"):
        s = ln.rstrip()
        if not s.strip():
            if para:
                out.append(" ".join(para))
                para = []
            out.append("")
        elif s.startswith((" ", "\t")) or len(s) < 30 and not para:
            if para:
                out.append(" ".join(para))
                para = []
            out.append(s)
        else:
            para.append(s.strip())
    if para:
        out.append(" ".join(para))
    return "\n".join(out)


# ------------------------------------------------------------ per package

def docs_for(pkg, files):
    """Yield (source_id, text) for one package."""
    if pkg == "bible-kjv-text":
        for i, d in enumerate(bible_docs()):
            yield "kjv/%04d" % i, d
    elif pkg in ("bible-kjv",):
        return
    elif pkg.startswith("fortunes"):
        for p in files:
            b = os.path.basename(p)
            if "/games/fortunes/" in p and "." not in b and b not in ("ascii-art", "art"):
                for i, d in enumerate(fortune_docs(p)):
                    yield "%s#%d" % (p, i), d
    elif pkg.startswith("dict-"):
        for p in files:
            if p.endswith(".dict.dz"):
                for i, d in enumerate(dict_docs(p)):
                    yield "%s#%d" % (p, i), d
    elif pkg == "wordnet-base":
        for i, d in enumerate(wordnet_docs(files)):
            yield "wordnet#%d" % i, d
    elif pkg == "miscfiles":
        for p in files:
            if "/usr/share/state/" in p:
                yield p, reflow(read_text(p))
    elif pkg == "gnome-user-docs":
        for p in files:
            if "/help/C/" in p and p.endswith(".page"):
                yield p, html_to_text(read_text(p))
    elif pkg == "debian-handbook":
        for p in files:
            if "/html/en-US/" in p and p.endswith(".html"):
                yield p, html_to_text(read_text(p))
    elif pkg == "debian-reference-en":
        for p in files:
            if p.endswith(".en.txt.gz"):
                yield p, read_text(p)
    elif pkg == "doc-debian":
        for p in files:
            b = os.path.basename(p)
            if "/doc/debian/" in p and (".txt" in b or "manifesto" in b) and not re.search(r"\.\d\.\d\.txt", b):
                yield p, reflow(read_text(p))
    elif pkg == "developers-reference":
        for p in files:
            if "/_sources/" in p and p.endswith(".rst.txt"):
                yield p, read_text(p)
    elif pkg in ("maint-guide", "debmake-doc"):
        for p in files:
            if p.endswith(".en.html"):
                yield p, html_to_text(read_text(p))
    elif pkg == "python3.11-doc":
        for p in files:
            if "/_sources/" in p and p.endswith(".rst.txt") and "/whatsnew/changelog" not in p:
                yield p, read_text(p)
    elif pkg == "perl-doc":
        for p in files:
            if p.endswith(".pod") and "perldelta" not in p and not re.search(r"perl5\d+delta", p):
                yield p, pod_to_text(read_text(p))
    elif pkg in ("gnu-standards", "r-doc-info"):
        for p in files:
            if "/usr/share/info/" in p:
                yield p, info_to_text(read_text(p))
    elif pkg == "git-doc":
        for p in files:
            if p.endswith(".txt") and "/RelNotes/" not in p:
                yield p, read_text(p)
    elif pkg == "vim-runtime":
        for p in files:
            if re.search(r"/vim\d+/doc/[^/]+\.txt$", p):
                yield p, read_text(p)
    elif pkg == "postgresql-doc-15":
        for p in files:
            if p.endswith(".html") and "release-" not in p:
                yield p, html_to_text(read_text(p))
    elif pkg in ("manpages", "manpages-dev"):
        for p in files:
            if "/usr/share/man/man" in p:
                yield p, man_to_text(read_text(p))
    elif pkg == "linux-doc-6.1":
        for p in files:
            if "/Documentation/" not in p or "/translations/" in p or "/devicetree/" in p or "/ABI/" in p:
                continue
            if re.search(r"\.(rst|txt)(\.gz)?$", p):
                yield p, read_text(p)
    else:
        raise SystemExit("no extractor for package " + pkg)


# ------------------------------------------------------------ cleaning

CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    text = CTRL.sub("", text)
    text = "\n".join(ln.rstrip() for ln in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n")


def english_enough(text):
    if len(text) < 200:
        return False
    letters = sum(1 for c in text if c.isascii() and (c.isalpha() or c == " "))
    non_ascii = sum(1 for c in text if not c.isascii())
    return letters / len(text) >= 0.70 and non_ascii / len(text) < 0.02


def dedup_key(p):
    return hashlib.sha1(" ".join(p.lower().split()).encode()).digest()


def pieces(text, limit=PIECE_BYTES):
    """Cut a long document at paragraph boundaries into pieces <= limit."""
    paras = text.split("\n\n")
    cur, size = [], 0
    for p in paras:
        if cur and size + len(p) > limit:
            yield "\n\n".join(cur)
            cur, size = [], 0
        cur.append(p)
        size += len(p) + 2
    if cur:
        yield "\n\n".join(cur)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--install", action="store_true", help="apt-get install the packages first")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus"))
    ap.add_argument("--only", default="", help="comma-separated subset of packages (debugging)")
    args = ap.parse_args()

    pkgs = [p for p, _ in PACKAGES]
    if args.only:
        pkgs = [p for p in pkgs if p in args.only.split(",")]
    if args.install:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + pkgs, check=True, env=env)
    missing = []
    for p in pkgs:
        if subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL).stdout.decode().find("ok installed") < 0:
            missing.append(p)
    if missing:
        sys.exit("build_corpus: packages not installed: %s (run with --install, as root, after apt-get update)"
                 % " ".join(missing))

    os.makedirs(args.out, exist_ok=True)
    seen = set()
    stats = {}
    n_train = n_valid = 0
    ftrain = open(os.path.join(args.out, "train.txt"), "w", encoding="utf-8", newline="\n")
    fvalid = open(os.path.join(args.out, "valid.txt"), "w", encoding="utf-8", newline="\n")
    for pkg in pkgs:
        files = pkg_files(pkg)
        st = {"version": pkg_version(pkg), "docs": 0, "bytes_train": 0, "bytes_valid": 0, "dropped_docs": 0}
        for src, text in docs_for(pkg, files):
            text = clean(text)
            kept = []
            for para in text.split("\n\n"):
                if len(para) >= 40:
                    k = dedup_key(para)
                    if k in seen:
                        continue
                    seen.add(k)
                kept.append(para)
            text = "\n\n".join(kept).strip("\n")
            if not english_enough(text):
                st["dropped_docs"] += 1
                continue
            st["docs"] += 1
            for i, piece in enumerate(pieces(text)):
                if len(piece) < 100:
                    continue
                h = hashlib.sha256(("%s#%d" % (src, i)).encode()).digest()
                held = int.from_bytes(h[:4], "big") % 1000 < HELDOUT_PER_MILLE
                f = fvalid if held else ftrain
                f.write(piece)
                f.write("\n" + RS + "\n")
                nb = len(piece.encode("utf-8"))
                if held:
                    st["bytes_valid"] += nb
                    n_valid += nb
                else:
                    st["bytes_train"] += nb
                    n_train += nb
        stats[pkg] = st
        print("%-22s %-28s docs %6d  train %10d  valid %8d" % (pkg, st["version"], st["docs"],
              st["bytes_train"], st["bytes_valid"]), flush=True)
    ftrain.close()
    fvalid.close()
    man = {"packages": stats, "train_bytes": n_train, "valid_bytes": n_valid}
    for name in ("train.txt", "valid.txt"):
        with open(os.path.join(args.out, name), "rb") as f:
            man[name + ".sha256"] = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(man, f, indent=1, sort_keys=True)
        f.write("\n")
    print("train %d bytes, valid %d bytes" % (n_train, n_valid))
    if n_train < 50_000_000:
        print("WARNING: corpus is below 50 MB", file=sys.stderr)


if __name__ == "__main__":
    main()
