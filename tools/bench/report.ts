import type { AgentStorageReport, ArmMeasurement, ArmName } from "./agent-storage.js";
import type { PayloadDedup } from "./cairn-runs.js";
import { formatBytes, formatCount, formatMicros, formatRatio, renderTable, type TimingSummary } from "./stats.js";

/** The benchmark's findings: what `--json` prints, and what the table is rendered from. */
export interface BenchReport {
  settings: BenchSettings;
  environment: { node: string; platform: string; cpus: number; postgres: string | null };
  backends: BackendReport[];
  /** Why the PostgreSQL rows are missing, when they are. */
  postgresSkipped: string | null;
  /** A conversation's checkpoints, Cairn against LangGraph's snapshot per step (SQLite only). */
  agentStorage: AgentStorageReport;
  goals: Goal[];
}

export interface BenchSettings {
  quick: boolean;
  rounds: number;
  sequentialSteps: number;
  concurrentRuns: number;
  stepsPerRun: number;
  payloadSteps: number;
  payloadValueBytes: number;
  agentTurns: number;
}

export type Backend = "sqlite" | "postgres";

/** A timed workload: the medians over rounds, and each round's rate so the spread is visible. */
export interface WorkloadReport extends TimingSummary {
  /** Steps per second including creating, starting and finishing the runs (Cairn only). */
  endToEndPerSecond: number | null;
  /** Median over rounds of this round's rate divided by the same round's raw floor. */
  vsRawFloor: number | null;
  roundRates: number[];
}

/**
 * Sequential steps with the fsync taken out of both sides (SQLite synchronous=OFF, PostgreSQL
 * synchronous_commit=off): what the engine adds per step in CPU and event-loop time. A disk shared
 * with other work moves the durable ratios around; this number moves far less.
 */
export interface OverheadReport {
  rawUsPerRow: number | null;
  cairnUsPerStep: number | null;
  /** Median over rounds of the round's Cairn µs/step minus its raw µs/row. */
  overheadUs: number | null;
}

export interface BackendReport {
  backend: Backend;
  rawFloor: WorkloadReport;
  sequential: WorkloadReport;
  concurrent: WorkloadReport;
  withoutFsync: OverheadReport;
  payload: PayloadDedup;
}

export interface Goal {
  backend: Backend;
  what: string;
  target: string;
  actual: string;
  met: boolean;
}

const SEQUENTIAL_GOAL = "sequential steps/s vs raw floor";
const CONCURRENT_GOAL = "concurrent steps/s vs raw sequential floor";
const PAYLOAD_GOAL = "repeated payload stored once";
const AGENT_BYTES_GOAL = "agent conversation bytes, LangGraph ÷ Cairn";
const AGENT_TIME_GOAL = "agent checkpoint time, LangGraph ÷ Cairn";
const AGENT_DEFERRED_TIME_GOAL = "agent checkpoint time, LangGraph ÷ Cairn with deferModelCallFsync";

export function goalsOf(backend: BackendReport): Goal[] {
  const goals: Goal[] = [
    {
      backend: backend.backend,
      what: SEQUENTIAL_GOAL,
      target: "≥ 0.80×",
      actual: formatRatio(backend.sequential.vsRawFloor),
      met: (backend.sequential.vsRawFloor ?? 0) >= 0.8,
    },
  ];
  if (backend.backend === "sqlite") {
    goals.push({
      backend: backend.backend,
      what: CONCURRENT_GOAL,
      target: "≥ 3.00×",
      actual: formatRatio(backend.concurrent.vsRawFloor),
      met: (backend.concurrent.vsRawFloor ?? 0) >= 3,
    });
  }
  goals.push({
    backend: backend.backend,
    what: PAYLOAD_GOAL,
    target: "1 row",
    actual: `${backend.payload.payloadRows} row(s)`,
    met: backend.payload.payloadRows === 1,
  });
  return goals;
}

