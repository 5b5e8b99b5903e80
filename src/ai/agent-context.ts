import type { IdGenerator, ToolSet } from "ai";
import type { WorkflowContext } from "../engine/context.js";
import { DURABLE_RUN, durableRun, type DurableRun } from "../engine/durable-run.js";
import type { Budget } from "./budget.js";
import { durableTools, type Permissions } from "./durable-tools.js";
import type { RecordedModelOptions } from "./recorded-model.js";
import type { Agent, AgentInput, AgentOutput } from "./agent.js";
import { agentState, setApprovalKey } from "./agent-state.js";
import { artifactsFor, type Artifacts } from "./artifacts.js";
import { memoryFor, type Memory } from "./memory.js";
import { budgetedModel, openRunBudget, type ModelBudgetOptions } from "./model-budget.js";
import { replayableIdGenerator } from "./replayable-ids.js";
import type { CairnLanguageModel } from "./sdk-version.js";

/**
 * The run context with the durable agent primitives, for workflows that run their own AI SDK loop
 * (`generateText` / `streamText`) instead of `cairn.agent`.
 */
export interface AgentContext extends WorkflowContext {
  /**
   * The model, its calls recorded and replayed (see `recordedModel` for the failure semantics).
   * Every call is checked against, and charged to, the run's budget (`ctx.budget`, or an agent's)
   * when it has one. `{ budget }` gives this handle a budget of its own, nested in the run's: both
   * are checked before each call and charged in the call's transaction (see `budgetedModel`).
   */
  model<M extends CairnLanguageModel>(model: M, options?: RecordedModelOptions & ModelBudgetOptions): M;
  /**
   * Opens the run's budget: every model call of the run from here on (through `ctx.model`, in any
   * workflow) is checked before it starts and charged in its transaction, as an agent's budget is.
   * Once per run; a delegated or agent run already has one.
   */
  budget(budget: Budget, options?: Pick<ModelBudgetOptions, "pricing">): Promise<void>;
  /** The tools, each execution a durable step behind its permission or `needsApproval` (see `durableTools`). */
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
  /**
   * An id generator for the AI SDK's `_internal: { generateId }` option of `generateText` and
   * `streamText`: the ids the SDK makes itself (tool approval ids, part ids) come out the same on
   * replay (see replayable-ids.ts).
   */
  readonly generateId: IdGenerator;
}

/** What the Cairn that runs a workflow tells its agent helpers. */
export interface AgentSettings {
  /** Approval decisions must be signed with this key (see approval-channel.ts). */
  approvalKey?: Uint8Array | undefined;
}

export function agentContext(ctx: WorkflowContext, settings: AgentSettings = {}): AgentContext {
  const run = durableRun(ctx);
  if (settings.approvalKey !== undefined) setApprovalKey(run, settings.approvalKey);
  // One context per run: a wrapper that already is one (agentBody inside Cairn.workflow) is reused.
  if ((ctx as { [AGENT_CONTEXT]?: boolean })[AGENT_CONTEXT] === true) return ctx as AgentContext;
  const handler = new AgentContextHandler();
  const proxy = new Proxy(run, handler) as unknown as AgentContext;
  handler.context = proxy;
  return proxy;
}

const AGENT_CONTEXT = Symbol("cairn.agentContext");

/**
 * The proxy's handler: the run's own members, plus the agent helpers. Every workflow of a Cairn
 * gets this context and most use none of it (a run that sleeps and ends), so a run costs one
 * handler and one proxy; the helpers are made when first read (10,000 runs waking at once).
 */
class AgentContextHandler implements ProxyHandler<DurableRun> {
  context!: AgentContext;
  private memory: Memory | undefined;
  private artifacts: Artifacts | undefined;
  private generateId: IdGenerator | undefined;

  get(run: DurableRun, prop: string | symbol): unknown {
    switch (prop) {
      case DURABLE_RUN:
        return run;
      case AGENT_CONTEXT:
        return true;
      case "model":
        return ((model, options = {}) => budgetedModel(run, model, options)) satisfies AgentContext["model"];
      case "budget":
        return ((budget, options = {}) => openRunBudget(run, budget, options)) satisfies AgentContext["budget"];
      case "tools":
        return ((tools, permissions) => durableTools(run, this.context, tools, permissions)) satisfies AgentContext["tools"];
      case "delegate":
        return (async (agent, input, options = {}) => {
          const scope = agentState(run).scopeId ?? null;
          const child = await run.child(
            agent,
            { ...input, delegation: { parentScope: scope, budget: options.budget ?? null } },
            options.id === undefined ? {} : { id: options.id },
          );
          return child.result();
        }) satisfies AgentContext["delegate"];
      case "memory":
        return (this.memory ??= memoryFor(run, run.workflowName));
      case "artifacts":
        return (this.artifacts ??= artifactsFor(run));
      case "generateId":
        return (this.generateId ??= replayableIdGenerator(run));
    }
    const value: unknown = Reflect.get(run, prop, run);
    return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(run) : value;
  }
}
