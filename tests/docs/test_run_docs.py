#!/usr/bin/env python3
"""Unit tests of the docs test's parser and matcher (tests/docs/run_docs.py)."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_docs  # noqa: E402


class LineMatch(unittest.TestCase):
    def test_exact_lines_match_and_trailing_spaces_do_not_count(self):
        self.assertTrue(run_docs.line_matches("a b", "a b   "))
        self.assertFalse(run_docs.line_matches("a b", "a  b"))
        self.assertFalse(run_docs.line_matches("a b", "a b c"))

    def test_regex_characters_are_literal(self):
        self.assertTrue(run_docs.line_matches('{"ids":[1,2]}', '{"ids":[1,2]}'))
        self.assertFalse(run_docs.line_matches("a.c", "abc"))

    def test_ellipsis_in_brackets_matches_any_text_within_the_line(self):
        self.assertTrue(run_docs.line_matches("took [...] s", "took 12.5 s"))
        self.assertTrue(run_docs.line_matches("took [...] s", "took  s"))
        self.assertFalse(run_docs.line_matches("took [...] s", "took 12.5 ms"))

    def test_approximate_number_within_one_unit_of_its_last_digit(self):
        self.assertTrue(run_docs.line_matches('{"nll":~7.70}', '{"nll":7.703125}'))
        self.assertTrue(run_docs.line_matches('{"nll":~7.70}', '{"nll":7.71}'))
        self.assertFalse(run_docs.line_matches('{"nll":~7.70}', '{"nll":7.68}'))
        self.assertTrue(run_docs.line_matches("ppl ~2215", "ppl 2215.07"))
        self.assertFalse(run_docs.line_matches("ppl ~2215", "ppl 2178.9"))
        self.assertTrue(run_docs.line_matches("~1e-3", "0.0015"))

    def test_approximate_number_with_an_explicit_tolerance(self):
        self.assertTrue(run_docs.line_matches("acc ~0.90±0.05", "acc 0.9463"))
        self.assertFalse(run_docs.line_matches("acc ~0.90±0.05", "acc 0.84"))

    def test_approximate_number_rejects_text(self):
        self.assertFalse(run_docs.line_matches("loss ~7.70", "loss nan"))


class OutputMatch(unittest.TestCase):
    def test_every_line_must_match_in_order(self):
        self.assertTrue(run_docs.output_matches(["a", "b"], ["a", "b", ""]))
        self.assertFalse(run_docs.output_matches(["a", "b"], ["b", "a"]))
        self.assertFalse(run_docs.output_matches(["a"], ["a", "b"]))
        self.assertFalse(run_docs.output_matches(["a", "b"], ["a"]))

    def test_dots_alone_match_any_number_of_lines(self):
        self.assertTrue(run_docs.output_matches(["a", "...", "z"], ["a", "z"]))
        self.assertTrue(run_docs.output_matches(["a", "...", "z"], ["a", "1", "2", "z"]))
        self.assertTrue(run_docs.output_matches(["...", "z"], ["1", "z"]))
        self.assertTrue(run_docs.output_matches(["..."], []))
        self.assertFalse(run_docs.output_matches(["a", "...", "z"], ["a", "1", "y"]))

    def test_no_expected_lines_means_no_output(self):
        self.assertTrue(run_docs.output_matches([], [""]))
        self.assertFalse(run_docs.output_matches([], ["noise"]))


PAGE = """Some text.

```console
$ echo one
one
$ printf 'a\\nb\\n' \\
    | cat
a
...
$ false
[exit 1]
```

```sh
$ not run
```

<!-- $ sleep 0 -->

  ```console
  $ echo indented
  indented
  ```
