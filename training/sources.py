"""sources.py - the fixed, named list of what k3-mini v2 is trained on beyond what the build
installs (node_modules after `npm ci`, Debian's Python 3.11 standard library): npm packages
at pinned versions (fetched with `npm pack`) and Debian bookworm packages at pinned versions
(fetched with `apt-get download`, unpacked with `dpkg-deb -x`, never installed). Each entry
names its licence; corpus.py --fetch checks it against the package's own package.json or
Debian copyright file and refuses the package when they disagree. Only MIT, BSD, Apache-2.0,
ISC and PSF licences are listed. No registry is searched: this list is the whole of it.

Entry fields: `include` are folders (or files) inside the package root whose source files
are used (all of it when absent), `exclude` are folder names skipped anywhere below them,
`root` (Debian) is the folder of the unpacked package whose relative paths are the files'
names (the path a header line shows), `lang_h` the language of its .h files, `copyright_says` the
first License: field of a Debian copyright file that names the licence loosely ("BSD"), `cap_mb` the
most text kept from one package (files taken in the order of a hash of their names), so no
single package dominates.
"""

# npm packages that ship readable sources (src/ folders of TypeScript or JavaScript, or
# per-file compiled modules), not only bundles. Packages already in node_modules are not
# repeated here.
NPM = [
    {"name": "rxjs", "version": "7.8.1", "licence": "Apache-2.0", "include": ["src"]},
    {"name": "three", "version": "0.160.0", "licence": "MIT", "include": ["src", "examples/jsm"]},
    {"name": "eslint", "version": "8.57.0", "licence": "MIT", "include": ["lib", "conf"]},
    {"name": "webpack", "version": "5.91.0", "licence": "MIT", "include": ["lib", "hot"]},
    {"name": "@reduxjs/toolkit", "version": "2.2.3", "licence": "MIT", "include": ["src"]},
    {"name": "redux", "version": "5.0.1", "licence": "MIT", "include": ["src"]},
    {"name": "mobx", "version": "6.12.3", "licence": "MIT", "include": ["src"]},
    {"name": "immer", "version": "10.0.3", "licence": "MIT", "include": ["src"]},
    {"name": "effect", "version": "3.0.0", "licence": "MIT", "include": ["src"]},
    {"name": "preact", "version": "10.20.2", "licence": "MIT",
     "include": ["src", "hooks/src", "compat/src", "debug/src", "devtools/src"]},
    {"name": "svelte", "version": "4.2.12", "licence": "MIT", "include": ["src"]},
    {"name": "axios", "version": "1.6.8", "licence": "MIT", "include": ["lib", "index.d.ts"]},
    {"name": "express", "version": "4.19.2", "licence": "MIT", "include": ["lib", "index.js"]},
    {"name": "koa", "version": "2.15.2", "licence": "MIT", "include": ["lib"]},
    {"name": "fastify", "version": "4.26.2", "licence": "MIT",
     "include": ["lib", "fastify.js", "fastify.d.ts", "types", "test"]},
    {"name": "moment", "version": "2.30.1", "licence": "MIT", "include": ["src"]},
    {"name": "luxon", "version": "3.4.4", "licence": "MIT", "include": ["src"]},
    {"name": "ramda", "version": "0.29.1", "licence": "MIT", "include": ["src"]},
    {"name": "jquery", "version": "3.7.1", "licence": "MIT", "include": ["src"]},
    {"name": "d3-array", "version": "3.2.4", "licence": "ISC", "include": ["src"]},
    {"name": "d3-scale", "version": "4.0.2", "licence": "ISC", "include": ["src"]},
    {"name": "d3-shape", "version": "3.2.0", "licence": "ISC", "include": ["src"]},
    {"name": "@tanstack/query-core", "version": "5.29.0", "licence": "MIT", "include": ["src"]},
    {"name": "@tanstack/table-core", "version": "8.16.0", "licence": "MIT", "include": ["src"]},
    {"name": "@trpc/server", "version": "10.45.2", "licence": "MIT", "include": ["src"]},
    {"name": "prosemirror-model", "version": "1.20.0", "licence": "MIT", "include": ["src"]},
    {"name": "prosemirror-state", "version": "1.4.3", "licence": "MIT", "include": ["src"]},
    {"name": "prosemirror-view", "version": "1.33.5", "licence": "MIT", "include": ["src"]},
    {"name": "yjs", "version": "13.6.14", "licence": "MIT", "include": ["src"]},
    {"name": "graphql", "version": "16.8.1", "licence": "MIT"},
    {"name": "mongoose", "version": "8.3.1", "licence": "MIT", "include": ["lib", "types"]},
    {"name": "sequelize", "version": "6.37.3", "licence": "MIT", "include": ["lib", "types"]},
    {"name": "@nestjs/core", "version": "10.3.7", "licence": "MIT"},
    {"name": "@apollo/client", "version": "3.9.11", "licence": "MIT", "exclude": ["testing", "dev"]},
    {"name": "hono", "version": "4.2.4", "licence": "MIT", "include": ["dist"], "exclude": ["cjs"]},
    {"name": "zod", "version": "3.23.8", "licence": "MIT", "include": ["lib"], "exclude": ["index.umd.js"]},
]

