import { formatCount, formatMicros, formatRatio, median, percentile, renderTable } from "../stats.js";
import type { Arm, ArmName, Backend, Mode, PeerTiming } from "./workload.js";

/** What `--json` prints, and what the table is rendered from. */
export interface PeersReport {
  settings: PeersSettings;
  environment: PeersEnvironment;
  arms: ArmResult[];
  ratios: RatioResult[];
  /** Why the PostgreSQL arms are missing, when they are. */
  postgresSkipped: string | null;
}

export interface PeersSettings {
  quick: boolean;
  rounds: number;
  runs: number;
  stepsPerRun: number;
  /** Runs in flight at once in the concurrent mode. */
  inFlight: number;
  /** Runs per mode in each arm's untimed warm-up. */
  warmupRuns: number;
}

export interface PeersEnvironment {
  node: string;
  platform: string;
  cpus: number;
  postgres: string | null;
  /** Installed versions of the peers, by package name. */
  packages: Record<string, string>;
}

/** One arm in one mode: medians over rounds. */
export interface ArmResult {
  arm: ArmName;
  backend: Backend;
  durability: string;
  mode: Mode;
  stepsPerSecond: number;
  /** Wall time per step: the whole cost of a durable step, nothing subtracted. */
  usPerStep: number;
  /** Median over rounds of this round's µs/step minus the same round's raw floor µs/row (same backend). */
  usPerStepOverFloor: number | null;
  /** Run latency, start to result (null for the raw floors). */
  runP50Ms: number | null;
  runP99Ms: number | null;
  roundRates: number[];
}

/** `numerator` steps/s ÷ `denominator` steps/s, computed round by round (the same minute's disk), then the median. */
export interface RatioResult {
  numerator: ArmName;
  denominator: ArmName;
  mode: Mode;
  ratio: number | null;
  roundRatios: number[];
  /** The goal, when this ratio has one. */
  target: number | null;
  met: boolean | null;
}

interface RatioSpec {
  numerator: ArmName;
  denominator: ArmName;
  target: number | null;
}

/**
 * The goals of issue 4, and the ratios that put them in context. Cairn ÷ DBOS Transact was ≥ 3× in
 * issue 4; issue 13 raised it to ≥ 4×, sequential and with 16 in flight.
 */
const RATIOS: readonly RatioSpec[] = [
  { numerator: "cairn-postgres", denominator: "dbos-postgres", target: 4 },
  { numerator: "cairn-sqlite", denominator: "langgraph-sqlite", target: 10 },
  { numerator: "cairn-sqlite", denominator: "langgraph-sqlite-defaults", target: null },
  { numerator: "cairn-sqlite", denominator: "raw-sqlite", target: 0.8 },
  { numerator: "cairn-postgres", denominator: "raw-postgres", target: 0.8 },
  { numerator: "dbos-postgres", denominator: "raw-postgres", target: null },
  { numerator: "langgraph-sqlite", denominator: "raw-sqlite", target: null },
];

const LABELS: Record<ArmName, string> = {
  "raw-sqlite": "raw floor: 1 row per commit",
  "cairn-sqlite": "Cairn",
  "langgraph-sqlite": "LangGraph.js + SqliteSaver",
  "langgraph-sqlite-defaults": "LangGraph.js + SqliteSaver, defaults",
  "raw-postgres": "raw floor: 1 row per commit",
  "cairn-postgres": "Cairn",
  "dbos-postgres": "DBOS Transact",
};

/** Every timing taken, by arm and mode, one per round in round order. */
export class Samples {
  private readonly taken = new Map<string, PeerTiming[]>();

  add(arm: ArmName, mode: Mode, timing: PeerTiming): void {
    const key = `${arm}/${mode}`;
    this.taken.set(key, [...(this.taken.get(key) ?? []), timing]);
  }

  of(arm: ArmName, mode: Mode): PeerTiming[] {
    return this.taken.get(`${arm}/${mode}`) ?? [];
  }
}

