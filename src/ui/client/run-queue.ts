import { h, link, time } from "./dom.js";

/** A run's queue row (`cairn_queue_runs`), as /api/runs/:id returns it; null for a run started directly. */
export interface RunQueue {
  queue: string;
  priority: number;
  partitionKey: string | null;
  dedupKey: string | null;
  notBefore: number | null;
  enqueuedAt: number;
  dispatchedAt: number | null;
  executorId: string | null;
  policy: string | null;
}

/** The run page's queue section: where the run waited, and the dispatch decision once one was made. */
export function queueSection(queue: RunQueue | null): HTMLElement[] {
  if (queue === null) return [];
  const pair = (label: string, value: Node | string) => [h("span", { class: "muted" }, label), h("span", {}, value)];
  const taken = queue.dispatchedAt !== null && queue.policy !== "cancelled";
  return [
    h("h2", {}, "Queue"),
    h(
      "div",
      { class: "card meta", "data-testid": "queue" },
      ...pair("queue", link(`#/runs?queue=${encodeURIComponent(queue.queue)}`, queue.queue)),
      ...pair("priority", String(queue.priority)),
      ...pair("partition key", queue.partitionKey ?? "—"),
      ...(queue.dedupKey === null ? [] : pair("dedup key", queue.dedupKey)),
      ...pair("enqueued", time(queue.enqueuedAt)),
      ...(queue.notBefore === null ? [] : pair("not before", time(queue.notBefore))),
      ...(queue.dispatchedAt === null
        ? pair("dispatched", "waiting for a dispatch")
        : taken
          ? [...pair("dispatched", time(queue.dispatchedAt)), ...pair("executor", queue.executorId ?? "—"), ...pair("policy", queue.policy ?? "—")]
          : pair("dispatched", `never: cancelled at ${time(queue.dispatchedAt)}`)),
    ),
  ];
}
