// Builds the dashboard's static files: web/src/* plus uPlot's browser bundle, into OUT.
//   node build.mjs NODE_MODULES_DIR OUT_DIR
// No bundler: the app is plain browser JavaScript; uPlot comes from npm (package-lock.json).
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const [modules, out] = process.argv.slice(2);
if (!modules || !out) {
  console.error("usage: node build.mjs NODE_MODULES_DIR OUT_DIR");
  process.exit(2);
}
const here = fileURLToPath(new URL(".", import.meta.url));
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "vendor"), { recursive: true });
for (const f of ["uPlot.iife.min.js", "uPlot.min.css"])
  copyFileSync(join(modules, "uplot", "dist", f), join(out, "vendor", f));
copyFileSync(join(modules, "uplot", "LICENSE"), join(out, "vendor", "uPlot.LICENSE"));
for (const f of readdirSync(join(here, "src"))) copyFileSync(join(here, "src", f), join(out, f));
console.log(`dashboard: ${out}`);
