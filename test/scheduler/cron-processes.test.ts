import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { scratchDir } from "../scratch.js";

/** The built package (`npm run build` first), as a real application imports it. */
const DIST = fileURLToPath(new URL("../../dist/index.js", import.meta.url));

// One executor process: declares an every-second schedule whose run appends "<run id> <pid>" to a
// ledger (fsynced) in its one step, launches, and shuts down on SIGTERM.
const EXECUTOR = `
import { appendFileSync, openSync, fsyncSync, closeSync } from "node:fs";
const { Cairn } = await import(process.env.DIST);
const cairn = new Cairn({ database: process.env.DB, pollIntervalMs: 20, onError: (e) => process.stderr.write(String(e) + "\\n") });
const tick = cairn.workflow("tick", async (ctx) => {
  await ctx.step("record", () => {
    const fd = openSync(process.env.LEDGER, "a");
    appendFileSync(fd, ctx.runId + " " + process.pid + "\\n");
    fsyncSync(fd);
    closeSync(fd);
  });
});
cairn.schedule("every-second", { cron: "* * * * * *", workflow: tick });
await cairn.launch();
process.stdout.write("launched\\n");
process.on("SIGTERM", () => cairn.shutdown().then(() => process.exit(0)));
`;

function startExecutor(db: string, ledger: string): { child: ChildProcess; launched: Promise<void> } {
  const child = spawn(process.execPath, ["--input-type=module", "-e", EXECUTOR], {
    env: { ...process.env, DB: db, LEDGER: ledger, DIST },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const launched = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("launched") && resolve());
    child.once("exit", (code) => reject(new Error(`an executor exited (${code}) before launching`)));
  });
  return { child, launched };
}

describe.each(BACKENDS)("cron across executor processes on $name", (backend) => {
  const env = cairnFactory(backend);

  it("three processes racing on one database start one run per tick, each executed once", async () => {
    const db = await env.database();
    // Migrate once, so the three first launches do not all create the schema at the same moment.
    const setup = env.cairn(db);
    await setup.launch();
    await setup.shutdown();
    const ledger = join(scratchDir("cron-ledger-"), "ledger");
    const executors = Array.from({ length: 3 }, () => startExecutor(db, ledger));
    try {
      await Promise.all(executors.map((e) => e.launched));
      await new Promise((resolve) => setTimeout(resolve, 3_500));
    } finally {
      await Promise.all(
        executors.map(({ child }) => {
          if (child.exitCode !== null) return Promise.resolve();
          const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
          child.kill("SIGTERM");
          return exited;
        }),
      );
    }
    const reader = env.cairn(db);
    const { rows } = await reader.query("SELECT id, status FROM cairn_runs WHERE id LIKE 'cron:every-second:%' ORDER BY id");
    const ticks = rows.map((row) => Date.parse(String(row.id).slice("cron:every-second:".length)));
    // Every second while the three ran fired, none twice: consecutive ticks, one run each.
    expect(ticks.length).toBeGreaterThanOrEqual(3);
    ticks.forEach((tick, i) => i > 0 && expect(tick - ticks[i - 1]!).toBe(1000));
    // Each run that finished executed its step once, whichever process took it.
    const lines = readFileSync(ledger, "utf8").trim().split("\n");
    const executed = new Map<string, number>();
    for (const line of lines) executed.set(line.split(" ")[0]!, (executed.get(line.split(" ")[0]!) ?? 0) + 1);
    for (const row of rows.filter((r) => r.status === "succeeded")) expect(executed.get(String(row.id))).toBe(1);
    expect([...executed.keys()].every((id) => rows.some((row) => row.id === id))).toBe(true);
  }, 30_000);
});