/** Against LangGraph with the same durability as Cairn (synchronous=FULL). */
export function agentStorageGoals(agent: AgentStorageReport): Goal[] {
  return [
    { backend: "sqlite", what: AGENT_BYTES_GOAL, target: "≥ 10.00×", actual: formatRatio(agent.storageRatio), met: agent.storageRatio >= 10 },
    { backend: "sqlite", what: AGENT_TIME_GOAL, target: "≥ 5.00×", actual: formatRatio(agent.checkpointTimeRatio), met: agent.checkpointTimeRatio >= 5 },
    {
      backend: "sqlite",
      what: AGENT_DEFERRED_TIME_GOAL,
      target: "≥ 5.00×",
      actual: formatRatio(agent.checkpointTimeRatioDeferred),
      met: agent.checkpointTimeRatioDeferred >= 5,
    },
  ];
}

export function renderReport(report: BenchReport): string {
  const s = report.settings;
  const env = report.environment;
  const lines: string[] = [
    `Cairn bench — ${s.quick ? "quick, " : ""}${s.rounds} rounds, medians; every measurement on a fresh database`,
    `node ${env.node}, ${env.platform}, ${env.cpus} CPUs; SQLite WAL synchronous=FULL` + (env.postgres === null ? "" : `; PostgreSQL ${env.postgres}`),
    "",
  ];
  const workloads: string[][] = [["backend", "workload", "steps/s", "p50 µs", "p99 µs", "e2e steps/s", "vs raw", "goal"]];
  const goal = (backend: Backend, what: string): string => {
    const g = report.goals.find((candidate) => candidate.backend === backend && candidate.what === what);
    return g === undefined ? "" : `${g.target} ${g.met ? "met" : "MISSED"}`;
  };
  for (const b of report.backends) {
    workloads.push(row(b.backend, "raw: 1 row per commit", b.rawFloor, ""));
    workloads.push(row(b.backend, `cairn: ${s.sequentialSteps} sequential steps`, b.sequential, goal(b.backend, SEQUENTIAL_GOAL)));
    workloads.push(row(b.backend, `cairn: ${s.concurrentRuns} runs × ${s.stepsPerRun} steps`, b.concurrent, goal(b.backend, CONCURRENT_GOAL)));
  }
  lines.push(renderTable(workloads));
  if (report.postgresSkipped !== null) lines.push("", `PostgreSQL rows skipped: ${report.postgresSkipped}`);

  lines.push("", `Payload dedup: one run, ${s.payloadSteps} steps returning the same ${formatBytes(s.payloadValueBytes)} value`, "");
  const payloads: string[][] = [["backend", "payload rows", "payload bytes", "steps by hash", "database size", `naive ${s.payloadSteps} × value`, "goal"]];
  for (const b of report.backends) {
    const p = b.payload;
    payloads.push([
      b.backend,
      formatCount(p.payloadRows),
      formatCount(p.payloadBytes),
      formatCount(p.stepsByHash),
      formatBytes(p.databaseBytes) + (p.wholeDatabaseBytes === null ? "" : ` (${formatBytes(p.wholeDatabaseBytes)} with catalog)`),
      formatBytes(p.naiveBytes),
      goal(b.backend, PAYLOAD_GOAL),
    ]);
  }
  lines.push(renderTable(payloads));

  lines.push("", "Engine cost per sequential step with the fsync taken out (SQLite synchronous=OFF, PostgreSQL synchronous_commit=off)", "");
  const overheads: string[][] = [["backend", "raw µs/row", "cairn µs/step", "engine µs/step"]];
  for (const b of report.backends) {
    const o = b.withoutFsync;
    overheads.push([b.backend, formatMicros(o.rawUsPerRow), formatMicros(o.cairnUsPerStep), formatMicros(o.overheadUs)]);
  }
  lines.push(renderTable(overheads));
  lines.push(
    "",
    "steps/s: steps over the step window (first ctx.step called to last resolved); p50/p99: one ctx.step, from the workflow's side.",
    "e2e: including creating, starting and finishing the runs. vs raw: median over rounds of the round's rate ÷ that round's raw floor.",
  );
  lines.push("", ...renderAgentStorage(report.agentStorage, report.goals));
  return lines.join("\n");
}

const ARM_LABELS: Record<ArmName, string> = {
  cairn: "cairn (ctx.model + ctx.step)",
  "cairn-deferred": "cairn, deferModelCallFsync",
  langgraph: "langgraph SqliteSaver",
  "langgraph-default": "langgraph SqliteSaver, as shipped",
};