_PY = "usr/lib/python3/dist-packages"
_GO = "usr/share/gocode/src"
_CARGO = "usr/share/cargo/registry"

# Debian bookworm packages: Python libraries, Go and Rust sources, C and C++ headers.
DEBIAN = [
    {"package": "python3-requests", "version": "2.28.1+dfsg-1", "licence": "Apache-2.0", "root": _PY,
     "copyright_says": "Apache"},
    {"package": "python3-urllib3", "version": "1.26.12-1+deb12u4", "licence": "MIT", "root": _PY},
    {"package": "python3-flask", "version": "2.2.2-3", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-werkzeug", "version": "2.2.2-3+deb12u1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-jinja2", "version": "3.1.2-1+deb12u3", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-click", "version": "8.1.3-2", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-django", "version": "3:3.2.25-0+deb12u3", "licence": "BSD-3-Clause", "root": _PY,
     "exclude": ["locale"]},
    {"package": "python3-sqlalchemy", "version": "1.4.46+ds1-1", "licence": "MIT", "root": _PY},
    {"package": "python3-attr", "version": "22.2.0-1", "licence": "MIT", "root": _PY},
    {"package": "python3-pytest", "version": "7.2.1-2", "licence": "MIT", "root": _PY},
    {"package": "python3-pygments", "version": "2.14.0+dfsg-1", "licence": "BSD-2-Clause", "root": _PY},
    {"package": "python3-numpy", "version": "1:1.24.2-1+deb12u1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-pandas", "version": "1.5.3+dfsg-2", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-networkx", "version": "2.8.8-1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-tornado", "version": "6.2.0-3+deb12u4", "licence": "Apache-2.0", "root": _PY},
    {"package": "python3-aiohttp", "version": "3.8.4-1+deb12u1", "licence": "Apache-2.0", "root": _PY},
    {"package": "python3-twisted", "version": "22.4.0-4+deb12u1", "licence": "MIT", "root": _PY},
    {"package": "python3-setuptools", "version": "66.1.1-1+deb12u2", "licence": "MIT", "root": _PY},
    {"package": "python3-yaml", "version": "6.0-3+b2", "licence": "MIT", "root": _PY},
    {"package": "python3-pydantic", "version": "1.10.4-1+deb12u1", "licence": "MIT", "root": _PY},
    {"package": "python3-starlette", "version": "0.26.1-1+deb12u1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-fastapi", "version": "0.92.0-1", "licence": "MIT", "root": _PY},
    {"package": "python3-httpx", "version": "0.23.3-1", "licence": "BSD-3-Clause", "root": _PY,
     "copyright_says": "BSD"},
    {"package": "python3-rich", "version": "13.3.1-1", "licence": "MIT", "root": _PY},
    {"package": "python3-marshmallow", "version": "3.18.0-1", "licence": "MIT", "root": _PY},
    {"package": "python3-sklearn", "version": "1.2.1+dfsg-1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-sympy", "version": "1.11.1-1", "licence": "BSD-3-Clause", "root": _PY},
    {"package": "python3-boto3", "version": "1.26.27+dfsg-1", "licence": "Apache-2.0", "root": _PY},
    {"package": "python3-celery", "version": "5.2.6-5", "licence": "BSD-2-Clause", "root": _PY},
    {"package": "python3-redis", "version": "4.3.4-3", "licence": "MIT", "root": _PY},
    {"package": "golang-1.19-src", "version": "1.19.8-2", "licence": "BSD-3-Clause", "root": "usr/share/go-1.19/src",
     "exclude": ["testdata", "vendor"], "cap_mb": 16},
    {"package": "golang-golang-x-tools-dev", "version": "1:0.5.0+ds-1", "licence": "BSD-3-Clause", "root": _GO,
     "exclude": ["testdata"]},
    {"package": "golang-golang-x-net-dev", "version": "1:0.7.0+dfsg-1", "licence": "BSD-3-Clause", "root": _GO,
     "exclude": ["testdata"]},
    {"package": "golang-github-stretchr-testify-dev", "version": "1.8.1-1", "licence": "MIT", "root": _GO},
    {"package": "golang-github-spf13-cobra-dev", "version": "1.6.1-1", "licence": "Apache-2.0", "root": _GO},
    {"package": "golang-github-gorilla-mux-dev", "version": "1.8.0-1", "licence": "BSD-3-Clause", "root": _GO},
    {"package": "golang-github-google-go-cmp-dev", "version": "0.5.9-1", "licence": "BSD-3-Clause", "root": _GO},
    {"package": "golang-github-prometheus-client-golang-dev", "version": "1.14.0-3", "licence": "Apache-2.0",
     "root": _GO},
    {"package": "golang-github-sirupsen-logrus-dev", "version": "1.9.0-1", "licence": "MIT", "root": _GO},
    {"package": "rust-src", "version": "1.63.0+dfsg1-2", "licence": "MIT OR Apache-2.0",
     "root": "usr/src/rustc-1.63.0", "include": ["library"], "exclude": ["tests", "benches"], "cap_mb": 16},
    {"package": "librust-serde-dev", "version": "1.0.152-2", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-serde-json-dev", "version": "1.0.87-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-regex-dev", "version": "1.7.1-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-regex-syntax-dev", "version": "0.6.27-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-tokio-dev", "version": "1.24.2-1", "licence": "MIT", "root": _CARGO},
    {"package": "librust-clap-dev", "version": "4.0.32-1", "licence": "MIT", "root": _CARGO},
    {"package": "librust-anyhow-dev", "version": "1.0.69-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-rand-dev", "version": "0.8.5-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-itertools-dev", "version": "0.10.3-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "librust-syn-dev", "version": "1.0.107-1", "licence": "MIT OR Apache-2.0", "root": _CARGO},
    {"package": "libgtest-dev", "version": "1.12.1-0.2", "licence": "BSD-3-Clause", "root": "usr/include",
     "lang_h": "cpp"},
    {"package": "libabsl-dev", "version": "20220623.1-1+deb12u2", "licence": "Apache-2.0", "root": "usr/include",
     "lang_h": "cpp"},
    {"package": "nlohmann-json3-dev", "version": "3.11.2-2", "licence": "MIT", "root": "usr/include", "lang_h": "cpp"},
    {"package": "libfmt-dev", "version": "9.1.0+ds1-2", "licence": "MIT", "root": "usr/include", "lang_h": "cpp"},
    {"package": "libspdlog-dev", "version": "1:1.10.0+ds-0.4", "licence": "MIT", "root": "usr/include",
     "lang_h": "cpp"},
    {"package": "rapidjson-dev", "version": "1.1.0+dfsg2-7.1", "licence": "MIT", "root": "usr/include",
     "lang_h": "cpp"},
    {"package": "libuv1-dev", "version": "1.44.2-1+deb12u1", "licence": "MIT", "root": "usr/include", "lang_h": "c"},
    {"package": "libexpat1-dev", "version": "2.5.0-1+deb12u2", "licence": "MIT", "root": "usr/include", "lang_h": "c"},
    {"package": "libyaml-dev", "version": "0.2.5-1", "licence": "MIT", "root": "usr/include", "lang_h": "c"},
    {"package": "libjansson-dev", "version": "2.14-2", "licence": "MIT", "root": "usr/include", "lang_h": "c"},
    {"package": "libevent-dev", "version": "2.1.12-stable-8", "licence": "BSD-3-Clause", "root": "usr/include",
     "lang_h": "c"},
]

# Whole packages held out for evaluation (training/heldout.json lists their files): new in v2,
# so neither v1 nor v2 trained on them. TypeScript, JavaScript and Python for the language
# server's quality bench, one each of C++, Rust and Go for the engine's metrics.
HELD_OUT = [
    "npm:@tanstack/query-core", "npm:axios", "npm:luxon",
    "deb:python3-click", "deb:python3-attr", "deb:python3-requests",
    "deb:libfmt-dev", "deb:librust-anyhow-dev", "deb:golang-github-spf13-cobra-dev",
]

# What the Debian copyright file's first License: field (the Files: * stanza) says for each
# licence of the list above (Debian names MIT "Expat", and the Go licence "Go").
DEBIAN_LICENCE_WORDS = {
    "MIT": ("mit", "expat"),
    "BSD-2-Clause": ("bsd-2", "bsd 2"),
    "BSD-3-Clause": ("bsd-3", "bsd-c3", "bsd 3", "go"),
    "Apache-2.0": ("apache-2", "apache 2"),
    "MIT OR Apache-2.0": ("mit or apache-2", "apache-2.0 or mit", "expat or apache-2", "apache-2.0 or expat"),
}

# What a free-form copyright file (no License: name) must quote, lower-cased, spaces folded.
LICENCE_PHRASES = {
    "MIT": ("permission is hereby granted, free of charge",),
    "BSD-3-Clause": ("redistribution and use in source and binary forms", "endorse or promote products"),
    "BSD-2-Clause": ("redistribution and use in source and binary forms",),
    "Apache-2.0": ("apache license", "version 2.0"),
}
