/**
 * What every arm's worker shares: marker output, the fault points, the services client, and the
 * instrumented model. The instrumentation sits where user code would: around the provider model
 * (inside Cairn's recorded model, so a call Cairn replays never reaches it) and inside each tool.
 */

import { existsSync, readFileSync } from "node:fs";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3, LanguageModelV3Prompt } from "@ai-sdk/provider";
import { wrapLanguageModel } from "ai";
import { formatMarker, type Marker } from "../markers.js";
import { points } from "../fault-schedule.js";
import { MODEL_IDS, taskInText, type AgentName } from "../workload.js";
import type { WorkerConfig } from "./worker-config.js";

export interface ModelCallLog {
  at: number;
  pid: number;
  task: number;
  agent: AgentName;
  turn: number;
  text: string;
  toolCalls: { toolCallId: string; toolName: string; input: string }[];
}

export class WorkerKit {
  private readonly scheduled: Set<string>;

  constructor(
    readonly config: WorkerConfig,
    /** Called with each model response (the conventional worker's application log). */
    private readonly onModelResponse?: (log: ModelCallLog) => void,
  ) {
    this.scheduled = new Set(config.hang);
  }

  emit(marker: Marker): void {
    process.stdout.write(`${formatMarker(marker)}\n`);
  }

  /**
   * Stops here for good if `point` is a scheduled fault that has not fired yet: prints `hang` and
   * never resolves (the supervisor SIGKILLs the process). Resolves at once otherwise.
   */
  async hangAt(point: string, task: number): Promise<void> {
    if (!this.scheduled.has(point) || this.fired().has(point)) return;
    this.emit({ e: "hang", point, task, t: Date.now() });
    await new Promise<never>(() => setInterval(() => undefined, 60_000));
  }

  /** Resolves when the task is due (see WorkerConfig.startAt). */
  async arrival(task: number): Promise<void> {
    const waitMs = this.config.startAt + (task - 1) * this.config.arrivalIntervalMs - Date.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }

  /** POSTs to a mock service; throws on an error status. */
  async call(path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const response = await fetch(`${this.config.servicesUrl}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${path} answered ${response.status}: ${JSON.stringify(json)}`);
    return json;
  }

  async get(path: string): Promise<Record<string, unknown>> {
    const response = await fetch(`${this.config.servicesUrl}${path}`);
    return (await response.json()) as Record<string, unknown>;
  }

  /**
   * The agent's model on the mock LLM, instrumented: before each request it stops at a scheduled
   * `beforeModel` point and prints `model-start`.
   */
  model(agent: AgentName): LanguageModelV3 {
    const provider = createOpenAICompatible({ name: "mock", baseURL: this.config.llmUrl });
    return wrapLanguageModel({
      model: provider.chatModel(MODEL_IDS[agent]),
      middleware: {
        specificationVersion: "v3",
        wrapGenerate: async ({ doGenerate, params }) => {
          const { task, turn } = callOf(params.prompt);
          await this.hangAt(points.beforeModel(task, agent, turn), task);
          this.emit({ e: "model-start", task, agent, turn, t: Date.now() });
          const result = await doGenerate();
          if (this.onModelResponse !== undefined) {
            const text = result.content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("");
            const toolCalls = result.content.flatMap((part) =>
              part.type === "tool-call" ? [{ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input }] : [],
            );
            this.onModelResponse({ at: Date.now(), pid: process.pid, task, agent, turn, text, toolCalls });
          }
          return result;
        },
      },
    });
  }

  private fired(): Set<string> {
    if (!existsSync(this.config.firedFile)) return new Set();
    return new Set(
      readFileSync(this.config.firedFile, "utf8")
        .split("\n")
        .filter((line) => line !== ""),
    );
  }
}

/** The task (the first number of the user message) and the turn (assistant messages so far). */
export function callOf(prompt: LanguageModelV3Prompt): { task: number; turn: number } {
  let turn = 0;
  let task: number | undefined;
  for (const message of prompt) {
    if (message.role === "assistant") turn++;
    if (message.role === "user" && task === undefined) {
      const text = message.content.map((part) => (part.type === "text" ? part.text : "")).join("");
      task = taskInText(text);
    }
  }
  if (task === undefined) throw new Error("a model call without a task number in its user message");
  return { task, turn };
}

export function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
