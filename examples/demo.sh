#!/usr/bin/env bash
# meshgen's main job, end to end on this one machine, with no registry:
#
#   vaultd → genesis → two nodes enrolled (hostd init) → the demo catalog
#   (examples/demo) committed → check → plan → graph → reconcile → each node
#   applies → status → an unchanged reconcile commits nothing → drift is
#   corrected → a change committed, reconciled and applied, showing what ran
#   again and why → a secret rotated over two credentials → a tampered branch
#   refused → no secret in git or in any output.
#
# Run it as root after `make build` (`make demo` does both). Everything lives
# in a fresh directory under /tmp, which is kept and printed at the end; the
# demo's containers are removed at the end unless you pass --keep.
#
# It is also a check: it exits non-zero when any step fails or when a node's
# report does not show what the demo expects, so CI can run it.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: examples/demo.sh [--keep]
  --keep   leave the demo's containers running (they are removed otherwise)
EOF
}

KEEP=0
case "${1:-}" in
  "") ;;
  --keep) KEEP=1 ;;
  -h | --help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac

REPO_ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$REPO_ROOT/bin
DEMO=$REPO_ROOT/examples/demo
NODES=(n1 n2)
MESH_NAME=demo

# --- output -----------------------------------------------------------------

step=0
heading() {
  step=$((step + 1))
  printf '\n\033[1m== %d. %s\033[0m\n' "$step" "$*"
}
say() { printf '   %s\n' "$*"; }
# run shows a command (on stderr, with the demo directory written as $WORK)
# and runs it.
run() {
  local shown="$*"
  printf '\033[2m$ %s\033[0m\n' "${shown//"$WORK"/\$WORK}" >&2
  "$@"
}
fail() {
  printf '\n\033[31mdemo: FAILED: %s\033[0m\n' "$*" >&2
  exit 1
}
# --- prerequisites ------------------------------------------------------------

