#!/usr/bin/env bash
# Refreshes web/static/vendor/: the browser builds of the UI's third-party libraries (Markdown,
# sanitizer, syntax highlighting), pinned here. Run by a maintainer who changes a pin; `make run`
# and the tests never run it and need neither Node nor the network (the files are committed).
set -euo pipefail

MARKED=18.2.1
DOMPURIFY=3.4.18
HIGHLIGHT=11.12.0
DIFF2HTML=3.4.56
ESBUILD=0.28.2

repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/web/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent \
  "marked@$MARKED" "dompurify@$DOMPURIFY" "highlight.js@$HIGHLIGHT" "diff2html@$DIFF2HTML" \
  "esbuild@$ESBUILD"

mkdir -p "$out"
# marked and DOMPurify ship self-contained ES modules: copied as published.
cp node_modules/marked/lib/marked.esm.js "$out/marked.esm.js"
cp node_modules/marked/LICENSE "$out/LICENSE.marked"
cp node_modules/dompurify/dist/purify.es.mjs "$out/purify.es.js"
cp node_modules/dompurify/LICENSE "$out/LICENSE.dompurify"
# highlight.js's core is CommonJS: bundle its "common" language set into one ES module.
printf 'import hljs from "highlight.js/lib/common";\nexport default hljs;\n' > hl-entry.mjs
./node_modules/.bin/esbuild hl-entry.mjs --bundle --format=esm --minify --legal-comments=inline \
  --outfile="$out/highlight.esm.js" --log-level=warning
cp node_modules/highlight.js/LICENSE "$out/LICENSE.highlight.js"
cp node_modules/highlight.js/styles/github.css "$out/hljs-github.css"
cp node_modules/highlight.js/styles/github-dark.css "$out/hljs-github-dark.css"
# diff2html (unified diff to HTML, its text escaped) with its jsdiff and Hogan dependencies,
# bundled to one ES module; the page sanitizes its output with DOMPurify all the same.
printf 'export { html, parse } from "diff2html";\n' > d2h-entry.mjs
./node_modules/.bin/esbuild d2h-entry.mjs --bundle --format=esm --minify --legal-comments=inline \
  --outfile="$out/diff2html.esm.js" --log-level=warning
cp node_modules/diff2html/bundles/css/diff2html.min.css "$out/diff2html.min.css"
cp node_modules/diff2html/LICENSE.md "$out/LICENSE.diff2html"
cp node_modules/diff/LICENSE "$out/LICENSE.jsdiff"
cp node_modules/@profoundlogic/hogan/LICENSE "$out/LICENSE.hogan"
# The source maps are not vendored; drop the comments that point at them.
sed -i '/sourceMappingURL=/d' "$out/marked.esm.js" "$out/purify.es.js"
echo "vendored into $out"
