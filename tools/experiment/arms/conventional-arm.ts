import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ModelCallLog } from "../worker/worker-kit.js";
import { ownTasks, servicesDesk, TOOL_OF_OP, type Arm, type ArmSession, type PassContext } from "./arm.js";

/**
 * The conventional runtime: a plain process per slot, restarted by the supervisor after a crash,
 * every unfinished task starting over. What it leaves behind to diagnose with is an application
 * log per worker process (each model response: task, turn, tool calls), which is more than many
 * agents keep.
 */
export const conventionalArm: Arm = {
  name: "conventional",
  unavailable: async () => undefined,
  async open(pass: PassContext): Promise<ArmSession> {
    const logs = join(pass.dir, "logs");
    mkdirSync(logs, { recursive: true });
    let processes = 0;
    return {
      runtime: "conventional",
      workerFields: (slot) => ({ appLog: join(logs, `worker-${slot}-${++processes}.jsonl`) }),
      tasksFor: (slot, unfinished) => ownTasks(slot, unfinished, pass.settings.workers),
      desk: servicesDesk(pass.services),

      /**
       * Log archaeology: (1) scan every worker's log for the model responses of the effect's task
       * that asked for its tool, (2) take the latest one before the effect. After a restart the
       * task asked more than once, and nothing recorded which response the service acted on.
       */
      async diagnose(target) {
        const started = performance.now();
        const tool = TOOL_OF_OP[target.op];
        const candidates: ModelCallLog[] = [];
        for (const file of existsSync(logs) ? readdirSync(logs) : []) {
          for (const line of readFileSync(join(logs, file), "utf8").split("\n")) {
            if (line === "") continue;
            const entry = JSON.parse(line) as ModelCallLog;
            if (entry.task === target.task && entry.toolCalls.some((c) => c.toolName === tool)) candidates.push(entry);
          }
        }
        const before = candidates.filter((c) => c.at <= target.at).sort((a, b) => b.at - a.at);
        const best = before[0];
        const ms = performance.now() - started;
        return {
          effect: `${target.effect} (ledger #${target.n})`,
          ms,
          commands: 2,
          exact: candidates.length === 1,
          answer:
            best === undefined
              ? "no logged model response precedes it"
              : `pid ${best.pid}, task ${best.task}, ${best.agent} turn ${best.turn} (${candidates.length} candidate response${candidates.length === 1 ? "" : "s"} in the logs)`,
          method: "scan every worker's application log for the task's responses asking for the tool; pick the latest before the effect",
        };
      },

      async reproduce() {
        return {
          reproducible: false,
          runs: 0,
          identical: 0,
          detail: "nothing recorded to re-run from: running a task again calls the model and the services again",
        };
      },
      close: async () => undefined,
    };
  },
};
