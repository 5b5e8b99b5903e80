/**
 * The experiment: a baseline pass (the conventional runtime, no faults), then for each arm a pass
 * without faults (for latency and throughput) and one with the fault schedule (for everything
 * else). Writes results.json, results.md and chart.svg to `settings.out`; each pass's files (model
 * request log, services ledger, markers, databases) stay under `runs/`.
 */

import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Arm, PassKind } from "./arms/arm.js";
import type { ExperimentObserver, ExperimentResults } from "./results.js";
import { cairnArm } from "./arms/cairn-arm.js";
import { conventionalArm } from "./arms/conventional-arm.js";
import { langGraphArm } from "./arms/langgraph-arm.js";
import { faultSchedule, type Fault } from "./fault-schedule.js";
import { armResult, stepStats, type ArmResult } from "./metrics.js";
import { renderChart } from "./report/chart.js";
import { renderMarkdown } from "./report/markdown.js";
import { runPass } from "./run-pass.js";
import { DEFAULTS, QUICK, type ArmName, type ExperimentSettings } from "./settings.js";

const ARM_IMPLEMENTATIONS: Readonly<Record<ArmName, Arm>> = {
  conventional: conventionalArm,
  langgraph: langGraphArm,
  "cairn-sqlite": cairnArm("sqlite"),
  "cairn-postgres": cairnArm("postgres"),
};

export function workerPath(): string {
  return fileURLToPath(new URL("./worker/worker-main.js", import.meta.url));
}

export async function runExperiment(settings: ExperimentSettings, observer: ExperimentObserver): Promise<ExperimentResults> {
  const worker = workerPath();
  if (!existsSync(worker)) throw new Error(`the experiment's worker is missing (${worker}): build first with npm run build:tools`);
  const started = Date.now();
  const out = resolve(settings.out);
  const runs = join(out, "runs");
  rmSync(runs, { recursive: true, force: true });
  mkdirSync(runs, { recursive: true });
  const faults = faultSchedule(settings.seed, settings.tasks, settings.faults);

  const skipped: ExperimentResults["skipped"] = [];
  const arms: ArmName[] = [];
  for (const name of settings.arms) {
    const reason = await ARM_IMPLEMENTATIONS[name].unavailable(settings);
    if (reason === undefined) arms.push(name);
    else {
      skipped.push({ arm: name, reason });
      observer.note(`skipping ${name}: ${reason}`);
    }
  }

  const total = 1 + 2 * arms.length;
  let index = 0;
  const pass = async (arm: Arm, kind: PassKind, label: string, schedule: readonly Fault[]) => {
    observer.passStarted(label, ++index, total, { finished: 0, tasks: settings.tasks, faultsFired: 0, faults: schedule.length });
    const passStarted = Date.now();
    const record = await runPass({
      arm,
      kind,
      faults: schedule,
      dir: join(runs, label.replace(/[^a-z0-9-]+/gi, "-")),
      settings,
      workerPath: worker,
      onProgress: (progress) => observer.passProgress(progress),
    });
    observer.passEnded(label, Date.now() - passStarted);
    return record;
  };

  const baselineRecord = await pass(conventionalArm, "baseline", "baseline", []);
  const baseline = stepStats(baselineRecord);
  const results: ArmResult[] = [];
  for (const name of arms) {
    const arm = ARM_IMPLEMENTATIONS[name];
    const noFault = await pass(arm, "no-fault", `${name} no-fault`, []);
    const faulted = await pass(arm, "faults", `${name} faults`, faults);
    results.push(armResult(name, noFault, faulted, baselineRecord));
  }

  const { out: _out, postgresUrl: _url, ...shown } = settings;
  void _out;
  void _url;
  const experiment: ExperimentResults = {
    seed: settings.seed,
    faults,
    arms: results,
    skipped,
    baseline: {
      p50StepMs: baseline.p50,
      p99StepMs: baseline.p99,
      steps: baseline.samples,
      throughputTasksPerMin:
        Math.round(
          ([...baselineRecord.outcomes.values()].filter((o) => o.ok).length / (Math.max(1, baselineRecord.endedAt - baselineRecord.startedAt) / 60_000)) *
            10,
        ) / 10,
    },
    settings: shown,
    command: commandOf(settings),
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? "unknown", node: process.version, platform: `${process.platform}-${process.arch}` },
  };
  writeFileSync(join(out, "results.json"), `${JSON.stringify(experiment, null, 2)}\n`);
  writeFileSync(join(out, "results.md"), renderMarkdown(experiment));
  writeFileSync(join(out, "chart.svg"), renderChart(experiment));
  return experiment;
}

/** `npm run experiment -- ...` with the options that differ from the defaults (the seed always). */
export function commandOf(settings: ExperimentSettings): string {
  const base = settings.quick ? QUICK : DEFAULTS;
  const args: string[] = [];
  if (settings.quick) args.push("--quick");
  if (settings.tasks !== base.tasks) args.push(`--tasks ${settings.tasks}`);
  if (settings.faults !== base.faults) args.push(`--faults ${settings.faults}`);
  args.push(`--seed ${settings.seed}`);
  if (settings.arms.length !== 4) args.push(`--arms ${settings.arms.join(",")}`);
  if (settings.workers !== base.workers) args.push(`--workers ${settings.workers}`);
  return `npm run experiment -- ${args.join(" ")}`;
}