export function buildReport(
  arms: readonly Arm[],
  samples: Samples,
  settings: PeersSettings,
  environment: PeersEnvironment,
  postgresSkipped: string | null,
): PeersReport {
  const floorOf = (backend: Backend): PeerTiming[] => samples.of(backend === "sqlite" ? "raw-sqlite" : "raw-postgres", "sequential");
  const results: ArmResult[] = [];
  for (const arm of arms) {
    for (const mode of arm.modes) {
      const rounds = samples.of(arm.name, mode);
      const floors = floorOf(arm.backend);
      const isFloor = arm.name.startsWith("raw-");
      results.push({
        arm: arm.name,
        backend: arm.backend,
        durability: arm.durability,
        mode,
        stepsPerSecond: median(rounds.map(stepsPerSecond)) ?? 0,
        usPerStep: median(rounds.map(usPerStep)) ?? 0,
        usPerStepOverFloor: isFloor ? null : median(rounds.map((t, i) => (floors[i] === undefined ? null : usPerStep(t) - usPerStep(floors[i])))),
        runP50Ms: median(rounds.map((t) => runPercentile(t, 50))),
        runP99Ms: median(rounds.map((t) => runPercentile(t, 99))),
        roundRates: rounds.map((t) => Math.round(stepsPerSecond(t))),
      });
    }
  }
  const ratios: RatioResult[] = [];
  for (const spec of RATIOS) {
    const denominatorArm = arms.find((arm) => arm.name === spec.denominator);
    for (const mode of ["sequential", "concurrent"] as const) {
      const numerators = samples.of(spec.numerator, mode);
      // The raw floors have only a sequential loop; concurrent runs are held to it.
      const denominatorMode = denominatorArm?.modes.includes(mode) === true ? mode : "sequential";
      const denominators = samples.of(spec.denominator, denominatorMode);
      const roundRatios = numerators.flatMap((t, i) => (denominators[i] === undefined ? [] : [stepsPerSecond(t) / stepsPerSecond(denominators[i])]));
      const ratio = median(roundRatios);
      ratios.push({
        numerator: spec.numerator,
        denominator: spec.denominator,
        mode,
        ratio,
        roundRatios,
        target: spec.target,
        met: spec.target === null || ratio === null ? null : ratio >= spec.target,
      });
    }
  }
  return { settings, environment, arms: results, ratios, postgresSkipped };
}

export function renderReport(report: PeersReport): string {
  const s = report.settings;
  const env = report.environment;
  const packages = Object.entries(env.packages)
    .map(([name, version]) => `${name} ${version}`)
    .join(", ");
  const lines = [
    `Cairn vs peers — ${s.quick ? "quick, " : ""}${s.rounds} round(s), medians; ${s.runs} runs × ${s.stepsPerRun} steps, ` +
      `sequential and ${s.inFlight} in flight; a fresh database per measurement`,
    `node ${env.node}, ${env.platform}, ${env.cpus} CPUs` + (env.postgres === null ? "" : `; PostgreSQL ${env.postgres}`),
    packages,
    "",
  ];
  const table: string[][] = [["backend", "arm", "mode", "steps/s", "µs/step", "over floor µs", "run p50 ms", "run p99 ms", "rounds (steps/s)"]];
  for (const r of report.arms) {
    table.push([
      r.backend,
      LABELS[r.arm],
      r.arm.startsWith("raw-") ? "sequential" : r.mode === "sequential" ? "sequential" : `${s.inFlight} in flight`,
      formatCount(r.stepsPerSecond),
      formatMicros(r.usPerStep),
      r.usPerStepOverFloor === null ? "" : signed(r.usPerStepOverFloor),
      formatMs(r.runP50Ms),
      formatMs(r.runP99Ms),
      r.roundRates.map((rate) => formatCount(rate)).join(" / "),
    ]);
  }
  lines.push(renderTable(table), "", "Durability as configured:");
  const seen = new Set<ArmName>();
  for (const r of report.arms) {
    if (seen.has(r.arm)) continue;
    seen.add(r.arm);
    lines.push(`  ${r.arm}: ${r.durability}`);
  }
  if (report.postgresSkipped !== null) lines.push("", `PostgreSQL arms skipped: ${report.postgresSkipped}`);

  lines.push("", "Ratios of steps/s (each round's ratio, then the median; concurrent runs against the sequential raw floor)", "");
  const ratios: string[][] = [["ratio", "sequential", `${s.inFlight} in flight`, "goal"]];
  for (const spec of RATIOS) {
    const of = (mode: Mode): RatioResult | undefined =>
      report.ratios.find((r) => r.numerator === spec.numerator && r.denominator === spec.denominator && r.mode === mode);
    ratios.push([
      `${spec.numerator} ÷ ${spec.denominator}`,
      formatRatio(of("sequential")?.ratio ?? null),
      formatRatio(of("concurrent")?.ratio ?? null),
      spec.target === null ? "" : `≥ ${spec.target.toFixed(2)}×`,
    ]);
  }
  lines.push(renderTable(ratios));

  lines.push("", "Goals", "");
  for (const r of report.ratios) {
    if (r.target === null) continue;
    const verdict = r.met === null ? "n/a   " : r.met ? "met   " : "MISSED";
    lines.push(`  ${verdict}  ${r.numerator} ≥ ${r.target.toFixed(2)}× ${r.denominator}, ${r.mode}: ${formatRatio(r.ratio)}`);
  }
  return lines.join("\n");
}

function stepsPerSecond(t: PeerTiming): number {
  return t.wallMs > 0 ? (t.steps * 1000) / t.wallMs : 0;
}

function usPerStep(t: PeerTiming): number {
  return (t.wallMs * 1000) / t.steps;
}

function runPercentile(t: PeerTiming, p: number): number | null {
  return t.runLatenciesMs.length === 0
    ? null
    : percentile(
        [...t.runLatenciesMs].sort((a, b) => a - b),
        p,
      );
}

function formatMs(value: number | null): string {
  return value === null ? "—" : value.toFixed(1);
}

function signed(value: number): string {
  return `${value >= 0 ? "+" : "-"}${Math.abs(value).toFixed(1)}`;
}
