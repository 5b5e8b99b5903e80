import type { LanguageModelV3 } from "@ai-sdk/provider";
import { generateText, jsonSchema, stepCountIs, tool, type ModelMessage, type ToolSet } from "ai";
import { InvalidSpecError } from "../errors.js";
import type { WorkflowContext } from "../engine/context.js";
import { validateWorkflowName } from "../engine/names.js";
import { durableRun } from "../engine/durable-run.js";
import type { Workflow } from "../engine/workflow.js";
import { agentState } from "./agent-state.js";
import { openScopeOp, tighter, validateBudget, type Budget } from "./budget.js";
import { durableTools, type Permissions } from "./durable-tools.js";
import type { Pricing } from "./pricing.js";
import { recordedModel } from "./recorded-model.js";

export interface AgentSpec {
  /** Any Vercel AI SDK language model (specification v3). */
  model: LanguageModelV3;
  system?: string;
  /** AI SDK tools; each execution is a durable step. */
  tools?: ToolSet;
  /** Per tool: "allow" (default) | "deny" | "approve" | (input, ctx) => decision. */
  permissions?: Permissions;
  budget?: Budget;
  pricing?: Pricing;
  /** Other agents this one may delegate to, offered to the model as tools. */
  agents?: Record<string, { agent: Agent; description: string; budget?: Budget }>;
  /** Model calls per run before the loop stops. Default 20. */
  maxSteps?: number;
  /** Further attempts after a failed provider call. Default 2. */
  modelRetries?: number;
  /** Per model call attempt; a call that takes longer is aborted and retried. Default: none. */
  modelTimeoutMs?: number;
  /** "fail" (default): a spent budget ends the run with BudgetExceededError. "ask": wait for approval of more. */
  onBudgetExceeded?: "fail" | "ask";
}

/** `{ prompt }` or `{ messages }`; `delegation` is set by a parent agent. */
export type AgentInput = ({ prompt: string } | { messages: ModelMessage[] }) & {
  delegation?: { parentScope: string | null; budget: Budget | null };
};

export interface AgentOutput {
  text: string;
  steps: number;
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  costUsd: number;
}

export type Agent = Workflow<AgentInput, AgentOutput>;

export function validateAgentSpec(name: string, spec: AgentSpec): void {
  validateWorkflowName(name, "agent name");
  if (spec === null || typeof spec !== "object") throw new InvalidSpecError("spec", spec, `agent "${name}" needs a spec object`);
  const model = spec.model as Partial<LanguageModelV3> | undefined;
  if (model === undefined || typeof model.doGenerate !== "function") {
    throw new InvalidSpecError("model", spec.model, `agent "${name}" needs an AI SDK language model (e.g. provider.chatModel("id"))`);
  }
  validateBudget(spec.budget);
  if (spec.onBudgetExceeded !== undefined && !["fail", "ask"].includes(spec.onBudgetExceeded)) {
    throw new InvalidSpecError("onBudgetExceeded", spec.onBudgetExceeded, 'must be "fail" or "ask"');
  }
  if (spec.maxSteps !== undefined && (!Number.isInteger(spec.maxSteps) || spec.maxSteps < 1)) {
    throw new InvalidSpecError("maxSteps", spec.maxSteps, "must be an integer ≥ 1");
  }
  if (spec.pricing !== undefined) {
    for (const key of ["inputPerMillion", "outputPerMillion"] as const) {
      const value = spec.pricing[key];
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
        throw new InvalidSpecError(`pricing.${key}`, value, "must be a number of dollars per million tokens ≥ 0");
      }
    }
  }
}

/**
 * The body of an agent's workflow: the AI SDK tool loop over a recorded model and durable tools.
 * An agent is a workflow, so start, handles, cancel, resume, fork and the CLI work on it unchanged.
 */
export function agentBody(spec: AgentSpec) {
  return async (ctx: WorkflowContext, input: AgentInput): Promise<AgentOutput> => {
    const run = durableRun(ctx);
    const state = agentState(run);
    state.pricing = spec.pricing;
    const carve = input.delegation;
    const budget = tighter(spec.budget, carve?.budget ?? undefined);
    const parentScope = carve?.parentScope ?? null;
    if (budget !== undefined || parentScope !== null) {
      await run.operation({
        kind: "step",
        name: "open-budget",
        execute: () => budget ?? {},
        alsoWrite: () => [openScopeOp(run.runId, parentScope, budget ?? {}, run.clock.now())],
      });
      state.scopeId = run.runId;
    }
    const model = recordedModel(run, spec.model, {
      scopeId: state.scopeId,
      retries: spec.modelRetries ?? 2,
      onBudgetExceeded: spec.onBudgetExceeded ?? "fail",
      ...(spec.modelTimeoutMs === undefined ? {} : { timeoutMs: spec.modelTimeoutMs }),
    });
    const tools: ToolSet = { ...durableTools(run, ctx, spec.tools ?? {}, spec.permissions), ...subAgentTools(ctx, spec, state.scopeId) };
    const conversation = "messages" in input ? { messages: input.messages } : { prompt: input.prompt };
    const result = await generateText({
      model,
      ...(spec.system === undefined ? {} : { system: spec.system }),
      ...conversation,
      tools,
      stopWhen: stepCountIs(spec.maxSteps ?? 20),
      // Cairn retries and records provider failures itself (modelRetries).
      maxRetries: 0,
    });
    const inputTokens = result.totalUsage.inputTokens ?? 0;
    const outputTokens = result.totalUsage.outputTokens ?? 0;
    return {
      text: result.text,
      steps: result.steps.length,
      usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
      costUsd: state.costUsd,
    };
  };
}

/** Sub-agents as tools: calling one delegates to it as a child run with a carved-out budget. */
function subAgentTools(ctx: WorkflowContext, spec: AgentSpec, scopeId: string | undefined): ToolSet {
  const tools: ToolSet = {};
  for (const [name, entry] of Object.entries(spec.agents ?? {})) {
    tools[name] = tool({
      description: entry.description,
      inputSchema: jsonSchema<{ prompt: string }>({
        type: "object",
        properties: { prompt: { type: "string", description: "What the sub-agent should do" } },
        required: ["prompt"],
      }),
      execute: async ({ prompt }) => {
        const child = await ctx.child(entry.agent, { prompt, delegation: { parentScope: scopeId ?? null, budget: entry.budget ?? null } });
        const out = await child.result();
        return out.text;
      },
    });
  }
  return tools;
}
