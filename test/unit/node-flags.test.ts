// The V8 flags the gateway runs with are given twice, in package.json's start
// script (`npm start`, and what the bench starts every side with) and in the
// Dockerfile's CMD: the two must be the same, or the image runs a runtime the
// bench never measured (docs/PERFORMANCE.md §17).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..')

/** `node <flags> dist/src/server.js` from npm's start script. */
function startFlags (): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
  const words = pkg.scripts.start.split(/\s+/)
  assert.equal(words[0], 'node', `the start script runs node: ${pkg.scripts.start}`)
  assert.equal(words[words.length - 1], 'dist/src/server.js', `the start script runs the build: ${pkg.scripts.start}`)
  return words.slice(1, -1)
}

/** The exec-form CMD of the Dockerfile's last stage, as its JSON array. */
function dockerCmd (): string[] {
  const cmds = readFileSync(join(ROOT, 'Dockerfile'), 'utf8').split('\n').filter((l) => l.startsWith('CMD '))
  const last = cmds[cmds.length - 1]
  assert.ok(last !== undefined, 'the Dockerfile has a CMD')
  return JSON.parse(last.slice('CMD '.length)) as string[]
}

describe('node flags', () => {
  it('are the same in the start script and the Dockerfile', () => {
    assert.deepEqual(dockerCmd(), ['node', ...startFlags(), 'dist/src/server.js'])
  })

  it('are flags this node accepts', () => {
    const flags = startFlags()
    assert.ok(flags.length > 0 && flags.every((f) => f.startsWith('--')), `flags only: ${flags.join(' ')}`)
    // node refuses an unknown V8 option ("bad option") with exit code 9.
    assert.equal(execFileSync(process.execPath, [...flags, '-e', 'process.stdout.write("ok")'], { encoding: 'utf8' }), 'ok')
  })
})
