import type { LayerMigration, StoreExtension } from "../store/extension.js";

/**
 * The supervision layer as the store sees it: one table of decisions and one view of the tree.
 *
 * `cairn_supervision` holds every decision a supervisor run makes — a child started, an exit seen,
 * a restart, a child stopped, a temporary spec dropped, giving up — one row per decision, written
 * in the same commit as the supervisor's journal record of it (kind `supervise`, at the same seq),
 * so the table and the journal never disagree and a supervisor that replays writes none twice.
 * `run_id` is the supervisor's run; `child_run_id` the child run concerned; a restart's
 * `previous_run_id` links the failed run (whose journal stays) to its replacement.
 *
 * `cairn_tree` is every run with its parent and state, and for a supervised run its child spec id,
 * how many restarts of that spec came before it, why it (or the run it replaced) exited, and the
 * run that replaced it: the supervision and delegation tree as rows (`WHERE root_id = ...`).
 */
export const SUPERVISION_MIGRATIONS: readonly LayerMigration[] = [
  {
    version: 1,
    name: "supervision",
    statements: [
      `CREATE TABLE cairn_supervision (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        child_id TEXT,
        child_run_id TEXT,
        previous_run_id TEXT,
        reason TEXT,
        restart_count INTEGER NOT NULL,
        at BIGINT NOT NULL,
        PRIMARY KEY (run_id, seq)
      )`,
      "CREATE INDEX cairn_supervision_child ON cairn_supervision (child_run_id)",
      "CREATE INDEX cairn_supervision_previous ON cairn_supervision (previous_run_id)",
      `CREATE VIEW cairn_tree AS
        SELECT r.root_id, r.id AS run_id, r.parent_id, r.workflow, r.status AS state,
          st.run_id AS supervisor_id, st.child_id, COALESCE(st.restart_count, 0) AS restart_count,
          COALESCE(ex.reason, pv.reason) AS last_exit_reason, rp.child_run_id AS replaced_by,
          r.created_at, r.finished_at
        FROM cairn_runs r
        LEFT JOIN cairn_supervision st ON st.child_run_id = r.id AND st.event IN ('start', 'restart')
        LEFT JOIN cairn_supervision ex ON ex.child_run_id = r.id AND ex.event IN ('exit', 'stop')
        LEFT JOIN cairn_supervision pv ON pv.child_run_id = st.previous_run_id AND pv.event = 'exit'
        LEFT JOIN cairn_supervision rp ON rp.previous_run_id = r.id AND rp.event = 'restart'`,
    ],
  },
];

export const SUPERVISION_EXTENSION: StoreExtension = {
  name: "supervision",
  migrations: SUPERVISION_MIGRATIONS,
  tables: ["cairn_supervision"],
  stepKinds: ["supervise"],
  hooks: {
    // A fork keeps the decisions of the journal it reuses.
    onFork: [
      `INSERT INTO cairn_supervision (run_id, seq, event, child_id, child_run_id, previous_run_id, reason, restart_count, at)
       SELECT $1, seq, event, child_id, child_run_id, previous_run_id, reason, restart_count, at
       FROM cairn_supervision WHERE run_id = $2 AND seq < $3`,
    ],
    onDelete: { runTables: ["cairn_supervision"], payloadColumns: [] },
  },
};

declare module "../store/store.js" {
  /** The supervision layer's step kind, part of `StepKind`. */
  interface ExtensionStepKinds {
    supervise: true;
  }
}
