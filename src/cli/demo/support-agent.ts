import type { CairnLanguageModel as LanguageModelV3 } from "../../ai/sdk-version.js";
import { jsonSchema, tool } from "ai";
import type { Cairn } from "../../index.js";
import { idempotencyKey, type Agent, type Pricing } from "../../ai/index.js";
import type { Marker } from "./markers.js";
import type { PaymentService } from "./payment-service.js";

export const AGENT_NAME = "support";
/** Every process of the demo runs this application version: a worker recovers only its own version's runs. */
export const DEMO_APP_VERSION = "cairn-demo";

/** The shop's orders, as `lookUpOrder` finds them. */
export const ORDERS: Readonly<Record<string, { item: string; totalCents: number }>> = {
  "1042": { item: "2 × Cairn mug", totalCents: 5990 },
  "7": { item: "trail map", totalCents: 1250 },
  "311": { item: "rain jacket", totalCents: 18900 },
};

export interface Ticket {
  orderId: string;
  prompt: string;
}

/** The support queue the demo submits, one run each. The mock LLM refunds the first number in a prompt. */
export const TICKETS: readonly Ticket[] = [
  { orderId: "1042", prompt: "Refund order 1042: both mugs arrived broken." },
  { orderId: "7", prompt: "Refund order 7 please, I bought the map twice." },
  { orderId: "311", prompt: "Refund order 311, the jacket does not fit." },
];

/** Illustrative prices (dollars per million tokens), so that the runs' cost is not zero. */
export const DEMO_PRICING: Pricing = { inputPerMillion: 3, outputPerMillion: 15 };

/**
 * How long the payment service's answer takes to come back to the refund tool: the refund has been
 * made, the tool has not returned, and its checkpoint is not written — the window the demo kills in.
 */
export const REFUND_RESPONSE_DELAY_MS = 400;

const SYSTEM = [
  "You are a support agent who resolves refund requests.",
  "Call lookUpOrder with the order's id, then call refund with that id and the order's totalCents,",
  "then tell the customer in one sentence that the refund is on its way. Never ask the customer a question.",
].join(" ");

export interface SupportDeps {
  model: LanguageModelV3;
  payments: PaymentService;
  emit: (marker: Marker) => void;
}

/**
 * The demo's agent: looks an order up, refunds it — a tool that waits for a human's approval —
 * and answers. The refund passes the tool call's idempotency key (`runId:seq`, the same after
 * every crash) to the payment service, so running the tool again after a crash refunds nothing
 * twice. Every process of the demo registers it: the demo itself, which submits the tickets and
 * approves the refunds but executes nothing, and each worker, which executes.
 */
export function registerSupportAgent(cairn: Cairn, { model, payments, emit }: SupportDeps): Agent {
  return cairn.agent(AGENT_NAME, {
    model,
    system: SYSTEM,
    tools: {
      lookUpOrder: tool({
        description: "Look up an order by its id: what was bought and its total in cents.",
        inputSchema: jsonSchema<{ id: string | number }>({
          type: "object",
          properties: { id: { type: ["string", "number"], description: "The order id" } },
          required: ["id"],
        }),
        execute: async ({ id }) => {
          const order = ORDERS[String(id)];
          return order === undefined ? { id, error: `there is no order ${id}` } : { id, ...order };
        },
      }),
      refund: tool({
        description: "Refund an amount in cents of an order to the customer's original payment method.",
        inputSchema: jsonSchema<{ id: string | number; amountCents: number | string }>({
          type: "object",
          properties: { id: { type: ["string", "number"] }, amountCents: { type: ["integer", "string"] } },
          required: ["id", "amountCents"],
        }),
        execute: async ({ id, amountCents }, options) => {
          const key = idempotencyKey(options);
          const request = { idempotencyKey: key, orderId: String(id), amountCents: Number(amountCents) };
          const receipt = payments.refund(request);
          // The key is `runId:seq`: the run is all but its last field.
          emit({ event: "refund", runId: key.slice(0, key.lastIndexOf(":")), ...request, ...receipt });
          await new Promise((resolve) => setTimeout(resolve, REFUND_RESPONSE_DELAY_MS));
          return { refundId: receipt.refundId, orderId: request.orderId, amountCents: request.amountCents, status: "refunded" };
        },
      }),
    },
    permissions: { refund: "approve" },
    pricing: DEMO_PRICING,
    maxSteps: 6,
  });
}
