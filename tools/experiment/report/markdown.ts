/** results.md: the table, the chart, the schedule, how each figure is measured, and the details per arm. */

import type { ArmResult } from "../metrics.js";
import type { ExperimentResults } from "../results.js";
import { MODEL_CALLS_PER_TASK, SIDE_EFFECTS_PER_TASK, TOOL_CALLS_PER_TASK } from "../workload.js";
import { compact, milliseconds, RESULT_COLUMNS } from "./columns.js";

export function renderMarkdown(results: ExperimentResults): string {
  const s = results.settings;
  const lines: string[] = [
    "# Fault-injection experiment: a conventional agent runtime, LangGraph.js and Cairn",
    "",
    `\`${results.command}\` — ${s.tasks} tasks arriving ${s.arrivalIntervalMs} ms apart, ${results.faults.length} faults (seed ${results.seed}),`,
    `${s.workers} worker processes per arm; mock model ${s.modelLatencyMs} ms a call, services ${s.serviceLatencyMs} ms, approvals after ${s.approvalDelayMs} ms.`,
    `${results.machine.cpus} × ${results.machine.cpuModel}, Node ${results.machine.node}, ${results.machine.platform}; ${results.startedAt}, took ${Math.round(results.durationMs / 1000)} s.`,
    "",
    `| ${RESULT_COLUMNS.map((c) => c.header).join(" | ")} |`,
    `| ${RESULT_COLUMNS.map((c) => (c.align === "right" ? "---:" : ":---")).join(" | ")} |`,
    ...results.arms.map((r) => `| ${RESULT_COLUMNS.map((c) => c.cell(r)).join(" | ")} |`),
    "",
    "![one bar group per metric, one bar per arm](chart.svg)",
    "",
  ];
  if (results.skipped.length > 0) {
    lines.push("Skipped:", "", ...results.skipped.map((s) => `- **${s.arm}**: ${s.reason}`), "");
  }
  lines.push(
    "## The workload",
    "",
    `Each task is one trajectory of a support agent and the billing sub-agent it delegates to: ${MODEL_CALLS_PER_TASK} model calls,`,
    `${TOOL_CALLS_PER_TASK} tool executions, ${SIDE_EFFECTS_PER_TASK} side effects on the mock services (a ticket opened and closed, a card charged, two emails)`,
    "and one human approval (of the charge, by an automatic approver in the supervisor). Every arm runs the same tools, the same",
    "scripted model and the same services, which deduplicate only requests that carry an idempotency key.",
    "",
    "- **conventional**: the AI SDK tool loop (`generateText` with tools) in a plain process; a crashed worker is restarted by the",
    "  supervisor and its unfinished tasks start over. Approvals are a request to a desk and a wait. No idempotency keys.",
    "- **langgraph**: a LangGraph.js StateGraph per agent with SqliteSaver; the charge waits through `interrupt()` and is resumed with",
    "  a `Command`; the sub-agent is a subgraph. A restarted worker resumes each thread from its last checkpoint. LangGraph offers no",
    "  idempotency keys, so its tools pass none.",
    "- **cairn-sqlite / cairn-postgres**: `cairn.agent` with durable tools passing `idempotencyKey(options)`, permission `approve` on",
    "  the charge (decided through `cairn.approvals`), the sub-agent via `agents`. Every worker is an executor on the shared database.",
    "",
    `## Fault schedule (seed ${results.seed}, the same for every arm)`,
    "",
    "Each fault is a real SIGKILL of the worker process running the task (every worker, for the environment restart), at a point",
    "the worker reports reaching; the other tasks that worker was running die with it.",
    "",
    "| # | kind | task | where |",
    "| ---: | :--- | ---: | :--- |",
    ...results.faults.map((f) => `| ${f.id} | ${f.kind} | ${f.task} | ${f.description} |`),
    "",
    "## How each figure is measured",
    "",
    "- **completed**: tasks that ended with the expected final answer, in the pass with faults.",
    "- **recovered**: of the tasks a kill interrupted (unfinished, last run by a killed worker), those that completed.",
    "- **dup. effects**: entries in the services' ledger that repeat a logical effect already applied (a second charge of a task,",
    "  a second email to the same address). A request deduplicated by its idempotency key is not a duplicate.",
    "- **rep. model calls**: requests in the mock model's log beyond the distinct (agent, task, conversation length) requests the",
    '  workload needs; "in flight": the repeat of a call a kill cut off (the worker that made it printed nothing more for the',
    "  task: it died before acting on the answer, or, for a durable runtime, before recording it).",
    "- **rep. tool calls**: tool executions beyond one per (task, agent, tool), counted from the workers' markers.",
    "- **tokens / cost**: every request the mock model answered, repeats included, at $3 / $15 per million tokens in / out.",
    "- **p50 / p99 overhead**: percentiles, over every step of every task, of the step's duration in the arm's pass without faults",
    "  minus the same step's in the baseline (the conventional runtime without faults: no durability). A step is the gap between a",
    "  task's consecutive live boundaries (a model call made, a tool begun, the answer), so it holds one model call or tool plus the",
    "  runtime's bookkeeping around it; the charge's step includes the wait for the approver and the wake-up after it.",
    "- **tasks/min**: completed tasks per minute of the pass with faults, recovery included.",
    '- **diagnose**: time to answer "which model response caused this side effect?" for the side effect the after-effect fault',
    "  hit, by the best automated means each runtime offers; `cmd` counts queries or file scans; `guess` marks an answer that picks",
    "  among several candidates by time rather than following a recorded link.",
    "- **reproducible**: re-running finished runs from what the runtime recorded, with the model and the services unreachable,",
    "  gives the identical trajectory (the same answer, no extra step, no live call).",
    "",
    "## Per arm",
    "",
  );
  for (const r of results.arms) lines.push(...armSection(r, results), "");
  lines.push(...goals(results));
  return `${lines.join("\n")}\n`;
}

