import type { StoreExtension } from "../../store/extension.js";
import { CANCEL_APPROVALS, FORK_MODEL_CALLS, FORK_TOOL_CALLS, REOPEN_APPROVALS, promptHashes } from "./agent-hooks.js";
import { AGENT_MIGRATIONS } from "./agent-migrations.js";

/**
 * The agents layer as the store sees it: its tables (model calls, tool calls, approvals, budgets,
 * memory, artifacts, streams), its step kinds, and what its rows do when a run is forked, cancelled,
 * resumed or deleted. Registered with the store where Cairn composes the layers (src/cairn.ts).
 */
export const AGENTS_EXTENSION: StoreExtension = {
  name: "agents",
  migrations: AGENT_MIGRATIONS,
  tables: ["cairn_model_calls", "cairn_tool_calls", "cairn_approvals", "cairn_budgets", "cairn_memory", "cairn_artifacts", "cairn_stream_chunks"],
  stepKinds: ["model", "tool", "memory", "artifact"],
  hooks: {
    // A fork keeps the provenance of the journal it reuses.
    onFork: [FORK_MODEL_CALLS, FORK_TOOL_CALLS],
    // Pending approvals are withdrawn with their run, and pending again when it resumes.
    onCancel: [CANCEL_APPROVALS],
    onResume: [REOPEN_APPROVALS],
    onDelete: {
      // Memory belongs to the agent, not the run: later runs read it, so it stays.
      runTables: ["cairn_model_calls", "cairn_tool_calls", "cairn_approvals", "cairn_budgets", "cairn_artifacts", "cairn_stream_chunks"],
      payloadColumns: [
        { table: "cairn_memory", column: "value_hash" },
        { table: "cairn_artifacts", column: "hash" },
      ],
      payloadHashes: promptHashes,
    },
  },
};

declare module "../../store/store.js" {
  /** The agents' step kinds, part of `StepKind`. */
  interface ExtensionStepKinds {
    model: true;
    tool: true;
    memory: true;
    artifact: true;
  }
}
