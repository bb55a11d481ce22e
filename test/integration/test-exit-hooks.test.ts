/**
 * What a test file started ends with it, even when the runner ends the file
 * early: over `--test-timeout`, the runner sends the file's process SIGTERM,
 * whose default action skips 'exit' listeners (test/support/exit-hooks.ts).
 * A file that started a Redis server and a gateway process, whose CLI runs
 * a background tool, is signalled (SIGKILL too, which runs no hook); none of
 * them may outlive it.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { connect } from 'node:net'
import { fileURLToPath } from 'node:url'
import { describe, it } from 'node:test'
import { processStartTime } from '../../src/cli/reaper.js'
import { eventually, processAlive } from '../support/gateway.js'

const REPO = fileURLToPath(new URL('../..', import.meta.url))

/** True while something accepts connections on the loopback port. */
async function listening (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(true) })
    socket.once('error', () => resolve(false))
  })
}

// The three files are independent (each its own Redis port, gateway and CLI, found by pid): run side by
// side, most of each case is waiting on its file's starts.
describe('a test file ended early', { concurrency: true }, () => {
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGKILL'] as const) {
    it(`leaves no Redis server, gateway, CLI or tool running after ${signal}`, { timeout: 60_000 }, async (t) => {
      const file = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/early-exit-file.ts'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] })
      let output = ''
      file.stderr.on('data', (d: Buffer) => { output += d.toString('utf8') })
      const exited = once(file, 'exit')
      // Its one stdout line, once everything runs (the test's timeout bounds the wait).
      const line = await new Promise<string>((resolve, reject) => {
        let out = ''
        file.stdout.on('data', (d: Buffer) => {
          out += d.toString('utf8')
          const nl = out.indexOf('\n')
          if (nl !== -1) resolve(out.slice(0, nl))
        })
        file.once('exit', (code, sig) => { reject(new Error(`the file exited (${String(code ?? sig)}) before starting everything; its stderr:\n${output}`)) })
      })
      const started = JSON.parse(line) as { redisPort: number, redis: number, gateway: number, cli: number, tool: number, result: string }
      // Should the hooks fail, what they left is ended here (each only while it is still the process seen now).
      const seen = [started.gateway, started.redis, started.cli, started.tool].map((pid) => ({ pid, at: processStartTime(pid) }))
      t.after(() => {
        for (const { pid, at } of seen) {
          if (at !== null && processStartTime(pid) === at) try { process.kill(pid, 'SIGKILL') } catch { /* gone meanwhile */ }
        }
      })
      assert.equal(started.result, 'success')
      for (const pid of [started.gateway, started.cli, started.tool]) assert.ok(Number.isInteger(pid) && processAlive(pid), `${pid} runs`)
      assert.ok(await listening(started.redisPort), 'its Redis server answers')

      file.kill(signal)
      const [code, by] = await exited
      // SIGKILL runs no hook: what the file started goes through the watchers it left (endsWithTest).
      if (signal === 'SIGKILL') assert.equal(by, 'SIGKILL')
      else assert.equal(code, signal === 'SIGTERM' ? 143 : 130, 'the file exited through its hooks')
      await eventually(async () => !(await listening(started.redisPort)), 10_000, 'the Redis server to be gone')
      await eventually(() => !processAlive(started.gateway), 10_000, 'the gateway to be gone')
      await eventually(() => !processAlive(started.cli) && !processAlive(started.tool), 10_000, 'the CLI and its background tool to be gone')
    })
  }
})
