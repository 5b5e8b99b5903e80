/**
 * The mock LLM's script: a JSON document that decides, for each chat-completions request, what the
 * "model" answers. The same requests in the same order get the same answers, byte for byte; the only
 * state carried from one request to the next is how often each fault has fired (`fault.times`).
 *
 * ```jsonc
 * {
 *   "latencyMs": 0,                     // optional: wait this long before every answer
 *   "rules": [                          // tried in order; the first whose `match` holds answers
 *     {
 *       "match": {                      // optional; every condition given must hold (none given: always)
 *         "lastRole": "tool",           // role of the request's last message: system | user | assistant | tool
 *         "contains": "not found",      // substring of the last message's text (a tool message: the tool's result)
 *         "promptContains": "refund",   // substring of the last user message's text
 *         "promptMatches": "\\d+",      // regular expression (JavaScript) found in the last user message's text
 *         "turn": 1,                    // number of assistant messages already in the request
 *         "model": "mock-1",            // the request's model, exactly
 *         "hasToolResultFor": "refund"  // a result of this tool comes after the last assistant message
 *       },
 *       "reply": {                      // what the model answers; content, tool calls or both
 *         "content": "Refunded order {{promptNumber}}.",
 *         "toolCalls": [{ "name": "refund", "arguments": { "id": "{{promptNumber}}" }, "id": "call_1" }],
 *         "usage": { "promptTokens": 10, "completionTokens": 5 }   // either overrides the counted value
 *       },
 *       "fault": {                      // optional: misbehave instead of replying
 *         "status": 500,                // answer with this HTTP status (400-599) and an OpenAI-style error body
 *         "delayMs": 30000,             // wait this long first (for timeouts; a client that gives up ends the wait)
 *         "malformed": true,            // send a body that is not JSON (streaming: an event that is not JSON)
 *         "times": 2                    // fault only the first 2 requests this rule matches, then reply normally
 *       }
 *     }
 *   ],
 *   "default": { "content": "..." }     // optional reply when no rule matches
 * }
 * ```
 *
 * A rule needs a reply, a fault, or both. A fault with only `delayMs` delays the rule's reply. Once
 * a fault's `times` are used up the rule answers with its reply, or, having none, stops matching so
 * that a later rule answers. When no rule matches and there is no default, the request fails with
 * HTTP 400 and a message naming its last message: a script that falls short says so.
 *
 * Placeholders, in `content` and in tool-call argument strings:
 * - `{{prompt}}`: the text of the last user message; `{{promptNumber}}`: the first whole number in
 *   it (`refund order 1042` → 1042; a number too long to be exact stays a string of digits).
 * - `{{turn}}`: the number of assistant messages in the request.
 * - `{{lastToolResult}}`: the last tool message's content; `{{lastToolResult.a.b}}` parses it as
 *   JSON and takes field `a.b` (array indexes are fields too: `items.0.sku`).
 * - `{{toolResult.NAME}}`, `{{toolResult.NAME.a.b}}`: the same for the latest result of tool NAME
 *   anywhere in the request.
 * In content a placeholder becomes text (JSON for objects and arrays). In tool-call arguments a
 * string that is exactly one placeholder becomes the value with its JSON type (`"{{promptNumber}}"`
 * → `1042`); placeholders inside a longer string become text. A placeholder that cannot be resolved
 * (no number in the prompt, no such field) fails the request with HTTP 400 naming it.
 *
 * Determinism of the wire format: tool calls without an `id` get `call_<turn>_<index>`; the
 * response `id` is a hash of the request's model and messages; `created` is a fixed time. Usage
 * is counted, unless the reply overrides it: prompt tokens = ceil(characters of every message's
 * text and tool-call arguments / 4), completion tokens = ceil(characters of the reply's content and
 * tool-call arguments (as JSON) / 4).
 */

import { readFile } from "node:fs/promises";
import { InvalidSpecError } from "../../errors.js";
import { BUILTIN_SCRIPTS } from "./builtin-scripts.js";
import { checkTemplate } from "./template.js";

export type { MessageRole, MockFault, MockMatch, MockReply, MockRule, MockScript, MockToolCall, MockUsage } from "./script-types.js";
import type { MessageRole, MockFault, MockMatch, MockReply, MockRule, MockScript, MockToolCall } from "./script-types.js";

const ROLES: readonly MessageRole[] = ["system", "user", "assistant", "tool"];
const BUILTIN_PREFIX = "builtin:";

