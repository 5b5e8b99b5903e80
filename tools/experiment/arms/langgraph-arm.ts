import { join } from "node:path";
import type { ModelMessage } from "ai";
import { ownTasks, servicesDesk, TOOL_OF_OP, type Arm, type ArmSession, type PassContext } from "./arm.js";

/**
 * LangGraph.js with its SQLite checkpointer. LangGraph is a development dependency of Cairn: when
 * it is not installed the arm is skipped.
 */
export const langGraphArm: Arm = {
  name: "langgraph",
  async unavailable() {
    try {
      await import("@langchain/langgraph");
      await import("@langchain/langgraph-checkpoint-sqlite");
      return undefined;
    } catch (error) {
      return `LangGraph.js is not installed (${error instanceof Error ? error.message.split("\n")[0] : String(error)}); npm install the dev dependencies`;
    }
  },
  async open(pass: PassContext): Promise<ArmSession> {
    const checkpoints = join(pass.dir, "checkpoints.db");
    return {
      runtime: "langgraph",
      workerFields: () => ({ checkpoints }),
      tasksFor: (slot, unfinished) => ownTasks(slot, unfinished, pass.settings.workers),
      desk: servicesDesk(pass.services),

      /**
       * One read: the task's thread (by our naming convention, thread = task) at its latest
       * checkpoint, decoded by the checkpointer; the assistant messages asking for the effect's
       * tool are the candidates. The checkpoint holds the response, not which execution of the
       * tool the service saw.
       */
      async diagnose(target) {
        const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
        const saver = SqliteSaver.fromConnString(checkpoints);
        const started = performance.now();
        const tuple = await saver.getTuple({ configurable: { thread_id: `task-${target.task}`, checkpoint_ns: "" } });
        const messages = ((tuple?.checkpoint.channel_values as { messages?: ModelMessage[] } | undefined)?.messages ?? []) as ModelMessage[];
        const tool = TOOL_OF_OP[target.op];
        const candidates = messages.flatMap((m, index) =>
          m.role === "assistant" && typeof m.content !== "string"
            ? m.content.flatMap((p) => (p.type === "tool-call" && p.toolName === tool ? [{ index, id: p.toolCallId }] : []))
            : [],
        );
        const ms = performance.now() - started;
        const found = candidates[0];
        return {
          effect: `${target.effect} (ledger #${target.n})`,
          ms,
          commands: 1,
          exact: candidates.length === 1,
          answer:
            found === undefined ? "no message in the thread asks for it" : `thread task-${target.task}, message ${found.index} (tool call ${found.id})`,
          method: "read the thread's latest checkpoint through SqliteSaver and search its messages for the tool call",
        };
      },

      async reproduce(finished, spawnReplay) {
        const task = finished[0];
        if (task === undefined) return { reproducible: false, runs: 0, identical: 0, detail: "no finished task to re-run" };
        const outcome = await spawnReplay({ tasks: [task], checkpoints });
        return {
          reproducible: outcome.runs > 0 && outcome.identical === outcome.runs && outcome.liveCalls === 0,
          runs: outcome.runs,
          identical: outcome.identical,
          detail: outcome.detail,
        };
      },
      close: async () => undefined,
    };
  },
};
