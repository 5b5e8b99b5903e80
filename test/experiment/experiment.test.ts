import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";

/**
 * The experiment is a tool of the repository (tools/experiment), not a command of the package:
 * it is built here, as `npm run experiment` builds it, so the test runs the current sources.
 */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const MAIN = join(ROOT, ".tmp/tools/tools/experiment/main.js");
const TSC = join(ROOT, "node_modules/typescript/bin/tsc");

/** The fields the issue requires of every arm, and their types. */
const REQUIRED = {
  arm: "string",
  tasks: "number",
  completed: "number",
  recovered: "number",
  duplicateSideEffects: "number",
  repeatedModelCalls: "number",
  repeatedToolCalls: "number",
  tokens: "number",
  costUsd: "number",
  p50OverheadMs: "number",
  p99OverheadMs: "number",
  throughputTasksPerMin: "number",
  diagnoseMs: "number",
  reproducible: "boolean",
} as const;

interface Arm extends Record<string, unknown> {
  arm: string;
  tasks: number;
  completed: number;
  duplicateSideEffects: number;
  repeatedModelCalls: number;
  repeatedModelCallsInFlight: number;
  faultsFired: number;
  kills: number;
  affectedTasks: number;
  recovered: number;
  reproducible: boolean;
  diagnoseCommands: number;
  diagnoseExact: boolean;
}

interface Results {
  seed: number;
  faults: { id: number; kind: string; task: number; point: string }[];
  arms: Arm[];
  skipped: unknown[];
}

function experiment(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: the tools' build failed`);
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env: { ...process.env, NO_COLOR: "1" }, timeout: 55_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr });
    });
  });
}

describe("npm run experiment", () => {
  beforeAll(async () => {
    await new Promise<void>((resolve, reject) => {
      execFile(process.execPath, [TSC, "-p", join(ROOT, "tools/tsconfig.json")], { cwd: ROOT }, (error, stdout) => {
        // tsc's exit code 2: type errors, but the JavaScript was written. Types are the typecheck's
        // business (the matrix legs on another AI SDK tolerate some in tools/); this test runs the tool.
        if (error === null || error.code === 2) resolve();
        else reject(new Error(`building tools/ failed:\n${stdout}`));
      });
    });
  }, 120_000);

  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("kills real workers on schedule; Cairn completes every task with no duplicate side effect", async () => {
    const out = mkdtempSync(join(tmpdir(), "cairn-experiment-"));
    dirs.push(out);
    const result = await experiment(["--quick", "--tasks", "3", "--arms", "cairn-sqlite,conventional", "--out", out, "--json"]);
    expect(result.code, result.stderr).toBe(0);

    const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as Results;
    expect(JSON.parse(result.stdout)).toEqual(results);
    expect(results.seed).toBe(42);
    expect(results.faults.map((f) => f.kind)).toEqual([
      "model-response",
      "tool-chain",
      "approval-wait",
      "after-effect",
      "sub-agent",
      "environment-restart",
    ]);
    expect(results.arms.map((a) => a.arm)).toEqual(["conventional", "cairn-sqlite"]);
    for (const arm of results.arms) {
      for (const [field, type] of Object.entries(REQUIRED)) expect(typeof arm[field], `${arm.arm}.${field}`).toBe(type);
      expect(arm.tasks).toBe(3);
      // Every fault is a point each task passes, so every one fires, each a SIGKILL.
      expect(arm.faultsFired).toBe(6);
      expect(arm.kills).toBe(6);
    }

    const cairn = results.arms.find((a) => a.arm === "cairn-sqlite")!;
    expect(cairn.completed).toBe(3);
    expect(cairn.recovered).toBe(cairn.affectedTasks);
    expect(cairn.duplicateSideEffects).toBe(0);
    // A model call is made again only if a kill cut it off before its answer was recorded.
    expect(cairn.repeatedModelCalls).toBe(cairn.repeatedModelCallsInFlight);
    expect(cairn.reproducible).toBe(true);
    expect(cairn).toMatchObject({ diagnoseCommands: 1, diagnoseExact: true });

    const conventional = results.arms.find((a) => a.arm === "conventional")!;
    expect(conventional.reproducible).toBe(false);

    expect(readFileSync(join(out, "results.md"), "utf8")).toMatch(/\| arm \| completed \| recovered \| dup\. effects \|/);
    expect(readFileSync(join(out, "chart.svg"), "utf8")).toMatch(/^<svg [^>]*>[\s\S]*cairn-sqlite[\s\S]*<\/svg>\n$/);
  }, 60_000);

  it("names a wrong arm and says which there are", async () => {
    const result = await experiment(["--arms", "conventional,temporal"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^cairn: unknown arm "temporal" — the arms are conventional, langgraph, cairn-sqlite, cairn-postgres\n$/);
  });
});
