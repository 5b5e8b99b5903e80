import "./ai/sdk-errors.js";
import type { ToolLoopAgent } from "ai";
import { approvalKeyBytes } from "./ai/approval-channel.js";
import { Approvals } from "./ai/approvals.js";
import { agentBody, validateAgentSpec, type Agent, type AgentSpec } from "./ai/agent.js";
import { agentContext, type AgentContext, type AgentSettings } from "./ai/agent-context.js";
import { readStream, type StreamChunk } from "./ai/stream-chunks.js";
import { fromToolLoopAgent, isToolLoopAgent, type CairnAgentOptions } from "./ai/tool-loop-agent.js";
import { AGENTS_EXTENSION } from "./ai/schema/agents-extension.js";
import { CairnRuntime, type CairnOptions } from "./engine/cairn.js";
import type { Workflow, WorkflowOptions } from "./engine/workflow.js";

/**
 * Cairn: the durable engine with agents on top. `cairn.workflow` gives the workflow an
 * `AgentContext` (the run context plus recorded models, durable tools and delegation);
 * `cairn.agent` registers a ready-made tool-loop agent; `cairn.approvals` decides the tool calls
 * that wait for a human.
 */
export class Cairn extends CairnRuntime {
  readonly approvals: Approvals;
  private readonly agentSettings: AgentSettings;

  constructor(options: CairnOptions = {}) {
    // Checked before the store opens, so that a bad key leaves nothing open.
    const approvalKey = approvalKeyBytes(options.approvalKey ?? (process.env.CAIRN_APPROVAL_KEY || undefined));
    super(options);
    // issue 9 (store): the agents layer brings its schema, tables, step kinds and hooks to the
    // store through the extension contract, before the store first migrates (on first use).
    this.store().register(AGENTS_EXTENSION);
    this.agentSettings = { approvalKey };
    this.approvals = new Approvals({
      ready: () => this.readyStore(),
      now: () => this.clock.now(),
      poke: () => this.poke(),
      approvalKey,
    });
  }

  override workflow<Input, Output>(
    name: string,
    fn: (ctx: AgentContext, input: Input) => Promise<Output>,
    options: WorkflowOptions<Input> = {},
  ): Workflow<Input, Output> {
    if (typeof fn !== "function") return super.workflow(name, fn, options); // refused there, naming the field
    return super.workflow(name, (ctx, input: Input) => fn(agentContext(ctx, this.agentSettings), input), options);
  }

  /**
   * The streamed model output of a run, readable from any process sharing the database: chunks as
   * they are written, resumable with `{ after: chunk.offset }`, ending when the run has finished.
   */
  async *stream(runId: string, options: { after?: string; signal?: AbortSignal } = {}): AsyncGenerator<StreamChunk> {
    yield* readStream(await this.readyStore(), runId, options);
  }

  /**
   * Registers an agent: a workflow whose body is the AI SDK tool loop, made durable. Give it a spec
   * (the `ToolLoopAgent` settings plus Cairn's), or an AI SDK `ToolLoopAgent` and Cairn's options.
   */
  agent(name: string, spec: AgentSpec): Agent;
  agent(name: string, agent: ToolLoopAgent<never, any, any>, options?: CairnAgentOptions): Agent;
  agent(name: string, spec: AgentSpec | ToolLoopAgent<never, any, any>, options: CairnAgentOptions = {}): Agent {
    const full = isToolLoopAgent(spec) ? fromToolLoopAgent(name, spec, options) : spec;
    validateAgentSpec(name, full);
    return super.workflow(name, agentBody(full, this.agentSettings));
  }
}
