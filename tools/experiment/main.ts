/**
 * `npm run experiment`: the fault-injection experiment, a tool of this repository rather than a
 * command of the package (it is not in dist/ and `cairn` has no `experiment` command). It reads its
 * options and reports errors the way `cairn` does.
 */

import { resolve } from "node:path";
import {
  bold,
  CliError,
  describeError,
  dim,
  integerOption,
  parseArgs,
  positionals,
  print,
  printJson,
  stringOption,
  type OptionSpec,
  type ParsedArgs,
} from "../internal.js";
import { ProgressBar } from "./report/progress.js";
import { renderTable } from "./report/terminal-table.js";
import { runExperiment } from "./run-experiment.js";
import { ARMS, DEFAULT_SEED, DEFAULTS, isArmName, LOCAL_POSTGRES, QUICK, type ArmName, type ExperimentSettings } from "./settings.js";

const USAGE = "npm run experiment -- [--tasks N] [--faults N] [--seed N] [--arms a,b] [--out DIR] [--quick] [--json]";
const SUMMARY = "kill agent workers on a schedule: a conventional runtime vs LangGraph.js vs Cairn, measured";
const HELP = [
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
];
const OPTIONS: OptionSpec = {
  json: "boolean",
  help: "boolean",
  tasks: "string",
  faults: "string",
  seed: "string",
  arms: "string",
  out: "string",
  quick: "boolean",
  workers: "string",
  postgres: "string",
};

async function main(argv: readonly string[]): Promise<void> {
  const args = parseArgs(argv, OPTIONS, "experiment");
  if (args.options.help === true) {
    print([`${bold("usage:")} ${USAGE}`, "", SUMMARY, "", ...HELP.map((line) => `  ${line}`)].join("\n"));
    return;
  }
  const json = args.options.json === true;
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
  print(
    dim(
      `${settings.tasks} tasks, ${results.faults.length} faults (seed ${settings.seed}), ${settings.workers} workers per arm, ${Math.round(results.durationMs / 1000)} s`,
    ),
  );
  print();
  print(renderTable(results));
  for (const skipped of results.skipped) print(dim(`skipped ${skipped.arm}: ${skipped.reason}`));
  print();
  print(`results.json, results.md and chart.svg are in ${settings.out}`);
}

main(process.argv.slice(2)).then(
  () => exit(0),
  (error: unknown) => {
    // The CLI's error line, so the tool fails the way `cairn` commands do.
    process.stderr.write(`cairn: ${describeError(error)}\n`);
    exit(1);
  },
);

/** As `cairn` does: let piped output flush, and exit anyway should a pool still hold the loop open. */
function exit(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 2000).unref();
}

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
  const names = text
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
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
