"""Runs clang-tidy over the files of a compile database that match a pattern, in parallel, and keeps a
cache of the files it found clean, outside the clone, so that CI after a session checks only what
changed. Called by scripts/tidy.sh.

    python3 scripts/tidy_files.py BUILD_DIR PATH_REGEX LOG

A file's cache key is everything that decides clang-tidy's answer on it: clang-tidy's version, the
configuration (.clang-tidy), the compile command's flags, and the file's preprocessed text (headers
included, without line markers, so that clones in other folders share the key). Only clean answers are
cached: a file with a finding is checked again on every run. PFX_TIDY_CACHE sets the cache's folder
(default ~/.cache/pfx/tidy); PFX_TIDY_CACHE=off turns it off. Exits 1 when any file has a finding.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path | None:
    setting = os.environ.get("PFX_TIDY_CACHE", "")
    if setting == "off":
        return None
    base = Path(setting) if setting else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pfx" / "tidy"
    base.mkdir(parents=True, exist_ok=True)
    return base


def arguments(entry: dict) -> list[str]:
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def key(entry: dict, fixed: bytes) -> str | None:
    """The hash of what clang-tidy would see, or None when the file cannot be preprocessed."""
    args = arguments(entry)
    flags = [a for a in args[1:] if a != entry["file"]]
    # Drop the output and dependency-file options: they name build paths and change nothing checked.
    keep, skip = [], False
    for a in flags:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith("-o"):
            continue
        keep.append(a)
    done = subprocess.run([args[0], *keep, "-E", "-P", entry["file"]], cwd=entry["directory"],
                          capture_output=True)
    if done.returncode != 0:
        return None
    digest = hashlib.sha256(fixed)
    relative = [re.sub(re.escape(str(ROOT)), "<root>", a) for a in keep]
    digest.update("\0".join(relative).encode())
    digest.update(os.path.relpath(entry["file"], ROOT).encode())
    digest.update(done.stdout)
    return digest.hexdigest()


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    build, pattern, log = Path(argv[1]), re.compile(argv[2]), Path(argv[3])
    entries = [e for e in json.loads((build / "compile_commands.json").read_text()) if pattern.search(e["file"])]
    seen, unique = set(), []
    for e in entries:  # a file compiled into two targets is checked once
        if e["file"] not in seen:
            seen.add(e["file"])
            unique.append(e)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True, text=True).stdout
    fixed = (version + (ROOT / ".clang-tidy").read_text()).encode()
    cache = cache_dir()

    def check(entry: dict) -> tuple[str, bool, str, bool]:
        k = key(entry, fixed) if cache else None
        if k and (cache / k).exists():
            return entry["file"], True, "", True
        done = subprocess.run(["clang-tidy", "-p", str(build), "--quiet", entry["file"]], capture_output=True,
                              text=True)
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        clean = done.returncode == 0 and not re.search(r"(warning|error): ", output)
        if clean and k:
            (cache / k).touch()
        return entry["file"], clean, output, False

    jobs = os.cpu_count() or 2
    findings, cached = [], 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool, open(log, "w", encoding="utf-8") as out:
        for file, clean, output, hit in pool.map(check, unique):
            cached += hit
            out.write(f"clang-tidy {file}: {'clean' if clean else 'FINDINGS'}{' (cached)' if hit else ''}\n{output}")
            if not clean:
                findings.append((file, output))
    for file, output in findings:
        print(f"== {file}\n{output}", file=sys.stderr)
    print(f"clang-tidy: {len(unique)} files, {len(findings)} with findings, {cached} known clean from the cache"
          f"{'' if cache else ' (cache off)'}", file=sys.stderr)
    if not unique:
        print("clang-tidy: no file matched; nothing was checked", file=sys.stderr)
        return 1
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
