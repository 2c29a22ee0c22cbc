#!/usr/bin/python3
"""Keeps the documents' generated parts and examples true.

  scripts/docs.py table [--check]
      Copies bench/results/headline.md into README.md and
      bench/results/table.md into bench/README.md (both written by
      bench/run.sh through scripts/plot-bench.py), between
          <!-- begin bench/results/<name>.md -->
          <!-- end bench/results/<name>.md -->
      With --check, changes nothing and fails if a copy differs.

  scripts/docs.py packages
      Fails unless the README's table of install modes lists, for each mode
      of scripts/install-deps.sh, the packages that mode adds.

  scripts/docs.py lengths
      Fails if README.md passes 300 lines, bench/README.md 580, or the
      README's headline table 12 rows: the front page stays a front page.

  scripts/docs.py references
      Fails if a document points at something missing: a Markdown link to a
      file that does not exist or to an #anchor no heading makes, or a
      section named in prose -- a document's path, then a quoted heading -- that is not a
      heading of that document (a heading that starts with the name will
      do). Reads every Markdown file of the repository and the public
      header.

  scripts/docs.py examples BUILD_DIR [FILE.md ...]
      Runs the examples of README.md and docs/operations.md (or the FILEs)
      and fails if one's output is not the output shown. An example is a
      fenced block right after an HTML comment:
          <!-- example: console -->   a shell session: lines starting with
              "$ " are commands (a here-document's lines go with its
              command), every other line is expected output. The commands
              run in order in one bash, in a scratch directory, with
              BUILD_DIR/src/tools on PATH; stdout is compared.
          <!-- example: c -->         a whole C program, compiled against
              include/ and BUILD_DIR's shared library and run; its expected
              output is the next fenced block, marked <!-- example: output -->.
          <!-- example: python -->    a whole Python program, run by
              /usr/bin/python3 with python/ on its path and SCI_LIB_DIR set
              to BUILD_DIR; its output is the next <!-- example: output -->.
      In expected output "…" stands for any text within the line.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each generated table and the documents that show it: the README shows the
# headline rows, bench/README.md the full table.
TABLES = {
    "bench/results/headline.md": [ROOT / "README.md"],
    "bench/results/table.md": [ROOT / "bench/README.md"],
}
EXAMPLES_IN = [ROOT / "README.md", ROOT / "docs/operations.md"]
EXAMPLE_TAG = re.compile(r"^<!-- example: (console|c|python|output) -->$")


def table(check):
    stale = []
    for name, docs in TABLES.items():
        generated = (ROOT / name).read_text()
        begin_tag, end_tag = f"<!-- begin {name} -->", f"<!-- end {name} -->"
        for doc in docs:
            text = doc.read_text()
            begin, end = text.find(begin_tag), text.find(end_tag)
            if begin < 0 or end < begin:
                sys.exit(f"{doc.relative_to(ROOT)}: no {begin_tag} ... {end_tag} block")
            updated = text[: begin + len(begin_tag)] + "\n" + generated + text[end:]
            if updated != text:
                stale.append(f"{doc.relative_to(ROOT)} ({name})")
                if not check:
                    doc.write_text(updated)
    if check and stale:
        sys.exit(f"not the generated table: {', '.join(stale)} (scripts/docs.py table copies it)")
    print(("stale, rewrote: " if stale else "every copy is ") + (", ".join(stale) or "current"))


def packages():
    """Each mode's packages in scripts/install-deps.sh against the README's table."""
    script = (ROOT / "scripts/install-deps.sh").read_text()
    readme = (ROOT / "README.md").read_text()
    wrong = []
    for mode in ("runtime", "build", "dev"):
        array = re.search(rf"^{mode}_packages=\((.*?)^\)", script, re.S | re.M)
        if array is None:
            sys.exit(f"scripts/install-deps.sh: no {mode}_packages=( ... ) array")
        listed = [line.split("#")[0].split() for line in array.group(1).splitlines()]
        installed = [name for names in listed for name in names]
        row = re.search(rf"^\| `{mode}`[^|]*\|[^|]*\| `([^`]*)` \|$", readme, re.M)
        shown = row.group(1).split() if row else None
        if shown != installed:
            wrong.append(f"{mode}: install-deps.sh installs {' '.join(installed)}; README.md shows "
                         f"{' '.join(shown) if shown else 'no row'}")
    if wrong:
        sys.exit("README.md's install modes differ from scripts/install-deps.sh:\n  " + "\n  ".join(wrong))
    print("README.md lists the packages of every install mode")


LIMITS = {"README.md": 300, "bench/README.md": 580}
HEADLINE_ROWS = 12


def lengths():
    wrong = []
    for name, limit in LIMITS.items():
        n = len((ROOT / name).read_text().splitlines())
        if n > limit:
            wrong.append(f"{name}: {n} lines (at most {limit})")
    rows = [line for line in (ROOT / "bench/results/headline.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| measure ")]
    if len(rows) > HEADLINE_ROWS:
        wrong.append(f"bench/results/headline.md: {len(rows)} rows (at most {HEADLINE_ROWS})")
    if wrong:
        sys.exit("\n".join(wrong))
    print("README.md, bench/README.md and the headline table are within their lengths")


def headings(path):
    """The headings of a Markdown file, as written (without the #s)."""
    found, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return text.replace(" ", "-")


def references():
    docs = [p for p in ROOT.rglob("*.md")
            if not any(part.startswith(".") or part in ("build", "target") or part.startswith("build-")
                       for part in p.relative_to(ROOT).parts)]
    sources = docs + [ROOT / "include/shared_cache_index.h"]
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    # `docs/x.md`, "Heading"  or  docs/x.md, "Heading"  or  docs/x.md "Heading"
    named = re.compile(r"`?([\w./-]+\.md)`?,? (?:section )?\"([^\"]+)\"")
    wrong = []
    for src in sources:
        text = src.read_text()
        if src.suffix == ".h":
            text = re.sub(r"(?m)^\s*\*(?: |$)", "", text)  # a comment's leading " * "
        where = src.relative_to(ROOT)
        for target in link.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # a URL
            file_part, _, anchor = target.partition("#")
            path = (src.parent / file_part).resolve() if file_part else src
            if not path.exists():
                wrong.append(f"{where}: link to {target}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in {slug(h) for h in headings(path)}:
                wrong.append(f"{where}: link to {target}: no heading makes #{anchor}")
        for doc, section in named.findall(" ".join(text.split())):
            candidates = [(src.parent / doc).resolve(), (ROOT / doc).resolve()]
            path = next((c for c in candidates if c.exists()), None)
            if path is None:
                if "/" in doc or doc[0].isupper():
                    wrong.append(f"{where}: {doc}, \"{section}\": no such document")
                continue
            # "5. The descriptor" is named "The descriptor" too.
            titles = [t for h in headings(path) for t in (h, re.sub(r"^\d+(\.\d+)*\.? ", "", h))]
            if not any(t.startswith(section) for t in titles):
                wrong.append(f"{where}: {doc}, \"{section}\": no such section")
    if wrong:
        sys.exit("\n".join(sorted(set(wrong))))
    print(f"every link and named section of {len(sources)} documents exists")


def fenced_blocks(path):
    """(tag, lines, line number) of every tagged fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        tag = EXAMPLE_TAG.match(lines[i])
        if tag and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            start = i + 2
            end = start
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append((tag.group(1), lines[start:end], start + 1))
            i = end
        i += 1
    return blocks


def matches(expected, actual):
    expected, actual = expected.splitlines(), actual.splitlines()
    if len(expected) != len(actual):
        return False
    for want, got in zip(expected, actual):
        pattern = ".*?".join(re.escape(part) for part in want.split("…"))
        if not re.fullmatch(pattern, got):
            return False
    return True


def console_session(lines):
    """The session's commands as one bash script, and its expected output."""
    commands, expected = [], []
    heredoc_end = None
    for line in lines:
        if heredoc_end is not None:
            commands.append(line)
            if line == heredoc_end:
                heredoc_end = None
        elif line.startswith("$ "):
            commands.append(line[2:])
            heredoc = re.search(r"<<-?'?(\w+)'?$", line)
            heredoc_end = heredoc.group(1) if heredoc else None
        else:
            expected.append(line)
    return "\n".join(commands) + "\n", "\n".join(expected) + "\n"


def run_console(lines, build, scratch):
    script, expected = console_session(lines)
    env = dict(os.environ, PATH=f"{build}/src/tools:{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True,
                            timeout=120)
    return expected, result.stdout, result.stderr


def run_c(lines, build, scratch):
    source = Path(scratch) / "example.c"
    source.write_text("\n".join(lines) + "\n")
    binary = Path(scratch) / "example"
    compile_ = subprocess.run(
        ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", str(source), "-o", str(binary),
         f"-I{ROOT}/include", f"-L{build}", "-lshared_cache_index", f"-Wl,-rpath,{build}"],
        capture_output=True, text=True)
    if compile_.returncode != 0:
        return None, "", compile_.stderr
    result = subprocess.run([str(binary)], cwd=scratch, capture_output=True, text=True, timeout=60)
    return None, result.stdout, result.stderr


def run_python(lines, build, scratch):
    source = Path(scratch) / "example.py"
    source.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), SCI_LIB_DIR=str(build))
    result = subprocess.run(["/usr/bin/python3", str(source)], cwd=scratch, env=env, capture_output=True, text=True,
                            timeout=60)
    return None, result.stdout, result.stderr


