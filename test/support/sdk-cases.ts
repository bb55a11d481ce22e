/**
 * Declares one conformance case twice: first with the CLI spawned directly
 * by the SDK, then through claude-remote → gateway, where the normalised
 * messages query() yields must equal the direct run's. The remote variant is
 * a node:test `todo` (with the reason) until claude-remote exists, or while
 * a known failure of the gateway or claude-remote is open.
 */
import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { type Mode, type SdkRun, type SdkWorld, remoteTodo } from './sdk-harness.js'
import { normaliseMessages, outline } from './sdk-normalise.js'

/** Deadline of one variant (one or two real CLIs, plus the gateway's start for the first remote case). */
export const SDK_CASE_TIMEOUT_MS = 60_000

export interface CaseOutcome {
  /** The runs of the case, in order: their messages are compared. */
  runs: SdkRun[]
  /** Further results to compare (control answers), already free of run-specific values. */
  extra?: unknown
}

export interface CaseOptions {
  /** An open failure of the gateway or claude-remote: the remote variant stays `todo` with it. */
  knownRemoteFailure?: string
}

/**
 * SDK_CONFORMANCE_SECOND=direct runs the second variant directly too: a check
 * that the normalisation makes two runs of the same thing equal.
 */
const SELF_CHECK = process.env.SDK_CONFORMANCE_SECOND === 'direct'
/** SDK_CONFORMANCE_DUMP=<dir> writes both normalised runs of each case there, for diffing. */
const DUMP_DIR = process.env.SDK_CONFORMANCE_DUMP

export function conformanceCase (world: SdkWorld, name: string, scenario: (mode: Mode) => Promise<CaseOutcome>, options: CaseOptions = {}): void {
  let direct: unknown
  const normalised = (outcome: CaseOutcome): unknown => {
    const paths: Record<string, string> = {}
    for (const r of outcome.runs) Object.assign(paths, world.paths(r))
    const errors = outcome.runs.map((r) => r.error === undefined ? null : String(r.error))
    return { messages: normaliseMessages(outcome.runs.flatMap((r) => r.messages), paths), errors: normaliseMessages(errors, paths), extra: outcome.extra }
  }
  test(`SDK conformance: ${name} (CLI spawned directly)`, { timeout: SDK_CASE_TIMEOUT_MS }, async () => {
    direct = normalised(await scenario('direct'))
  })
  test(`SDK conformance: ${name} (claude-remote → gateway, same messages as direct)`,
    { timeout: SDK_CASE_TIMEOUT_MS, todo: SELF_CHECK ? undefined : remoteTodo(options.knownRemoteFailure) },
    async () => {
      const outcome = await scenario(SELF_CHECK ? 'direct' : 'remote')
      assert.ok(direct !== undefined, 'the direct run of this case failed: nothing to compare with')
      // Compared whole: system/init included (tools, agents, model, permission mode).
      const remote = normalised(outcome) as { messages: unknown[] }
      const expected = direct as { messages: unknown[] }
      if (DUMP_DIR !== undefined) {
        const file = join(DUMP_DIR, name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60))
        writeFileSync(`${file}.direct.json`, JSON.stringify(expected, null, 2))
        writeFileSync(`${file}.second.json`, JSON.stringify(remote, null, 2))
      }
      assert.deepEqual(remote, expected, `remote [${outline(remote.messages)}] vs direct [${outline(expected.messages)}]`)
    })
}

