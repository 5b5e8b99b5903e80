import { cairnQueueSystem, cairnSystem } from "./cairn-system.js";
import { dbosSystem } from "./dbos-system.js";
import { graphileSystem } from "./graphile-system.js";
import { pgBossSystem } from "./pgboss-system.js";
import type { QueueSystem, SystemName } from "./system.js";

export function systemNamed(name: SystemName): QueueSystem {
  switch (name) {
    case "cairn":
      return cairnSystem;
    case "cairn-queue":
      return cairnQueueSystem;
    case "dbos":
      return dbosSystem;
    case "pg-boss":
      return pgBossSystem;
    case "graphile-worker":
      return graphileSystem();
  }
}
