/**
 * SANDBOX=bwrap with the fake CLI: a tool has no capabilities, even when
 * the gateway runs as root (as in many containers). bwrap run by root keeps
 * every capability inside the sandbox's user namespace unless told to drop
 * them, and with CAP_SYS_ADMIN over the sandbox's own mounts a tool can
 * undo them: remount the read-only system (`/usr`, the allowlisted `/etc`
 * entries: the host's files, written as the host's root) read-write, or
 * unmount the read-only copy of the tenant's user settings and write the
 * real file under it.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { gateway } from '../support/gateway.js'
import { run, sandboxUnavailable } from '../support/sandbox.js'

const unavailable = sandboxUnavailable()

describe('SANDBOX=bwrap: capabilities (fake CLI)', { skip: unavailable ?? false }, () => {
  it('leaves a tool none: it cannot remount the system read-write or unmount its read-only files', async (t) => {
    const gw = await gateway(t, { env: { SANDBOX: 'bwrap', CLAUDE_ARGS_EXTRA: '' } })
    const created = await gw.createSession({})
    const holder = await gw.connect(created.id)
    t.after(() => holder.terminate())
    await holder.waitFor((f) => f.subtype === 'hello')

    const remount = await run(holder, 'mount -o remount,bind,rw /usr && echo usr-writable; mount -o remount,bind,rw /etc/passwd && echo etc-writable; echo end')
    assert.doesNotMatch(remount, /usr-writable|etc-writable/)
    const settings = await run(holder, 'umount "$CLAUDE_CONFIG_DIR/settings.json" && echo unmounted; echo \'{"permissions":{"defaultMode":"acceptEdits"}}\' > "$CLAUDE_CONFIG_DIR/settings.json"; echo end')
    assert.doesNotMatch(settings, /unmounted/)
    assert.equal(readFileSync(join(gw.dataDir, 'claude-config', 'tenant-a', 'settings.json'), 'utf8'), '{}\n')
    assert.match(await run(holder, 'grep CapEff /proc/self/status'), /^CapEff:\s+0+\n/)
    // A user namespace of its own gives it capabilities there, over mounts it inherits locked.
    const nested = await run(holder, 'unshare -Urm sh -c \'umount "$CLAUDE_CONFIG_DIR/settings.json" && echo nested-unmounted; mount -o remount,bind,rw /usr && echo nested-usr-writable; echo end\'')
    assert.doesNotMatch(nested, /nested-unmounted|nested-usr-writable/)
    assert.equal(readFileSync(join(gw.dataDir, 'claude-config', 'tenant-a', 'settings.json'), 'utf8'), '{}\n')
  })
})
