// Smoke test of the REAL claude CLI (node_modules/@anthropic-ai/claude-code),
// fully offline against the local Messages API stand-in.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { claudeEnv, findToolResults, lastUserText, startMockAnthropic, type MockAnthropic } from '../support/mock-anthropic.js'
import { allowResponse, denyResponse, isCanUseTool, isResult, spawnClaude, type CanUseToolRequest, type CliProcess } from '../support/cli-driver.js'

const TEST_TIMEOUT_MS = 60_000
const WAIT_MS = 30_000
const scratch = realpathSync(mkdtempSync(path.join(tmpdir(), 'real-cli-e2e-')))

after(() => {
  rmSync(scratch, { recursive: true, force: true })
})

interface Run {
  cli: CliProcess
  mock: MockAnthropic
  cwd: string
}

/** A fresh stand-in, scratch HOME + cwd and CLI for one test; always cleaned up. */
async function withCli(name: string, fn: (run: Run) => Promise<void>): Promise<void> {
  const root = path.join(scratch, name)
  const home = path.join(root, 'home')
  const cwd = path.join(root, 'work')
  mkdirSync(home, { recursive: true })
  mkdirSync(cwd, { recursive: true })
  const mock = await startMockAnthropic()
  let cli: CliProcess | undefined
  try {
    cli = spawnClaude({ cwd, env: claudeEnv({ home, baseUrl: mock.url }), sessionId: randomUUID(), deadlineMs: TEST_TIMEOUT_MS })
    await cli.initialize({ timeoutMs: WAIT_MS })
    await fn({ cli, mock, cwd })
  } finally {
    if (cli) await cli.close(10_000)
    await mock.close()
  }
}

test('text turn: result success, the stand-in saw the prompt', { timeout: TEST_TIMEOUT_MS }, async () => {
  await withCli('text', async ({ cli, mock }) => {
    const from = cli.mark()
    cli.sendUser('Say hello')
    const result = await cli.waitFor(isResult, { from, timeoutMs: WAIT_MS, what: 'result' })
    assert.equal(result.subtype, 'success')
    assert.equal(result.is_error, false)
    assert.equal(result.result, 'Echo: Say hello')
    const prompts = mock.messageRequests().map((r) => lastUserText(r.body))
    assert.ok(prompts.includes('Say hello'), `stand-in saw ${JSON.stringify(prompts)}`)
    const init = cli.messages().find((m) => m.type === 'system' && m.subtype === 'init')
    assert.ok(init, 'system/init before the answer')
  })
})

test('allow: the Bash tool runs and creates the file in the scratch cwd', { timeout: TEST_TIMEOUT_MS }, async () => {
  await withCli('allow', async ({ cli, cwd }) => {
    const from = cli.mark()
    cli.sendUser('RUN_BASH touch created-by-tool.txt && echo hello-from-tool')
    const req = await cli.waitFor<CanUseToolRequest>(isCanUseTool, { from, timeoutMs: WAIT_MS, what: 'can_use_tool' })
    assert.equal(req.request.tool_name, 'Bash')
    assert.equal(req.request.input.command, 'touch created-by-tool.txt && echo hello-from-tool')
    cli.send(allowResponse(req))
    const result = await cli.waitFor(isResult, { from, timeoutMs: WAIT_MS, what: 'result' })
    assert.equal(result.subtype, 'success')
    assert.equal(result.result, 'Tool finished: hello-from-tool')
    assert.ok(existsSync(path.join(cwd, 'created-by-tool.txt')), 'created-by-tool.txt exists')
  })
})

test('deny: the deny message reaches the model as a tool_result', { timeout: TEST_TIMEOUT_MS }, async () => {
  const message = 'User denied this in the browser'
  await withCli('deny', async ({ cli, mock, cwd }) => {
    const from = cli.mark()
    cli.sendUser('RUN_BASH touch created-by-tool.txt && echo hello-from-tool')
    const req = await cli.waitFor<CanUseToolRequest>(isCanUseTool, { from, timeoutMs: WAIT_MS, what: 'can_use_tool' })
    cli.send(denyResponse(req, message))
    const result = await cli.waitFor(isResult, { from, timeoutMs: WAIT_MS, what: 'result' })
    assert.equal(result.subtype, 'success')
    const toolResults = mock.messageRequests().flatMap((r) => findToolResults(r.body))
    const denied = toolResults.find((t) => t.toolUseId === req.request.tool_use_id)
    assert.ok(denied, `no tool_result for ${String(req.request.tool_use_id)}: ${JSON.stringify(toolResults)}`)
    assert.ok(denied.content.includes(message), `tool_result content: ${denied.content}`)
    assert.equal(denied.isError, true)
    assert.ok(!existsSync(path.join(cwd, 'created-by-tool.txt')), 'the denied command did not run')
  })
})
