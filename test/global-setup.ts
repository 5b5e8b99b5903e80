/**
 * The backend matrix's gate: with CAIRN_REQUIRE_POSTGRES=1 (as .ci/run sets), a run without a
 * reachable PostgreSQL fails instead of quietly testing SQLite alone.
 */
export default async function setup(): Promise<void> {
  const url = process.env.CAIRN_TEST_POSTGRES_URL;
  if (url === undefined || url === "") {
    if (process.env.CAIRN_REQUIRE_POSTGRES === "1") {
      throw new Error("CAIRN_REQUIRE_POSTGRES=1 but CAIRN_TEST_POSTGRES_URL is not set: start one with `npm run pg:start`");
    }
    console.warn("[cairn tests] CAIRN_TEST_POSTGRES_URL is not set: PostgreSQL tests are skipped");
    return;
  }
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    throw new Error(`cannot reach PostgreSQL at ${url}: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}
