import type { LanguageModelV3 } from "@ai-sdk/provider";
import type { ToolSet } from "ai";
import type { WorkflowContext } from "../engine/context.js";
import { DURABLE_RUN, durableRun } from "../engine/durable-run.js";
import type { Budget } from "./budget.js";
import { durableTools, type Permissions } from "./durable-tools.js";
import { recordedModel, type RecordedModelOptions } from "./recorded-model.js";
import type { Agent, AgentInput, AgentOutput } from "./agent.js";
import { agentState } from "./agent-state.js";
import { artifactsFor, type Artifacts } from "./artifacts.js";
import { memoryFor, type Memory } from "./memory.js";

/**
 * The run context with the durable agent primitives, for workflows that run their own AI SDK loop
 * (`generateText` / `streamText`) instead of `cairn.agent`.
 */
export interface AgentContext extends WorkflowContext {
  /** The model, its calls recorded and replayed (see `recordedModel` for the failure semantics). */
  model(model: LanguageModelV3, options?: RecordedModelOptions): LanguageModelV3;
  /** The tools, each execution a durable step behind its permission (see `durableTools`). */
  tools<T extends ToolSet>(tools: T, permissions?: Permissions): T;
  /**
   * Runs a sub-agent as a child run and returns its output. Its budget is carved out of this run's:
   * it spends at most `budget`, and what it spends is charged to this run's budget too.
   */
  delegate(agent: Agent, input: AgentInput, options?: { budget?: Budget; id?: string }): Promise<AgentOutput>;
  /** This agent's memory, shared by its runs: namespace `workflowName` (see `Memory`). */
  readonly memory: Memory;
  /** Content-addressed files this run produces (see `Artifacts`). */
  readonly artifacts: Artifacts;
}

export function agentContext(ctx: WorkflowContext): AgentContext {
  const run = durableRun(ctx);
  const extras: Partial<AgentContext> = {
    model: (model, options = {}) => {
      const scopeId = agentState(run).scopeId;
      return recordedModel(run, model, scopeId === undefined ? options : { scopeId, ...options });
    },
    tools: (tools, permissions) => durableTools(run, proxy, tools, permissions),
    delegate: async (agent, input, options = {}) => {
      const scope = agentState(run).scopeId ?? null;
      const child = await run.child(agent, { ...input, delegation: { parentScope: scope, budget: options.budget ?? null } }, options.id === undefined ? {} : { id: options.id });
      return child.result();
    },
    memory: memoryFor(run, run.workflowName),
    artifacts: artifactsFor(run),
  };
  const proxy = new Proxy(run, {
    get(target, prop) {
      if (prop === DURABLE_RUN) return target;
      if (Object.prototype.hasOwnProperty.call(extras, prop)) return extras[prop as keyof AgentContext];
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as unknown as AgentContext;
  return proxy;
}
