#!/usr/bin/python3
"""Checks that harness/ is in its layers: every include points to the file's own layer or one below.

usage: check-layers.py HARNESS_DIR

The layers and what each may include are read from HARNESS_DIR/CMakeLists.txt, the
swa_harness_layer(NAME ... LAYERS BELOW...) calls that build them, so the build and this check use one
table. cli (src/cli) is above every layer. Checked, for every file of src/ and include/swa/harness/:
  - it sits in a layer's folder (nothing left in the flat folders);
  - each #include "swa/harness/L/..." names its own layer L or one the table puts below it;
  - each bare #include "x.hpp" (no folder in the name) names a private header of the file's own
    folder: a header of another library is included by its public path ("swa/dut/cpu_dut.hpp"), so
    a reader sees which library it is and a library's private headers stay its own;
  - a layer's .cpp includes its own header first, where the layer has a header of that name (a
    header is implemented in its own .cpp, not in another file).
Exit 0: in order; 1: the violations are listed; 2: the folder or its CMakeLists.txt cannot be read.
"""
import pathlib
import re
import sys

KEYWORDS = {"SOURCES", "LAYERS", "PUBLIC", "PRIVATE"}
TOP = "cli"


def layer_table(cmake_text):
    table = {}
    for m in re.finditer(r"swa_harness_layer\((\w+)([^)]*)\)", cmake_text):
        name, words, below, section = m.group(1), m.group(2).split(), [], None
        for w in words:
            if w in KEYWORDS:
                section = w
            elif section == "LAYERS":
                below.append(w)
        table[name] = set(below)
    return table


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1])
    try:
        table = layer_table((root / "CMakeLists.txt").read_text())
    except OSError as e:
        print(f"check-layers.py: {e}", file=sys.stderr)
        return 2
    if not table:
        print(f"check-layers.py: {root / 'CMakeLists.txt'}: no swa_harness_layer(...) calls", file=sys.stderr)
        return 2
    # A layer may include what its listed layers may: the table lists the whole chain, but say so if not.
    problems = []
    for name, below in table.items():
        for b in below:
            if b not in table:
                problems.append(f"CMakeLists.txt: layer {name} links {b}, which is not a layer")
            elif not table[b] <= below:
                problems.append(f"CMakeLists.txt: layer {name} links {b} but not what {b} links: "
                                f"{', '.join(sorted(table[b] - below))}")
            elif name in table[b]:
                problems.append(f"CMakeLists.txt: layers {name} and {b} link each other")
    allowed = dict(table)
    allowed[TOP] = set(table)

    include_root = root / "include" / "swa" / "harness"
    files = [(p, p.parent.relative_to(root / "src")) for p in (root / "src").rglob("*") if p.is_file()]
    files += [(p, p.parent.relative_to(include_root)) for p in include_root.rglob("*") if p.is_file()]
    private_headers = {}  # a header of src/ by name -> its folders (a bare name elsewhere is a lower library's)
    for p, folder in files:
        if p.suffix == ".hpp" and p.is_relative_to(root / "src"):
            private_headers.setdefault(p.name, []).append(str(folder))
    include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for path, folder in sorted(files):
        rel = path.relative_to(root)
        layer = folder.parts[0] if folder.parts else None
        if layer not in allowed or len(folder.parts) != 1:
            problems.append(f"{rel}: not in a layer's folder (layers: {', '.join(sorted(allowed))})")
            continue
        text = path.read_text(errors="replace")
        for lineno, target in ((text.count("\n", 0, m.start()) + 1, m.group(1)) for m in include_re.finditer(text)):
            m = re.fullmatch(r"swa/harness/(\w+)/[\w.]+", target)
            if m:
                to = m.group(1)
                if to != layer and to not in allowed[layer]:
                    problems.append(f"{rel}:{lineno}: includes {target}: layer {layer} may include "
                                    f"{', '.join(sorted(allowed[layer] | {layer}))}")
                elif not (include_root / target.removeprefix("swa/harness/")).is_file():
                    problems.append(f"{rel}:{lineno}: includes {target}, which does not exist")
            elif target.startswith("swa/harness/"):
                problems.append(f"{rel}:{lineno}: includes {target}: not in a layer's folder")
            elif "/" not in target and not (path.parent / target).is_file():
                where = (f"a private header of {', '.join(private_headers[target])}" if target in private_headers
                         else "no header of harness/")
                problems.append(f"{rel}:{lineno}: includes \"{target}\", {where}, not of its folder {folder}: "
                                f"include a header of another library by its public path (swa/LIBRARY/{target})")
        if path.suffix == ".cpp" and layer != TOP:
            own = include_root / layer / (path.stem + ".hpp")
            private = path.with_suffix(".hpp")
            first = include_re.search(text)
            want = f"swa/harness/{layer}/{path.stem}.hpp" if own.is_file() else (private.name if private.is_file() else None)
            if want and (not first or first.group(1) != want):
                problems.append(f"{rel}: its first include is not its own header {want}")
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers.py: {len(problems)} violation(s) of the layer table in {root / 'CMakeLists.txt'}")
        return 1
    print(f"check-layers.py: {len(files)} files in {len(table) + 1} layers, every include downward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
