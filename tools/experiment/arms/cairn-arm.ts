import { join } from "node:path";
import { Cairn } from "../../../src/index.js";
import type { ApprovalDesk } from "../supervisor/approver.js";
import { APP_VERSION } from "../worker/cairn-worker.js";
import { slotOf, type Arm, type ArmSession, type PassContext } from "./arm.js";
import { freshDatabase, postgresUnreachable, type ScratchDatabase } from "./scratch-postgres.js";
import { storeOf } from "../../internal.js";

export const APPROVER = "experiment-approver";

/**
 * How often a Cairn worker looks for work written by other processes (the approver's decisions):
 * on SQLite 50 ms, the approver desk's own polling interval, instead of the default 200 ms; on
 * PostgreSQL the default, since a decision wakes the executors at once through LISTEN/NOTIFY.
 */
const POLL_INTERVAL_MS = { sqlite: 50, postgres: undefined } as const;

/**
 * Cairn on SQLite (a file in the pass's directory) or PostgreSQL (a fresh database per pass). The
 * supervisor holds a client of the database — never launched, so it executes nothing — for the
 * approver (`cairn.approvals`) and the diagnosis.
 */
export function cairnArm(backend: "sqlite" | "postgres"): Arm {
  return {
    name: `cairn-${backend}`,
    async unavailable(settings) {
      if (backend === "sqlite") return undefined;
      const reason = await postgresUnreachable(settings.postgresUrl);
      return reason === undefined
        ? undefined
        : `PostgreSQL at ${settings.postgresUrl} does not answer (${reason}); start one with \`bash scripts/pg-start.sh\` or pass --postgres <url>`;
    },
    async open(pass: PassContext): Promise<ArmSession> {
      let scratch: ScratchDatabase | undefined;
      if (backend === "postgres") scratch = await freshDatabase(pass.settings.postgresUrl);
      const database = scratch?.url ?? join(pass.dir, "cairn.db");
      const client = new Cairn({ database, appVersion: APP_VERSION, onError: () => undefined });
      // Migrates the database once, here, before the workers race to.
      await client.approvals.list();
      const workers = pass.settings.workers;
      const pollMs = POLL_INTERVAL_MS[backend];
      const pollInterval = pollMs === undefined ? {} : { pollIntervalMs: pollMs };
      return {
        runtime: "cairn",
        workerFields: () => ({ database, ...pollInterval }),
        // Every executor recovers every run, so each worker waits for every unfinished task.
        tasksFor: (slot, unfinished) => ({ tasks: unfinished.filter((task) => slotOf(task, workers) === slot), awaitTasks: [...unfinished] }),
        desk: cairnDesk(client),

        /**
         * One SQL query over the provenance view: the side effect's idempotency key is the tool
         * call's `runId:seq`, and the view joins the tool call to the model response that asked
         * for it.
         */
        async diagnose(target) {
          const key = target.idempotencyKey ?? "";
          const at = key.lastIndexOf(":");
          const [runId, seq] = [key.slice(0, at), Number(key.slice(at + 1))];
          const started = performance.now();
          const rows = await storeOf(client).select<{ model_seq: unknown; model_id: string | null; model_excerpt: string | null; tool_call_id: string }>(
            "SELECT model_seq, model_id, model_excerpt, tool_call_id FROM cairn_provenance WHERE run_id = $1 AND tool_seq = $2",
            [runId, seq],
          );
          const ms = performance.now() - started;
          const row = rows[0];
          return {
            effect: `${target.effect} (ledger #${target.n}, key ${key})`,
            ms,
            commands: 1,
            exact: rows.length === 1 && row?.model_seq !== null,
            answer:
              row === undefined
                ? "no tool call under that key"
                : `${runId} model call seq ${String(row.model_seq)}: ${row.model_excerpt ?? ""} (tool call ${row.tool_call_id})`,
            method: "SELECT model_seq, model_id, model_excerpt, tool_call_id FROM cairn_provenance WHERE run_id = $1 AND tool_seq = $2",
          };
        },

        async reproduce(finished, spawnReplay) {
          if (finished.length === 0) return { reproducible: false, runs: 0, identical: 0, detail: "no finished task to re-run" };
          const outcome = await spawnReplay({ tasks: [...finished], database, ...pollInterval });
          return {
            reproducible: outcome.runs > 0 && outcome.identical === outcome.runs && outcome.liveCalls === 0,
            runs: outcome.runs,
            identical: outcome.identical,
            detail: outcome.liveCalls === 0 ? outcome.detail : `${outcome.detail}; but it made ${outcome.liveCalls} live calls`,
          };
        },

        async close() {
          await client.shutdown();
          await scratch?.drop();
        },
      };
    },
  };
}

function cairnDesk(client: Cairn): ApprovalDesk {
  return {
    async pending() {
      return (await client.approvals.list())
        .filter((a) => a.kind === "tool")
        .map((a) => ({ key: JSON.stringify([a.runId, a.toolCallId]), task: Number(/\d+/.exec(a.runId)?.[0]), requestedAt: a.requestedAt.getTime() }));
    },
    async approve(key) {
      const [runId, toolCallId] = JSON.parse(key) as [string, string];
      await client.approvals.approve(runId, toolCallId, { by: APPROVER });
    },
    async requestCount() {
      const [row] = await storeOf(client).select<{ n: unknown }>("SELECT count(*) AS n FROM cairn_approvals WHERE kind = 'tool'");
      return Number(row?.n ?? 0);
    },
  };
}
