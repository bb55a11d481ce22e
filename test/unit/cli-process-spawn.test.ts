/**
 * How long spawn() held the event loop, as src/cli/cli-process.ts reports it
 * (`onSpawn`, the gateway's cgw_cli_spawn_seconds): once per CLI, before the
 * constructor returns, whether or not the command could run. Real child
 * processes, no fakes.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import type { CliExit } from '../../src/cli/cli-handle.js'
import { CliProcess } from '../../src/cli/cli-process.js'

const logger = pino({ level: 'silent' })
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }

async function start (command: string, args: string[]): Promise<{ spawns: number[], exit: CliExit }> {
  const spawns: number[] = []
  let ended: (exit: CliExit) => void = () => {}
  const exited = new Promise<CliExit>((resolve) => { ended = resolve })
  const cli = new CliProcess(
    { command, args, cwd: process.cwd(), env, sessionId: 'spawn-test' },
    { onLine: () => {}, onOversize: () => {}, onExit: (e) => { ended(e) } },
    { maxLineBytes: 1 << 16, stopTimeoutMs: 2000, logger, onSpawn: (seconds) => { spawns.push(seconds) } }
  )
  // Reported by the time the constructor returns: the fork is over then.
  assert.equal(spawns.length, 1)
  void cli.stop()
  return { spawns, exit: await exited }
}

test('a CLI start is timed once, in seconds', async () => {
  const { spawns, exit } = await start('sh', ['-c', 'cat > /dev/null'])
  assert.equal(spawns.length, 1)
  const [seconds] = spawns as [number]
  assert.ok(Number.isFinite(seconds) && seconds > 0 && seconds < 5, `spawn took ${seconds} s`)
  assert.equal(exit.code, 0)
})

test('a command that cannot run is timed too (the fork happened)', async () => {
  const { spawns, exit } = await start('/nonexistent/claude', [])
  assert.equal(spawns.length, 1)
  assert.ok((spawns[0] as number) > 0)
  assert.match(exit.spawnError ?? '', /ENOENT/)
})
