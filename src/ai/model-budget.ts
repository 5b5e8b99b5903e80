import type { LanguageModelV3 } from "@ai-sdk/provider";
import { specOf, type CairnLanguageModel } from "./sdk-version.js";
import { InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import { agentState } from "./agent-state.js";
import { openScopeOp, validateBudget, type Budget } from "./budget.js";
import type { Pricing } from "./pricing.js";
import { recordedModel, type RecordedModelOptions } from "./recorded-model.js";

/** Budget options of `ctx.model(model, { budget, pricing })`. */
export interface ModelBudgetOptions {
  /** A budget of this model handle's own, nested in the run's (if the run has one). */
  budget?: Budget;
  /** Dollars per million tokens, for `usd` budgets and `costUsd`; applies to the run's model calls. */
  pricing?: Pricing;
}

/**
 * Budgets for model calls in any workflow, with the agent budget's semantics.
 *
 * Failure semantics: a scope is a `cairn_budgets` row, opened by a recorded step ("open-budget") —
 * the run's by `ctx.budget`, a handle's (`ctx.model(model, { budget })`) just before its first
 * call. Each model call checks the scope and its ancestors before it starts and is charged to all
 * of them in its own checkpoint's transaction, so a crash neither loses a charge nor charges twice;
 * concurrent calls that passed the check together overspend by at most the calls in flight. A
 * replay that reaches a recorded opening makes sure the row exists (a fork does not copy it); the
 * fork's spending starts again from zero.
 */
export function budgetedModel<M extends CairnLanguageModel>(run: DurableRun, model: M, options: RecordedModelOptions & ModelBudgetOptions): M {
  const { budget, pricing, ...recorded } = options;
  validateBudget(budget);
  setPricing(run, pricing, budget);
  const state = agentState(run);
  const recordedFor = wrapperCache(run, model, recorded);
  if (budget === undefined && recorded.scopeId === undefined) {
    // The run's budget, if it has one by the time of each call (ctx.budget may come after ctx.model).
    return late(model, () => recordedFor(state.scopeId));
  }
  if (budget === undefined) return recordedModel(run, model, recorded);
  const scopeId = `${run.runId}#model-budget:${state.modelBudgets++}`;
  let opened: Promise<void> | undefined;
  const open = () => (opened ??= openScope(run, scopeId, state.scopeId ?? null, budget));
  return late(model, async () => {
    await open();
    return recordedFor(scopeId);
  });
}

/** `ctx.budget(budget)`: opens the run's own scope; later model calls of the run are charged to it. */
export async function openRunBudget(run: DurableRun, budget: Budget, options: Pick<ModelBudgetOptions, "pricing">): Promise<void> {
  if (budget === null || typeof budget !== "object") throw new InvalidSpecError("budget", budget, "must be an object like { tokens: 10_000 }");
  validateBudget(budget);
  setPricing(run, options.pricing, budget);
  const state = agentState(run);
  if (state.scopeId !== undefined) {
    throw new InvalidSpecError(
      "budget",
      budget,
      `run ${run.runId} already has a budget (an agent's, a delegation's or an earlier ctx.budget); give a model its own with ctx.model(model, { budget })`,
    );
  }
  await openScope(run, run.runId, null, budget);
  state.scopeId = run.runId;
}

async function openScope(run: DurableRun, scopeId: string, parentScope: string | null, budget: Budget): Promise<void> {
  let live = false;
  const row = () => openScopeOp(scopeId, parentScope, budget, run.clock.now());
  await run.operation({
    kind: "step",
    name: "open-budget",
    execute: () => ((live = true), { scope: scopeId, budget }),
    alsoWrite: () => [row()],
  });
  if (!live) await run.store.commit(null, [row()]);
}

function setPricing(run: DurableRun, pricing: Pricing | undefined, budget: Budget | undefined): void {
  const state = agentState(run);
  if (pricing !== undefined) {
    for (const key of ["inputPerMillion", "outputPerMillion"] as const) {
      const value = (pricing as Partial<Pricing> | null)?.[key];
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
        throw new InvalidSpecError(`pricing.${key}`, value, "must be a number of dollars per million tokens ≥ 0");
      }
    }
    state.pricing = pricing;
  }
  if (budget?.usd !== undefined && state.pricing === undefined) {
    throw new InvalidSpecError(
      "budget.usd",
      budget.usd,
      "a usd budget needs pricing: ctx.model(model, { budget, pricing: { inputPerMillion, outputPerMillion } })",
    );
  }
}

/** One handle's recorded wrappers, one per scope it was called under. */
function wrapperCache<M extends CairnLanguageModel>(run: DurableRun, model: M, options: RecordedModelOptions): (scopeId: string | undefined) => M {
  const byScope = new Map<string, M>();
  return (scopeId) => {
    let wrapped = byScope.get(scopeId ?? "");
    if (wrapped === undefined) {
      wrapped = recordedModel(run, model, scopeId === undefined ? options : { ...options, scopeId });
      byScope.set(scopeId ?? "", wrapped);
    }
    return wrapped;
  };
}

/** A model whose recorded wrapper is chosen at each call (once its budget scope is known). */
function late<M extends CairnLanguageModel>(given: M, target: () => M | Promise<M>): M {
  // Either specification: the options and results pass through as the SDK gives and takes them.
  const model = given as unknown as LanguageModelV3;
  const inner = async () => (await target()) as unknown as LanguageModelV3;
  const wrapped: LanguageModelV3 = {
    specificationVersion: specOf(given) as "v3",
    provider: model.provider,
    modelId: model.modelId,
    get supportedUrls() {
      return model.supportedUrls;
    },
    doGenerate: async (params) => (await inner()).doGenerate(params),
    doStream: async (params) => (await inner()).doStream(params),
  };
  return wrapped as unknown as M;
}
