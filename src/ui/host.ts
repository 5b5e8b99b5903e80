import type { Store } from "../store/store.js";

/**
 * What the dashboard needs from the Cairn it serves, declared here and implemented by the face
 * (`Cairn.ui`), so that this floor never imports the one above it. Reads go through src/observe/
 * on `store()`; the actions go through the same public calls the CLI makes, so they obey the same
 * rules (a decision is final, only a failed or cancelled run resumes, ...).
 */
export interface UiHost {
  /** The system database, migrated. */
  store(): Promise<Store>;
  now(): number;
  cancel(runId: string): Promise<string[]>;
  resume(runId: string): Promise<boolean>;
  fork(runId: string, options: { fromSeq: number }): Promise<{ id: string }>;
  approve(runId: string, toolCallId: string, options: { by: string }): Promise<void>;
  deny(runId: string, toolCallId: string, options: { by: string; reason?: string }): Promise<void>;
}

export const DEFAULT_UI_PORT = 4000;

/** `cairn ui [--port] [--host]`, `cairn.ui({ port })`. */
export interface UiOptions {
  /** Default 4000; 0 picks a free port. */
  port?: number;
  /** The interface to bind. Default 127.0.0.1; anything else is reachable from other machines, still behind the token. */
  host?: string;
  /** Who the dashboard's actions are recorded as when the page does not say (default: $USER, else "ui"). */
  actor?: string;
}

/** A running dashboard. */
export interface UiServer {
  /** The address to open, with the token: `http://127.0.0.1:4000/?token=...`. */
  url: string;
  /** Stops serving (open connections are closed). */
  close(): Promise<void>;
}
