import type { ToolLoopAgent } from "ai";
import { InvalidSpecError } from "../errors.js";
import type { AgentSpec } from "./agent.js";
import type { CairnLanguageModel } from "./sdk-version.js";

/** What Cairn adds to a `ToolLoopAgent` passed to `cairn.agent(name, agent, options)`. */
export type CairnAgentOptions = Pick<
  AgentSpec,
  "permissions" | "budget" | "pricing" | "agents" | "maxSteps" | "modelRetries" | "modelTimeoutMs" | "onBudgetExceeded" | "deferModelCallFsync"
>;

export function isToolLoopAgent(value: unknown): value is ToolLoopAgent<never, any, any> {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { version?: unknown }).version === "agent-v1" &&
    typeof (value as { generate?: unknown }).generate === "function"
  );
}

/**
 * The spec of a `ToolLoopAgent`: its settings, as given to its constructor (the AI SDK keeps them
 * on the instance), with Cairn's options added. Settings Cairn cannot make durable are refused
 * here, by name, rather than ignored.
 */
export function fromToolLoopAgent(name: string, agent: ToolLoopAgent<never, any, any>, options: CairnAgentOptions): AgentSpec {
  const settings = (agent as unknown as { settings?: Record<string, unknown> }).settings;
  if (settings === undefined || typeof settings !== "object") {
    throw new InvalidSpecError(
      "agent",
      agent,
      `agent "${name}": this ToolLoopAgent keeps no settings Cairn can read (an AI SDK version Cairn does not know)`,
    );
  }
  for (const field of ["callOptionsSchema", "prepareCall", "experimental_download", "experimental_toolApprovalSecret", "timeout"]) {
    if (settings[field] !== undefined) {
      throw new InvalidSpecError(
        field,
        settings[field],
        `agent "${name}": Cairn does not support ToolLoopAgent's ${field} (the input of a Cairn agent is its prompt or messages)`,
      );
    }
  }
  const { id: _id, maxRetries: _maxRetries, model, ...rest } = settings;
  if (typeof model === "string") {
    throw new InvalidSpecError(
      "model",
      model,
      `agent "${name}": give the ToolLoopAgent a language model object (e.g. provider.chatModel("id")), not a model id string`,
    );
  }
  return { ...(rest as Omit<AgentSpec, "model">), model: model as CairnLanguageModel, ...options };
}
