/**
 * The agents' tools, the same code in every arm: each stops at its scheduled fault points, prints
 * `tool-start` / `effect-done`, and calls a mock service. `keyOf` is the one difference between
 * arms: Cairn passes `idempotencyKey(options)`, the others have no key to pass.
 */

import { jsonSchema, tool, type ToolExecutionOptions, type ToolSet } from "ai";
import { points } from "../fault-schedule.js";
import { customerOf, type AgentName } from "../workload.js";
import type { WorkerKit } from "./worker-kit.js";

export type KeyOf = (options: ToolExecutionOptions) => string | undefined;

interface TaskInput {
  task: number;
}

const taskSchema = { task: { type: "integer", description: "The task number" } } as const;

function effectTool<I extends TaskInput>(
  kit: WorkerKit,
  agent: AgentName,
  name: string,
  spec: { description: string; properties: Record<string, unknown>; required: string[]; path: string },
  keyOf: KeyOf,
) {
  return tool({
    description: spec.description,
    inputSchema: jsonSchema<I>({ type: "object", properties: { ...taskSchema, ...spec.properties }, required: ["task", ...spec.required] }),
    execute: async (input: I, options: ToolExecutionOptions) => {
      const task = Number(input.task);
      await kit.hangAt(points.toolStart(task, agent, name), task);
      kit.emit({ e: "tool-start", task, agent, tool: name, t: Date.now() });
      const key = keyOf(options);
      const result = await kit.call(spec.path, {
        ...(input as unknown as Record<string, unknown>),
        task,
        ...(key === undefined ? {} : { idempotencyKey: key }),
      });
      kit.emit({ e: "effect-done", task, agent, tool: name, t: Date.now() });
      await kit.hangAt(points.afterEffect(task, agent, name), task);
      return result;
    },
  });
}

/** The support agent's own tools (its delegation to the billing sub-agent is added by each arm). */
export function supportTools(kit: WorkerKit, keyOf: KeyOf): ToolSet {
  return {
    lookUpCustomer: tool({
      description: "Look up the customer of a task: name, email, balance due in cents.",
      inputSchema: jsonSchema<TaskInput>({ type: "object", properties: taskSchema, required: ["task"] }),
      execute: async ({ task }) => {
        await kit.hangAt(points.toolStart(task, "support", "lookUpCustomer"), task);
        kit.emit({ e: "tool-start", task, agent: "support", tool: "lookUpCustomer", t: Date.now() });
        return customerOf(Number(task));
      },
    }),
    openTicket: effectTool<TaskInput & { subject: string }>(
      kit,
      "support",
      "openTicket",
      { description: "Open a support ticket.", properties: { subject: { type: "string" } }, required: ["subject"], path: "/tickets/open" },
      keyOf,
    ),
    chargePayment: effectTool<TaskInput & { amountCents: number }>(
      kit,
      "support",
      "chargePayment",
      {
        description: "Charge the customer's card (needs a human's approval).",
        properties: { amountCents: { type: "integer" } },
        required: ["amountCents"],
        path: "/payments/charge",
      },
      keyOf,
    ),
    sendEmail: emailTool(kit, "support", keyOf),
    closeTicket: effectTool<TaskInput & { ticketId: string }>(
      kit,
      "support",
      "closeTicket",
      { description: "Close a support ticket.", properties: { ticketId: { type: "string" } }, required: ["ticketId"], path: "/tickets/close" },
      keyOf,
    ),
  };
}

/** The billing sub-agent's tools. */
export function billingTools(kit: WorkerKit, keyOf: KeyOf): ToolSet {
  return { sendEmail: emailTool(kit, "billing", keyOf) };
}

function emailTool(kit: WorkerKit, agent: AgentName, keyOf: KeyOf) {
  return effectTool<TaskInput & { to: string; subject: string; body: string }>(
    kit,
    agent,
    "sendEmail",
    {
      description: "Send an email.",
      properties: { to: { type: "string" }, subject: { type: "string" }, body: { type: "string" } },
      required: ["to", "subject", "body"],
      path: "/email/send",
    },
    keyOf,
  );
}

/** The delegation tool's input: what the sub-agent is asked. */
export const delegationSchema = jsonSchema<{ prompt: string }>({
  type: "object",
  properties: { prompt: { type: "string", description: "What the billing sub-agent should do" } },
  required: ["prompt"],
});
