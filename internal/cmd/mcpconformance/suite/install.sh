#!/usr/bin/env bash
# Installs the official MCP conformance suite, pinned by package-lock.json,
# and lets it run on Node.js 20.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
# 0.2.0-alpha.12 imports fs.globSync (Node.js 22) for its tier report only; no
# scenario uses it, and on Node.js 20 the import alone stops the program.
# Take it out of the import list (idempotent).
sed -i 's/globSync as a,//' node_modules/@modelcontextprotocol/conformance/dist/index.js
