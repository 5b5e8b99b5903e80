/**
 * What a worker tells the supervisor, one JSON line each on stdout, prefixed so that anything else
 * a worker prints is told apart. Stdout is a pipe, written synchronously on Linux and macOS, so a
 * marker written before a SIGKILL has reached the supervisor. `t` is the worker's clock (ms since
 * the epoch; the same machine's clock as the supervisor's).
 *
 * Markers report live actions only: a model call or tool that Cairn replays from its journal, or
 * that LangGraph skips because its checkpoint holds the result, prints nothing.
 */

import { markerChannel } from "../internal.js";
import type { AgentName } from "./workload.js";

export type Marker =
  /** A model request is about to be sent. `turn`: assistant messages already in the conversation. */
  | { e: "model-start"; task: number; agent: AgentName; turn: number; t: number }
  /** A tool began its work (after any approval). */
  | { e: "tool-start"; task: number; agent: AgentName; tool: string; t: number }
  /** A service acted and answered; the tool has not returned yet. */
  | { e: "effect-done"; task: number; agent: AgentName; tool: string; t: number }
  /** The worker reached a scheduled fault point and stops there until it is killed. */
  | { e: "hang"; point: string; task: number; t: number }
  | { e: "task-done"; task: number; text: string; t: number }
  | { e: "task-failed"; task: number; error: string; t: number }
  /** A replay worker's verdict (see the arms' `reproduce`). */
  | { e: "replay"; runs: number; identical: number; detail: string }
  /** The worker's tasks are over; it exits. */
  | { e: "worker-done"; t: number }
  | { e: "error"; message: string };

const channel = markerChannel<Marker>("@cairn-experiment ");

export const formatMarker = channel.format;
export const parseMarker = channel.parse;
