import { replayableIdGenerator } from "./replayable-ids.js";
import type { ModelMessage, ToolSet } from "ai";
import { InvalidSpecError } from "../errors.js";
import type { WorkflowContext } from "../engine/context.js";
import { validateWorkflowName } from "../engine/names.js";
import { durableRun } from "../engine/durable-run.js";
import type { Workflow } from "../engine/workflow.js";
import { agentContext, type AgentSettings } from "./agent-context.js";
import { agentState } from "./agent-state.js";
import { openScopeOp, tighter, validateBudget, type Budget } from "./budget.js";
import { durableTools, type Permissions } from "./durable-tools.js";
import type { Pricing } from "./pricing.js";
import { recordedModel } from "./recorded-model.js";
import { allResponseMessages, type CairnLanguageModel, type SdkAgentSettings } from "./sdk-version.js";
import { sdk } from "./sdk.js";

/**
 * The `ToolLoopAgent` settings Cairn passes through to the AI SDK loop unchanged: `instructions`,
 * `stopWhen`, `prepareStep`, `toolChoice`, `activeTools`, `output`, `providerOptions`, call settings
 * (`temperature`, `maxOutputTokens`, `topP`, `topK`, `presencePenalty`, `frequencyPenalty`,
 * `stopSequences`, `seed`, `headers`), `experimental_context`, `experimental_repairToolCall`,
 * `experimental_telemetry` and the callbacks `onStepFinish` / `onFinish`. Not taken: `maxRetries`
 * and `timeout` (Cairn retries and times model calls itself: `modelRetries`, `modelTimeoutMs`),
 * and call options (`callOptionsSchema`, `prepareCall`: an agent's input is its prompt or messages).
 * Callbacks run again when a run replays (with the recorded results).
 */
export type LoopSettings = Omit<
  SdkAgentSettings,
  "model" | "tools" | "id" | "maxRetries" | "timeout" | "callOptionsSchema" | "prepareCall" | "experimental_toolApprovalSecret" | "experimental_download"
>;

export interface AgentSpec extends LoopSettings {
  /** Any Vercel AI SDK language model object: specification v3 (ai@6, ai@7) or v4 (ai@7). */
  model: CairnLanguageModel;
  /** The system prompt (the AI SDK's `instructions`; either name works). */
  system?: string;
  /** AI SDK tools; each execution is a durable step. `needsApproval` waits for a Cairn approval. */
  tools?: ToolSet;
  /** Per tool: "allow" (default) | "deny" | "approve" | (input, ctx) => decision. */
  permissions?: Permissions;
  budget?: Budget;
  pricing?: Pricing;
  /** Other agents this one may delegate to, offered to the model as tools. */
  agents?: Record<string, { agent: Agent; description: string; budget?: Budget }>;
  /** Model calls per run before the loop stops, when `stopWhen` is not given. Default 20. */
  maxSteps?: number;
  /** Further attempts after a failed provider call. Default 2. */
  modelRetries?: number;
  /** Per model call attempt; a call that takes longer is aborted and retried. Default: none. */
  modelTimeoutMs?: number;
  /** "fail" (default): a spent budget ends the run with BudgetExceededError. "ask": wait for approval of more. */
  onBudgetExceeded?: "fail" | "ask";
  /**
   * Commit model-call records without waiting for their fsync, forcing it before the next tool
   * execution, message, approval or result. Default false. What a power loss can then erase, and
   * what runs again: see `RecordedModelOptions.deferModelCallFsync`.
   */
  deferModelCallFsync?: boolean;
}

/** `{ prompt }` or `{ messages }`; `delegation` is set by a parent agent. */
export type AgentInput = ({ prompt: string } | { messages: ModelMessage[] }) & {
  delegation?: { parentScope: string | null; budget: Budget | null };
};

/** A tool call the model made, in any step of the loop. */
export interface AgentToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

/** A tool's result (a denied call's is `{ denied: true, reason }`; the model saw `execution-denied`). */
export interface AgentToolResult extends AgentToolCall {
  output: unknown;
}

export interface AgentOutput {
  /** The last step's text. */
  text: string;
  /** How many model calls (loop steps) the run made. */
  steps: number;
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  costUsd: number;
  /** Why the last step ended ("stop", "tool-calls", "length", ...). */
  finishReason: string;
  /** Every step's tool calls and results, in order (the AI SDK result's are the last step's only). */
  toolCalls: AgentToolCall[];
  toolResults: AgentToolResult[];
  /** Every step's reasoning text, in order; `reasoningText` joins them (undefined when none). */
  reasoning: string[];
  reasoningText: string | undefined;
  /** The structured output, parsed, when the spec has `output` (e.g. `Output.object({ schema })`). */
  output?: unknown;
  /** The messages the loop added (assistant and tool messages): append them to continue the conversation. */
  response: { messages: ModelMessage[] };
}

export type Agent = Workflow<AgentInput, AgentOutput>;

