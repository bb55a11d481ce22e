// scripts/build-if-stale.mjs (npm start's prestart): dist/ is rebuilt exactly when a source is newer than the last build,
// and so is the web console (dist/console) when one of its sources is.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { staleConsoleSource, staleSource } from '../../scripts/build-if-stale.mjs'

function tree (t: { after: (fn: () => void) => void }): { root: string, file: (path: string, at: number) => string } {
  const root = mkdtempSync(join(tmpdir(), 'cgw-stale-'))
  t.after(() => rmSync(root, { recursive: true, force: true }))
  const file = (path: string, at: number): string => {
    const full = join(root, path)
    mkdirSync(join(full, '..'), { recursive: true })
    writeFileSync(full, 'x')
    utimesSync(full, at, at)
    return full
  }
  return { root, file }
}

describe('build-if-stale', () => {
  it('builds when there is no build yet', (t) => {
    const { root, file } = tree(t)
    file('src/server.ts', 1000)
    assert.equal(staleSource(root), join(root, 'dist', '.built'))
  })

  it('skips the build when every source is older than the last one', (t) => {
    const { root, file } = tree(t)
    file('src/server.ts', 1000)
    file('src/session/session.ts', 1500)
    file('config/defaults.ts', 1200)
    file('tsconfig.json', 900)
    file('dist/.built', 2000)
    file('dist/src/server.js', 1900)
    assert.equal(staleSource(root), null)
  })

  it('builds when only tsc\'s build info is there (a tsc --noEmit wrote it) or the entry point is missing', (t) => {
    const { root, file } = tree(t)
    file('src/server.ts', 1000)
    file('dist/.tsbuildinfo', 2000)
    assert.equal(staleSource(root), join(root, 'dist', '.built'))
    file('dist/.built', 2000)
    assert.equal(staleSource(root), join(root, 'dist', '.built'), 'dist/src/server.js is missing')
    file('dist/src/server.js', 2000)
    assert.equal(staleSource(root), null)
  })

  it('names a source edited after the last build, however deep, and the build settings', (t) => {
    const { root, file } = tree(t)
    file('src/server.ts', 1000)
    file('dist/.built', 2000)
    file('dist/src/server.js', 2000)
    const edited = file('src/session/deep/session.ts', 3000)
    assert.equal(staleSource(root), edited)
    const again = tree(t)
    again.file('dist/.built', 2000)
    again.file('dist/src/server.js', 2000)
    const lock = again.file('package-lock.json', 2500)
    assert.equal(staleSource(again.root), lock)
  })

  it('does not run tsc for an edit in src/console, which tsc does not compile', (t) => {
    const { root, file } = tree(t)
    file('src/server.ts', 1000)
    file('dist/.built', 2000)
    file('dist/src/server.js', 2000)
    file('src/console/main.ts', 3000)
    assert.equal(staleSource(root), null)
    const client = file('src/client/index.ts', 3000)
    assert.equal(staleSource(root), client, 'the client is compiled by tsc too')
  })
})

describe('build-if-stale: the web console', () => {
  it('builds when dist/console/index.html is missing', (t) => {
    const { root, file } = tree(t)
    file('src/console/main.ts', 1000)
    file('dist/console/app.js', 2000) // a build that stopped before index.html
    assert.equal(staleConsoleSource(root), join(root, 'dist', 'console', 'index.html'))
  })

  it('skips the build when every console source is older than index.html', (t) => {
    const { root, file } = tree(t)
    file('src/console/main.ts', 1000)
    file('src/console/styles.css', 1200)
    file('src/client/session-connection.ts', 1500)
    file('scripts/build-console.mjs', 900)
    file('package-lock.json', 900)
    file('src/server.ts', 5000) // the gateway's own sources do not concern the console
    file('dist/console/index.html', 2000)
    assert.equal(staleConsoleSource(root), null)
  })

  it('names the console source, client source or build script edited after the last build', (t) => {
    for (const path of ['src/console/deep/view.ts', 'src/console/index.html', 'src/client/frames.ts', 'scripts/build-console.mjs', 'package-lock.json']) {
      const { root, file } = tree(t)
      file('src/console/main.ts', 1000)
      file('dist/console/index.html', 2000)
      const edited = file(path, 3000)
      assert.equal(staleConsoleSource(root), edited, path)
    }
  })
})
