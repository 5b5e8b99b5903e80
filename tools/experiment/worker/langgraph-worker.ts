/**
 * The LangGraph arm: each agent a LangGraph.js StateGraph (an `agent` node that calls the model
 * through the AI SDK, a `tools` node that runs the tool calls), checkpointed by SqliteSaver in the
 * pass's directory; one thread per task. The charge waits for a human through LangGraph's own
 * `interrupt()`, resumed with a `Command`; the billing sub-agent is a subgraph invoked from the
 * tools node, which LangGraph checkpoints under the parent's thread. After a crash the new worker
 * resumes each thread from its last checkpoint. LangGraph offers no idempotency keys, so the tools
 * pass none: a node that re-runs after a crash calls its services again.
 */

import { Annotation, Command, END, interrupt, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { generateText, tool, type ModelMessage, type ToolExecutionOptions, type ToolSet } from "ai";
import type { Marker } from "../markers.js";
import { APPROVAL_TOOL, BILLING_SYSTEM, DELEGATION_DESCRIPTION, DELEGATION_TOOL, promptOf, SUPPORT_SYSTEM } from "../workload.js";
import { awaitApproval } from "./desk-client.js";
import { errorText, WorkerKit } from "./worker-kit.js";
import type { WorkerConfig } from "./worker-config.js";
import { billingTools, delegationSchema, supportTools } from "./workload-tools.js";

const AgentState = Annotation.Root({
  messages: Annotation<ModelMessage[]>({ reducer: (left, right) => left.concat(right), default: () => [] }),
});

type State = typeof AgentState.State;

interface ToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

type Execute = (input: unknown, options: ToolExecutionOptions) => Promise<unknown>;

export function threadOf(task: number): string {
  return `task-${task}`;
}

interface GraphSpec {
  model: ReturnType<WorkerKit["model"]>;
  system: string;
  tools: ToolSet;
  /** Tools that wait for a human: the tools node interrupts before running them. */
  approve?: string;
  /** The delegation tool and how to run the sub-agent. */
  delegate?: { name: string; run: (prompt: string, config: LangGraphRunnableConfig) => Promise<string> };
}

function agentGraph(spec: GraphSpec) {
  // The model sees the tools' schemas only; the tools node executes them.
  const schemas: ToolSet = {};
  for (const [name, t] of Object.entries(spec.tools)) schemas[name] = tool({ description: t.description ?? name, inputSchema: t.inputSchema });
  if (spec.delegate !== undefined) schemas[spec.delegate.name] = tool({ description: DELEGATION_DESCRIPTION, inputSchema: delegationSchema });

  return new StateGraph(AgentState)
    .addNode("agent", async (state: State) => {
      const result = await generateText({ model: spec.model, system: spec.system, messages: state.messages, tools: schemas });
      return { messages: result.response.messages };
    })
    .addNode("tools", async (state: State, config: LangGraphRunnableConfig) => {
      const parts = [];
      for (const call of toolCalls(state.messages.at(-1))) {
        // On resume LangGraph runs this node again from the top; interrupt() then returns the decision.
        if (call.toolName === spec.approve) interrupt({ tool: call.toolName, toolCallId: call.toolCallId });
        let output: unknown;
        if (spec.delegate !== undefined && call.toolName === spec.delegate.name) {
          output = await spec.delegate.run(String((call.input as { prompt?: unknown }).prompt), config);
        } else {
          const execute = spec.tools[call.toolName]?.execute as Execute | undefined;
          if (execute === undefined) throw new Error(`no tool ${call.toolName}`);
          output = await execute(call.input, { toolCallId: call.toolCallId, messages: state.messages });
        }
        parts.push({
          type: "tool-result" as const,
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          output: typeof output === "string" ? { type: "text" as const, value: output } : { type: "json" as const, value: output as never },
        });
      }
      return { messages: [{ role: "tool" as const, content: parts }] };
    })
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state: State) => (toolCalls(state.messages.at(-1)).length > 0 ? "tools" : END), ["tools", END])
    .addEdge("tools", "agent");
}

function toolCalls(message: ModelMessage | undefined): ToolCall[] {
  if (message?.role !== "assistant" || typeof message.content === "string") return [];
  return message.content.flatMap((part) =>
    part.type === "tool-call" ? [{ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input }] : [],
  );
}