/**
 * Reads a script: `builtin:<name>` (see `BUILTIN_SCRIPTS`) or the path of a JSON file. Throws an
 * InvalidSpecError naming the offending field and value.
 */
export async function loadMockScript(spec: string): Promise<MockScript> {
  if (spec.startsWith(BUILTIN_PREFIX)) {
    const name = spec.slice(BUILTIN_PREFIX.length);
    const script = BUILTIN_SCRIPTS[name];
    if (script === undefined) {
      const known = Object.keys(BUILTIN_SCRIPTS).map((n) => BUILTIN_PREFIX + n);
      throw new InvalidSpecError("mock-LLM script", spec, `no such built-in script; there is ${known.join(", ")}`);
    }
    return parseMockScript(script, spec);
  }
  let text: string;
  try {
    text = await readFile(spec, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (error as Error).message;
    throw new InvalidSpecError("mock-LLM script file", spec, `${reason}; give a JSON file or builtin:refund`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw new InvalidSpecError("mock-LLM script file", spec, `not JSON: ${(error as Error).message}`);
  }
  return parseMockScript(value, spec);
}

/** Validates a script (parsed JSON) and returns a copy; `source` names it in errors. */
export function parseMockScript(value: unknown, source = "mock-LLM script"): MockScript {
  const check: Checker = new Checker(source);
  const root = check.object(value, "script");
  check.onlyKeys(root, "script", ["latencyMs", "rules", "default"]);
  const script: MockScript = { rules: [] };
  const latencyMs = check.integer(root.latencyMs, "latencyMs", 0);
  if (latencyMs !== undefined) script.latencyMs = latencyMs;
  if (!Array.isArray(root.rules)) check.fail("rules", root.rules, "must be an array of rules");
  root.rules.forEach((rule, i) => script.rules.push(parseRule(check, rule, `rules[${i}]`)));
  if (root.default !== undefined) script.default = parseReply(check, root.default, "default");
  return script;
}

function parseRule(check: Checker, value: unknown, path: string): MockRule {
  const raw = check.object(value, path);
  check.onlyKeys(raw, path, ["match", "reply", "fault"]);
  const rule: MockRule = {};
  if (raw.match !== undefined) rule.match = parseMatch(check, raw.match, `${path}.match`);
  if (raw.reply !== undefined) rule.reply = parseReply(check, raw.reply, `${path}.reply`);
  if (raw.fault !== undefined) rule.fault = parseFault(check, raw.fault, `${path}.fault`);
  if (rule.reply === undefined && rule.fault === undefined) check.fail(path, value, "a rule needs a reply, a fault, or both");
  const fault = rule.fault;
  if (fault !== undefined && fault.status === undefined && fault.malformed !== true && rule.reply === undefined) {
    check.fail(`${path}.fault`, raw.fault, "a fault with only delayMs delays the rule's reply, and this rule has none");
  }
  return rule;
}

function parseMatch(check: Checker, value: unknown, path: string): MockMatch {
  const raw = check.object(value, path);
  check.onlyKeys(raw, path, ["lastRole", "contains", "promptContains", "promptMatches", "turn", "model", "hasToolResultFor"]);
  const match: MockMatch = {};
  if (raw.lastRole !== undefined) {
    if (!ROLES.includes(raw.lastRole as MessageRole)) check.fail(`${path}.lastRole`, raw.lastRole, `must be one of ${ROLES.join(", ")}`);
    match.lastRole = raw.lastRole as MessageRole;
  }
  for (const key of ["contains", "promptContains", "model", "hasToolResultFor"] as const) {
    const text = check.string(raw[key], `${path}.${key}`);
    if (text !== undefined) match[key] = text;
  }
  const pattern = check.string(raw.promptMatches, `${path}.promptMatches`);
  if (pattern !== undefined) {
    try {
      new RegExp(pattern);
    } catch (error) {
      check.fail(`${path}.promptMatches`, pattern, `not a regular expression: ${(error as Error).message}`);
    }
    match.promptMatches = pattern;
  }
  const turn = check.integer(raw.turn, `${path}.turn`, 0);
  if (turn !== undefined) match.turn = turn;
  return match;
}

function parseReply(check: Checker, value: unknown, path: string): MockReply {
  const raw = check.object(value, path);
  check.onlyKeys(raw, path, ["content", "toolCalls", "usage"]);
  const reply: MockReply = {};
  const content = check.template(raw.content, `${path}.content`);
  if (content !== undefined) reply.content = content;
  if (raw.toolCalls !== undefined) {
    if (!Array.isArray(raw.toolCalls)) check.fail(`${path}.toolCalls`, raw.toolCalls, "must be an array of { name, arguments, id? }");
    reply.toolCalls = raw.toolCalls.map((call, i) => parseToolCall(check, call, `${path}.toolCalls[${i}]`));
  }
  if (raw.usage !== undefined) {
    const usage = check.object(raw.usage, `${path}.usage`);
    check.onlyKeys(usage, `${path}.usage`, ["promptTokens", "completionTokens"]);
    reply.usage = {};
    const promptTokens = check.integer(usage.promptTokens, `${path}.usage.promptTokens`, 0);
    const completionTokens = check.integer(usage.completionTokens, `${path}.usage.completionTokens`, 0);
    if (promptTokens !== undefined) reply.usage.promptTokens = promptTokens;
    if (completionTokens !== undefined) reply.usage.completionTokens = completionTokens;
  }
  if (reply.content === undefined && reply.toolCalls === undefined) {
    check.fail(path, value, "a reply needs content, toolCalls, or both");
  }
  return reply;
}

function parseToolCall(check: Checker, value: unknown, path: string): MockToolCall {
  const raw = check.object(value, path);
  check.onlyKeys(raw, path, ["name", "arguments", "id"]);
  const name = check.string(raw.name, `${path}.name`);
  if (name === undefined || name === "") check.fail(`${path}.name`, raw.name, "a tool call needs the tool's name");
  const args = raw.arguments === undefined ? {} : check.object(raw.arguments, `${path}.arguments`);
  checkArgumentTemplates(check, args, `${path}.arguments`);
  const call: MockToolCall = { name, arguments: structuredClone(args) };
  const id = check.string(raw.id, `${path}.id`);
  if (id !== undefined) call.id = id;
  return call;
}

function checkArgumentTemplates(check: Checker, value: unknown, path: string): void {
  if (typeof value === "string") check.template(value, path);
  else if (Array.isArray(value)) value.forEach((item, i) => checkArgumentTemplates(check, item, `${path}[${i}]`));
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) checkArgumentTemplates(check, item, `${path}.${key}`);
  }
}