export function validateAgentSpec(name: string, spec: AgentSpec): void {
  validateWorkflowName(name, "agent name");
  if (spec === null || typeof spec !== "object") throw new InvalidSpecError("spec", spec, `agent "${name}" needs a spec object`);
  const model = spec.model as Partial<CairnLanguageModel> | undefined;
  if (model === undefined || typeof model.doGenerate !== "function") {
    throw new InvalidSpecError("model", spec.model, `agent "${name}" needs an AI SDK language model (e.g. provider.chatModel("id"))`);
  }
  validateBudget(spec.budget);
  if (spec.system !== undefined && spec.instructions !== undefined) {
    throw new InvalidSpecError("instructions", spec.instructions, `agent "${name}" has both system and instructions: give one (they are the same prompt)`);
  }
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
export function agentBody(spec: AgentSpec, settings: AgentSettings = {}) {
  return async (workflowCtx: WorkflowContext, input: AgentInput): Promise<AgentOutput> => {
    const ctx = agentContext(workflowCtx, settings);
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
    const modelOptions = {
      scopeId: state.scopeId,
      retries: spec.modelRetries ?? 2,
      onBudgetExceeded: spec.onBudgetExceeded ?? "fail",
      ...(spec.modelTimeoutMs === undefined ? {} : { timeoutMs: spec.modelTimeoutMs }),
      ...(spec.deferModelCallFsync === true ? { deferModelCallFsync: true } : {}),
    } as const;
    const recorded = new WeakMap<object, CairnLanguageModel>();
    const record = (model: unknown, field: string): CairnLanguageModel => {
      if (model === null || typeof model !== "object" || typeof (model as CairnLanguageModel).doGenerate !== "function") {
        throw new InvalidSpecError(
          field,
          model,
          'Cairn records model calls of AI SDK language model objects (e.g. provider.chatModel("id")), not model id strings',
        );
      }
      let wrapped = recorded.get(model);
      if (wrapped === undefined) recorded.set(model, (wrapped = recordedModel(run, model as CairnLanguageModel, modelOptions)));
      return wrapped;
    };
    const tools: ToolSet = { ...durableTools(run, ctx, spec.tools ?? {}, spec.permissions), ...subAgentTools(ctx, spec, state.scopeId) };
    const conversation = "messages" in input ? { messages: input.messages } : { prompt: input.prompt };
    const {
      model: _model,
      system,
      instructions,
      tools: _tools,
      permissions: _permissions,
      budget: _budget,
      pricing: _pricing,
      agents: _agents,
      maxSteps,
      modelRetries: _retries,
      modelTimeoutMs: _timeout,
      onBudgetExceeded: _onBudget,
      deferModelCallFsync: _defer,
      prepareStep,
      stopWhen,
      ...loop
    } = spec;
    const { generateText, stepCountIs } = sdk().ai;
    const result = await generateText({
      ...loop,
      model: record(spec.model, "model"),
      ...(instructions !== undefined ? { system: instructions } : system !== undefined ? { system } : {}),
      ...conversation,
      tools,
      stopWhen: stopWhen ?? stepCountIs(maxSteps ?? 20),
      ...(prepareStep === undefined
        ? {}
        : {
            // A model chosen per step is recorded like the agent's own.
            prepareStep: async (options) => {
              const prepared = await prepareStep(options);
              return prepared?.model === undefined ? prepared : { ...prepared, model: record(prepared.model, "prepareStep().model") };
            },
          }),
      // Cairn retries and records provider failures itself (modelRetries).
      maxRetries: 0,
      // Ids the SDK makes itself (approval ids, part ids) come out the same on replay.
      _internal: { generateId: replayableIdGenerator(run) },
    });
    const inputTokens = result.totalUsage.inputTokens ?? 0;
    const outputTokens = result.totalUsage.outputTokens ?? 0;
    const reasoning = result.steps.flatMap((step) => (step.reasoningText === undefined ? [] : [step.reasoningText]));
    return {
      text: result.text,
      steps: result.steps.length,
      usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
      costUsd: state.costUsd,
      finishReason: result.finishReason,
      toolCalls: result.steps.flatMap((step) => step.toolCalls.map((c) => ({ toolCallId: c.toolCallId, toolName: c.toolName, input: c.input }))),
      toolResults: result.steps.flatMap((step) =>
        step.toolResults.map((r) => ({ toolCallId: r.toolCallId, toolName: r.toolName, input: r.input, output: r.output })),
      ),
      reasoning,
      reasoningText: reasoning.length === 0 ? undefined : reasoning.join("\n"),
      ...(spec.output === undefined ? {} : { output: result.output as unknown }),
      response: { messages: allResponseMessages(result) },
    };
  };
}

/** Sub-agents as tools: calling one delegates to it as a child run with a carved-out budget. */
function subAgentTools(ctx: WorkflowContext, spec: AgentSpec, scopeId: string | undefined): ToolSet {
  const tools: ToolSet = {};
  const { jsonSchema, tool } = sdk().ai;
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
