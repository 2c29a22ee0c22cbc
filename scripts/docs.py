#!/usr/bin/python3
"""Keeps the documents' generated parts and examples true.

  scripts/docs.py table [--check]
      Copies bench/results/table.md (written by bench/run.sh through
      scripts/plot-bench.py) into every document that shows it, between
          <!-- begin bench/results/table.md -->
          <!-- end bench/results/table.md -->
      With --check, changes nothing and fails if a copy differs.

  scripts/docs.py packages
      Fails unless the README's table of install modes lists, for each mode
      of scripts/install-deps.sh, the packages that mode adds.

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
TABLE = ROOT / "bench/results/table.md"
TABLE_SHOWN_IN = [ROOT / "README.md", ROOT / "bench/README.md"]
EXAMPLES_IN = [ROOT / "README.md", ROOT / "docs/operations.md"]
BEGIN = "<!-- begin bench/results/table.md -->"
END = "<!-- end bench/results/table.md -->"
EXAMPLE_TAG = re.compile(r"^<!-- example: (console|c|output) -->$")


def table(check):
    generated = TABLE.read_text()
    stale = []
    for doc in TABLE_SHOWN_IN:
        text = doc.read_text()
        begin, end = text.find(BEGIN), text.find(END)
        if begin < 0 or end < begin:
            sys.exit(f"{doc.relative_to(ROOT)}: no {BEGIN} ... {END} block")
        updated = text[: begin + len(BEGIN)] + "\n" + generated + text[end:]
        if updated != text:
            stale.append(doc.relative_to(ROOT))
            if not check:
                doc.write_text(updated)
    if check and stale:
        sys.exit(f"not the table of {TABLE.relative_to(ROOT)}: {', '.join(map(str, stale))} "
                 "(scripts/docs.py table copies it)")
    print(("stale, rewrote: " if stale else "every copy is ") + (", ".join(map(str, stale)) or "current"))


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
                        print(f"{where}: a C example needs an <!-- example: output --> block after it")
                        failures += 1
                        continue
                    expected = "\n".join(following[1]) + "\n"
                    _, out, err = run_c(lines, build, scratch)
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
    examples_parser = sub.add_parser("examples", help="run the documents' examples")
    examples_parser.add_argument("build", help="a build directory with the library and the tools")
    examples_parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, "
                                 "docs/operations.md)")
    args = parser.parse_args()
    if args.job == "table":
        table(args.check)
    elif args.job == "packages":
        packages()
    else:
        examples(args.build, [f.resolve() for f in args.files] or EXAMPLES_IN)


if __name__ == "__main__":
    main()
