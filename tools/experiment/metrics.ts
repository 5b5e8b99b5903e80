/**
 * The measurements, computed from what the supervisor saw and what the outside world recorded —
 * the mock model's request log and the services' ledger — never from a runtime's report on itself.
 */

import type { LoggedRequest } from "../../src/testing/index.js";
import type { PassRecord } from "./pass-record.js";
import { appliedEffects, duplicatedEffectTasks, duplicateEffects } from "./services/ledger.js";
import type { ArmName } from "./settings.js";
import { AGENT_OF_MODEL, MODEL_CALLS_PER_TASK, PRICING, SIDE_EFFECTS_PER_TASK, taskInText, TOOL_CALLS_PER_TASK } from "./workload.js";

/** One arm's figures; the first fields are the ones the issue names, the rest explain them. */
export interface ArmResult {
  arm: ArmName;
  tasks: number;
  /** Tasks that ended with the expected answer, in the pass with faults. */
  completed: number;
  /** Of the tasks a kill interrupted (`affectedTasks`), those that still completed. */
  recovered: number;
  /** Applied ledger entries beyond the first per logical effect (a second charge, a second email). */
  duplicateSideEffects: number;
  /** Model requests beyond the distinct (agent, task, conversation length) requests the workload needs. */
  repeatedModelCalls: number;
  /** Tool executions beyond one per (task, agent, tool). */
  repeatedToolCalls: number;
  /** Tokens billed by the model: every request, repeats included. */
  tokens: number;
  costUsd: number;
  /**
   * Per step (a model call or a tool, with the runtime's bookkeeping), without faults: percentiles
   * of this arm's duration minus the baseline's for the same step of the same task.
   */
  p50OverheadMs: number;
  p99OverheadMs: number;
  /** Completed tasks per minute of the pass with faults (recovery included). */
  throughputTasksPerMin: number;
  /** Time to answer "which model response caused this side effect?" (see `diagnoseMethod`). */
  diagnoseMs: number;
  /** Re-running finished runs from their record (model and services unreachable) gave identical trajectories. */
  reproducible: boolean;

  completionRate: number;
  affectedTasks: number;
  /** Recovered tasks none of whose side effects was applied twice. */
  recoveredCleanly: number;
  recoveryRate: number;
  kills: number;
  faultsFired: number;
  modelCalls: number;
  modelCallsNeeded: number;
  /** Of the repeated model calls, those that repeat a call a kill cut off (made, but not yet acted on or recorded). */
  repeatedModelCallsInFlight: number;
  toolCalls: number;
  toolCallsNeeded: number;
  sideEffects: number;
  sideEffectsNeeded: number;
  /** Approval requests a human saw (needed: one per task). */
  approvalRequests: number;
  /** Tokens of the pass without faults: what the workload costs when nothing fails. */
  tokensNoFault: number;
  p50StepMs: number;
  p99StepMs: number;
  noFaultThroughputTasksPerMin: number;
  /** The longest time from a kill to an interrupted task's next live step. */
  recoveryMsMax: number;
  diagnoseCommands: number;
  diagnoseExact: boolean;
  diagnoseAnswer: string;
  diagnoseMethod: string;
  reproducibleDetail: string;
  /** Wall time of the pass with faults. */
  wallMs: number;
  workerStarts: number;
  problems: string[];
}

