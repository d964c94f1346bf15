#!/usr/bin/env bash
# setup.sh - installs what the real-editor tests (test/e2e/) need and a fresh machine lacks:
# Debian's chromium, and code-server 4.100.3 (VS Code 1.100.3's workbench, the last release
# built for Node 20) from npm into .e2e/code-server, with the Debian packages its install
# compiles against (ripgrep, libkrb5-dev, a compiler, python3). It is not a package.json
# dependency, so `npm ci` stays light. `--no-browser` (npm start) leaves chromium out: the
# demo prints a URL for the browser you have. apt is asked only for what is missing, after
# saying what and why; without root the command to run is printed instead. Idempotent: a
# second run checks and exits in well under a second. What code-server's install would fetch
# (node headers, node-gyp through npx, ripgrep) is supplied locally where it is installed.
#   bash scripts/e2e/setup.sh [--no-browser]
set -euo pipefail
cd "$(dirname "$0")/../.."

CS_VERSION=4.100.3
CS_DIR=.e2e/code-server
CS_ENTRY="$CS_DIR/node_modules/code-server/out/node/entry.js"
browser=1
[ "${1:-}" = --no-browser ] && browser=0

installed=$(node -p "try { require('./$CS_DIR/node_modules/code-server/package.json').version } catch { '' }")
need_cs=0
{ [ "$installed" != "$CS_VERSION" ] || [ ! -f "$CS_ENTRY" ]; } && need_cs=1

missing=()
why=()
if ((browser)) && ! command -v chromium >/dev/null; then
  missing+=(chromium); why+=("chromium: the browser the real-editor tests drive")
fi
if ((need_cs)); then
  command -v rg >/dev/null || { missing+=(ripgrep); why+=("ripgrep: code-server's search (its installer would download it otherwise)"); }
  dpkg -s libkrb5-dev >/dev/null 2>&1 || { missing+=(libkrb5-dev); why+=("libkrb5-dev: code-server's kerberos module is compiled at install"); }
  { command -v c++ >/dev/null && command -v make >/dev/null; } || { missing+=(build-essential); why+=("build-essential: code-server's native modules are compiled at install"); }
  command -v python3 >/dev/null || { missing+=(python3); why+=("python3: node-gyp, which compiles them, runs on it"); }
fi
if ((${#missing[@]})); then
  echo "setup: this machine lacks ${#missing[@]} Debian package(s):"
  printf '  %s\n' "${why[@]}"
  if [ "$(id -u)" != 0 ]; then
    echo "setup: install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# code-server's postinstall refuses a Node major other than the one it was built for.
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" != 20 ]; then
  echo "setup: code-server $CS_VERSION needs Node 20, this is $(node --version)" >&2
  exit 1
fi

if ((need_cs)); then
  echo "setup: npm install code-server@$CS_VERSION into $CS_DIR (about a minute)"
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # @vscode/ripgrep's postinstall downloads rg from GitHub unless it finds this cached file;
  # seeding it with Debian's rg keeps the install offline.
  mkdir -p "$tmp/vscode-ripgrep-cache-1.15.11"
  tar czf "$tmp/vscode-ripgrep-cache-1.15.11/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg
  # nodedir: node-gyp uses the installed headers instead of downloading them; yes: node-pty's
  # postinstall runs `npx node-gyp`; unsafe-perm: postinstall.sh insists on it as root.
  TMPDIR="$tmp" npm_config_yes=true npm_config_nodedir=/usr npm_config_unsafe_perm=true \
    npm install --prefix "$CS_DIR" --no-save --no-audit --no-fund --loglevel=error "code-server@$CS_VERSION"
fi
echo '{}' > .e2e/cs-version-config.yaml
node "$CS_ENTRY" --config .e2e/cs-version-config.yaml --version | head -1
