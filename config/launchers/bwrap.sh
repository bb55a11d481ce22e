#!/bin/sh
# NOT the sandbox to use: the built-in SANDBOX=bwrap (the default) replaces
# this script. Kept only as an example of the CLAUDE_LAUNCHER interface. It
# binds the session folder the gateway resolved on the host, which bwrap
# resolves again: a tenant that swaps a directory and a symlink in a loop
# wins that race and gets WORKSPACE_ROOT mounted (issue 11, finding 2; see
# test/integration/sandbox-symlink-race.test.ts). It also shares the host's
# network (Redis, the gateway's port) and all of /etc.
#
# CLAUDE_LAUNCHER example: runs each CLI under bubblewrap (Debian package
# `bubblewrap`) so its tools see the system read-only, their own session's
# workspace and their tenant's CLI config dir read-write, and nothing else:
# not other tenants' workspaces or transcripts, not the gateway's data dir.
# The network stays shared (the CLI must reach the API).
#
# The gateway calls it as:  bwrap.sh <workspace> <config-dir> -- <cli> [args...]
# Enable with CLAUDE_LAUNCHER=/path/to/bwrap.sh (needs unprivileged user
# namespaces, or a setuid bwrap).
set -eu
workspace=$1
config=$2
shift 2
[ "${1:-}" = "--" ] && shift
cli_dir=$(dirname "$(readlink -f "$1")")
[ -n "$config" ] || config=$(mktemp -d)

# No --new-session: the CLI must stay in the gateway-made process group so
# that stopping the session (signals to the group) reaches every process.
exec bwrap \
  --die-with-parent --cap-drop ALL \
  --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try \
  --ro-bind /usr /usr \
  --ro-bind-try /bin /bin --ro-bind-try /sbin /sbin \
  --ro-bind-try /lib /lib --ro-bind-try /lib64 /lib64 \
  --ro-bind /etc /etc \
  --proc /proc --dev /dev --tmpfs /tmp \
  --ro-bind "$cli_dir" "$cli_dir" \
  --bind "$config" "$config" \
  --bind "$workspace" "$workspace" \
  --setenv HOME "$config" \
  --setenv TMPDIR /tmp \
  --chdir "$workspace" \
  -- "$@"
