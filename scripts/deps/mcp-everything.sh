#!/usr/bin/env bash
# The npm MCP test server @modelcontextprotocol/server-everything, installed once into a
# repo-local folder (.deps/mcp-everything, gitignored) that the tests read: no npx download
# at test time. Installs Debian's nodejs and npm first when they are missing (CI runs as root).
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail
cd "$(dirname "$0")/../.."
version="${MCP_EVERYTHING_VERSION:-2026.8.31}"
prefix="${MINIAGENT_MCP_EVERYTHING_DIR:-.deps/mcp-everything}"
package="$prefix/node_modules/@modelcontextprotocol/server-everything/package.json"
if [ -f "$package" ] && grep -q "\"version\": \"$version\"" "$package"; then
  exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm
fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
  "@modelcontextprotocol/server-everything@$version"
echo "mcp-everything: installed server-everything $version in $prefix"
