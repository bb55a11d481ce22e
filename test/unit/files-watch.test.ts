/**
 * FilesWatch (CREDENTIAL_FILES_POLL_MS): a change is reported once it reads
 * the same at two polls in a row, once; a file that keeps changing, or is
 * missing for a moment and comes back the same, is never reported.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { FilesWatch } from '../../src/config/files-watch.js'

function watched (initial: Record<string, string | null>): { contents: Record<string, string | null>, reports: string[][], watch: FilesWatch } {
  const contents = { ...initial }
  const reports: string[][] = []
  const watch = new FilesWatch({
    paths: Object.keys(initial),
    intervalMs: 60_000,
    onChange: (changed) => { reports.push(changed) },
    read: (path) => { const c = contents[path]; return c === null || c === undefined ? null : Buffer.from(c) }
  })
  watch.start()
  return { contents, reports, watch }
}

test('a change is reported at the second poll that reads it, once, naming only the changed file', (t) => {
  const { contents, reports, watch } = watched({ '/s/tokens': 'a=t1', '/s/keys': 'k' })
  t.after(() => watch.close())
  watch.poll()
  assert.deepEqual(reports, [], 'nothing changed')
  contents['/s/tokens'] = 'b=t1'
  watch.poll()
  assert.deepEqual(reports, [], 'read once: it may be half written')
  watch.poll()
  assert.deepEqual(reports, [['/s/tokens']])
  watch.poll()
  watch.poll()
  assert.deepEqual(reports, [['/s/tokens']], 'reported once')
})

test('a file changing at every poll is not reported until it settles; one missing for a poll and back the same is not reported', (t) => {
  const { contents, reports, watch } = watched({ '/s/tokens': 'v0' })
  t.after(() => watch.close())
  for (const v of ['v1', 'v2', 'v3']) {
    contents['/s/tokens'] = v
    watch.poll()
  }
  assert.deepEqual(reports, [])
  watch.poll()
  assert.deepEqual(reports, [['/s/tokens']], 'settled on v3')
  contents['/s/tokens'] = null
  watch.poll()
  contents['/s/tokens'] = 'v3'
  watch.poll()
  watch.poll()
  assert.deepEqual(reports, [['/s/tokens']], 'a symlink swap seen half way changes nothing')
  contents['/s/tokens'] = null
  watch.poll()
  watch.poll()
  assert.deepEqual(reports, [['/s/tokens'], ['/s/tokens']], 'gone for good is a change (the reload then says why it cannot read it)')
})

test('the files of a real directory: a rename over the file is seen', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'cgw-files-watch-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'tokens')
  writeFileSync(file, 'a')
  const reports: string[][] = []
  const watch = new FilesWatch({ paths: [file], intervalMs: 60_000, onChange: (changed) => { reports.push(changed) } })
  watch.start()
  t.after(() => watch.close())
  writeFileSync(`${file}.next`, 'b')
  renameSync(`${file}.next`, file)
  watch.poll()
  watch.poll()
  assert.deepEqual(reports, [[file]])
})
