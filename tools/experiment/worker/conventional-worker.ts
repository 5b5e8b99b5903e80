/**
 * The conventional arm: the AI SDK tool loop (`generateText` with tools and `stopWhen`) in a plain
 * process, as most agents run today. Nothing is recorded but an application log of the model's
 * responses; after a crash the supervisor starts the worker again and every unfinished task starts
 * over from its prompt. No idempotency keys: the tools have none to pass.
 */

import { appendFileSync } from "node:fs";
import { generateText, stepCountIs, tool, type ToolExecutionOptions, type ToolSet } from "ai";
import { BILLING_SYSTEM, DELEGATION_DESCRIPTION, DELEGATION_TOOL, promptOf, SUPPORT_SYSTEM, APPROVAL_TOOL } from "../workload.js";
import { awaitApproval } from "./desk-client.js";
import { errorText, WorkerKit } from "./worker-kit.js";
import type { WorkerConfig } from "./worker-config.js";
import { billingTools, delegationSchema, supportTools } from "./workload-tools.js";

type Execute = (input: unknown, options: ToolExecutionOptions) => Promise<unknown>;

export async function runConventionalWorker(config: WorkerConfig): Promise<void> {
  const appLog = config.appLog;
  const kit = new WorkerKit(config, appLog === undefined ? undefined : (entry) => appendFileSync(appLog, `${JSON.stringify(entry)}\n`));
  const noKey = (): undefined => undefined;
  const own = supportTools(kit, noKey);
  const charge = own[APPROVAL_TOOL]!;
  const chargeExecute = charge.execute as Execute;
  const billingModel = kit.model("billing");
  const tools: ToolSet = {
    ...own,
    // The approval is a request to the desk and a wait, in the tool: nothing of it survives a crash.
    [APPROVAL_TOOL]: {
      ...charge,
      execute: async (input: unknown, options: ToolExecutionOptions) => {
        await awaitApproval(kit, Number((input as { task: unknown }).task), APPROVAL_TOOL);
        return chargeExecute(input, options);
      },
    } as ToolSet[string],
    [DELEGATION_TOOL]: tool({
      description: DELEGATION_DESCRIPTION,
      inputSchema: delegationSchema,
      execute: async ({ prompt }) => {
        const result = await generateText({
          model: billingModel,
          system: BILLING_SYSTEM,
          prompt,
          tools: billingTools(kit, noKey),
          stopWhen: stepCountIs(6),
        });
        return result.text;
      },
    }),
  };
  const supportModel = kit.model("support");
  await Promise.all(
    config.tasks.map(async (task) => {
      await kit.arrival(task);
      try {
        const result = await generateText({ model: supportModel, system: SUPPORT_SYSTEM, prompt: promptOf(task), tools, stopWhen: stepCountIs(12) });
        kit.emit({ e: "task-done", task, text: result.text, t: Date.now() });
      } catch (error) {
        kit.emit({ e: "task-failed", task, error: errorText(error), t: Date.now() });
      }
    }),
  );
  kit.emit({ e: "worker-done", t: Date.now() });
}
