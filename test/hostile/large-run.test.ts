import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { runWithLongJournal } from "../cli/long-journal.js";
import { cairnFactory } from "../harness.js";

const STEPS = 140_000;

function bigCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const main = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      { env: { ...process.env, CAIRN_DATABASE: undefined, NO_COLOR: "1" }, maxBuffer: 512 * 1024 * 1024, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }),
    );
  });
}

describe.each(BACKENDS)("cairn show of a 140,000-step run on $name", (backend) => {
  const env = cairnFactory(backend);

  it("pages the journal with --from and --limit, and prints every entry without crashing", async () => {
    const database = await env.database();
    await runWithLongJournal(env.cairn(database), backend, database, "r1", STEPS);

    let started = Date.now();
    const page = await bigCli(["show", "r1", "--database", database]);
    const pageMs = Date.now() - started;
    expect(page.stderr).toBe("");
    expect(page.code).toBe(0);
    expect(page.stdout).toMatch(/\(1000 of 140000 journal entries, seq 0–999; --from 1000 for the next page\)/);

    const middle = await bigCli(["show", "r1", "--database", database, "--from", "70000", "--limit", "3", "--json"]);
    expect(middle.code).toBe(0);
    const view = JSON.parse(middle.stdout) as { journal: { seq: number }[]; journalPage: unknown };
    expect(view.journal.map((s) => s.seq)).toEqual([70000, 70001, 70002]);
    expect(view.journalPage).toEqual({ from: 70000, limit: 3, total: STEPS });

    started = Date.now();
    const all = await bigCli(["show", "r1", "--database", database, "--limit", String(STEPS)]);
    const allMs = Date.now() - started;
    expect(all.stderr).toBe("");
    expect(all.code).toBe(0);
    expect(all.stdout).toContain("step 139999");
    console.log(`cairn show on ${backend.name}: first page ${pageMs} ms, all ${STEPS} entries ${allMs} ms`);

    const past = await bigCli(["show", "r1", "--database", database, "--from", "999999"]);
    expect(past.code).toBe(0);
    expect(past.stdout).toContain(`journal: no entry from seq 999999 (${STEPS} entries)`);
    const bad = await bigCli(["show", "r1", "--database", database, "--limit", "0"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--limit must be an integer ≥ 1/);
  });
});
