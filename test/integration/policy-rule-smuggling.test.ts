/**
 * Whole-shell-tool allow rules smuggled past the policy in a shape the gateway
 * reads as one harmless rule and the CLI (2.1.332) reads otherwise: an
 * `allowed_tools` entry whose parentheses close early (the CLI cuts its
 * `--allowedTools` list at a `,` or space after any `)`), and an
 * `updatedPermissions` rule whose name carries the specifier while its
 * `ruleContent` is "" (the CLI writes a rule with a falsy content as its bare
 * name: `Bash(*)`, then reads that as all of Bash). Checked on the fake CLI's
 * argv and stdin.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isError, resolved } from '../support/frames.js'
import { eventually, gateway } from '../support/gateway.js'
import { answer, answersTo, ask, fence, holderOf } from '../support/sessions.js'

/** The CLI's own `--allowedTools` splitting (its `Qf`): a `,` or space ends a rule unless inside parentheses, and any `)` closes them. */
function cliToolList (value: string): string[] {
  const rules: string[] = []
  let current = ''
  let inParens = false
  for (const ch of value) {
    if (ch === '(') inParens = true
    else if (ch === ')') inParens = false
    else if ((ch === ',' || ch === ' ') && !inParens) {
      if (current.trim() !== '') rules.push(current.trim())
      current = ''
      continue
    }
    if (current !== '' || ch.trim() !== '') current += ch
  }
  if (current.trim() !== '') rules.push(current.trim())
  return rules
}

/** What the CLI reads as all of Bash: a bare name, or `Bash()` / `Bash(*)`. */
const wholeBash = (rule: string): boolean => /^Bash(\((\*)?\))?$/.test(rule)

describe('allowed_tools the CLI splits differently', () => {
  it('refuses an entry that the CLI would read as several rules, one of them all of Bash; no CLI gets such a list', async (t) => {
    const gw = await gateway(t)
    const smuggled = ['Read(x),Bash,Read(y)', 'Read(x) Bash(*) Grep(y)', 'Grep(a),Bash()']
    for (const rule of smuggled) {
      const res = await gw.request('POST', '/v1/sessions', { allowed_tools: ['Read', rule] })
      if (res.status === 201) {
        const dump = await eventually(() => gw.argvDumps(res.body.id)[0], 5000, 'argv dump')
        const list = dump.argv.find((a) => a.startsWith('--allowedTools='))?.slice('--allowedTools='.length) ?? ''
        assert.deepEqual(cliToolList(list).filter(wholeBash), [], `the CLI got ${JSON.stringify(list)}`)
      }
      assert.equal(res.status, 400, rule)
    }
    // A specifier with a comma or space inside its parentheses is still one rule to the CLI.
    const ok = await gw.request('POST', '/v1/sessions', { allowed_tools: ['Read', 'Bash(git log:*)', 'Bash(npm run test, lint)'] })
    assert.equal(ok.status, 201)
    const dump = await eventually(() => gw.argvDumps(ok.body.id)[0], 5000, 'argv dump')
    assert.ok(dump.argv.includes('--allowedTools=Read,Bash(git log:*),Bash(npm run test, lint)'))
  })
})

describe('updatedPermissions rules with the specifier in toolName', () => {
  it('refuses {toolName: "Bash(*)", ruleContent: ""} over WebSocket and HTTP; nothing of it reaches the CLI', async (t) => {
    const gw = await gateway(t)
    const { id, holder } = await holderOf(gw, t)
    const prompt = await ask(holder, 'ask')
    for (const toolName of ['Bash(*)', 'Bash()', 'Bash(:*)']) {
      const sneaky = { behavior: 'allow', updatedInput: prompt.request.input, updatedPermissions: [{ type: 'addRules', rules: [{ toolName, ruleContent: '' }], behavior: 'allow', destination: 'session' }] }
      const before = holder.frames.length
      answer(holder, prompt.request_id, sneaky)
      const err = await holder.waitFor((f) => isError('permission_update_not_allowed')(f) || resolved(prompt.request_id)(f), 10_000, before)
      await fence(holder, { unique: true })
      assert.deepEqual(answersTo(gw, id, prompt.request_id).map((a) => a.response.response.updatedPermissions), [], `the CLI got ${toolName}`)
      assert.equal(err.request_id, prompt.request_id, toolName)
      const viaHttp = await gw.request('POST', `/v1/sessions/${id}/permissions/${prompt.request_id}`, sneaky)
      assert.equal(viaHttp.status, 403, toolName)
      assert.equal(viaHttp.body.code, 'permission_update_not_allowed')
    }
    answer(holder, prompt.request_id, { behavior: 'deny', message: 'no' })
    assert.equal((await holder.waitFor(resolved(prompt.request_id))).decision, 'denied')
  })
})
