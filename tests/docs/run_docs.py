#!/usr/bin/env python3
"""The docs test: runs every ```console block of README.md and docs/*.md and compares the output.

The convention (docs/contributing.md says it for writers):

  ```console
  $ zenith tokenize --model tests/fixtures/text/llama3_bpe --text "Hello world" --json
  {"ids":[956,39,527,78,881],"tokens":["<|begin_of_text|>","H","ell","o","Ġworld"]}
  ```

- A line starting with `$ ` is a command (a line ending in `\\` continues it on the next line).
  The lines after it, up to the next command, are its expected output: standard output and
  standard error together, as a terminal shows them. A command with no lines after it must only
  succeed. It must exit 0, unless its last expected line is `[exit N]`.
- `...` alone on a line matches any number of lines (none included).
- `[...]` inside a line matches any text within that line.
- `~7.70` matches a number within one unit of its last digit (7.69 to 7.71); `~7.70±0.05`
  gives the tolerance.
- Trailing spaces are ignored; otherwise lines match exactly. Commands run under `bash -o
  pipefail`, so a failing command in a pipeline fails.
- `<!-- $ command -->` on a line of its own is a hidden command (set-up, waiting for a server):
  it runs in order with the others and must succeed; its output is not compared.
- A command ending in ` &` runs in the background until the page's last command has run.
- A ```pycon block is Python's interactive prompt: `>>> ` starts a statement (`... ` continues
  it), the lines after it are what it prints (an expression's value as the prompt shows it, an
  exception as `Traceback (most recent call last):` and the exception's line). A page's pycon
  blocks share one interpreter, started in the page's folder.

Other fenced blocks (```sh, ```yaml, ```python ...) are shown, not run. Every page runs in a
fresh temporary directory holding links to the repository's top-level entries (except build/
and out*/), with HOME and ZENITH_DATA inside it, so `examples/...` resolves as in a checkout and
whatever the commands write stays there. `$ZENITH_REPO` is the repository.

Also checked: docs/reference.md equals what scripts/make_reference.sh writes now; every flag
shown after `zenith CMD` (in any code block or span, run or not) is one that docs/reference.md
lists for CMD; every relative link in the pages names a file that exists; and every path in
backquotes that starts with src/, include/, tests/, scripts/, examples/, bench/, python/, web/
or docs/ exists.

Usage: run_docs.py --repo DIR --bin-dir DIR [--page PATTERN] [--list] [--keep]
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
APPROX = re.compile(r"~(" + NUMBER + r")(?:±(" + NUMBER + r"))?")


# ---------------------------------------------------------------------------------------------
# Parsing


class Command:
    def __init__(self, text, line, hidden=False, python=False):
        self.text = text  # the command, continuation lines joined with newlines
        self.line = line  # 1-based line of the page where it starts
        self.hidden = hidden
        self.python = python  # a `>>> ` statement of a ```pycon block
        self.expected = []  # expected output lines
        self.exit_code = 0

    @property
    def background(self):
        t = self.text.rstrip()
        return not self.python and t.endswith("&") and not t.endswith("&&")


def parse_page(text):
    """The page's commands in order: those of ```console blocks and hidden ones."""
    commands = []
    lines = text.split("\n")
    i = 0
    fence = None
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if fence is None:
            m = re.match(r"^(\s*)(```+|~~~+)\s*(\S*)", line)
            if m:
                fence = (m.group(1), m.group(2), m.group(3))
                if fence[2] in ("console", "pycon"):
                    i = _parse_console(lines, i + 1, fence, commands, fence[2] == "pycon")
                    fence = None
                    continue
            else:
                h = re.match(r"^\s*<!--\s*\$ (.*?)\s*-->\s*$", line)
                if h:
                    commands.append(Command(h.group(1), i + 1, hidden=True))
        elif stripped.startswith(fence[1]) and stripped.strip("`~") == "":
            fence = None
        i += 1
    return commands


