import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/** The repository root, where package.json is. */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** What `npm pack` would put in the tarball, from the built dist/ (`npm test` builds first). */
function packedPaths(): Promise<string[]> {
  return new Promise((resolve, reject) => {
    // --ignore-scripts: no `prepare` build here; the files come from the dist/ the suite runs against.
    execFile("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null) return reject(new Error(`npm pack failed: ${stderr}`));
      const [pack] = JSON.parse(stdout) as { files: { path: string }[] }[];
      resolve(pack!.files.map((file) => file.path));
    });
  });
}

describe("the package", () => {
  it("ships the product and none of the repository's tools", async () => {
    if (!existsSync(new URL("../../dist/index.js", import.meta.url))) throw new Error("dist/ is missing: run `npm run build` first");
    const paths = await packedPaths();
    expect(paths).toContain("dist/index.js");
    expect(paths).toContain("dist/cli/main.js");
    // The dashboard's front end is compiled into the package: nothing is fetched from elsewhere.
    expect(paths).toContain("dist/ui/client/main.js");
    // Benchmarks and the fault-injection experiment live in tools/ and are not part of the package.
    expect(paths.filter((path) => /(^|\/)(bench|experiment|tools)(\/|\.|$)/.test(path))).toEqual([]);
  }, 90_000);
});
