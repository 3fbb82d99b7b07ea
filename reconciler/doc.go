// Package reconciler resolves every requirement of every assignment of a mesh
// repository, renders one ordered declaration per node, and plans what a
// change to the repository would do (design 27).
//
// The phases are separate functions so the reconcile loop, `meshgen plan` and
// the tests can each take what they need:
//
//   - [Resolve] answers every requirement from the four kinds of provider
//     (module, host, mesh, operator), or returns a [*Refusal] naming every
//     reason at once. A provider that has not answered yet is a state, not a
//     failure: the consumer is listed in [Resolution.Waiting].
//   - [Render] turns a [Resolution] into one [declaration.Declaration] per
//     node, filling every ${{ requirement.field }} and referring to secrets
//     only by name, version and sealed file, never by value.
//   - [Plan] compares two states of the repository (a pull request's base and
//     head) and says, per node, what would be added, changed, removed,
//     recreated, run again, sealed, refused and waiting.
//
// The reconciler never sees a secret's plaintext: a [Resolution] names the
// secrets the vault must make and seal ([SecretNeed]); the caller hands
// [Render] what vaultd sealed ([SealedSecrets]).
package reconciler
