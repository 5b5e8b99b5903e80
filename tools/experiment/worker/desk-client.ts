import type { WorkerKit } from "./worker-kit.js";

/**
 * Asks the services' approval desk to approve a tool call and waits until someone has, polling.
 * With a `requestKey` (LangGraph: its interrupt's id) asking again finds the same request; without
 * one (the conventional worker) every ask is a new request.
 */
export async function awaitApproval(kit: WorkerKit, task: number, tool: string, requestKey?: string): Promise<void> {
  const { id } = await kit.call("/approvals", { task, tool, ...(requestKey === undefined ? {} : { requestKey }) });
  for (;;) {
    const request = await kit.get(`/approvals/${String(id)}`);
    if (request.status === "approved") return;
    await new Promise((resolve) => setTimeout(resolve, kit.config.approvalPollMs));
  }
}
