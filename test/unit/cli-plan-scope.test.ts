// The control policy's scope of a session (src/session/cli-plan.ts
// `policyScope`): the tenant's root and the session's folder as real paths,
// resolved when first read, not when the scope is handed out, because the
// real paths cost synchronous file-system calls that most checks (a plain
// allow or deny of a prompt) never need. Real folders and symlinks in a
// temporary directory.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import pino from 'pino'
import { CliPlan } from '../../src/session/cli-plan.js'
import { MemoryStore } from '../../src/store/memory.js'
import { DEFAULT_RETENTION, session } from '../support/store-contract.js'

describe('CliPlan.policyScope', () => {
  let dir: string
  let plan: CliPlan

  before(() => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'cgw-scope-')))
    mkdirSync(join(dir, 'workspaces'))
    plan = new CliPlan({ store: new MemoryStore({ retention: DEFAULT_RETENTION }), logger: pino({ level: 'silent' }), claudeBin: 'claude', claudeArgsExtra: [], workspaceRoot: join(dir, 'workspaces'), configRoot: null })
  })

  after(() => { rmSync(dir, { recursive: true, force: true }) })

  it('resolves the real paths when first read, then keeps them for that scope', () => {
    const scope = plan.policyScope(session({ id: 's1', tenant: 'acme' }), {})
    // Made before the folders exist; the tenant's root then turns out to be a symlink.
    mkdirSync(join(dir, 'elsewhere', 's1'), { recursive: true })
    symlinkSync(join(dir, 'elsewhere'), join(dir, 'workspaces', 'acme'))
    assert.deepEqual(scope.roots, [join(dir, 'workspaces', 'acme'), join(dir, 'elsewhere')])
    assert.equal(scope.cwd, join(dir, 'elsewhere', 's1'))
    // Read once: a later change of the folders does not move this scope, a new one sees it.
    rmSync(join(dir, 'workspaces', 'acme'))
    mkdirSync(join(dir, 'workspaces', 'acme', 's1'), { recursive: true })
    assert.equal(scope.cwd, join(dir, 'elsewhere', 's1'))
    assert.deepEqual(plan.policyScope(session({ id: 's1', tenant: 'acme' }), {}).roots, [join(dir, 'workspaces', 'acme')])
  })
})
