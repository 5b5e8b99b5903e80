import { resolve } from "node:path";
import { ProgressBar } from "../../experiment/report/progress.js";
import { renderTable } from "../../experiment/report/terminal-table.js";
import { runExperiment } from "../../experiment/run-experiment.js";
import { ARMS, DEFAULT_SEED, DEFAULTS, isArmName, LOCAL_POSTGRES, QUICK, type ArmName, type ExperimentSettings } from "../../experiment/settings.js";
import { integerOption, positionals, stringOption, type ParsedArgs } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { print, printJson } from "../output.js";
import { bold, dim } from "../style.js";

export const experiment: Command = {
  name: "experiment",
  usage: "[--tasks N] [--faults N] [--seed N] [--arms a,b] [--out DIR] [--quick] [--json]",
  summary: "kill agent workers on a schedule: a conventional runtime vs LangGraph.js vs Cairn, measured",
  help: [
    "Runs the same agent workload — tasks of model calls, tool chains with side effects on local mock services,",
    "a human approval and a sub-agent — on each arm, and SIGKILLs the worker processes at points drawn from",
    "the seed (after a model response, mid tool chain, while waiting for approval, after a service acted but",
    "before its result was recorded, inside the sub-agent, and one restart of every process). Then it counts,",
    "from the mock model's request log and the services' ledgers: completion, recovery, duplicate side effects,",
    "repeated model and tool calls, tokens and cost, latency overhead per step against a no-fault,",
    "no-durability baseline, throughput, time to diagnose a side effect's cause, and reproducibility.",
    "",
    `Arms: ${ARMS.join(", ")} (default: all). cairn-postgres creates a fresh database per`,
    `pass on --postgres <url> (default $CAIRN_EXPERIMENT_POSTGRES_URL, else ${LOCAL_POSTGRES})`,
    "and is skipped, with a note, if the server does not answer.",
    "",
    `  --tasks N     agent tasks (default ${DEFAULTS.tasks}; --quick ${QUICK.tasks})`,
    `  --faults N    faults in the schedule (default ${DEFAULTS.faults}: one of each kind)`,
    `  --seed N      the fault schedule's seed (default ${DEFAULT_SEED})`,
    "  --arms a,b    the arms to run, comma-separated",
    `  --workers N   worker processes per arm (default ${DEFAULTS.workers})`,
    "  --out DIR     where results.json, results.md, chart.svg and each pass's files go (default experiment-results)",
    "  --quick       a CI-sized run: fewer tasks, a faster mock world",
    "  --json        print results.json instead of the table",
    "",
    "Everything runs offline on this machine: the model is the scripted mock LLM on loopback.",
  ],
  options: { tasks: "string", faults: "string", seed: "string", arms: "string", out: "string", quick: "boolean", workers: "string", postgres: "string" },
  async run({ args, json }) {
    positionals(args, [], "experiment");
    const settings = settingsOf(args);
    const progress = new ProgressBar();
    let results;
    try {
      results = await runExperiment(settings, progress);
    } catch (error) {
      throw new CliError(`the experiment failed: ${error instanceof Error ? error.message : String(error)}`, `its files are in ${settings.out}`);
    } finally {
      progress.done();
    }
    if (json) {
      printJson(results);
      return;
    }
    print(bold(`Fault-injection experiment — ${results.command}`));
    print(dim(`${settings.tasks} tasks, ${results.faults.length} faults (seed ${settings.seed}), ${settings.workers} workers per arm, ${Math.round(results.durationMs / 1000)} s`));
    print();
    print(renderTable(results));
    for (const skipped of results.skipped) print(dim(`skipped ${skipped.arm}: ${skipped.reason}`));
    print();
    print(`results.json, results.md and chart.svg are in ${settings.out}`);
  },
};

function settingsOf(args: ParsedArgs): ExperimentSettings {
  const quick = args.options.quick === true;
  const base = quick ? QUICK : DEFAULTS;
  const arms = armsOf(stringOption(args, "arms"));
  return {
    tasks: integerOption(args, "tasks", 1) ?? base.tasks,
    faults: integerOption(args, "faults", 0) ?? base.faults,
    seed: integerOption(args, "seed", 0) ?? DEFAULT_SEED,
    arms,
    out: resolve(stringOption(args, "out") ?? "experiment-results"),
    quick,
    workers: integerOption(args, "workers", 1) ?? base.workers,
    arrivalIntervalMs: base.arrivalIntervalMs,
    modelLatencyMs: base.modelLatencyMs,
    serviceLatencyMs: base.serviceLatencyMs,
    approvalDelayMs: base.approvalDelayMs,
    passTimeoutMs: base.passTimeoutMs,
    postgresUrl: stringOption(args, "postgres") ?? nonEmpty(process.env.CAIRN_EXPERIMENT_POSTGRES_URL) ?? LOCAL_POSTGRES,
  };
}

function armsOf(text: string | undefined): ArmName[] {
  if (text === undefined) return [...ARMS];
  const names = text.split(",").map((name) => name.trim()).filter((name) => name !== "");
  if (names.length === 0) throw new CliError("--arms is empty", `name one or more of ${ARMS.join(", ")}`);
  for (const name of names) {
    if (!isArmName(name)) throw new CliError(`unknown arm "${name}"`, `the arms are ${ARMS.join(", ")}`);
  }
  // In the report's order, each once.
  return ARMS.filter((arm) => names.includes(arm));
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}