function armSection(r: ArmResult, results: ExperimentResults): string[] {
  const lines = [
    `### ${r.arm}`,
    "",
    `- completed ${r.completed}/${r.tasks}; ${r.kills} kills (${r.faultsFired}/${results.faults.length} faults fired), ${r.workerStarts} worker processes started; interrupted tasks ${r.affectedTasks}, recovered ${r.recovered}, of which ${r.recoveredCleanly} without a duplicate side effect`,
    `- model calls: ${r.modelCalls} made, ${r.modelCallsNeeded} needed; ${r.repeatedModelCalls} repeated, of which ${r.repeatedModelCallsInFlight} were in flight at a kill`,
    `- tool executions: ${r.toolCalls} (needed ${r.toolCallsNeeded}); side effects applied: ${r.sideEffects} (needed ${r.sideEffectsNeeded}), ${r.duplicateSideEffects} duplicates`,
    `- approval requests a human saw: ${r.approvalRequests} (needed ${r.tasks})`,
    `- tokens: ${compact(r.tokens)} with faults, ${compact(r.tokensNoFault)} without; cost $${r.costUsd.toFixed(4)}`,
    `- step latency without faults: p50 ${r.p50StepMs} ms, p99 ${r.p99StepMs} ms (baseline ${results.baseline.p50StepMs} / ${results.baseline.p99StepMs} ms); ${r.noFaultThroughputTasksPerMin} tasks/min without faults, ${r.throughputTasksPerMin} with`,
    `- recovery: at most ${Math.round(r.recoveryMsMax)} ms from a kill to an interrupted task's next live step`,
    `- diagnosis (${milliseconds(r.diagnoseMs)}, ${r.diagnoseCommands} command${r.diagnoseCommands === 1 ? "" : "s"}${r.diagnoseExact ? "" : ", a guess among candidates"}): ${r.diagnoseAnswer}`,
    `  - method: ${r.diagnoseMethod}`,
    `- reproducible: ${r.reproducible ? "yes" : "no"} — ${r.reproducibleDetail}`,
  ];
  if (r.problems.length > 0) lines.push(`- problems: ${r.problems.slice(0, 5).join("; ")}`);
  return lines;
}

/** The goals for the Cairn arms, checked. */
function goals(results: ExperimentResults): string[] {
  const cairn = results.arms.filter((r) => r.arm.startsWith("cairn-"));
  if (cairn.length === 0) return [];
  const lines = ["## Goals for the Cairn arms", ""];
  for (const r of cairn) {
    const check = (ok: boolean, text: string) => `- ${ok ? "✔" : "✘"} ${r.arm}: ${text}`;
    lines.push(
      check(r.completed === r.tasks, `100% completion (${r.completed}/${r.tasks})`),
      check(r.duplicateSideEffects === 0, `0 duplicate side effects (${r.duplicateSideEffects})`),
      check(
        r.repeatedModelCalls === r.repeatedModelCallsInFlight,
        `no repeated model call beyond those in flight at a kill (${r.repeatedModelCalls} repeated, ${r.repeatedModelCallsInFlight} in flight)`,
      ),
      check(r.recoveryMsMax < 15_000, `recovery within one lease period, 15 s (at most ${Math.round(r.recoveryMsMax)} ms)`),
    );
  }
  return lines;
}
