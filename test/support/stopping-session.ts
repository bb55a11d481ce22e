/**
 * For the tests of a session caught while it is being stopped (stdin
 * closed, the CLI not yet gone): a CLAUDE_BIN slow to exit after stdin EOF
 * (the fake CLI behind a wrapper that keeps the fake's stdin open after its
 * own closes, and ends it on SIGTERM, so the stop lasts until
 * CLI_STOP_TIMEOUT_MS), and a prompt left pending into that stop.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { type Frame, isPrompt, isStatus } from './frames.js'
import { FAKE_CLI, type Scope, type TestClient, type TestGateway } from './gateway.js'
import { setup } from './sessions.js'

/** Writes the wrapper into a temporary folder removed when `scope` ends; returns its path. */
export function slowExitCli (scope: Scope): string {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-slow-exit-'))
  scope.after(() => rmSync(dir, { recursive: true, force: true }))
  const wrapper = join(dir, 'slow-exit-claude.mjs')
  writeFileSync(wrapper, [
    '#!/usr/bin/env node',
    "import { spawn } from 'node:child_process'",
    `const child = spawn(process.execPath, [${JSON.stringify(FAKE_CLI)}, ...process.argv.slice(2)], { stdio: ['pipe', 'inherit', 'inherit'] })`,
    'process.stdin.pipe(child.stdin, { end: false })',
    "process.on('SIGTERM', () => child.kill('SIGTERM'))",
    "child.on('exit', (code) => process.exit(code ?? 143))"
  ].join('\n'))
  chmodSync(wrapper, 0o755)
  return wrapper
}

export interface Stopping {
  id: string
  holder: TestClient
  /** The can_use_tool prompt pending when the stop began. */
  prompt: Frame
  /** The DELETE that stops the session (it answers once the CLI is gone). */
  stopping: Promise<{ status: number, body: any }>
}

/** A session (cleaned up when the test ends) whose holder has a prompt pending, stopped by DELETE: returns once the holder saw `stopping`. */
export async function promptWhileStopping (gw: TestGateway, t: TestContext): Promise<Stopping> {
  const { id, holder } = await setup(gw, t)
  holder.sendUser('ask')
  const prompt = await holder.waitFor(isPrompt)
  const stopping = gw.request('DELETE', `/v1/sessions/${id}`)
  await holder.waitFor(isStatus('stopping'))
  return { id, holder, prompt, stopping }
}