"""


class Parse(unittest.TestCase):
    def test_console_blocks_and_hidden_commands_in_page_order(self):
        commands = run_docs.parse_page(PAGE)
        self.assertEqual([c.text for c in commands],
                         ["echo one", "printf 'a\\nb\\n' \\\n    | cat", "false", "sleep 0",
                          "echo indented"])
        self.assertEqual(commands[0].expected, ["one"])
        self.assertEqual(commands[0].line, 4)
        self.assertEqual(commands[1].expected, ["a", "..."])
        self.assertEqual(commands[2].exit_code, 1)
        self.assertEqual(commands[2].expected, [])
        self.assertTrue(commands[3].hidden)
        self.assertEqual(commands[4].expected, ["indented"])

    def test_pycon_statements_with_continuations(self):
        page = "```pycon\n>>> x = 1\n>>> for i in range(2):\n...     print(i)\n0\n1\n```\n"
        commands = run_docs.parse_page(page)
        self.assertEqual([c.text for c in commands], ["x = 1", "for i in range(2):\n    print(i)"])
        self.assertTrue(all(c.python for c in commands))
        self.assertEqual(commands[1].expected, ["0", "1"])

    def test_background_commands(self):
        commands = run_docs.parse_page("```console\n$ zenith server &\n$ a && b\n```\n")
        self.assertTrue(commands[0].background)
        self.assertFalse(commands[1].background)

    def test_braces_expand_to_every_path(self):
        self.assertEqual(run_docs.expand_braces("a/{b,c}.h"), ["a/b.h", "a/c.h"])


REFERENCE = """# Command reference

## zenith train

  --epochs INT=10             total epochs
  --eval-epochs INT=1         evaluate every N epochs

## zenith token

### zenith token create

  --service TEXT              the service
"""


class Scratch(unittest.TestCase):
    def scratch(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder, True)
        return folder


class Flags(Scratch):
    def test_reference_sections_give_each_command_its_flags(self):
        flags = run_docs.reference_flags(REFERENCE)
        self.assertEqual(flags["train"], {"--help", "-h", "--epochs", "--eval-epochs"})
        self.assertIn("--service", flags["token create"])

    def test_a_renamed_flag_fails_in_blocks_continuations_and_inline_spans(self):
        repo = self.scratch()
        page = os.path.join(repo, "page.md")
        with open(page, "w") as f:
            f.write("Use `zenith train --eval-every 2` or `zenith train --epochs 1`.\n\n"
                    "```sh\nzenith train --epochs 1 \\\n    --eval-every 1   # --not-a-flag\n"
                    "zenith token create --service s | grep --count x\n```\n")
        failures = run_docs.check_flags(page, repo, run_docs.reference_flags(REFERENCE))
        self.assertEqual(len(failures), 2, failures)
        self.assertIn("page.md:1: `zenith train` has no flag --eval-every", failures[0])
        self.assertIn("page.md:4: `zenith train` has no flag --eval-every", failures[1])

    def test_missing_links_and_paths_fail(self):
        repo = self.scratch()
        os.makedirs(os.path.join(repo, "src", "core"))
        open(os.path.join(repo, "src", "core", "a.cpp"), "w").close()
        page = os.path.join(repo, "page.md")
        with open(page, "w") as f:
            f.write("[ok](src/core/a.cpp) [gone](nowhere.md) [web](https://x.org/y.md)\n"
                    "`src/core/a.cpp` `src/core/{a,b}.cpp` `src/core/a` `src/<name>`\n")
        failures = run_docs.check_paths(page, repo)
        self.assertEqual(len(failures), 2, failures)
        self.assertIn("link to nowhere.md", failures[0])
        self.assertIn("`src/core/b.cpp` names no file", failures[1])


class RunPage(Scratch):
    def test_a_page_runs_and_a_stale_output_fails_naming_its_line(self):
        repo = self.scratch()
        page = os.path.join(repo, "page.md")
        with open(page, "w") as f:
            f.write("```console\n$ echo $((6 * 7))\n42\n$ echo stale\nfresh\n```\n")
        failures, ran = run_docs.run_page(page, repo, repo, keep=False, timeout=30)
        self.assertEqual(ran, 2)
        self.assertEqual(len(failures), 1)
        self.assertIn("page.md:4", failures[0])
        self.assertIn("output differs", failures[0])

    def test_pycon_blocks_share_one_interpreter_and_show_values_and_errors(self):
        repo = self.scratch()
        page = os.path.join(repo, "page.md")
        with open(page, "w") as f:
            f.write("```pycon\n>>> x = 6\n>>> x * 7\n42\n>>> import os; os.write(1, b'fd\\n')\n"
                    "fd\n3\n>>> y\nTraceback (most recent call last):\n"
                    "NameError: name 'y' is not defined\n>>> zenith\n[...]\n```\n")
        failures, ran = run_docs.run_page(page, repo, repo, keep=False, timeout=30)
        self.assertEqual(ran, 5)
        self.assertEqual(len(failures), 1, failures)
        self.assertIn("page.md:11", failures[0])
        self.assertIn("NameError: name 'zenith' is not defined", failures[0])


if __name__ == "__main__":
    unittest.main()
