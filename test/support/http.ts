/**
 * Requests with exactly the headers a test gives (no harness defaults): plain
 * HTTP over node:http, so Host, absolute-form targets and upgrades are the
 * test's to set, and WebSocket upgrades whose refusal (status and JSON body)
 * is what the test checks.
 */
import { type IncomingHttpHeaders, request as httpRequest } from 'node:http'
import WebSocket from 'ws'
import type { TestGateway } from './gateway.js'

export interface RawReply { status: number, headers: IncomingHttpHeaders, body: any }

/** One request with exactly these headers; an upgrade the server accepts resolves with its 101 (the socket is dropped). */
export function raw (gw: TestGateway, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<RawReply> {
  const { port } = new URL(gw.url)
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === '' ? null : JSON.parse(text) }))
    })
    req.on('upgrade', (res, socket) => {
      socket.destroy()
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body: null })
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** A WebSocket upgrade with exactly these headers: the 101's headers, or the refusal's status and JSON body. */
export function upgrade (gw: TestGateway, path: string, headers: Record<string, string> = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(gw.wsUrl + path, { headers })
    ws.on('error', reject) // after a resolve (terminate below), ignored
    ws.once('upgrade', (res) => {
      resolve({ status: 101, headers: res.headers, body: null })
      ws.terminate()
    })
    ws.once('unexpected-response', (_req, res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === '' ? null : JSON.parse(text) })
        ws.terminate()
      })
    })
  })
}

/** Status and JSON body of a refused WebSocket upgrade (101 once it opens), with `token` as bearer (none when undefined). */
export function upgradeStatus (url: string, token?: string): Promise<{ status: number, body: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
    ws.on('error', reject)
    ws.once('open', () => { resolve({ status: 101, body: null }); ws.terminate() })
    ws.once('unexpected-response', (_req, res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) }); ws.terminate() })
    })
  })
}
