/**
 * A restarted gateway ends a CLI its crashed predecessor left running also
 * when the CLI was started through CLAUDE_LAUNCHER, which `exec`s what it
 * wraps (as config/launchers/bwrap.sh execs bwrap). The pid file records the
 * launcher as the command, while the live process runs what it exec'd: a
 * reaper that wanted the recorded command in the process's command line
 * left the CLI running for ever, although its recorded start time proves
 * it is the same process.
 */
import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { processStartTime } from '../../src/cli/reaper.js'
import { TOKEN_A, eventually, parentOf, processAlive } from '../support/gateway.js'
import { type GatewayProcess, fakeCliEnv, startGatewayProcess } from '../support/gateway-process.js'

describe('a crashed gateway\'s CLI started through an exec\'ing CLAUDE_LAUNCHER', () => {
  it('is ended by the next gateway on the same DATA_DIR', { timeout: 40_000 }, async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'cgw-reap-launched-'))
    const launcher = join(dataDir, 'launch.sh')
    // <workspace> <config dir> -- <CLI argv>: becomes the CLI, as the shipped launcher becomes bwrap.
    writeFileSync(launcher, '#!/bin/sh\nshift 3\nexec "$@"\n')
    chmodSync(launcher, 0o755)
    // `hang`: the CLI outlives the closing of its stdin, as one busy in a turn does.
    const env = { ...fakeCliEnv(dataDir), CLAUDE_LAUNCHER: launcher, CLAUDE_ARGS_EXTRA: '--fake-mode hang' }
    const gateways: GatewayProcess[] = []
    let cli: { pid: number, started: string | null } | null = null
    t.after(async () => {
      for (const g of gateways) await g.kill()
      if (cli !== null && cli.started !== null && processStartTime(cli.pid) === cli.started) process.kill(cli.pid, 'SIGKILL')
      await rm(dataDir, { recursive: true, force: true })
    })

    const first = await startGatewayProcess(env)
    gateways.push(first)
    const res = await fetch(`${first.url}/v1/sessions`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN_A}`, 'content-type': 'application/json' }, body: '{}' })
    assert.equal(res.status, 201)
    const session = await res.json() as { pid: number }
    cli = { pid: session.pid, started: processStartTime(session.pid) }
    const helper = parentOf(cli.pid)
    assert.equal(parentOf(helper), first.pid, 'the CLI\'s parent is the spawn helper')

    // Both gone, the helper first (as an OOM kill of both): nothing but the next gateway can end the CLI.
    process.kill(helper, 'SIGKILL')
    await eventually(() => !processAlive(helper), 5000, 'the helper to be gone')
    await first.kill()
    assert.ok(processAlive(cli.pid), 'the CLI outlived its gateway')

    gateways.push(await startGatewayProcess(env))
    const pid = cli.pid
    await eventually(() => !processAlive(pid), 10_000, 'the left CLI to be ended by the next gateway')
  })
})
