/**
 * The local services the agents act on, over HTTP on loopback, in the supervisor's process:
 *
 *   POST /tickets/open     { task, subject }              → { task, ticketId }
 *   POST /tickets/close    { task, ticketId }             → { task, ticketId, status }
 *   POST /payments/charge  { task, amountCents }          → { task, chargeId, amountCents }
 *   POST /email/send       { task, to, subject, body }    → { task, messageId }
 *
 * Each takes an optional `idempotencyKey` and, like a real provider (Stripe's Idempotency-Key),
 * deduplicates only by it: a request with a key it has seen returns the first result and does
 * nothing. Without a key every request acts. Every request is a ledger entry (ledger.ts), also
 * appended to `ledger.jsonl` in the pass's directory.
 *
 * And an approval desk for runtimes without approvals of their own (conventional, LangGraph):
 *
 *   POST /approvals        { task, tool, requestKey? }    → { id }   (the same requestKey: the same request)
 *   GET  /approvals/:id                                   → { id, status }
 *
 * The supervisor's approver decides desk requests in-process (`desk`).
 */

import { appendFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { LedgerEntry, Service } from "./ledger.js";

export interface DeskRequest {
  id: string;
  task: number;
  tool: string;
  requestKey: string | null;
  requestedAt: number;
  status: "pending" | "approved";
}

export interface MockServices {
  url: string;
  ledger(): LedgerEntry[];
  /** Every approval request the desk received, in order. */
  deskRequests(): DeskRequest[];
  approve(id: string): void;
  close(): Promise<void>;
}

interface Operation {
  service: Service;
  op: LedgerEntry["op"];
  effect: (body: Body) => string;
  act: (body: Body, n: number) => Record<string, unknown>;
}

type Body = Record<string, unknown> & { task: number };

const OPERATIONS: Readonly<Record<string, Operation>> = {
  "/tickets/open": {
    service: "tickets",
    op: "open",
    effect: (b) => `open:${b.task}`,
    act: (b, n) => ({ task: b.task, ticketId: `T-${b.task}-${n}` }),
  },
  "/tickets/close": {
    service: "tickets",
    op: "close",
    effect: (b) => `close:${b.task}`,
    act: (b) => ({ task: b.task, ticketId: b.ticketId, status: "closed" }),
  },
  "/payments/charge": {
    service: "payments",
    op: "charge",
    effect: (b) => `charge:${b.task}`,
    act: (b, n) => ({ task: b.task, chargeId: `ch_${b.task}_${n}`, amountCents: b.amountCents }),
  },
  "/email/send": {
    service: "email",
    op: "send",
    effect: (b) => `email:${b.task}:${String(b.to)}`,
    act: (b, n) => ({ task: b.task, messageId: `m_${b.task}_${n}`, to: b.to }),
  },
};

export async function startMockServices(options: { dir: string; latencyMs: number }): Promise<MockServices> {
  const ledger: LedgerEntry[] = [];
  const byKey = new Map<string, LedgerEntry>();
  const desk: DeskRequest[] = [];
  const ledgerFile = join(options.dir, "ledger.jsonl");

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://services").pathname;
    if (req.method === "GET" && path.startsWith("/approvals/")) {
      const request = desk.find((r) => r.id === path.slice("/approvals/".length));
      return request === undefined ? send(res, 404, { error: "no such approval request" }) : send(res, 200, { id: request.id, status: request.status });
    }
    if (req.method !== "POST") return send(res, 404, { error: `no route ${req.method} ${path}` });
    const body = JSON.parse(await readBody(req)) as Body;
    if (typeof body.task !== "number") return send(res, 400, { error: "task must be a number" });
    if (path === "/approvals") {
      const requestKey = typeof body.requestKey === "string" ? body.requestKey : null;
      let request = requestKey === null ? undefined : desk.find((r) => r.requestKey === requestKey);
      if (request === undefined) {
        request = { id: `ap_${desk.length + 1}`, task: body.task, tool: String(body.tool), requestKey, requestedAt: Date.now(), status: "pending" };
        desk.push(request);
      }
      return send(res, 200, { id: request.id });
    }
    const operation = OPERATIONS[path];
    if (operation === undefined) return send(res, 404, { error: `no route POST ${path}` });
    await new Promise((resolve) => setTimeout(resolve, options.latencyMs));
    const key = typeof body.idempotencyKey === "string" ? body.idempotencyKey : null;
    const scopedKey = key === null ? null : `${path} ${key}`;
    const first = scopedKey === null ? undefined : byKey.get(scopedKey);
    const n = ledger.length + 1;
    const entry: LedgerEntry = {
      n,
      at: Date.now(),
      service: operation.service,
      op: operation.op,
      task: body.task,
      effect: operation.effect(body),
      idempotencyKey: key,
      deduplicated: first !== undefined,
      result: first?.result ?? operation.act(body, n),
    };
    ledger.push(entry);
    if (scopedKey !== null && first === undefined) byKey.set(scopedKey, entry);
    appendFileSync(ledgerFile, `${JSON.stringify(entry)}\n`);
    send(res, 200, entry.result);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => send(res, 500, { error: error instanceof Error ? error.message : String(error) }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    ledger: () => ledger.map((e) => ({ ...e })),
    deskRequests: () => desk.map((r) => ({ ...r })),
    approve(id) {
      const request = desk.find((r) => r.id === id);
      if (request !== undefined) request.status = "approved";
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function send(res: ServerResponse, status: number, body: object): void {
  if (res.headersSent) return;
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
