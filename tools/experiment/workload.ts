/**
 * The workload every arm runs: N billing-support tasks, each one trajectory of a support agent
 * and the billing sub-agent it delegates to. The mock model is scripted (WORKLOAD_SCRIPT), so every
 * arm asks the same questions in the same order and gets the same answers.
 *
 * One task, turn by turn (a turn is one model call; `→` is the tool it asks for):
 *
 *   support 0 → lookUpCustomer        read-only
 *   support 1 → openTicket            side effect (tickets)
 *   support 2 → chargePayment         side effect (payments), behind a human approval
 *   support 3 → notifyBilling         delegation: the billing sub-agent runs
 *       billing 0 → sendEmail         side effect (email to billing@)
 *       billing 1   "Task N: billing notified ..."
 *   support 4 → sendEmail             side effect (email to the customer)
 *   support 5 → closeTicket           side effect (tickets)
 *   support 6   "Task N resolved: ..."
 *
 * Needed per task: 9 model calls, 6 tool executions, 5 side effects, 1 approval.
 */

import type { MockScript } from "../../src/testing/index.js";

export type AgentName = "support" | "billing";

/** The model ids the mock LLM tells the agents apart by. */
export const MODEL_IDS: Readonly<Record<AgentName, string>> = { support: "support-model", billing: "billing-model" };

export const AGENT_OF_MODEL: Readonly<Record<string, AgentName>> = { "support-model": "support", "billing-model": "billing" };

/** The support agent's tools in the order its turns ask for them (turn k asks for the k-th). */
export const SUPPORT_TOOLS = ["lookUpCustomer", "openTicket", "chargePayment", "notifyBilling", "sendEmail", "closeTicket"] as const;

/** The tool of the support agent that delegates to the billing sub-agent. */
export const DELEGATION_TOOL = "notifyBilling";

/** The tool that waits for a human's approval. */
export const APPROVAL_TOOL = "chargePayment";

export const MODEL_CALLS_PER_TASK = 9;
export const TOOL_CALLS_PER_TASK = 6;
export const SIDE_EFFECTS_PER_TASK = 5;

/** Illustrative prices (dollars per million tokens), so that tokens have a cost. */
export const PRICING = { inputPerMillion: 3, outputPerMillion: 15 } as const;

export const SUPPORT_SYSTEM = [
  "You are a billing-support agent. For the task you are given: look the customer up, open a ticket,",
  "charge the balance due (a human approves charges), have the billing team notified, email the customer",
  "a receipt, close the ticket, and report in one sentence.",
].join(" ");

export const BILLING_SYSTEM = "You are the billing team's assistant. Email the billing team what you are told, then confirm in one sentence.";

/** Where the billing sub-agent sends its email. */
export const BILLING_EMAIL = "billing@example.com";

export const DELEGATION_DESCRIPTION = "Ask the billing sub-agent to notify the billing team of a charge.";

export interface Customer {
  task: number;
  customer: string;
  email: string;
  balanceCents: number;
}

const NAMES = ["Ada", "Brendan", "Chidi", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas"];

/** The customer a task is about: deterministic in the task number. */
export function customerOf(task: number): Customer {
  const name = `${NAMES[task % NAMES.length]!} ${String.fromCharCode(65 + (task % 26))}.`;
  return { task, customer: name, email: `customer${task}@example.com`, balanceCents: 1000 + ((task * 377) % 9000) };
}

/** The task's prompt; the mock reads the task number as the prompt's first number. */
export function promptOf(task: number): string {
  return `Task ${task}: ${customerOf(task).customer} has a balance due. Settle it.`;
}

export function taskIds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i + 1);
}

/** A task's final answer, as the script writes it. */
export function isResolved(task: number, text: string): boolean {
  return text.startsWith(`Task ${task} resolved:`);
}

/** The logical side effect an agent's tool makes for a task, named as the services' ledger names it. */
export function effectOf(task: number, agent: AgentName, tool: string): string | undefined {
  switch (tool) {
    case "openTicket":
      return `open:${task}`;
    case "chargePayment":
      return `charge:${task}`;
    case "closeTicket":
      return `close:${task}`;
    case "sendEmail":
      return `email:${task}:${agent === "billing" ? BILLING_EMAIL : customerOf(task).email}`;
    default:
      return undefined;
  }
}

/** The first number in a text: how the mock, and the experiment, tell which task a message is about. */
export function taskInText(text: string): number | undefined {
  const match = /(\d+)/.exec(text);
  return match === null ? undefined : Number(match[1]);
}

const support = MODEL_IDS.support;
const billing = MODEL_IDS.billing;
const task = "{{promptNumber}}";

/**
 * The mock model's script. Each rule answers the tool results that came after the model's last
 * message, so the conversation walks the turns listed at the top of this file.
 */
export const WORKLOAD_SCRIPT: MockScript = {
  rules: [
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: "closeTicket" },
      reply: {
        content:
          "Task {{promptNumber}} resolved: ticket {{toolResult.closeTicket.ticketId}} closed, {{toolResult.chargePayment.amountCents}} cents charged ({{toolResult.chargePayment.chargeId}}), receipt {{toolResult.sendEmail.messageId}} sent.",
      },
    },
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: "sendEmail" },
      reply: { toolCalls: [{ name: "closeTicket", arguments: { task, ticketId: "{{toolResult.openTicket.ticketId}}" } }] },
    },
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: DELEGATION_TOOL },
      reply: {
        toolCalls: [
          {
            name: "sendEmail",
            arguments: { task, to: "{{toolResult.lookUpCustomer.email}}", subject: "Your receipt", body: "{{toolResult.notifyBilling}}" },
          },
        ],
      },
    },
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: "chargePayment" },
      reply: {
        toolCalls: [
          {
            name: DELEGATION_TOOL,
            arguments: {
              prompt: "Task {{promptNumber}}: {{toolResult.chargePayment.amountCents}} cents were charged as {{toolResult.chargePayment.chargeId}}.",
            },
          },
        ],
      },
    },
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: "openTicket" },
      reply: { toolCalls: [{ name: "chargePayment", arguments: { task, amountCents: "{{toolResult.lookUpCustomer.balanceCents}}" } }] },
    },
    {
      match: { model: support, lastRole: "tool", hasToolResultFor: "lookUpCustomer" },
      reply: { toolCalls: [{ name: "openTicket", arguments: { task, subject: "Balance due for {{toolResult.lookUpCustomer.customer}}" } }] },
    },
    {
      match: { model: support, lastRole: "user" },
      reply: { toolCalls: [{ name: "lookUpCustomer", arguments: { task } }] },
    },
    {
      match: { model: billing, lastRole: "tool", hasToolResultFor: "sendEmail" },
      reply: { content: "Task {{promptNumber}}: billing notified ({{toolResult.sendEmail.messageId}})." },
    },
    {
      match: { model: billing, lastRole: "user" },
      reply: { toolCalls: [{ name: "sendEmail", arguments: { task, to: BILLING_EMAIL, subject: "Charge recorded", body: "{{prompt}}" } }] },
    },
  ],
};
