import { actor, post } from "./api.js";
import { confirmAction } from "./confirm.js";

/** Confirms, then performs, an action; the server records who did it. Returns false when not confirmed. */
export async function act(
  action: "cancel" | "resume" | "fork" | "approve" | "deny",
  runId: string,
  describe: string,
  extra: { fromSeq?: number; toolCallId?: string } = {},
): Promise<Record<string, unknown> | undefined> {
  const reason = await confirmAction(`${action[0]!.toUpperCase()}${action.slice(1)}?`, describe, {
    reason: action === "deny",
    danger: action === "cancel" || action === "deny",
  });
  if (reason === undefined) return undefined;
  try {
    return await post<Record<string, unknown>>("/actions", { action, runId, actor: actor(), ...extra, ...(reason === "" ? {} : { reason }) });
  } catch (error) {
    alert((error as Error).message);
    return undefined;
  }
}
