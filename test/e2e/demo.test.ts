// `npm run demo` as a newcomer runs it (scripts/demo.ts: the built gateway,
// the real CLI, the scripted local model): it builds what is stale, prints
// a console link that carries its token, serves the console, and a first
// prompt gets the scripted greeting streamed back through the real CLI.
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import WebSocket from 'ws'
import { type Demo, startDemo } from '../../scripts/demo.js'

let demo: Demo | undefined
after(async () => { await demo?.close() })

test('npm run demo: console link with its token, the console served, a prompt answered by the real CLI', { timeout: 240_000 }, async () => {
  let printed = ''
  demo = await startDemo({ port: 0, output: (chunk) => { printed += chunk } })
  assert.equal(demo.consoleUrl, `${demo.url}/#token=${encodeURIComponent(demo.token)}`)
  assert.match(printed, /Console: http:\/\/127\.0\.0\.1:\d+\//)

  const page = await fetch(`${demo.url}/`)
  assert.equal(page.status, 200)
  assert.match(await page.text(), /<script[^>]+src="\/console\/app\.js/)

  const auth = { authorization: `Bearer ${demo.token}` }
  const created = await fetch(`${demo.url}/v1/sessions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' })
  assert.equal(created.status, 201)
  const { id } = await created.json() as { id: string }
  const ws = new WebSocket(`${demo.url.replace('http', 'ws')}/v1/sessions/${id}/ws`, { headers: auth })
  const frames: any[] = []
  const result = new Promise<any>((resolve, reject) => {
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString())
      frames.push(f)
      if (f.type === 'result') resolve(f)
    })
    ws.on('close', (code) => reject(new Error(`closed ${code} before a result`)))
  })
  await new Promise((resolve) => ws.once('open', resolve))
  ws.send(JSON.stringify({ type: 'user', message: { role: 'user', content: 'hello' } }))
  const done = await result
  ws.removeAllListeners('close')
  ws.close()
  assert.equal(done.subtype, 'success')
  assert.match(done.result, /scripted stand-in for Claude/)
  assert.ok(frames.some((f) => f.type === 'system' && f.subtype === 'init'), 'the real CLI started')
})
