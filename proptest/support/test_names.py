"""The tests a test file holds, named as their reports name them (Suite.Name), read from its source
without building or importing it: what run_tests.py --skip reports skipped and what the docs check
(verification/docs/check_doc_test_names.py) accepts as a test.

  C++     TEST(Suite, Name) and PFX_PROPERTY(Suite, Name, ...)
  Python  def test_name in class Suite, named as run_tests.py reports it: test_foo_bar -> FooBar
"""
from __future__ import annotations

import ast
import pathlib
import re

CPP_TEST = re.compile(r"^(?:TEST|PFX_PROPERTY)\((\w+),\s*(\w+)", re.MULTILINE)


def sentence(method: str) -> str:
    """test_answers_as_the_seed -> AnswersAsTheSeed, the style of the C++ test names."""
    return "".join(word[:1].upper() + word[1:] for word in method.removeprefix("test_").split("_"))


def tests_in(path: pathlib.Path) -> list:
    """(suite, name) of each test of the file, in order."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".cpp"):
        return CPP_TEST.findall(text)
    return [(suite.name, sentence(method.name))
            for suite in ast.parse(text, str(path)).body if isinstance(suite, ast.ClassDef)
            for method in suite.body if isinstance(method, ast.FunctionDef) and method.name.startswith("test_")]
