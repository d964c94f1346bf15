"""corpus.py - the training corpus: permissively licensed code that is on every machine that
builds this project, so training needs nothing from the network. Two sources:
  - node_modules after `npm ci` (pinned by package-lock.json): .ts, .d.ts, .js, .mjs, .cjs
    files of packages whose package.json licence is in PERMISSIVE;
  - the Python standard library of Debian's python3.11 (/usr/lib/python3.11, PSF-2.0),
    without its test suite.
Minified or generated files (long lines), files over MAX_BYTES and exact duplicates are
dropped. The project's own code is not used at all. Files are split train / held-out by a
hash of their path (HELD_OUT_EVERY), so the split does not move when files are added.
"""
import hashlib
import json
import os

PERMISSIVE = {"MIT", "ISC", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "BlueOak-1.0.0", "CC0-1.0",
              "Unlicense", "Python-2.0", "PSF-2.0"}
JS_SUFFIXES = (".ts", ".js", ".mjs", ".cjs", ".mts", ".cts")
MAX_BYTES = 200_000
MAX_LINE = 400
HELD_OUT_EVERY = 40
PYTHON_STDLIB = "/usr/lib/python3.11"


def _package_licence(directory, cache):
    """The licence of the nearest package.json at or above `directory` inside node_modules."""
    d = directory
    while d and os.path.basename(d) != "node_modules":
        if d in cache:
            return cache[d]
        meta = os.path.join(d, "package.json")
        if os.path.exists(meta):
            try:
                with open(meta, encoding="utf-8") as f:
                    info = json.load(f)
            except (OSError, ValueError):
                info = {}
            if "name" in info:
                lic = info.get("license")
                if isinstance(lic, dict):
                    lic = lic.get("type")
                cache[d] = (info["name"], lic if isinstance(lic, str) else None)
                return cache[d]
        d = os.path.dirname(d)
    return (None, None)


def _looks_written(text):
    lines = text.split("\n")
    return len(lines) >= 3 and max(len(l) for l in lines) <= MAX_LINE


def _candidates(root):
    cache = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, "node_modules")):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(JS_SUFFIXES) or ".min." in name:
                continue
            package, lic = _package_licence(dirpath, cache)
            if package is not None and lic in PERMISSIVE:
                yield os.path.join(dirpath, name), f"npm:{package}", lic
    for dirpath, dirnames, filenames in os.walk(PYTHON_STDLIB):
        dirnames[:] = sorted(d for d in dirnames if d not in ("test", "tests", "idle_test", "site-packages", "__pycache__"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name), "python3.11-stdlib", "PSF-2.0"


def collect(root):
    """[{path, source, licence, split}] for every kept file, in a stable order."""
    seen, files = set(), []
    for path, source, lic in _candidates(root):
        if os.path.getsize(path) > MAX_BYTES:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        digest = hashlib.sha1(text.encode()).hexdigest()
        if digest in seen or not _looks_written(text):
            continue
        seen.add(digest)
        rel = os.path.relpath(path, root) if path.startswith(root) else path
        bucket = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16) % HELD_OUT_EVERY
        files.append({"path": path, "name": rel, "source": source, "licence": lic,
                      "split": "held_out" if bucket == 0 else "train", "bytes": len(text.encode())})
    return files


def read_text(entry):
    with open(entry["path"], encoding="utf-8") as f:
        return f.read()