[ "$(id -u)" = 0 ] || fail "run as root (podman stores and node roots are made as root): sudo make demo"
for b in meshgen hostd vaultd; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b is missing: run \`make build\` first"
done
for c in podman git go; do
  command -v "$c" >/dev/null || fail "$c is not installed: run \`make deps\`"
done
command -v jq >/dev/null || fail "jq is not installed: run \`make deps\`"

WORK=$(mktemp -d /tmp/mgdemo.XXXXXX) # short: podman's runroot path length matters
chmod 0755 "$WORK"
VAULT_SOCK=$WORK/vault.sock
MESH_HOME=$WORK/mesh
MESH_REPO=$MESH_HOME/mesh.git
KEY=$MESH_HOME/reconciler.key
OPERATOR=$WORK/operator # the operator's clone of the mesh repository
LOG=$WORK/demo.log      # everything the demo's commands print, for the secret check
VAULTD_PID=

# The signing key's password, for this demo only: it lives in this process's
# environment and nowhere on disk.
COSIGN_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
export COSIGN_PASSWORD

podman_flags() { # the node's own podman store
  echo --root "$WORK/$1/p/r" --runroot "$WORK/$1/p/rr" --tmpdir "$WORK/$1/p/t"
}

cleanup() {
  local rc=$?
  set +e
  trap '' PIPE INT TERM
  echo
  if [ -n "$VAULTD_PID" ] && kill -0 "$VAULTD_PID" 2>/dev/null; then
    kill "$VAULTD_PID"
    wait "$VAULTD_PID" 2>/dev/null
    echo "stopped vaultd"
  fi
  if [ "$KEEP" = 1 ]; then
    echo "kept the demo's containers; see them with: podman $(podman_flags n1) ps -a"
    echo "remove them with: for n in ${NODES[*]}; do podman --root $WORK/\$n/p/r --runroot $WORK/\$n/p/rr --tmpdir $WORK/\$n/p/t system reset --force; done"
  else
    for n in "${NODES[@]}"; do
      if [ -d "$WORK/$n/p/r" ]; then
        # shellcheck disable=SC2046
        podman $(podman_flags "$n") rm -a -f -t 0 >/dev/null 2>&1
        # reset, not prune: it also unmounts the store's own overlay mount,
        # so the kept directory can be removed with rm -rf.
        # shellcheck disable=SC2046
        podman $(podman_flags "$n") system reset --force >/dev/null 2>&1
      fi
    done
    # Anything podman left mounted under the demo's directory.
    findmnt -rn -o TARGET | grep "^$WORK/" | sort -r | while read -r m; do umount "$m"; done
    echo "removed the demo's containers (pass --keep to leave them running)"
  fi
  echo "the demo's directory is kept: $WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Everything is shown and kept in $LOG. tee ignores Ctrl-C, so the cleanup's
# own output still reaches the screen after an interrupt.
exec > >(
  trap '' INT TERM
  exec tee -a "$LOG"
) 2>&1

cat <<EOF
meshgen demo: one mesh, two nodes (${NODES[*]}), on this machine, no registry.
working in $WORK (written \$WORK below)
EOF

# --- 1. the image -------------------------------------------------------------

heading "The container image: busybox, built byte for byte the same every time"
say "There is no registry here. Every container of the demo runs one tiny OCI image made"
say "from /bin/busybox; its archive is deterministic, so its digest is known in advance"
say "and the demo's modules pin it (examples/demo/catalog/modules/*/module.yaml)."
IMAGE=$(cd "$REPO_ROOT" && run go run ./test/tools/busybox-image -o "$WORK/image")
say "built $IMAGE"
pinned=$(grep -rhoE 'localhost/meshgen-busybox@sha256:[0-9a-f]{64}' "$DEMO/catalog" | sort -u)
[ "$(printf '%s\n' "$pinned" | wc -l)" = 1 ] || fail "the demo's modules pin more than one image: $pinned"
if [ "$pinned" != "$IMAGE" ]; then
  # The digest follows this machine's /bin/busybox: another busybox-static
  # (a Debian point release) builds another image. The demo then pins what it
  # built, in the copy it commits, and says so; examples/demo stays as it is.
  say "note: examples/demo pins $pinned, built from another busybox-static;"
  say "      the demo commits its modules pinned to the image built here instead."
  REPIN=1
fi

# --- 2. vaultd ----------------------------------------------------------------

heading "Start vaultd, the only maker of the mesh's shared secrets"
mkdir -p "$WORK/vault"
say "vaultd makes its own age identity on first start; it never leaves $WORK/vault."
# Started directly (not through run, whose subshell would hide vaultd's pid
# from the cleanup).
printf '\033[2m$ %s\033[0m\n' "$BIN/vaultd --dir \$WORK/vault --listen unix://\$WORK/vault.sock &" >&2
"$BIN/vaultd" --dir "$WORK/vault" --listen "unix://$VAULT_SOCK" >"$WORK/vault/vaultd.log" 2>&1 &
VAULTD_PID=$!
for _ in $(seq 100); do
  [ -S "$VAULT_SOCK" ] && break
  kill -0 "$VAULTD_PID" 2>/dev/null || { cat "$WORK/vault/vaultd.log"; fail "vaultd exited at start"; }
  sleep 0.1
done
[ -S "$VAULT_SOCK" ] || fail "vaultd did not open $VAULT_SOCK within 10 s (log: $WORK/vault/vaultd.log)"
say "vaultd is listening on \$WORK/vault.sock (pid $VAULTD_PID)"

# --- 3. genesis ---------------------------------------------------------------

heading "Genesis: a new mesh, its signing key, and its first secret handed to the vault"
run "$BIN/meshgen" genesis --dir "$MESH_HOME" --name "$MESH_NAME" --vault "$VAULT_SOCK"
[ -f "$KEY" ] || fail "genesis made no signing key at $KEY"
grep -q 'ENCRYPTED SIGSTORE PRIVATE KEY' "$KEY" || fail "the signing key is not encrypted"
say "The vault now holds the first enrolment token, made by genesis, recorded as the"
say "mesh's own (so the vault may rotate it); its value was never shown or written:"
run "$BIN/meshgen" vault status --vault "$VAULT_SOCK" | tee "$WORK/vault-status.txt"
grep -qE '^mesh-enrolment-token +genesis ' "$WORK/vault-status.txt" || fail "the vault does not hold the enrolment token as genesis's"
say "Genesis refuses to overwrite a mesh:"
if "$BIN/meshgen" genesis --dir "$MESH_HOME" --name "$MESH_NAME" 2>"$WORK/genesis-again.err"; then
  fail "a second genesis over the same directory was not refused"
fi
say "  $(head -1 "$WORK/genesis-again.err")"

# --- 4. enrol the nodes -------------------------------------------------------

heading "Enrol ${NODES[*]}: each node makes its own age key; only the public half leaves"
run git clone -q "$MESH_REPO" "$OPERATOR"
git -C "$OPERATOR" config user.name "demo operator"
git -C "$OPERATOR" config user.email "operator@demo.mesh"
for n in "${NODES[@]}"; do
  mkdir -p "$WORK/$n/etc" "$WORK/$n/state" "$WORK/$n/root" "$WORK/$n/p/r" "$WORK/$n/p/rr" "$WORK/$n/p/t"
  # The reconciler's public key is installed on the node at enrolment: hostd
  # trusts this copy, never the one on main.
  cp "$OPERATOR/keys/reconciler.pub" "$WORK/$n/etc/reconciler.pub"
  cat >"$WORK/$n/etc/hostd.yaml" <<EOF
node: $n
mesh: $MESH_NAME
remote: file://$MESH_REPO
pushURL: file://$MESH_REPO
publicKey: $WORK/$n/etc/reconciler.pub
identity: $WORK/$n/etc/age-identity.txt
stateDir: $WORK/$n/state
root: $WORK/$n/root
podman: {root: $WORK/$n/p/r, runRoot: $WORK/$n/p/rr, tmpDir: $WORK/$n/p/t, stopTimeout: 1}
EOF
  recipient=$(run "$BIN/hostd" init --dir "$WORK/$n/etc" | grep -oE 'age1[0-9a-z]{58}' | head -1)
  [ -n "$recipient" ] || fail "hostd init on $n printed no age recipient"
  cat >"$OPERATOR/nodes/$n.yaml" <<EOF
# Node $n: its age recipient, printed by \`hostd init\` on the node.
recipient: $recipient
root: $WORK/$n/root
facts:
  address: 127.0.0.1
EOF
  say "$n: recipient $recipient, root \$WORK/$n/root"
done

# --- 5. commit the demo catalog ----------------------------------------------

heading "Commit the demo's catalog and assignments to main"
cp -r "$DEMO/catalog/." "$OPERATOR/catalog/"
cp -r "$DEMO/assignments/." "$OPERATOR/assignments/"
if [ "${REPIN:-}" = 1 ]; then
  grep -rlF "$pinned" "$OPERATOR/catalog" | xargs sed -i "s|$pinned|$IMAGE|g"
fi
git -C "$OPERATOR" add -A
git -C "$OPERATOR" commit -q -m "demo: nodes n1 and n2, the store on n1 and its reporter on n2"
run git -C "$OPERATOR" push -q origin main
say "main now holds:"
git -C "$OPERATOR" ls-files | grep -v '\.gitkeep$' | sed 's/^/     /'
GENESIS_COMMIT=$(git -C "$OPERATOR" rev-list --max-parents=0 HEAD)

# --- 6. check and plan --------------------------------------------------------

heading "Check the mesh: every file, every reference, every refusal at once"
run "$BIN/meshgen" check --repo "$OPERATOR" || fail "meshgen check refused the demo mesh"

heading "Plan: what main would do to each node, as a pull request would show it"
run "$BIN/meshgen" plan --repo "$MESH_REPO" --base "$GENESIS_COMMIT" --head main ||
  fail "meshgen plan refused the demo mesh"
say "Who provides what to whom, as Mermaid (renders in a pull request):"
run "$BIN/meshgen" graph --repo "$MESH_REPO" --ref main --format mermaid || fail "meshgen graph failed"

# --- 7. reconcile -------------------------------------------------------------

heading "Reconcile: resolve, ask vaultd to seal each secret, render, sign, write node branches"
run "$BIN/meshgen" reconcile --repo "$MESH_REPO" --vault "$VAULT_SOCK" --key "$KEY"
for n in "${NODES[@]}"; do
  git -C "$MESH_REPO" rev-parse -q --verify "refs/heads/node/$n" >/dev/null ||
    fail "reconcile wrote no branch node/$n"
  say "node/$n: $(git -C "$MESH_REPO" ls-tree -r --name-only "node/$n" | tr '\n' ' ')"
done
say "vaultd made the reporter's store password and sealed it to n1 (which applies it)"
say "and n2 (which reads it); the reconciler only ever saw ciphertext:"
run "$BIN/meshgen" vault status --vault "$VAULT_SOCK" | tee "$WORK/vault-status.txt"
grep -qE '^store-account\.reporter@n2\.store +mesh ' "$WORK/vault-status.txt" ||
  fail "the vault does not hold the reporter's store password as one it made"

# --- 8. apply -----------------------------------------------------------------

round=0
# apply runs one hostd apply on every node and keeps each node's report, as
# hostd pushed it to status/<node>.
apply_all() {
  round=$((round + 1))
  for n in "${NODES[@]}"; do
    run "$BIN/hostd" apply --once --config "$WORK/$n/etc/hostd.yaml" ||
      fail "hostd apply on $n failed (report: git -C $MESH_REPO show status/$n:report.json)"
    git -C "$MESH_REPO" show "status/$n:report.json" >"$WORK/$n/report-$round.json" ||
      fail "$n pushed no report to status/$n"
  done
}
# expect checks one resource's outcome (and, optionally, that its reason
# matches an extended regular expression) in this round's report of a node.
expect() {
  local node=$1 id=$2 want=$3 reason=${4:-}
  local report=$WORK/$node/report-$round.json got why
  got=$(jq -r --arg id "$id" '.resources[] | select(.id == $id) | .outcome' "$report")
  why=$(jq -r --arg id "$id" '.resources[] | select(.id == $id) | .reason // ""' "$report")
  [ "$got" = "$want" ] || fail "$node: $id is '${got:-missing}', the demo expects '$want' (report: $report)"
  if [ -n "$reason" ] && ! grep -qE "$reason" <<<"$why"; then
    fail "$node: $id was $want because '$why'; the demo expects a reason matching '$reason'"
  fi
  say "ok: $node $id $want${why:+ ($why)}"
}
# expect_ok checks a node's report says the apply succeeded.
expect_ok() {
  local report=$WORK/$1/report-$round.json
  [ "$(jq -r '.refused // ""' "$report")" = "" ] || fail "$1 refused its declaration: $(jq -r .refused "$report")"
  if jq -e '.resources[] | select(.outcome == "failed" or .outcome == "gated")' "$report" >/dev/null; then
    fail "$1: a resource failed or was gated (report: $report)"
  fi
}

heading "Load the image into each node's own podman store"
for n in "${NODES[@]}"; do
  # shellcheck disable=SC2046
  run podman $(podman_flags "$n") load -q -i "$WORK/image/meshgen-busybox.oci.tar" >/dev/null
done
say "each node runs it by digest with --pull=never"

heading "Apply: each node fetches only its branch, verifies, decrypts, applies in order"
apply_all
for n in "${NODES[@]}"; do expect_ok "$n"; done
expect n1 store/data created
expect n1 store/accounts created
expect n1 store/seed ran
expect n1 store/server created
expect n2 reporter/password created
expect n2 reporter/reporter created

STORE_DATA=$(find "$WORK/n1/root" -name seed.log -printf '%h\n' | head -1)
REPORTER_OUT=$(find "$WORK/n2/root" -name store-password -printf '%h\n' | head -1)
[ -n "$STORE_DATA" ] || fail "the seed step wrote no seed.log under n1's root"
[ -n "$REPORTER_OUT" ] || fail "no store-password file under n2's root"
say "the step seeded the store before its server started:"
say "  banner: $(cat "$STORE_DATA/banner")"
say "and, as the store's provisioner, found the reporter's password (sealed to n1 too)"
say "and added its login to the create-once accounts.txt:"
sed 's/^/     /' "$STORE_DATA/accounts.txt"
grep -qvE '^(#|$)' "$STORE_DATA/accounts.txt" || fail "the store's step added no consumer login to accounts.txt"
ACCOUNTS=$(cat "$STORE_DATA/accounts.txt")
for _ in $(seq 50); do [ -s "$REPORTER_OUT/report" ] && break; sleep 0.1; done
say "the reporter on n2 says:"
sed 's/^/     /' "$REPORTER_OUT/report"
grep -q '^hello from the demo from ' "$REPORTER_OUT/report" || fail "the reporter did not get the operator's greeting"
grep -q '^password: present$' "$REPORTER_OUT/report" || fail "the reporter did not get its store password as a file"
[ "$(stat -c %a "$REPORTER_OUT/store-password")" = 600 ] || fail "the store password file is not mode 0600"

heading "Status: which generation each node runs"
run "$BIN/meshgen" status --repo "$MESH_REPO" || fail "meshgen status reports a failed or stale node"

# --- 9. nothing changed: nothing happens ----------------------------------------

heading "Reconcile again with nothing changed: nothing is committed"
say "The same secret version sealed to the same node is the same bytes, so an"
say "unchanged mesh renders the same branches and the reconciler writes nothing."
before=$(git -C "$MESH_REPO" rev-parse node/n1 node/n2)
run "$BIN/meshgen" reconcile --repo "$MESH_REPO" --vault "$VAULT_SOCK" --key "$KEY"
[ "$(git -C "$MESH_REPO" rev-parse node/n1 node/n2)" = "$before" ] || fail "an unchanged mesh moved a node branch"
say "ok: node/n1 and node/n2 did not move"

heading "Drift: stop the reporter by hand; the next apply starts it again, and nothing else runs"
# shellcheck disable=SC2046
run podman $(podman_flags n2) stop -t 0 mesh-reporter.reporter >/dev/null
apply_all
for n in "${NODES[@]}"; do expect_ok "$n"; done
expect n1 store/seed unchanged
expect n1 store/server unchanged
expect n1 store/accounts kept
expect n2 reporter/reporter corrected
[ "$(cat "$STORE_DATA/accounts.txt")" = "$ACCOUNTS" ] || fail "the create-once accounts.txt was overwritten"
[ "$(wc -l <"$STORE_DATA/seed.log")" = 1 ] || fail "the seed step ran again with nothing changed"

# --- 10. a change ---------------------------------------------------------------

heading "Change two operator values, commit, reconcile, apply: see what re-ran and why"
cat >"$OPERATOR/assignments/n1/store.yaml" <<'EOF'
# The store on n1, with a message of the operator's.
values:
  motd: the store has news
EOF
cat >"$OPERATOR/assignments/n2/reporter.yaml" <<'EOF'
# The reporter on n2, greeting differently.
values:
  greeting: hello again
EOF
git -C "$OPERATOR" commit -q -am "demo: a new store message and a new greeting"
run git -C "$OPERATOR" --no-pager diff --stat HEAD~1
run git -C "$OPERATOR" push -q origin main
run "$BIN/meshgen" plan --repo "$MESH_REPO" --base main~1 --head main || fail "meshgen plan refused the change"
run "$BIN/meshgen" reconcile --repo "$MESH_REPO" --vault "$VAULT_SOCK" --key "$KEY"
apply_all
for n in "${NODES[@]}"; do expect_ok "$n"; done
say "the step names the message it reads under restartOn, so it ran again (ADR 0099);"
say "the server names the step, so it was recreated after it:"
expect n1 store/seed ran
expect n1 store/server recreated 'seed'
expect n1 store/accounts kept
say "the reporter's environment changed, so it was recreated:"
expect n2 reporter/reporter recreated
for _ in $(seq 50); do grep -q '^hello again from ' "$REPORTER_OUT/report" 2>/dev/null && break; sleep 0.1; done
grep -q '^hello again from ' "$REPORTER_OUT/report" || fail "the recreated reporter does not greet with the new value"
[ "$(wc -l <"$STORE_DATA/seed.log")" = 2 ] || fail "the seed step did not run exactly once more"
say "  banner: $(cat "$STORE_DATA/banner")"
[ "$(cat "$STORE_DATA/accounts.txt")" = "$ACCOUNTS" ] || fail "the create-once accounts.txt changed"
run "$BIN/meshgen" status --repo "$MESH_REPO" || fail "meshgen status reports a failed or stale node"

# --- 11. rotation -----------------------------------------------------------------

heading "Rotate the reporter's store password, with no moment without a working one"
say "Two parties hold it: the store (which applies it) and the reporter (which reads"
say "it). The vault makes the new value for the unused credential; the store's step"
say "ensures it first; only then is the reporter given it and recreated; only then is"
say "the old one retired (design 27, ADR 0114). Each reconcile advances the rotation"
say "from what the nodes reported."
SECRET=store-account.reporter@n2.store
OLD_PW=$(cat "$REPORTER_OUT/store-password")
run "$BIN/meshgen" vault rotate "$SECRET" --vault "$VAULT_SOCK"
reader_moved=0
for pass in 1 2 3 4 5 6; do
  run "$BIN/meshgen" reconcile --repo "$MESH_REPO" --vault "$VAULT_SOCK" --key "$KEY" >/dev/null
  apply_all >/dev/null
  for n in "${NODES[@]}"; do expect_ok "$n"; done
  if [ "$pass" = 1 ]; then
    say "first the applier: the store's step ran with the new credential beside the old; the reporter kept the old one"
    expect n1 store/seed ran 'mesh\.consumer\..*password'
    expect n2 reporter/reporter unchanged
  fi
  if [ "$(jq -r '.resources[] | select(.id == "reporter/reporter") | .outcome' "$WORK/n2/report-$round.json")" = recreated ]; then
    say "then the reader:"
    expect n2 reporter/reporter recreated 'reporter/password'
    reader_moved=1
  fi
  status=$("$BIN/meshgen" vault status --vault "$VAULT_SOCK" | grep "^$SECRET ")
  say "after pass $pass: ${status#"$SECRET"}"
  grep -qE ' -$' <<<"$status" && break
done
[ "$reader_moved" = 1 ] || fail "the reporter was never recreated with the new password"
grep -qE "^$SECRET +mesh +two-party +2 +-$" <<<"$status" || fail "the rotation did not finish at version 2: $status"
[ "$(cat "$REPORTER_OUT/store-password")" != "$OLD_PW" ] || fail "the reporter still holds the old password"
grep -q '^password: present$' "$REPORTER_OUT/report" || fail "the recreated reporter has no password file"
say "ok: rotated to version 2; the reporter reads the new password"

# --- 12. a tampered branch ---------------------------------------------------------

heading "Tamper with node/n2, as someone with push access to the repository could: refused"
say "hostd trusts only the key installed at enrolment. An altered declaration fails"
say "its signature, so hostd applies nothing from it and says why."
run git clone -q -b node/n2 "$MESH_REPO" "$WORK/attacker"
sed -i 's/"GREETING": "hello again"/"GREETING": "pwned"/' "$WORK/attacker/declaration.json"
grep -q '"GREETING": "pwned"' "$WORK/attacker/declaration.json" || fail "could not alter n2's declaration"
git -C "$WORK/attacker" -c user.name=attacker -c user.email=attacker@example.org commit -q -am "node n2: a small fix"
run git -C "$WORK/attacker" push -q origin node/n2
round=$((round + 1))
if run "$BIN/hostd" apply --once --config "$WORK/n2/etc/hostd.yaml"; then
  fail "hostd applied a declaration whose signature cannot match"
fi
git -C "$MESH_REPO" show "status/n2:report.json" >"$WORK/n2/report-$round.json" || fail "n2 pushed no report of the refusal"
refused=$(jq -r '.refused // ""' "$WORK/n2/report-$round.json")
[ -n "$refused" ] || fail "n2's report does not say it refused the altered declaration"
say "ok: n2 refused it: $refused"
grep -q '^hello again from ' "$REPORTER_OUT/report" || fail "the reporter changed after a refused declaration"
say "ok: the reporter still runs what was signed"

heading "The reconciler's next run puts node/n2 right, signed, one generation higher"
run "$BIN/meshgen" reconcile --repo "$MESH_REPO" --vault "$VAULT_SOCK" --key "$KEY"
apply_all
for n in "${NODES[@]}"; do expect_ok "$n"; done
expect n2 reporter/reporter unchanged
expect n1 store/server unchanged

# --- 13. no secret anywhere -------------------------------------------------------

heading "The store passwords reached the nodes only as files: nowhere in git or in any output"
NEW_PW=$(cat "$REPORTER_OUT/store-password")
for pw in "$OLD_PW" "$NEW_PW"; do
  [ ${#pw} -ge 24 ] || fail "a store password of ${#pw} characters is too short to look for"
  if git -C "$MESH_REPO" cat-file --batch-all-objects --batch | grep -qF -f <(printf '%s\n' "$pw"); then
    fail "a store password appears in an object of the mesh repository"
  fi
  if grep -qF -f <(printf '%s\n' "$pw") "$LOG" "$WORK"/vault/vaultd.log; then
    fail "a store password appears in the demo's output or vaultd's log"
  fi
done
say "ok: neither the old nor the new password is in any git object of the mesh (all"
say "branches), the demo's output, or vaultd's log"

heading "Done"
say "every step worked and every report showed what the demo expects."
