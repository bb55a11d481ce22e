/**
 * A TCP forwarder in front of a gateway, for what a network does to a
 * client's connection: lose what the client sent as the connection dies, or
 * keep it open while nothing passes (a gateway host gone without a FIN, a
 * NAT that forgot the flow). Real sockets on loopback.
 */
import { connect, createServer, type Socket } from 'node:net'

export interface Forwarder {
  url: string
  /** The next client→gateway bytes are dropped (`drop`) or delivered (`deliver`), then both sides of that connection are cut. */
  cutNext: (how: 'drop' | 'deliver') => void
  /** Bytes dropped so far. */
  dropped: () => number
  /** Freezes every WebSocket connection open so far: kept open, nothing passes either way. Returns how many. */
  freeze: () => number
  close: () => Promise<void>
}

export async function startForwarder (gatewayUrl: string): Promise<Forwarder> {
  const target = Number(new URL(gatewayUrl).port)
  let cut: 'drop' | 'deliver' | null = null
  let dropped = 0
  const all = new Set<Socket>()
  const websockets = new Set<Socket>()
  const frozen = new WeakSet<Socket>()
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1')
    for (const s of [client, upstream]) {
      all.add(s)
      s.on('close', () => all.delete(s))
      s.on('error', () => {})
    }
    client.on('close', () => websockets.delete(client))
    client.on('data', (chunk: Buffer) => {
      if (/^upgrade: websocket/im.test(chunk.toString('latin1'))) websockets.add(client)
      if (frozen.has(client)) return
      if (cut === null) { upstream.write(chunk); return }
      const how = cut
      cut = null
      if (how === 'drop') {
        dropped += chunk.length
        upstream.destroy()
      } else {
        // Delivered (FIN after it): the gateway reads the frame, the client never hears back on this connection.
        upstream.end(chunk)
      }
      client.destroy()
    })
    upstream.on('data', (chunk: Buffer) => { if (!frozen.has(client) && !client.destroyed) client.write(chunk) })
    client.on('end', () => { if (!frozen.has(client)) upstream.end() })
    upstream.on('end', () => { if (!frozen.has(client)) client.end() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    cutNext: (how) => { cut = how },
    dropped: () => dropped,
    freeze: () => {
      for (const s of websockets) frozen.add(s)
      return websockets.size
    },
    close: async () => {
      for (const s of all) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
