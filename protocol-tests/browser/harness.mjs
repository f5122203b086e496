// What both browser tests share: where the binaries are, and reading a child's stdout for a line.

import { createInterface } from "node:readline";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
// A binary named by the environment variable `env`, else the workspace's target/debug/`name`.
export const binary = (env, name) => process.env[env] || join(ROOT, "target/debug", name);
export const BROOK = binary("BROOK_BIN", "brook");
export const CHROMIUM = process.env.CHROMIUM_BIN || "/usr/bin/chromium";

// Resolves with the first stdout line of `child` starting with `prefix`, within `ms`.
export function lineWith(child, prefix, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${prefix} line within ${ms} ms`)), ms);
    const rl = createInterface({ input: child.stdout });
    rl.on("line", (l) => { if (l.startsWith(prefix)) { clearTimeout(timer); resolve(l); } });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`exited (${code}) before ${prefix}`)); });
  });
}
