import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { Worker } from "../crash/crash-harness.js";
import { scratchDir } from "../scratch.js";

/**
 * Trace context across a real SIGKILL and a takeover: a worker process (fixtures/traced-worker.mjs,
 * over the built package, with its own OpenTelemetry SDK writing finished spans to a file) starts a
 * run inside an application span and is killed inside the run's third step; a second worker takes
 * the run over. Its spans must be in the caller's trace, and the steps the first one completed must
 * not be emitted again.
 */
const WORKER = fileURLToPath(new URL("./fixtures/traced-worker.mjs", import.meta.url));

interface ExportedSpan {
  pid: number;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  attributes: Record<string, unknown>;
}

function readSpans(path: string): ExportedSpan[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as ExportedSpan);
}

describe.each(BACKENDS)("OpenTelemetry across a SIGKILL and takeover on $name", (backend) => {
  const alive: Worker[] = [];
  afterEach(async () => {
    await Promise.all(alive.splice(0).map((w) => w.kill()));
  });
  const worker = (env: Record<string, string>): Worker => {
    const started = new Worker(spawn(process.execPath, [WORKER], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] }));
    alive.push(started);
    return started;
  };

  it("the resumed run's spans are in the caller's trace, and completed steps are not emitted again", async () => {
    const db = await backend.freshDatabase();
    const spansFile = join(scratchDir("cairn-otel-"), "spans.jsonl");
    const first = worker({ DB: db, SPANS: spansFile, START: "1", HANG: "2" });
    await first.line(/^hang 2$/);
    await first.kill();

    const before = readSpans(spansFile);
    const caller = before.find((s) => s.name === "POST /chains")!;
    expect(caller).toBeDefined();
    // The killed process ended (and exported) the caller's span, the start span and steps s0, s1;
    // its run span and s2 never ended.
    expect(before.map((s) => s.name).sort()).toEqual(["POST /chains", "start chain", "step s0", "step s1"]);

    const second = worker({ DB: db, SPANS: spansFile });
    expect(await second.result("chain")).toEqual({ status: "succeeded", value: 30 });
    await second.finished();

    const spans = readSpans(spansFile);
    const traceId = caller.traceId;
    expect(spans.every((s) => s.traceId === traceId)).toBe(true);
    const start = spans.find((s) => s.name === "start chain")!;
    expect(start.parentSpanId).toBe(caller.spanId);

    const after = spans.filter((s) => s.pid === second.pid);
    const run = after.find((s) => s.name === "run chain")!;
    expect(run.parentSpanId).toBe(start.spanId);
    expect(run.attributes).toMatchObject({
      "cairn.run.id": "chain",
      "cairn.run.recoveries": 1,
      "cairn.run.recorded_operations": 2,
      "cairn.run.replayed_operations": 2,
      "cairn.run.outcome": "succeeded",
    });
    // s2 is done again (it never completed), s3 and s4 for the first time; s0 and s1 are not.
    expect(after.filter((s) => s.name.startsWith("step ")).map((s) => s.name)).toEqual(["step s2", "step s3", "step s4"]);
    for (const step of after.filter((s) => s.name.startsWith("step "))) expect(step.parentSpanId).toBe(run.spanId);
    const names = spans.map((s) => s.name);
    for (const name of ["step s0", "step s1", "step s2", "step s3", "step s4"]) expect(names.filter((n) => n === name)).toHaveLength(1);
  });
});
