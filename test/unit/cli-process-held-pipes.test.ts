/**
 * The CLI's last stdout line when it ended without a newline and a process
 * that left the CLI's group (`setsid`) still holds its pipes: the gateway
 * gives the pipes up (src/cli/cli-process.ts), and what was read of that line
 * must still come out before the exit, as it does when the pipe reaches EOF.
 * A complete JSON line then is an event; a cut one goes to the session as the
 * text it is, which the session reports as a bad line. Real child processes.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test, type TestContext } from 'node:test'
import pino from 'pino'
import type { CliExit } from '../../src/cli/cli-handle.js'
import { CliProcess } from '../../src/cli/cli-process.js'
import { processStartTime } from '../../src/cli/reaper.js'

const logger = pino({ level: 'silent' })
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }

/** Runs `sh -c` with a setsid sleep holding its stdout and stderr, then `tail`; resolves the lines seen and the exit. */
async function heldPipes (t: TestContext, tail: string): Promise<{ events: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-held-unit-'))
  const pidFile = join(dir, 'held.pid')
  t.after(async () => {
    let pid: number | undefined
    try { pid = Number(readFileSync(pidFile, 'utf8')) } catch { /* never started */ }
    if (pid !== undefined && processStartTime(pid) !== null) {
      try { process.kill(pid, 'SIGKILL') } catch { /* gone meanwhile */ }
    }
    await rm(dir, { recursive: true, force: true })
  })
  const events: string[] = []
  const exited = new Promise<CliExit>((resolve) => {
    new CliProcess(
      { command: 'sh', args: ['-c', `setsid sleep 60 & echo $! > '${pidFile}'\nprintf '{"type":"system","subtype":"init"}\\n'\n${tail}\nexit 0`], cwd: process.cwd(), env, sessionId: 'held-unit' },
      {
        onLine: (line) => { events.push(`line ${line}`) },
        onOversize: (bytes) => { events.push(`oversize ${bytes}`) },
        onExit: (exit) => { events.push(`exit ${exit.code}`); resolve(exit) }
      },
      { maxLineBytes: 1 << 16, stopTimeoutMs: 200, logger }
    )
  })
  await exited
  return { events }
}

test('held pipes: a complete last line without a newline is delivered before the exit', { timeout: 10_000 }, async (t) => {
  const { events } = await heldPipes(t, 'printf \'{"type":"result","subtype":"success"}\'')
  assert.deepEqual(events, [
    'line {"type":"system","subtype":"init"}',
    'line {"type":"result","subtype":"success"}',
    'exit 0'
  ])
})

test('held pipes: a cut last line is handed on as the text it is (the session reports it as a bad line)', { timeout: 10_000 }, async (t) => {
  const { events } = await heldPipes(t, 'printf \'{"type":"result","sub\'')
  assert.deepEqual(events, [
    'line {"type":"system","subtype":"init"}',
    'line {"type":"result","sub',
    'exit 0'
  ])
})
