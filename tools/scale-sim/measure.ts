import { hostname } from "node:os";
import { Cairn } from "../../src/index.js";
import { runtimeOf, storeOf } from "../internal.js";
import type { Costs } from "./costs.js";

/**
 * Measures one partition's costs on a PostgreSQL database (a fresh one per call), through Cairn's
 * own statements: steps alone and together, claims of 1 and of 100 runs, starts. `scale` shrinks
 * the counts for --quick.
 */
export async function measureCosts(database: string, scale: number): Promise<Costs> {
  const stepLatencyUs = await sequentialSteps(database, Math.round(500 * scale));
  const { stepsPerSecond, cpuPerStepUs } = await concurrentSteps(database, 64, Math.max(5, Math.round(30 * scale)));
  const claims = await claimCosts(database, Math.max(3, Math.round(20 * scale)));
  return {
    measuredOn: `${hostname()}, ${new Date().toISOString()}`,
    stepLatencyUs,
    partitionStepsPerSecond: stepsPerSecond,
    executorCpuPerStepUs: cpuPerStepUs,
    claimFixedUs: claims.fixedUs,
    claimPerRunUs: claims.perRunUs,
    startLatencyUs: claims.startUs,
  };
}

async function sequentialSteps(database: string, steps: number): Promise<number> {
  const cairn = new Cairn({ database });
  try {
    let elapsed = 0;
    const wf = cairn.workflow("sim-sequential", async (ctx, n: number) => {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await ctx.step("s", () => i);
      elapsed = performance.now() - t0;
    });
    await cairn.launch();
    await (await wf.start(steps, { id: `seq-${Date.now()}` })).result();
    return (elapsed * 1000) / steps;
  } finally {
    await cairn.shutdown();
  }
}

async function concurrentSteps(database: string, runs: number, stepsPerRun: number): Promise<{ stepsPerSecond: number; cpuPerStepUs: number }> {
  const cairn = new Cairn({ database });
  try {
    const wf = cairn.workflow("sim-concurrent", async (ctx, n: number) => {
      for (let i = 0; i < n; i++) await ctx.step("s", () => i);
    });
    await cairn.launch();
    const tag = Date.now();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const handles = await Promise.all(Array.from({ length: runs }, (_, i) => wf.start(stepsPerRun, { id: `con-${tag}-${i}` })));
    await Promise.all(handles.map((h) => h.result()));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const steps = runs * stepsPerRun;
    return { stepsPerSecond: steps / seconds, cpuPerStepUs: (cpu.user + cpu.system) / steps };
  } finally {
    await cairn.shutdown();
  }
}

/** Claims by an executor row that is registered but not running, of runs a client enqueued. */
async function claimCosts(database: string, repeats: number): Promise<{ fixedUs: number; perRunUs: number; startUs: number }> {
  const client = new Cairn({ database });
  try {
    const wf = client.workflow("sim-claim", async () => 1);
    const store = storeOf(client);
    await store.migrate();
    const executorId = `sim-claimer-${Date.now()}`;
    const now = Date.now();
    await store.registerExecutor({
      id: executorId,
      hostname: hostname(),
      pid: process.pid,
      backendPid: null,
      pidNamespace: null,
      appVersion: runtimeOf(client).appVersion,
      startedAt: now,
      heartbeatAt: now,
    });
    const total = repeats * 101;
    const t0 = performance.now();
    for (let i = 0; i < total; i++) await wf.start(undefined, { id: `claim-${executorId}-${i}` });
    const startUs = ((performance.now() - t0) * 1000) / total;
    const claim = async (limit: number): Promise<number> => {
      const begin = performance.now();
      const rows = await store.claimRuns({ executorId, appVersion: null, now: Date.now(), deadExecutors: [], workflows: ["sim-claim"], limit });
      if (rows === null || rows.length !== limit) throw new Error(`claimed ${rows?.length} of ${limit}`);
      return (performance.now() - begin) * 1000;
    };
    let one = 0;
    let hundred = 0;
    for (let r = 0; r < repeats; r++) {
      one += await claim(1);
      hundred += await claim(100);
    }
    one /= repeats;
    hundred /= repeats;
    const perRunUs = Math.max(0, (hundred - one) / 99);
    return { fixedUs: Math.max(0, one - perRunUs), perRunUs, startUs };
  } finally {
    await client.shutdown();
  }
}