function lastText(messages: readonly ModelMessage[]): string {
  const last = messages.at(-1);
  if (last?.role !== "assistant") return "";
  if (typeof last.content === "string") return last.content;
  return last.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

function buildGraphs(kit: WorkerKit, checkpoints: string) {
  const noKey = (): undefined => undefined;
  const billing = agentGraph({ model: kit.model("billing"), system: BILLING_SYSTEM, tools: billingTools(kit, noKey) }).compile();
  const support = agentGraph({
    model: kit.model("support"),
    system: SUPPORT_SYSTEM,
    tools: supportTools(kit, noKey),
    approve: APPROVAL_TOOL,
    delegate: {
      name: DELEGATION_TOOL,
      // Invoked with the node's config, the subgraph is checkpointed under the parent's thread.
      run: async (prompt, config) => lastText((await billing.invoke({ messages: [{ role: "user", content: prompt }] }, config)).messages),
    },
  }).compile({ checkpointer: SqliteSaver.fromConnString(checkpoints) });
  return support;
}

type SupportGraph = ReturnType<typeof buildGraphs>;

export async function runLangGraphWorker(config: WorkerConfig): Promise<void> {
  if (config.checkpoints === undefined) throw new Error("the LangGraph worker needs config.checkpoints");
  const kit = new WorkerKit(config);
  const graph = buildGraphs(kit, config.checkpoints);
  if (config.mode === "replay") {
    kit.emit(await replay(graph, config.tasks));
    return;
  }
  await Promise.all(
    config.tasks.map(async (task) => {
      await kit.arrival(task);
      try {
        kit.emit({ e: "task-done", task, text: await driveTask(graph, kit, task), t: Date.now() });
      } catch (error) {
        kit.emit({ e: "task-failed", task, error: errorText(error), t: Date.now() });
      }
    }),
  );
  kit.emit({ e: "worker-done", t: Date.now() });
}

/**
 * Runs a task's thread to its end from wherever its checkpoints left it: no checkpoint, start it;
 * an interrupt pending, get the approval (the same request again, keyed by the interrupt's id) and
 * resume with it; nodes pending, resume; nothing pending, it is done.
 */
async function driveTask(graph: SupportGraph, kit: WorkerKit, task: number): Promise<string> {
  const config = { configurable: { thread_id: threadOf(task) }, recursionLimit: 60 };
  for (;;) {
    const state = await graph.getState(config);
    const messages = (state.values as Partial<State>).messages ?? [];
    const pending = state.tasks.flatMap((t) => t.interrupts);
    if (messages.length === 0) {
      await graph.invoke({ messages: [{ role: "user", content: promptOf(task) }] }, config);
    } else if (pending.length > 0) {
      await awaitApproval(kit, task, APPROVAL_TOOL, `${threadOf(task)}:${pending[0]!.id ?? "interrupt"}`);
      await graph.invoke(new Command({ resume: { approved: true } }), config);
    } else if (state.next.length > 0 || state.tasks.length > 0) {
      // A task whose writes were saved before the crash is listed in `tasks` but not in `next`.
      await graph.invoke(null, config);
    } else {
      return lastText(messages);
    }
  }
}

/**
 * What LangGraph offers for re-running a finished thread: time travel, resuming from one of its
 * checkpoints. It replays the steps before that checkpoint and executes the ones after it, so
 * re-running the thread from its first checkpoint executes every node again — here with the model
 * and the services unreachable, as they would be for a faithful re-run of the record.
 */
async function replay(graph: SupportGraph, tasks: readonly number[]): Promise<Marker> {
  let identical = 0;
  const problems: string[] = [];
  for (const task of tasks) {
    const config = { configurable: { thread_id: threadOf(task) } };
    try {
      const original = lastText(((await graph.getState(config)).values as Partial<State>).messages ?? []);
      const history = [];
      for await (const snapshot of graph.getStateHistory(config)) history.push(snapshot);
      const first = history.at(-1);
      if (first === undefined) throw new Error("the thread has no checkpoint");
      const result = await graph.invoke(null, { ...first.config, recursionLimit: 60 });
      if (lastText(result.messages) === original) identical++;
      else problems.push(`${threadOf(task)}: a different answer`);
    } catch (error) {
      problems.push(
        `${threadOf(task)}: re-running from its first checkpoint executed the model call again, which failed (${errorText(error).slice(0, 120)})`,
      );
    }
  }
  return { e: "replay", runs: tasks.length, identical, detail: problems.length === 0 ? "re-ran each thread from its first checkpoint" : problems[0]! };
}
