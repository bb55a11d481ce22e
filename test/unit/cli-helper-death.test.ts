/**
 * A spawn helper that dies after handing over some of a CLI's pipes but
 * before saying the CLI runs (the rest wait in its queue: a passed pipe is
 * sent only once the last one was acknowledged). The start fails, as the
 * spawner reports it; the CLI the helper did start must not run on for
 * ever with nobody reading it, held open by the pipe the gateway got.
 * Real helper, real CLI; only the channel between them is cut at that point.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventEmitter } from 'node:events'
import { after, describe, it } from 'node:test'
import pino from 'pino'
import type { CliExit } from '../../src/cli/cli-handle.js'
import { CliProcess, forkHelper } from '../../src/cli/cli-process.js'
import { type HelperChannel, Spawner } from '../../src/cli/spawner.js'
import { processAlive } from '../support/gateway.js'
import { eventually } from '../support/waiters.js'

const logger = pino({ level: 'silent' })

/** The real helper's channel, cut (the helper SIGKILLed, nothing more delivered) once the first pipe arrived. */
function cutAfterFirstPipe (real: HelperChannel): HelperChannel {
  const channel = new EventEmitter() as EventEmitter & HelperChannel
  let cut = false
  real.on('message', (m: { op: string }, handle: unknown) => {
    if (cut) return
    channel.emit('message', m, handle)
    if (m.op === 'pipe') { cut = true; real.kill('SIGKILL') }
  })
  real.on('exit', (code, signal) => channel.emit('exit', code, signal))
  real.on('error', (err) => channel.emit('error', err))
  Object.defineProperties(channel, {
    pid: { get: () => real.pid },
    connected: { get: () => real.connected }
  })
  channel.send = (message) => real.send(message)
  channel.disconnect = () => { real.disconnect() }
  channel.kill = (signal) => real.kill(signal)
  return channel
}

describe('cli: the spawn helper dies mid hand-over', { timeout: 30_000 }, () => {
  const spawner = new Spawner({
    logger,
    stopTimeoutMs: 300,
    fork: (path, args, execArgv) => cutAfterFirstPipe(forkHelper(path, args, execArgv) as unknown as HelperChannel)
  })
  after(async () => { await spawner.close() })

  it('the start is reported failed and the CLI it started does not outlive it (its stdin is not held open)', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'cgw-helper-death-'))
    const pidFile = join(dir, 'cli.pid')
    // Records its pid, then reads stdin until its end, as the CLI does.
    const script = `echo $$ > ${pidFile}.tmp && mv ${pidFile}.tmp ${pidFile} && exec cat >/dev/null`
    let exited: (exit: CliExit) => void = () => {}
    const exit = new Promise<CliExit>((resolve) => { exited = resolve })
    const cli = new CliProcess({ command: 'sh', args: ['-c', script], cwd: process.cwd(), env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, sessionId: 'helper-death' }, {
      onLine: () => {},
      onOversize: () => {},
      onExit: exited
    }, { maxLineBytes: 1 << 16, stopTimeoutMs: 300, logger, spawner })
    const reported = await exit
    assert.match(reported.spawnError ?? '', /spawn helper exited/)
    assert.equal(cli.pid, undefined)
    const pid = Number(await eventually(() => { try { return readFileSync(pidFile, 'utf8').trim() || undefined } catch { return undefined } }, 5000, 'the CLI to have started'))
    // Ended here if the check fails: a test must not leave it running either.
    t.after(() => { if (processAlive(pid)) process.kill(pid, 'SIGKILL') })
    await eventually(() => !processAlive(pid) || undefined, 5000, `the orphaned CLI ${pid} to end`)
  })
})
