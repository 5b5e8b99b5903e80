/**
 * The fault schedule: which task is killed where, drawn from the seed. Every arm gets the same
 * schedule. A fault is keyed by a task and a trigger point in the workload's terms (a tool about to
 * run, a model call about to be made, an effect just made, an approval requested), which every arm
 * passes through; a worker that reaches a scheduled point prints a `hang` marker and stops there,
 * and the supervisor SIGKILLs it (every worker, for the environment restart). An approval wait is
 * seen by the supervisor's approver, which kills the worker that last ran the task.
 *
 * A point fires once per pass: the supervisor records it as fired (a file the workers read) before
 * killing, so a task that passes the same point again after recovery goes on.
 */

import { pick, seededRandom, shuffled } from "../util/random.js";
import { SUPPORT_TOOLS, type AgentName } from "./workload.js";

/**
 * - `model-response`: right after a model response, before the tool it asked for runs.
 * - `tool-chain`: in the middle of the tool chain: a tool has returned, the next model call is not made.
 * - `approval-wait`: while the charge waits for a human's approval.
 * - `after-effect`: after an external service acted and answered, before the tool's result is recorded.
 * - `sub-agent`: inside the billing sub-agent.
 * - `environment-restart`: every worker process killed at once (the directory and database kept).
 */
export type FaultKind = "model-response" | "tool-chain" | "approval-wait" | "after-effect" | "sub-agent" | "environment-restart";

export const FAULT_KINDS: readonly FaultKind[] = ["model-response", "tool-chain", "approval-wait", "after-effect", "sub-agent", "environment-restart"];

export interface Fault {
  /** 1, 2, ... in schedule order. */
  id: number;
  kind: FaultKind;
  task: number;
  /** The trigger point (see `points`). */
  point: string;
  /** For people: where exactly the process dies. */
  description: string;
}

/** Trigger points, as the workers and the supervisor name them. */
export const points = {
  /** A tool is called, before it does anything (right after the model response that asked for it). */
  toolStart: (task: number, agent: AgentName, tool: string) => `tool:${task}:${agent}:${tool}`,
  /** A model call is about to be sent (the previous turn's tool results are in hand). */
  beforeModel: (task: number, agent: AgentName, turn: number) => `model:${task}:${agent}:${turn}`,
  /** A service has acted and answered the tool, which has not returned yet. */
  afterEffect: (task: number, agent: AgentName, tool: string) => `effect:${task}:${agent}:${tool}`,
  /** The task's charge waits for approval (seen by the approver, not the worker). */
  approval: (task: number) => `approval:${task}`,
};

/** A worker's trigger point taken apart: `effect:5:support:openTicket` → effect, 5, support, openTicket. */
export function parsePoint(point: string): { where: string; task: number; agent: AgentName | undefined; name: string | undefined } {
  const [where = "", task = "", agent, name] = point.split(":");
  return { where, task: Number(task), agent: agent as AgentName | undefined, name };
}

const EFFECT_TOOLS = ["openTicket", "chargePayment", "sendEmail", "closeTicket"] as const;
/** Tools that run as soon as the model asks (no approval in between, no delegation). */
const PLAIN_TOOLS = ["lookUpCustomer", "openTicket", "sendEmail", "closeTicket"] as const;

function draw(kind: FaultKind, task: number, random: () => number): { point: string; description: string } {
  switch (kind) {
    case "model-response": {
      const tool = pick(random, PLAIN_TOOLS);
      const turn = SUPPORT_TOOLS.indexOf(tool);
      return { point: points.toolStart(task, "support", tool), description: `after model response ${turn} (asking for ${tool}), before ${tool} runs` };
    }
    case "tool-chain": {
      const turn = pick(random, [1, 2, 4, 5, 6]);
      const previous = SUPPORT_TOOLS[turn - 1]!;
      return { point: points.beforeModel(task, "support", turn), description: `mid tool chain: ${previous} returned, before model call ${turn}` };
    }
    case "approval-wait":
      return { point: points.approval(task), description: "while chargePayment waits for a human's approval" };
    case "after-effect": {
      const tool = pick(random, EFFECT_TOOLS);
      return { point: points.afterEffect(task, "support", tool), description: `after the ${tool} service acted, before the tool's result was recorded` };
    }
    case "sub-agent":
      return pick(random, [
        {
          point: points.toolStart(task, "billing", "sendEmail"),
          description: "inside the billing sub-agent: after its model response, before its sendEmail",
        },
        {
          point: points.afterEffect(task, "billing", "sendEmail"),
          description: "inside the billing sub-agent: after its email was sent, before the result was recorded",
        },
        { point: points.beforeModel(task, "billing", 1), description: "inside the billing sub-agent: its email recorded, before its last model call" },
      ]);
    case "environment-restart": {
      const turn = pick(random, [1, 2, 3, 4, 5, 6]);
      return { point: points.beforeModel(task, "support", turn), description: `every worker killed as the task is about to make model call ${turn}` };
    }
  }
}

/**
 * `count` faults over tasks `1..tasks`: with 6 or more, one of each kind first, then more of the
 * first five kinds; with fewer, a seeded choice of kinds. Faults go to distinct tasks while there
 * are tasks enough, and never share a point.
 */
export function faultSchedule(seed: number, tasks: number, count: number): Fault[] {
  const random = seededRandom(seed);
  const kinds: FaultKind[] = count >= FAULT_KINDS.length ? [...FAULT_KINDS] : shuffled(random, FAULT_KINDS).slice(0, count);
  while (kinds.length < count) kinds.push(pick(random, FAULT_KINDS.slice(0, 5)));
  const order = shuffled(
    random,
    Array.from({ length: tasks }, (_, i) => i + 1),
  );
  const taken = new Set<string>();
  const faults: Fault[] = [];
  for (const [i, kind] of kinds.entries()) {
    let task = order[i % order.length]!;
    let drawn = draw(kind, task, random);
    for (let attempt = 0; taken.has(drawn.point) && attempt < 50; attempt++) {
      task = pick(random, order);
      drawn = draw(kind, task, random);
    }
    if (taken.has(drawn.point)) continue;
    taken.add(drawn.point);
    faults.push({ id: faults.length + 1, kind, task, ...drawn });
  }
  return faults;
}
