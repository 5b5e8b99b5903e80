import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";

/** The built CLI: `npm test` builds before testing; run `npm run build` before `npx vitest`. */
const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node dist/cli/main.js ...args` as a real process. Asynchronous, so a Cairn launched in the
 * test process keeps executing (picking up what the CLI wrote) while the CLI runs.
 */
export function cli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` first`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [MAIN, ...args],
      { env: { ...process.env, CAIRN_DATABASE: undefined, NO_COLOR: "1", ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Exit code 1 and exactly one line on stderr, `cairn: <what was wrong> — <what to do>`. */
export function expectOneLineError(result: CliResult, what: RegExp | string): void {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe("");
  const lines = result.stderr.split("\n").filter((line) => line !== "");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^cairn: .+ — .+$/);
  expect(lines[0]).toMatch(what);
}

export function expectOk(result: CliResult): void {
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
}