def _parse_console(lines, i, fence, commands, python):
    indent = fence[0]
    prompt, more = (">>> ", "... ") if python else ("$ ", None)
    current = None
    first = len(commands)
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith(fence[1]) and line.strip().strip("`~") == "":
            break
        if line.startswith(indent):
            line = line[len(indent):]
        if line.startswith(prompt) or (python and line.rstrip() == ">>>"):
            text = line[len(prompt):]
            start = i + 1

            def following():
                nxt = lines[i + 1]
                return nxt[len(indent):] if nxt.startswith(indent) else nxt

            while i + 1 < len(lines):
                if python and following().startswith(more):
                    text += "\n" + following()[len(more):]
                elif not python and text.endswith("\\"):
                    text += "\n" + following()
                else:
                    break
                i += 1
            current = Command(text, start, python=python)
            commands.append(current)
        elif current is not None:
            current.expected.append(line)
        i += 1
    for c in commands[first:]:
        while c.expected and c.expected[-1].strip() == "":
            c.expected.pop()
        if c.expected:
            m = re.match(r"^\[exit (\d+)\]$", c.expected[-1].strip())
            if m:
                c.exit_code = int(m.group(1))
                c.expected.pop()
    return i + 1


# ---------------------------------------------------------------------------------------------
# Matching


def _line_pattern(expected):
    """A regex for one expected line, and the approximate numbers in it (value, tolerance)."""
    parts = []
    approx = []
    pos = 0
    tokens = re.compile(r"\[\.\.\.\]|" + APPROX.pattern)
    for m in tokens.finditer(expected):
        parts.append(re.escape(expected[pos:m.start()]))
        if m.group(0) == "[...]":
            parts.append(".*?")
        else:
            shown = m.group(1)
            if m.group(2) is not None:
                tolerance = float(m.group(2))
            else:
                mantissa = re.split(r"[eE]", shown)[0]
                decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
                exponent = int(re.split(r"[eE]", shown)[1]) if re.search(r"[eE]", shown) else 0
                tolerance = 10.0 ** (exponent - decimals)
            approx.append((float(shown), tolerance))
            parts.append("(" + NUMBER + ")")
        pos = m.end()
    parts.append(re.escape(expected[pos:]))
    return re.compile("^" + "".join(parts) + "$"), approx


def line_matches(expected, actual):
    """Whether one output line matches one expected line (`[...]`, `~N`, trailing spaces)."""
    pattern, approx = _line_pattern(expected.rstrip())
    actual = actual.rstrip()
    if not approx:
        return pattern.match(actual) is not None
    m = pattern.match(actual)
    if m is None:
        return False
    for (value, tolerance), got in zip(approx, m.groups()):
        if abs(float(got) - value) > tolerance * (1 + 1e-9):
            return False
    return True


