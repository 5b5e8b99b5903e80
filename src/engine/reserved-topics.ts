import { InvalidSpecError } from "../errors.js";

/**
 * Topics (and message ids) under these prefixes are Cairn's own channels: approval decisions travel
 * on `approval:<seq>`, written only by the approval API (`cairn.approvals`) in the transaction that
 * decides the `cairn_approvals` row. A user message — `cairn.send`, `ctx.send`, `cairn send` — may
 * not use them, so it can neither forge a decision nor take the id a decision will need.
 */
export const RESERVED_TOPIC_PREFIXES = ["approval:", "cairn:"] as const;

export function isReservedTopic(topic: string): boolean {
  return RESERVED_TOPIC_PREFIXES.some((prefix) => topic.startsWith(prefix));
}

/** Refuses a user send to a reserved topic, or with an idempotency key in Cairn's reserved id space. */
export function assertUserSend(topic: unknown, idempotencyKey?: unknown): void {
  if (typeof topic === "string" && isReservedTopic(topic)) {
    throw new InvalidSpecError(
      "topic",
      topic,
      `topics beginning ${RESERVED_TOPIC_PREFIXES.map((p) => `"${p}"`).join(" or ")} are reserved for Cairn; decide approvals with cairn.approvals.approve/deny or \`cairn approve\` / \`cairn deny\``,
    );
  }
  if (typeof idempotencyKey === "string" && isReservedTopic(idempotencyKey)) {
    throw new InvalidSpecError(
      "idempotencyKey",
      idempotencyKey,
      `keys beginning ${RESERVED_TOPIC_PREFIXES.map((p) => `"${p}"`).join(" or ")} are reserved for Cairn's own messages`,
    );
  }
}