function parseFault(check: Checker, value: unknown, path: string): MockFault {
  const raw = check.object(value, path);
  check.onlyKeys(raw, path, ["status", "delayMs", "malformed", "times"]);
  const fault: MockFault = {};
  const status = check.integer(raw.status, `${path}.status`, 400);
  if (status !== undefined) {
    if (status > 599) check.fail(`${path}.status`, raw.status, "must be an HTTP error status, 400 to 599");
    fault.status = status;
  }
  const delayMs = check.integer(raw.delayMs, `${path}.delayMs`, 0);
  if (delayMs !== undefined) fault.delayMs = delayMs;
  if (raw.malformed !== undefined) {
    if (typeof raw.malformed !== "boolean") check.fail(`${path}.malformed`, raw.malformed, "must be true or false");
    fault.malformed = raw.malformed;
  }
  const times = check.integer(raw.times, `${path}.times`, 1);
  if (times !== undefined) fault.times = times;
  if (fault.status === undefined && fault.delayMs === undefined && fault.malformed !== true) {
    check.fail(path, value, "a fault needs status, delayMs or malformed: true");
  }
  return fault;
}

/** Validation helpers; every failure names the field (a path into the script) and its value. */
class Checker {
  constructor(private readonly source: string) {}

  fail(path: string, value: unknown, reason: string): never {
    throw new InvalidSpecError(`${path} in ${this.source}`, value, reason);
  }

  object(value: unknown, path: string): Record<string, unknown> {
    if (value === null || typeof value !== "object" || Array.isArray(value)) this.fail(path, value, "must be an object");
    return value as Record<string, unknown>;
  }

  onlyKeys(value: Record<string, unknown>, path: string, known: readonly string[]): void {
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) this.fail(`${path}.${key}`, value[key], `unknown field; the known ones are ${known.join(", ")}`);
    }
  }

  string(value: unknown, path: string): string | undefined {
    if (value !== undefined && typeof value !== "string") this.fail(path, value, "must be a string");
    return value;
  }

  integer(value: unknown, path: string, min: number): number | undefined {
    if (value === undefined) return undefined;
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) this.fail(path, value, `must be an integer ≥ ${min}`);
    return value;
  }

  template(value: unknown, path: string): string | undefined {
    const text = this.string(value, path);
    if (text === undefined) return undefined;
    const problem = checkTemplate(text);
    if (problem !== undefined) this.fail(path, value, problem);
    return text;
  }
}
