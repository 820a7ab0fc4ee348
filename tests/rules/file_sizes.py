#!/usr/bin/env python3
"""No source file over 500 lines: every file under src/, include/ and python/src/ of the
repository given as the argument (default: this checkout) is at most MAX_LINES lines long.
A module is small and whole: split a file that grows past the limit into files with one job
each. The checker first proves on a temporary tree
that it catches a long file, so it cannot pass by finding nothing."""
import os
import sys
import tempfile

MAX_LINES = 500
FOLDERS = ("src", "include", os.path.join("python", "src"))


def long_files(root):
    """[(path relative to root, lines)] of the files over MAX_LINES, sorted by path."""
    found = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    lines = sum(1 for _ in f)
                if lines > MAX_LINES:
                    found.append((os.path.relpath(path, root), lines))
    return sorted(found)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "src", "ops"))
        os.makedirs(os.path.join(root, "python", "src"))
        with open(os.path.join(root, "src", "ops", "short.cpp"), "w") as f:
            f.write("x\n" * MAX_LINES)
        with open(os.path.join(root, "python", "src", "long.cpp"), "w") as f:
            f.write("x\n" * (MAX_LINES + 1))
        got = long_files(root)
        want = [(os.path.join("python", "src", "long.cpp"), MAX_LINES + 1)]
        if got != want:
            sys.exit(f"file_sizes self-test: expected {want}, found {got}")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    self_test()
    too_long = long_files(os.path.abspath(root))
    for path, lines in too_long:
        print(f"{path}: {lines} lines, over the limit of {MAX_LINES}: split it into files with "
              "one job each", file=sys.stderr)
    if too_long:
        sys.exit(1)
    print(f"every file in {', '.join(FOLDERS)} has at most {MAX_LINES} lines")


if __name__ == "__main__":
    main()
