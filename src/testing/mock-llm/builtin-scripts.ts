import type { MockScript } from "./script-types.js";

/**
 * A refund-support agent, for the demo and the benchmarks: the user asks to refund order N (any
 * whole number in the prompt), and the model
 * 1. calls `lookUpOrder({ id: N })`, which must return JSON with `totalCents`;
 * 2. after that result, calls `refund({ id: N, amountCents: <totalCents> })`;
 * 3. after the refund's result, answers "Refunded order N: <totalCents> cents ...".
 * A prompt without a number gets a question back instead. Each step answers the tool results that
 * follow the last assistant message, so a later prompt in the same conversation starts over.
 */
export const REFUND_SCRIPT: MockScript = {
  rules: [
    {
      match: { lastRole: "tool", hasToolResultFor: "refund" },
      reply: {
        content: "Refunded order {{promptNumber}}: {{toolResult.lookUpOrder.totalCents}} cents are on their way back to the original payment method.",
      },
    },
    {
      match: { lastRole: "tool", hasToolResultFor: "lookUpOrder" },
      reply: { toolCalls: [{ name: "refund", arguments: { id: "{{promptNumber}}", amountCents: "{{toolResult.lookUpOrder.totalCents}}" } }] },
    },
    {
      match: { lastRole: "user", promptMatches: "\\d" },
      reply: { toolCalls: [{ name: "lookUpOrder", arguments: { id: "{{promptNumber}}" } }] },
    },
  ],
  default: { content: "Which order should I refund? Tell me its number." },
};

/** The scripts `builtin:<name>` selects (`cairn mock-llm --script builtin:refund`). */
export const BUILTIN_SCRIPTS: Readonly<Record<string, MockScript>> = { refund: REFUND_SCRIPT };