function renderAgentStorage(agent: AgentStorageReport, goals: Goal[]): string[] {
  const s = agent.settings;
  const n = s.turns;
  const w = agent.window;
  const goal = (what: string): string => {
    const g = goals.find((candidate) => candidate.what === what);
    return g === undefined ? "" : ` (goal ${g.target} ${g.met ? "met" : "MISSED"})`;
  };
  const lines = [
    `Agent conversation: ${n} turns (${agent.toolTurns} with a tool call), ${agent.modelCalls} model calls, ${formatBytes(agent.contentBytes)} of message text;` +
      ` each arm on a fresh SQLite file (WAL), medians of ${s.rounds} rounds`,
    "",
  ];
  const rows: string[][] = [
    [
      "arm",
      "synchronous",
      "bytes",
      `B/turn 1–${w}`,
      `B/turn ${n - w + 1}–${n}`,
      "file (empty schema)",
      "checkpoint ms",
      "of which GC",
      "ms/turn",
      `ms/turn 1–${w}`,
      `ms/turn ${n - w + 1}–${n}`,
      "commits",
    ],
  ];
  for (const arm of agent.arms) {
    rows.push([
      ARM_LABELS[arm.arm],
      arm.synchronous,
      formatBytes(arm.bytes),
      formatCount(arm.firstTurns.bytesPerTurn),
      formatCount(arm.lastTurns.bytesPerTurn),
      `${formatBytes(arm.fileBytes)} (${formatBytes(arm.emptyFileBytes)})`,
      arm.checkpointMs.toFixed(1),
      arm.gcMs.toFixed(1),
      (arm.checkpointMs / n).toFixed(2),
      arm.firstTurns.checkpointMsPerTurn.toFixed(2),
      arm.lastTurns.checkpointMsPerTurn.toFixed(2),
      formatCount(arm.checkpoints),
    ]);
  }
  lines.push(renderTable(rows), "");
  const [cairn, langgraph] = agent.arms as [ArmMeasurement, ArmMeasurement];
  lines.push(
    `LangGraph (synchronous=FULL, as Cairn) ÷ Cairn: bytes ${formatRatio(agent.storageRatio)}${goal(AGENT_BYTES_GOAL)},` +
      ` file ${formatRatio(langgraph.fileBytes / cairn.fileBytes)}, checkpoint time ${formatRatio(agent.checkpointTimeRatio)}${goal(AGENT_TIME_GOAL)}`,
    `  checkpoint time with the GC pauses taken out of both: ${formatRatio(agent.checkpointTimeRatioWithoutGc)}`,
    `LangGraph as shipped (better-sqlite3's WAL default, synchronous=NORMAL: commits not fsynced) ÷ Cairn: checkpoint time ${formatRatio(agent.checkpointTimeRatioVsDefault)}`,
    `LangGraph (synchronous=FULL) ÷ Cairn with deferModelCallFsync (external synchrony: model calls not fsynced, the fsync forced before each tool step): ` +
      `checkpoint time ${formatRatio(agent.checkpointTimeRatioDeferred)}${goal(AGENT_DEFERRED_TIME_GOAL)}`,
    `where the bytes go — cairn: ${topColumns(cairn)}; langgraph: ${topColumns(langgraph)}`,
    `bytes: ${agent.measured.bytes}.`,
    `checkpoint time, cairn: ${agent.measured.cairnCheckpoint}.`,
    `checkpoint time, langgraph: ${agent.measured.langgraphCheckpoint}` + (langgraph.loadMs === null ? "." : ` (${langgraph.loadMs.toFixed(1)} ms).`),
  );
  return lines;
}

/** The columns holding most of an arm's bytes, with their shares. */
function topColumns(arm: ArmMeasurement, count = 3): string {
  return Object.entries(arm.bytesByColumn)
    .sort((a, b) => b[1] - a[1])
    .slice(0, count)
    .map(([column, bytes]) => `${column} ${formatBytes(bytes)} (${Math.round((100 * bytes) / arm.bytes)}%)`)
    .join(", ");
}

function row(backend: Backend, workload: string, w: WorkloadReport, goal: string): string[] {
  return [
    backend,
    workload,
    formatCount(w.operationsPerSecond),
    formatCount(w.p50Us),
    formatCount(w.p99Us),
    formatCount(w.endToEndPerSecond),
    formatRatio(w.vsRawFloor),
    goal,
  ];
}
