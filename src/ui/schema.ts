import type { StoreExtension } from "../store/extension.js";

/** The operator actions the dashboard records: who cancelled, resumed, forked, approved or denied what. */
export const ACTIONS_TABLE = "cairn_operator_actions";

/**
 * The dashboard as the store sees it: its one table, and the indexes its run list reads by.
 * Registered by the dashboard when it starts (`startUi`), which then migrates: a database the
 * dashboard never opened does not have them, and nothing else needs them.
 *
 * The indexes serve the runs page's keyset order — newest first, (created_at, id) — over all runs
 * and within a status, so a page of 100,000 runs reads 51 index entries instead of sorting them all.
 */
export const UI_EXTENSION: StoreExtension = {
  name: "ui",
  migrations: [
    {
      version: 1,
      name: "dashboard",
      statements: [
        `CREATE INDEX IF NOT EXISTS cairn_runs_created ON cairn_runs (created_at, id)`,
        `CREATE INDEX IF NOT EXISTS cairn_runs_status_created ON cairn_runs (status, created_at, id)`,
        `CREATE TABLE ${ACTIONS_TABLE} (
          id TEXT PRIMARY KEY,
          run_id TEXT NOT NULL,
          action TEXT NOT NULL,
          actor TEXT NOT NULL,
          detail TEXT,
          at BIGINT NOT NULL
        )`,
        `CREATE INDEX ${ACTIONS_TABLE}_run ON ${ACTIONS_TABLE} (run_id, at)`,
      ],
    },
    {
      version: 2,
      name: "queue filter",
      // The runs page's queue filter reads a queue's run ids from this index alone. The queues
      // layer is registered by every Cairn before the dashboard's, so its table exists here.
      statements: [`CREATE INDEX IF NOT EXISTS cairn_queue_runs_queue ON cairn_queue_runs (queue, run_id)`],
    },
  ],
  tables: [ACTIONS_TABLE],
  stepKinds: [],
  hooks: {
    // An action is about its run: it goes when the run is deleted.
    onDelete: { runTables: [ACTIONS_TABLE], payloadColumns: [] },
  },
};
