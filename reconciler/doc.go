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
//   - [MakePlan] compares two states of the repository (a pull request's base and
//     head) and says, per node, what would be added, changed, removed,
//     recreated, run again, sealed, refused and waiting.
//
// The reconciler never sees a secret's plaintext: a [Resolution] names the
// secrets the vault must make and seal ([SecretNeed]); the caller hands
// [Render] what vaultd sealed ([SealedSecrets]).
//
// # What resolution decides
//
// Design 27 leaves some choices to the implementation; these are they.
//
//   - A module provider is, in order: the holder of the seat the
//     requirement names; the assignment's pin ("<module>@<node>"); the one
//     provider on the consumer's node; the one provider in the mesh. Else the
//     requirement is refused, listing the candidates, holders of a seat that
//     delivers the provision first. A secret is always the mesh-vault
//     holder's, and a pin on one is refused.
//   - A host directory is <node root>/<module>/<requirement> unless the
//     assignment places it (an absolute, clean path). A port comes from
//     [PortBase, PortBase+PortSpan): the last resolution's port if it had one
//     ([ResolveOptions.Previous]), else a hash of "<assignment>/<requirement>"
//     probed upward to the first port free on the node, in a fixed order. The
//     facts are the node's address and every node's name ("machines",
//     comma-separated, sorted).
//   - The mesh's identity of an assignment is [DeriveIdentity]: a login of at
//     most [LoginMaxLen] bytes of [a-z0-9_] and a name, collision-free. In a
//     contract with a per-consumer secret, a string field the provision
//     neither states nor answers is the consumer's login: the login of the
//     credential slot it reads now ([SlotLogin]), so login and password move
//     together through a rotation.
//   - A public name is an operator value of type hostname: one assignment in
//     the mesh holds it (the last resolution's holder, else the first in
//     order), and any other asking for it is refused, naming the holder.
//   - Holding mesh-vault or mesh-broker with an assignment other than the one
//     that held it in the last resolution (or raising one that no assignment
//     held) is refused unless the assignment names its break-glass procedure
//     (`breakGlass:`).
//   - Secrets are named "<module>@<node>.<requirement>" (a module's own) and
//     "<provision>.<consumer>.<requirement>" (per consumer; sealed to the
//     provider's node, which applies it, and the consumer's, which reads it).
//     Their ciphertexts are at [SealedPath] (a derived form at
//     [DerivedPath]), one file a version, as [SealedSecrets] says each node
//     holds them in each role ([Held]).
//   - A provider serving per-consumer secrets gets, under
//     <root>/<module>/.mesh/consumers, one JSON file per consumer (its
//     identity, every credential it ensures now and the logins it retires)
//     and a file for each password and derived form, mounted read-only at
//     [ConsumersMount] into its run-once steps, which name them under
//     restartOn: a new consumer, a new secret version or a rotation's next
//     step runs the provisioner again.
//   - A rotation (design 27, "Rotation"): over two credentials, the provider
//     ensures the second login (slot b, "<login>__b") beside the first
//     before the consumer is given it, and disables the old one only after
//     the consumer moved; in place, an applied secret's new value is staged
//     at "<path>.next" beside the one in use until the provisioner
//     confirmed it. [DeliveredBy] says what a node's applied declaration
//     delivers, which the loop confirms rotation steps from.
//   - A container is named [ContainerName]; a resource's ID is
//     "<module>/<resource>".
package reconciler
