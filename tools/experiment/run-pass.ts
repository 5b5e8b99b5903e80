/**
 * One pass: the whole workload on one arm, with or without the fault schedule. This process hosts
 * the mock model and the mock services (the outside world, whose logs are the ground truth) and
 * supervises the workers (supervisor/pass-supervisor.ts); after a pass with faults it asks the arm
 * for a diagnosis and a replay.
 */

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startMockLlm } from "../../src/testing/index.js";
import type { ArmSession } from "./arms/arm.js";
import { parsePoint, type Fault } from "./fault-schedule.js";
import type { PassPlan, PassRecord } from "./pass-record.js";
import type { LedgerEntry } from "./services/ledger.js";
import { startMockServices } from "./services/mock-services.js";
import { PassSupervisor } from "./supervisor/pass-supervisor.js";
import { effectOf, WORKLOAD_SCRIPT } from "./workload.js";

export async function runPass(plan: PassPlan): Promise<PassRecord> {
  const { settings, faults } = plan;
  mkdirSync(plan.dir, { recursive: true });
  const firedFile = join(plan.dir, "fired-faults.txt");
  writeFileSync(firedFile, "");
  writeFileSync(join(plan.dir, "faults.json"), `${JSON.stringify(faults, null, 2)}\n`);

  const mock = await startMockLlm({ script: WORKLOAD_SCRIPT, latencyMs: settings.modelLatencyMs, log: join(plan.dir, "model-requests.jsonl") });
  const services = await startMockServices({ dir: plan.dir, latencyMs: settings.serviceLatencyMs });
  let session: ArmSession | undefined;
  try {
    session = await plan.arm.open({ kind: plan.kind, dir: plan.dir, settings, services });
    const supervisor = new PassSupervisor(plan, session, {
      llmUrl: mock.url,
      servicesUrl: services.url,
      firedFile,
      markersFile: join(plan.dir, "markers.jsonl"),
      killsFile: join(plan.dir, "kills.jsonl"),
    });
    const record = await supervisor.run();
    if (plan.kind === "faults") {
      const target = diagnosisTarget(services.ledger(), faults);
      if (target !== undefined) record.diagnosis = await session.diagnose(target);
      const finished = [...record.outcomes].filter(([, o]) => o.ok).map(([task]) => task);
      record.reproduction = await session.reproduce(finished, (fields) => supervisor.replay(fields));
    }
    record.requests = mock.requests();
    record.ledger = services.ledger();
    record.approvalRequests = await session.desk.requestCount();
    return record;
  } finally {
    await session?.close().catch(() => undefined);
    await mock.close();
    await services.close();
  }
}

/**
 * The side effect the diagnosis asks about: the one the `after-effect` fault hit (its first
 * applied entry), else the first charge.
 */
function diagnosisTarget(ledger: readonly LedgerEntry[], faults: readonly Fault[]): LedgerEntry | undefined {
  const applied = ledger.filter((e) => !e.deduplicated);
  const fault = faults.find((f) => f.kind === "after-effect");
  if (fault !== undefined) {
    const { task, agent, name } = parsePoint(fault.point);
    const effect = agent === undefined || name === undefined ? undefined : effectOf(task, agent, name);
    const hit = applied.find((e) => e.effect === effect);
    if (hit !== undefined) return hit;
  }
  return applied.find((e) => e.op === "charge") ?? applied[0];
}
