/** Decides a request's answer: the first matching rule, its fault or its rendered reply. */

import type { Conversation } from "./conversation.js";
import type { MockFault, MockMatch, MockReply, MockScript } from "./script.js";
import { PlaceholderError, renderArguments, renderText } from "./template.js";

export interface RenderedToolCall {
  id: string;
  name: string;
  /** The arguments as the JSON string the wire carries. */
  arguments: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface RenderedReply {
  /** null when the reply is only tool calls, as OpenAI sends it. */
  content: string | null;
  toolCalls: RenderedToolCall[];
  finishReason: "stop" | "tool_calls";
  usage: Usage;
}

export type Outcome =
  { kind: "reply"; reply: RenderedReply } | { kind: "error"; status: number; type: string; message: string } | { kind: "malformed"; status: number };

export interface Decision {
  /** The rule that answered: its index in `rules`, "default", or null when none matched. */
  rule: number | "default" | null;
  /** How long to wait before answering: the latency plus any fault's delay. */
  delayMs: number;
  outcome: Outcome;
}

/**
 * One per server: it holds the only state a script has, how many times each rule's fault fired,
 * so a `times`-limited fault fires on the first N requests the rule matches and never again.
 */
export class Responder {
  private readonly faultsFired = new Map<number, number>();

  constructor(
    private readonly script: MockScript,
    private readonly latencyMs: number,
  ) {}

  respond(conversation: Conversation): Decision {
    for (const [index, rule] of this.script.rules.entries()) {
      if (rule.match !== undefined && !matches(rule.match, conversation)) continue;
      if (rule.fault !== undefined) {
        const fired = (this.faultsFired.get(index) ?? 0) + 1;
        if (rule.fault.times === undefined || fired <= rule.fault.times) {
          this.faultsFired.set(index, fired);
          return this.fault(index, rule.fault, fired, rule.reply, conversation);
        }
      }
      // A used-up fault without a reply stops matching: a later rule answers.
      if (rule.reply === undefined) continue;
      return this.reply(index, rule.reply, conversation, 0);
    }
    if (this.script.default !== undefined) return this.reply("default", this.script.default, conversation, 0);
    const last = conversation.messages.at(-1);
    const what = last === undefined ? "no messages" : `last message: ${last.role} ${JSON.stringify(conversation.lastText.slice(0, 80))}`;
    return this.error(null, 0, 400, "mock_script_error", `mock LLM: no rule of the script matches this request (${what}) and it has no "default" reply`);
  }

  private fault(index: number, fault: MockFault, fired: number, reply: MockReply | undefined, conversation: Conversation): Decision {
    const delayMs = fault.delayMs ?? 0;
    if (fault.malformed === true) return { rule: index, delayMs: this.latencyMs + delayMs, outcome: { kind: "malformed", status: fault.status ?? 200 } };
    if (fault.status !== undefined) {
      const count = fault.times === undefined ? `fault ${fired}` : `fault ${fired} of ${fault.times}`;
      return this.error(index, delayMs, fault.status, "mock_fault", `mock LLM: scripted HTTP ${fault.status} (rules[${index}], ${count})`);
    }
    // Only a delay: parseMockScript made sure such a rule has a reply.
    return this.reply(index, reply!, conversation, delayMs);
  }

  private reply(rule: number | "default", reply: MockReply, conversation: Conversation, delayMs: number): Decision {
    try {
      return { rule, delayMs: this.latencyMs + delayMs, outcome: { kind: "reply", reply: render(reply, conversation) } };
    } catch (error) {
      if (!(error instanceof PlaceholderError)) throw error;
      const where = rule === "default" ? "default" : `rules[${rule}].reply`;
      return this.error(rule, delayMs, 400, "mock_script_error", `mock LLM: ${where}: ${error.message}`);
    }
  }

  private error(rule: number | "default" | null, delayMs: number, status: number, type: string, message: string): Decision {
    return { rule, delayMs: this.latencyMs + delayMs, outcome: { kind: "error", status, type, message } };
  }
}

function matches(match: MockMatch, conversation: Conversation): boolean {
  if (match.lastRole !== undefined && conversation.lastRole !== match.lastRole) return false;
  if (match.contains !== undefined && !conversation.lastText.includes(match.contains)) return false;
  if (match.promptContains !== undefined && !conversation.prompt.includes(match.promptContains)) return false;
  if (match.promptMatches !== undefined && !new RegExp(match.promptMatches).test(conversation.prompt)) return false;
  if (match.turn !== undefined && conversation.turn !== match.turn) return false;
  if (match.model !== undefined && conversation.model !== match.model) return false;
  const tool = match.hasToolResultFor;
  if (tool !== undefined && !conversation.newToolResults.some((result) => result.toolName === tool)) return false;
  return true;
}

/** The reply with placeholders filled in, deterministic tool-call ids and counted usage. */
function render(reply: MockReply, conversation: Conversation): RenderedReply {
  const toolCalls = (reply.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_${conversation.turn}_${index}`,
    name: call.name,
    arguments: JSON.stringify(renderArguments(call.arguments, conversation)),
  }));
  const content = reply.content === undefined ? null : renderText(reply.content, conversation);
  const completionChars = (content?.length ?? 0) + toolCalls.reduce((sum, call) => sum + call.arguments.length, 0);
  const promptTokens = reply.usage?.promptTokens ?? Math.ceil(conversation.promptChars / 4);
  const completionTokens = reply.usage?.completionTokens ?? Math.ceil(completionChars / 4);
  return {
    content: content ?? (toolCalls.length === 0 ? "" : null),
    toolCalls,
    finishReason: toolCalls.length === 0 ? "stop" : "tool_calls",
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
  };
}
