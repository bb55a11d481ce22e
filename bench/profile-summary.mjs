#!/usr/bin/env node
// Summarises a V8 .cpuprofile or .heapprofile (from `npm run bench -- --profile`, written to
// .tmp/bench-prof/): top functions by self time, and self time by file.
// Usage: node bench/profile-summary.mjs <file.cpuprofile|file.heapprofile> [top=25]
import { readFileSync } from 'node:fs'

// Piped into `head`: stop quietly when the reader has had enough.
process.stdout.on('error', (err) => { if (err.code === 'EPIPE') process.exit(0); else throw err })

const file = process.argv[2]
const top = Number(process.argv[3] ?? 25)
if (file === undefined) {
  process.stderr.write('usage: node bench/profile-summary.mjs <file.cpuprofile> [top]\n')
  process.exit(2)
}
const profile = JSON.parse(readFileSync(file, 'utf8'))
if (profile.head !== undefined) {
  // Sampling heap profile (.heapprofile): bytes allocated by function.
  const bySite = new Map()
  let totalBytes = 0
  const walk = (node) => {
    const cf = node.callFrame
    const url = cf.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, 'nm/').replace(/.*\/work\/main\//, '')
    const key = `${cf.functionName || '(anonymous)'} ${url}:${cf.lineNumber + 1}`
    bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize)
    totalBytes += node.selfSize
    for (const child of node.children) walk(child)
  }
  walk(profile.head)
  process.stdout.write(`${file}\n${(totalBytes / 2 ** 20).toFixed(1)} MiB sampled allocations\n\nTop allocation sites (self):\n`)
  for (const [k, n] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${((100 * n) / totalBytes).toFixed(1).padStart(5)}%  ${k}\n`)
  process.exit(0)
}
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const counts = new Map()
for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1)
const total = profile.samples.length
const dt = (profile.endTime - profile.startTime) / 1000 / Math.max(1, total)

const selfByFn = new Map()
const selfByFile = new Map()
for (const [id, n] of counts) {
  const node = byId.get(id)
  const cf = node.callFrame
  const url = cf.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, 'nm/').replace(/.*\/work\/main\//, '')
  const key = `${cf.functionName || '(anonymous)'} ${url}:${cf.lineNumber + 1}`
  selfByFn.set(key, (selfByFn.get(key) ?? 0) + n)
  const f = url === '' ? `(${cf.functionName})` : url.replace(/^nm\/([^/]+(?:\/[^/]+)?)\/.*/, 'nm/$1')
  selfByFile.set(f, (selfByFile.get(f) ?? 0) + n)
}
const idle = [...counts].filter(([id]) => byId.get(id).callFrame.functionName === '(idle)').reduce((s, [, n]) => s + n, 0)
const pct = (n) => `${((100 * n) / total).toFixed(1)}%`
process.stdout.write(`${file}\n${total} samples (~${dt.toFixed(2)} ms each), ${pct(total - idle)} busy\n\nTop self time:\n`)
for (const [k, n] of [...selfByFn].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${pct(n).padStart(6)}  ${k}\n`)
process.stdout.write('\nSelf time by file/package:\n')
for (const [k, n] of [...selfByFile].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`  ${pct(n).padStart(6)}  ${k}\n`)
