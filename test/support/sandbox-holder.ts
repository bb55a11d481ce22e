/**
 * For the sandbox tests with the fake CLI: a gateway whose CLIs run under
 * SANDBOX=bwrap, and a session's holder on it, so a test can `run` shell
 * commands (test/support/sandbox.ts) inside that tenant's sandbox.
 */
import type { TestContext } from 'node:test'
import { type Scope, type TestClient, type TestGateway, gateway } from './gateway.js'

/** A gateway closed when the test (or a `suiteScope()`) ends; `env` adds to (or overrides) SANDBOX=bwrap. */
export async function bwrapGateway (t: Scope, env: Record<string, string> = {}): Promise<TestGateway> {
  // No --fake-log-dir: it is under the gateway's DATA_DIR, which no sandbox shows.
  return await gateway(t, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '', ...env } })
}

/** A new session of the tenant of `token` (tenant-a by default) and its holder past its hello, terminated when the test ends. */
export async function sandboxHolder (gw: TestGateway, t: TestContext, token?: string): Promise<TestClient> {
  const created = await gw.createSession({}, token)
  const holder = await gw.connect(created.id, '', token)
  t.after(() => holder.terminate())
  await holder.waitFor((f) => f.subtype === 'hello')
  return holder
}