export interface StepStats {
  p50: number;
  p99: number;
  samples: number;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

/**
 * Each completed task's step durations, in order: the gaps between its consecutive live boundaries
 * (each model call made, each tool begun, the answer). A gap holds one model call or tool plus the
 * runtime's bookkeeping around it (a durable step's commit, a checkpoint). Every arm runs the same
 * steps in the same order, so without faults the sequences line up step by step.
 */
export function stepGaps(record: PassRecord): Map<number, number[]> {
  const byTask = new Map<number, number[]>();
  for (const { marker } of record.markers) {
    if (marker.e !== "model-start" && marker.e !== "tool-start") continue;
    if (record.outcomes.get(marker.task)?.ok !== true) continue;
    (byTask.get(marker.task) ?? byTask.set(marker.task, []).get(marker.task)!).push(marker.t);
  }
  const gaps = new Map<number, number[]>();
  for (const [task, times] of byTask) {
    times.push(record.outcomes.get(task)!.at);
    times.sort((a, b) => a - b);
    gaps.set(
      task,
      times.slice(1).map((t, i) => t - times[i]!),
    );
  }
  return gaps;
}

export function stepStats(record: PassRecord): StepStats {
  const gaps = [...stepGaps(record).values()].flat();
  return { p50: percentile(gaps, 50), p99: percentile(gaps, 99), samples: gaps.length };
}

/** Per step, this pass's duration minus the baseline's for the same step of the same task. */
export function stepOverheads(record: PassRecord, baseline: PassRecord): number[] {
  const mine = stepGaps(record);
  const overheads: number[] = [];
  for (const [task, reference] of stepGaps(baseline)) {
    const gaps = mine.get(task);
    if (gaps === undefined || gaps.length !== reference.length) continue;
    gaps.forEach((gap, i) => overheads.push(gap - reference[i]!));
  }
  return overheads;
}

/** The request's identity: which agent, which task, which turn (a system and a user message, then two per turn). */
function requestKey(request: LoggedRequest): string {
  const task = request.lastMessage === null ? undefined : taskInText(request.lastMessage.preview);
  return `${AGENT_OF_MODEL[request.model] ?? request.model}|${task ?? "?"}|${(request.messageCount - 2) / 2}`;
}

/**
 * Model calls cut off by a kill, per (agent, task, turn): attempts made by a worker that was then
 * killed without printing anything more for the task — it died before acting on the call's answer
 * (for a durable runtime: before recording it, or while the run waited for approval after it).
 */
function cutOffCalls(record: PassRecord): Map<string, number> {
  const killed = new Set(record.kills.flatMap((kill) => kill.pids));
  const cut = new Map<string, number>();
  record.markers.forEach((attempt, i) => {
    const m = attempt.marker;
    if (m.e !== "model-start" || !killed.has(attempt.pid)) return;
    const progressed = record.markers.slice(i + 1).some((later) => later.pid === attempt.pid && "task" in later.marker && later.marker.task === m.task);
    if (progressed) return;
    const key = `${m.agent}|${m.task}|${m.turn}`;
    cut.set(key, (cut.get(key) ?? 0) + 1);
  });
  return cut;
}

function modelCallFigures(record: PassRecord) {
  const counts = new Map<string, number>();
  for (const request of record.requests) counts.set(requestKey(request), (counts.get(requestKey(request)) ?? 0) + 1);
  const cut = cutOffCalls(record);
  let repeated = 0;
  let inFlight = 0;
  for (const [key, count] of counts) {
    repeated += count - 1;
    inFlight += Math.min(count - 1, cut.get(key) ?? 0);
  }
  let tokens = 0;
  let costUsd = 0;
  for (const request of record.requests) {
    if (request.reply.kind !== "reply") continue;
    const { promptTokens, completionTokens, totalTokens } = request.reply.usage;
    tokens += totalTokens;
    costUsd += (promptTokens * PRICING.inputPerMillion + completionTokens * PRICING.outputPerMillion) / 1_000_000;
  }
  return { total: record.requests.length, repeated, inFlight, tokens, costUsd };
}

function tokensOf(record: PassRecord): number {
  return record.requests.reduce((sum, r) => sum + (r.reply.kind === "reply" ? r.reply.usage.totalTokens : 0), 0);
}

function perMinute(count: number, record: PassRecord): number {
  const minutes = Math.max(1, record.endedAt - record.startedAt) / 60_000;
  return count / minutes;
}

export function armResult(arm: ArmName, noFault: PassRecord, faults: PassRecord, baseline: PassRecord): ArmResult {
  const tasks = faults.tasks.length;
  const completedTasks = new Set([...faults.outcomes].filter(([, o]) => o.ok).map(([task]) => task));
  const affected = new Set(faults.kills.flatMap((k) => k.affected));
  const recovered = [...affected].filter((task) => completedTasks.has(task));
  const duplicatedTasks = new Set(duplicatedEffectTasks(faults.ledger));
  const model = modelCallFigures(faults);
  const toolStarts = faults.markers.flatMap(({ marker }) => (marker.e === "tool-start" ? [`${marker.task}|${marker.agent}|${marker.tool}`] : []));
  const steps = stepStats(noFault);
  const overheads = stepOverheads(noFault, baseline);
  const recoveries = faults.kills.flatMap((kill) =>
    kill.affected.flatMap((task) => {
      const next = faults.markers.find((m) => m.at > kill.at && "task" in m.marker && m.marker.task === task);
      return next === undefined ? [] : [next.at - kill.at];
    }),
  );
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    arm,
    tasks,
    completed: completedTasks.size,
    recovered: recovered.length,
    duplicateSideEffects: duplicateEffects(faults.ledger),
    repeatedModelCalls: model.repeated,
    repeatedToolCalls: toolStarts.length - new Set(toolStarts).size,
    tokens: model.tokens,
    costUsd: Math.round(model.costUsd * 1e6) / 1e6,
    p50OverheadMs: round(percentile(overheads, 50)),
    p99OverheadMs: round(percentile(overheads, 99)),
    throughputTasksPerMin: round(perMinute(completedTasks.size, faults)),
    diagnoseMs: round(faults.diagnosis?.ms ?? 0),
    reproducible: faults.reproduction?.reproducible ?? false,

    completionRate: tasks === 0 ? 0 : completedTasks.size / tasks,
    affectedTasks: affected.size,
    recoveredCleanly: recovered.filter((task) => !duplicatedTasks.has(task)).length,
    recoveryRate: affected.size === 0 ? 1 : recovered.length / affected.size,
    kills: faults.kills.length,
    faultsFired: faults.fired.size,
    modelCalls: model.total,
    modelCallsNeeded: tasks * MODEL_CALLS_PER_TASK,
    repeatedModelCallsInFlight: model.inFlight,
    toolCalls: toolStarts.length,
    toolCallsNeeded: tasks * TOOL_CALLS_PER_TASK,
    sideEffects: appliedEffects(faults.ledger),
    sideEffectsNeeded: tasks * SIDE_EFFECTS_PER_TASK,
    approvalRequests: faults.approvalRequests,
    tokensNoFault: tokensOf(noFault),
    p50StepMs: round(steps.p50),
    p99StepMs: round(steps.p99),
    noFaultThroughputTasksPerMin: round(perMinute([...noFault.outcomes.values()].filter((o) => o.ok).length, noFault)),
    recoveryMsMax: Math.max(0, ...recoveries),
    diagnoseCommands: faults.diagnosis?.commands ?? 0,
    diagnoseExact: faults.diagnosis?.exact ?? false,
    diagnoseAnswer: faults.diagnosis === undefined ? "no side effect to ask about" : `${faults.diagnosis.effect} ← ${faults.diagnosis.answer}`,
    diagnoseMethod: faults.diagnosis?.method ?? "",
    reproducibleDetail: faults.reproduction?.detail ?? "",
    wallMs: faults.endedAt - faults.startedAt,
    workerStarts: faults.workerStarts,
    problems: [
      ...noFault.problems,
      ...faults.problems,
      ...(faults.timedOut ? ["the pass with faults timed out"] : []),
      ...(noFault.timedOut ? ["the pass without faults timed out"] : []),
    ],
  };
}