def examples(build, files):
    build = Path(build).resolve()
    failures = ran = 0
    for doc in files:
        blocks = fenced_blocks(doc)
        for index, (tag, lines, line_number) in enumerate(blocks):
            if tag == "output":
                continue
            where = f"{doc.relative_to(ROOT)}:{line_number}"
            with tempfile.TemporaryDirectory(prefix="sci-doc-example-") as scratch:
                if tag == "console":
                    expected, out, err = run_console(lines, build, scratch)
                else:
                    following = blocks[index + 1] if index + 1 < len(blocks) else None
                    if following is None or following[0] != "output":
                        print(f"{where}: a {tag} example needs an <!-- example: output --> block after it")
                        failures += 1
                        continue
                    expected = "\n".join(following[1]) + "\n"
                    _, out, err = (run_c if tag == "c" else run_python)(lines, build, scratch)
            ran += 1
            if matches(expected, out):
                print(f"{where}: {tag} example ran as shown")
            else:
                failures += 1
                print(f"{where}: {tag} example's output differs\n--- shown\n{expected}--- got\n{out}"
                      f"--- stderr\n{err}")
    if ran == 0:
        sys.exit("no example found")
    if failures:
        sys.exit(f"{failures} of {ran} examples do not run as shown")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="job", required=True)
    table_parser = sub.add_parser("table", help="copy bench/results/table.md into the documents")
    table_parser.add_argument("--check", action="store_true", help="only check the copies")
    sub.add_parser("packages", help="check the README's install modes against scripts/install-deps.sh")
    sub.add_parser("lengths", help="check the README's and bench/README.md's lengths")
    sub.add_parser("references", help="check every link and named section of the documents")
    examples_parser = sub.add_parser("examples", help="run the documents' examples")
    examples_parser.add_argument("build", help="a build directory with the library and the tools")
    examples_parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, "
                                 "docs/operations.md)")
    args = parser.parse_args()
    if args.job == "table":
        table(args.check)
    elif args.job == "packages":
        packages()
    elif args.job == "lengths":
        lengths()
    elif args.job == "references":
        references()
    else:
        examples(args.build, [f.resolve() for f in args.files] or EXAMPLES_IN)


if __name__ == "__main__":
    main()
