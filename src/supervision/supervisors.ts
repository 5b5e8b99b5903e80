import { randomUUID } from "node:crypto";
import { InvalidSpecError, RunNotFoundError } from "../errors.js";
import { validateRunId } from "../engine/names.js";
import type { Store } from "../store/store.js";
import { toStored } from "../store/value/index.js";
import type { ResolvedSpec } from "./spec.js";
import { CONTROL_TOPIC, type StartChildMessage } from "./supervisor.js";

/** What `cairn.supervisors` needs from the runtime. */
export interface SupervisorsHost {
  readyStore(): Promise<Store>;
  now(): number;
  /** Work may be claimable now. */
  poke(): void;
  /** The specs of the supervisors registered in this process, by workflow name. */
  specs: ReadonlyMap<string, ResolvedSpec>;
}

export interface StartChildOptions {
  /** The child's run id; default `<supervisorRunId>/<uuid>`. Starting again with the same id starts nothing new. */
  id?: string;
}

/** Operations on running supervisors, from any process sharing the database. */
export class Supervisors {
  readonly #host: SupervisorsHost;

  constructor(host: SupervisorsHost) {
    this.#host = host;
  }

  /**
   * Asks a `simple_one_for_one` supervisor run to start a child of its spec with `input`; returns
   * the child's run id. The request is a message to the supervisor run (reserved topic
   * `cairn:supervisor`), so it works from any process.
   *
   * Failure semantics: committed when this resolves; idempotent by the child's id (the message id
   * is derived from it), so a retried call starts one child. The supervisor starts it when it
   * next looks (at once if it is waiting), recording the start.
   */
  async startChild(supervisorRunId: string, input: unknown, options: StartChildOptions = {}): Promise<string> {
    validateRunId(supervisorRunId, "supervisorRunId");
    const id = options.id ?? `${supervisorRunId}/${randomUUID()}`;
    validateRunId(id, "id");
    const store = await this.#host.readyStore();
    const run = await store.getRun(supervisorRunId);
    if (run === undefined) throw new RunNotFoundError(supervisorRunId);
    const spec = this.#host.specs.get(run.workflow);
    if (spec !== undefined && spec.strategy !== "simple_one_for_one") {
      throw new InvalidSpecError(
        "supervisorRunId",
        supervisorRunId,
        `supervisor "${run.workflow}" is ${spec.strategy}; startChild needs a simple_one_for_one supervisor`,
      );
    }
    const body: StartChildMessage = { type: "start_child", id, input };
    const now = this.#host.now();
    await store.commit(null, [
      {
        type: "message",
        message: {
          id: `cairn:start-child:${id}`,
          runId: supervisorRunId,
          topic: CONTROL_TOPIC,
          body: toStored(body, `startChild input for ${id}`),
          sender: null,
          createdAt: now,
        },
      },
    ]);
    this.#host.poke();
    return id;
  }
}