def output_matches(expected_lines, actual_lines):
    """Whether the output matches the expected lines; `...` alone matches any lines."""
    expected = [e for e in expected_lines]
    actual = [a for a in actual_lines]
    while actual and actual[-1].strip() == "":
        actual.pop()
    memo = {}

    def match(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            result = j == len(actual)
        elif expected[i].strip() == "...":
            result = any(match(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = (j < len(actual) and line_matches(expected[i], actual[j]) and
                      match(i + 1, j + 1))
        memo[key] = result
        return result

    sys.setrecursionlimit(max(10000, 4 * (len(expected) + len(actual)) + 100))
    return match(0, 0)


# ---------------------------------------------------------------------------------------------
# Running


# Runs ```pycon statements one at a time as Python's interactive prompt does (an expression's
# value is printed), in one interpreter per page; what a statement writes to file descriptors 1
# and 2 (C++ logs included) is its output, and an exception prints the traceback's last line.
PYTHON_DRIVER = r"""
import json, os, sys, tempfile, traceback
reply = os.fdopen(os.dup(1), "w")
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    source = json.loads(request)
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1); os.dup2(f.fileno(), 2)
        ok = True
        try:
            exec(compile(source, "<docs>", "single"), namespace)
        except BaseException:
            ok = False
            print("Traceback (most recent call last):")
            print(traceback.format_exc().rstrip().split("\n")[-1])
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        os.close(saved[0]); os.close(saved[1])
        f.seek(0)
        out = f.read().decode("utf-8", "replace")
    reply.write(json.dumps({"out": out, "ok": ok}) + "\n"); reply.flush()
"""


class PythonSession:
    def __init__(self, work, env):
        self.proc = subprocess.Popen([sys.executable if not shutil.which("python3") else "python3",
                                      "-u", "-c", PYTHON_DRIVER], cwd=work, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)

    def run(self, source, timeout):
        import json
        import threading
        self.proc.stdin.write(json.dumps(source) + "\n")
        self.proc.stdin.flush()
        result = {}
        reader = threading.Thread(target=lambda: result.update(
            line=self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if "line" not in result:
            self.close()
            return "", "timeout after %d s" % timeout
        if not result["line"]:
            return "", "the interpreter exited"
        # An exception is output like any other (its traceback's last line): shown, it passes.
        return json.loads(result["line"])["out"], 0

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


def make_workdir(repo, keep):
    work = tempfile.mkdtemp(prefix="zenith-docs-")
    for entry in os.listdir(repo):
        if entry in ("build", ".git") or entry.startswith("out"):
            continue
        os.symlink(os.path.join(repo, entry), os.path.join(work, entry))
    os.makedirs(os.path.join(work, "home"))
    return work


def page_env(repo, bin_dir, work):
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(bin_dir) + os.pathsep + env.get("PATH", "")
    env["HOME"] = os.path.join(work, "home")
    env["ZENITH_DATA"] = os.path.join(work, "home", ".zenith")
    env["ZENITH_REPO"] = repo
    env["NO_COLOR"] = "1"
    for name in ("ZENITH_SERVER", "ZENITH_TOKEN"):
        env.pop(name, None)
    return env


SHOW = False  # --show: print every command's output, to write a page's expected lines from


def _report(c, rel, code, out, took, failures):
    problem = None
    if code != c.exit_code:
        problem = "exited %s, expected %d" % (code, c.exit_code) if not c.python else code
    elif not c.hidden and not output_matches(c.expected, out.split("\n")):
        problem = "output differs"
    label = "%s:%d" % (rel, c.line)
    print("  %-32s %5.1f s  %s" % (label, took, "FAILED: " + problem if problem else "ok"))
    if SHOW:
        print("    $ " + c.text.replace("\n", "\n      "))
        print("    " + out.rstrip().replace("\n", "\n    "))
    sys.stdout.flush()
    if problem:
        failures.append("%s: `%s` %s\n--- expected\n%s\n--- got\n%s" % (
            label, c.text, problem, "\n".join(c.expected), out.rstrip()))


def run_page(path, repo, bin_dir, keep, timeout):
    """Runs the page's commands; returns a list of failure messages."""
    with open(path, encoding="utf-8") as f:
        commands = parse_page(f.read())
    if not commands:
        return [], 0
    rel = os.path.relpath(path, repo)
    work = make_workdir(repo, keep)
    env = page_env(repo, bin_dir, work)
    background = []
    failures = []
    python = None
    try:
        for c in commands:
            if c.python:
                python = python or PythonSession(work, env)
                start = time.monotonic()
                out, code = python.run(c.text, timeout)
                took = time.monotonic() - start
                _report(c, rel, code, out, took, failures)
                continue
            if c.background:
                p = subprocess.Popen(["bash", "-c", c.text.rstrip()[:-1]], cwd=work, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
                background.append(p)
                continue
            start = time.monotonic()
            try:
                r = subprocess.run(["bash", "-o", "pipefail", "-c", c.text], cwd=work, env=env,
                                   timeout=timeout, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
                out = r.stdout.decode("utf-8", "replace")
                code = r.returncode
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode("utf-8", "replace")
                code = "timeout after %d s" % timeout
            _report(c, rel, code, out, time.monotonic() - start, failures)
    finally:
        if python:
            python.close()
        for p in background:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if keep:
            print("  kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return failures, len([c for c in commands if not c.hidden])


# ---------------------------------------------------------------------------------------------
# Static checks


PATH_PREFIXES = ("src/", "include/", "tests/", "scripts/", "examples/", "bench/", "python/",
                 "web/", "docs/")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(path[:m.start()] + alt + path[m.end():])
    return out


def check_paths(path, repo):
    """Relative links and backquoted repository paths that name nothing in the tree."""
    failures = []
    rel = os.path.relpath(path, repo)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(path)
    for n, line in enumerate(text.split("\n"), 1):
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue
            if not os.path.exists(os.path.join(base, target)):
                failures.append("%s:%d: link to %s, which does not exist" % (rel, n, target))
        for m in re.finditer(r"`([^`\s]+)`", line):
            token = m.group(1)
            if not token.startswith(PATH_PREFIXES) or re.search(r"[<>$]|\.\.\.", token):
                continue
            token = token.split(":")[0].rstrip(".,;")
            for candidate in expand_braces(token):
                # A program is named by its source: `bench/llm` is bench/llm.cpp's.
                where = os.path.join(repo, candidate)
                if not glob.glob(where) and not glob.glob(where + ".*"):
                    failures.append("%s:%d: `%s` names no file or folder of the tree" %
                                    (rel, n, candidate))
    return failures


def reference_flags(reference_text):
    """{"train": {"--epochs", ...}, "token create": {...}} from docs/reference.md's sections."""
    flags = {}
    current = None
    for line in reference_text.split("\n"):
        m = re.match(r"^#{2,3} zenith (.+)$", line)
        if m:
            current = flags.setdefault(m.group(1).strip(), {"--help", "-h"})
        elif current is not None:
            current.update(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line))
    return flags


ZENITH_CALL = re.compile(r"(?:^|[\s$(;&|])zenith ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)([^|;&#]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def zenith_invocations(text):
    """(line, command, subcommand, flags) of every `zenith CMD ...` in code blocks and spans; a
    block's lines ending in a backslash are joined first."""
    found = []
    in_block = False
    pending, pending_line = "", 0
    for n, line in enumerate(text.split("\n"), 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_block = not in_block
            continue
        if in_block:
            if not pending:
                pending_line = n
            pending += " " + line.rstrip().rstrip("\\")
            if line.rstrip().endswith("\\"):
                continue
            spans, where = [pending], pending_line
            pending = ""
        else:
            spans, where = re.findall(r"`([^`]+)`", line), n
        for span in spans:
            for m in ZENITH_CALL.finditer(span.split(" #")[0]):
                found.append((where, m.group(1), m.group(2).strip(), FLAG.findall(m.group(3))))
    return found


def check_flags(path, repo, flags):
    """Flags shown after `zenith CMD` that `zenith CMD --help` does not list (a renamed flag)."""
    failures = []
    rel = os.path.relpath(path, repo)
    if rel == os.path.join("docs", "reference.md"):
        return failures
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for n, cmd, sub, used in zenith_invocations(text):
        known = flags.get("%s %s" % (cmd, sub)) if sub else None
        known = known or flags.get(cmd)
        if known is None:
            continue  # not a command (prose such as `zenith train`'s): the reference lists them
        for flag in used:
            if flag not in known and flag not in flags.get(cmd, ()):
                failures.append("%s:%d: `zenith %s` has no flag %s (docs/reference.md)" %
                                (rel, n, (cmd + " " + sub).strip(), flag))
    return failures


def check_reference(repo, bin_dir):
    script = os.path.join(repo, "scripts", "make_reference.sh")
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(bin_dir) + os.pathsep + env.get("PATH", "")
    r = subprocess.run(["bash", script, "-"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        return ["scripts/make_reference.sh failed: %s" % r.stderr.decode(errors="replace")]
    with open(os.path.join(repo, "docs", "reference.md"), encoding="utf-8") as f:
        shown = f.read()
    made = r.stdout.decode("utf-8")
    if shown == made:
        return []
    import difflib
    diff = "".join(difflib.unified_diff(shown.splitlines(True), made.splitlines(True),
                                        "docs/reference.md", "zenith --help now", n=1))
    return ["docs/reference.md is stale (run scripts/make_reference.sh):\n" + diff[:4000]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", default=os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    parser.add_argument("--bin-dir", required=True, help="the folder holding `zenith`")
    parser.add_argument("--page", default="", help="only pages whose path contains this")
    parser.add_argument("--list", action="store_true", help="list the commands, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the working folders")
    parser.add_argument("--show", action="store_true", help="print every command's output")
    parser.add_argument("--timeout", type=int, default=180, help="seconds per command")
    args = parser.parse_args()
    repo = os.path.abspath(args.repo)
    global SHOW
    SHOW = args.show
    pages = [os.path.join(repo, "README.md")] + sorted(glob.glob(os.path.join(repo, "docs",
                                                                                "*.md")))
    pages = [p for p in pages if args.page in os.path.relpath(p, repo)]
    if args.list:
        for p in pages:
            with open(p, encoding="utf-8") as f:
                for c in parse_page(f.read()):
                    print("%s:%d %s%s" % (os.path.relpath(p, repo), c.line,
                                          "(hidden) " if c.hidden else "", c.text))
        return 0
    start = time.monotonic()
    failures = []
    with open(os.path.join(repo, "docs", "reference.md"), encoding="utf-8") as f:
        flags = reference_flags(f.read())
    for p in pages:
        failures += check_paths(p, repo)
        failures += check_flags(p, repo, flags)
    if not args.page or "reference" in args.page:
        failures += check_reference(repo, args.bin_dir)
    ran = 0
    for p in pages:
        print(os.path.relpath(p, repo))
        f, n = run_page(p, repo, args.bin_dir, args.keep, args.timeout)
        failures += f
        ran += n
    print("%d commands in %d pages, %.0f s, %d failures" % (ran, len(pages),
                                                            time.monotonic() - start,
                                                            len(failures)))
    for f in failures:
        print("\nFAILED " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
