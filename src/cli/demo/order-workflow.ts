import type { Cairn, Workflow } from "../../index.js";
import type { DemoLedger } from "./ledger.js";
import type { Marker } from "./markers.js";

export interface Order {
  orderId: string;
  sku: string;
  quantity: number;
  amountCents: number;
  email: string;
}

export interface OrderResult {
  orderId: string;
  reservationId: string;
  chargeId: string;
  emailedTo: string;
}

export const DEMO_ORDER: Order = { orderId: "1042", sku: "MUG-CAIRN", quantity: 2, amountCents: 5990, email: "ada@example.com" };

export const STEPS = ["reserve-stock", "charge-card", "send-confirmation"] as const;
export const SLEEP = { name: "fraud-check-window", delayMs: 1500 } as const;
/** How long the payment provider's response takes to come back: the window the demo kills in. */
export const RESPONSE_DELAY_MS = 300;

export interface OrderDeps {
  ledger: DemoLedger;
  /** Names the process in the ledger: `worker #2 (pid 4242)`. */
  worker: string;
  emit: (marker: Marker) => void;
}

/**
 * The demo's workflow: reserve stock, charge the card, wait out a fraud-check window (a durable
 * sleep), send the confirmation. Each step's side effect is a line in the ledger. The charge passes
 * the step's idempotency key (`runId:seq`, the same after every crash) to the payment provider, so
 * running the step again after a crash charges nothing twice.
 */
export function registerOrderWorkflow(cairn: Cairn, { ledger, worker, emit }: OrderDeps): Workflow<Order, OrderResult> {
  return cairn.workflow("order", async (ctx, order: Order) => {
    const reservation = await ctx.step("reserve-stock", () => {
      ledger.recordEffect("reserve-stock", worker, `${order.quantity} × ${order.sku}`);
      emit({ event: "effect", step: "reserve-stock", detail: `reserved ${order.quantity} × ${order.sku}` });
      return { reservationId: `res-${order.orderId}` };
    });
    emit({ event: "returned", step: "reserve-stock" });

    const charge = await ctx.step("charge-card", async ({ idempotencyKey }) => {
      const result = ledger.charge(idempotencyKey, order.amountCents);
      ledger.recordEffect("charge-card", worker, `${result.chargeId}${result.deduplicated ? " (deduplicated)" : ""}`);
      emit({ event: "charged", ...result, idempotencyKey, amountCents: order.amountCents });
      await new Promise((resolve) => setTimeout(resolve, RESPONSE_DELAY_MS));
      return { chargeId: result.chargeId };
    });
    emit({ event: "returned", step: "charge-card" });

    emit({ event: "sleeping", name: SLEEP.name, delayMs: SLEEP.delayMs });
    await ctx.sleep(SLEEP.name, SLEEP.delayMs);

    await ctx.step("send-confirmation", () => {
      ledger.recordEffect("send-confirmation", worker, order.email);
      emit({ event: "effect", step: "send-confirmation", detail: `emailed ${order.email}` });
      return { to: order.email };
    });
    emit({ event: "returned", step: "send-confirmation" });

    return { orderId: order.orderId, reservationId: reservation.reservationId, chargeId: charge.chargeId, emailedTo: order.email };
  });
}
