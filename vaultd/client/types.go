package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Alphabets a [Spec] may name. The default is [AlphabetAlnum].
const (
	AlphabetAlnum     = "alnum"
	AlphabetHex       = "hex"
	AlphabetBase64URL = "base64url"
)

// Formats of the derived form a [Spec] may ask for beside the value.
const (
	// FormatMosquittoPBKDF2 is mosquitto's password-file hash,
	// "$7$<iterations>$<salt>$<hash>" (PBKDF2-SHA512).
	FormatMosquittoPBKDF2 = "mosquitto-pbkdf2"
	// FormatBcrypt is a bcrypt hash, "$2a$10$...".
	FormatBcrypt = "bcrypt"
)

// Rotation kinds a [Spec] may name (design 27 "Rotation", ADR 0114).
const (
	// OneParty rotates in place, staged: the new value is delivered to the
	// appliers beside the current one and made current once they confirm.
	OneParty = "one-party"
	// TwoParty rotates over two credential slots, A and B, with the same
	// rights: readers move to the unused slot only after the appliers
	// ensured it, and the old slot is retired only after every reader moved.
	TwoParty = "two-party"
)

// Origin says who made a secret's value.
type Origin string

const (
	// OriginMesh is a value vaultd made; vaultd may rotate it.
	OriginMesh Origin = "mesh"
	// OriginGenesis is a value genesis made and delivered with
	// [Client.Adopt]; it is the mesh's own, so vaultd may rotate it.
	OriginGenesis Origin = "genesis"
	// OriginOperator is a value an operator delivered with [Client.Put]
	// (`meshgen vault put`); vaultd never replaces it.
	OriginOperator Origin = "operator"
)

// Role says how a recipient takes a secret (design 27 "Rotation").
type Role string

const (
	// RoleApplier applies the value: the provider's run-once step that
	// creates or changes the credential (a login's password, a broker
	// account). It receives the value and its derived form.
	RoleApplier Role = "applier"
	// RoleReader presents the value: a container that reads it at start and
	// is recreated when its version changes. It receives the value only.
	RoleReader Role = "reader"
)

// Item names one sealed form of a secret version.
type Item string

const (
	// ItemValue is the secret's value.
	ItemValue Item = "value"
	// ItemDerived is the derived form asked for by [Spec.Format] (a hash
	// the provider applies while the consumer presents the value).
	ItemDerived Item = "derived"
)

// Slot names a two-party secret's credential slot. One-party secrets use
// [SlotNone].
type Slot string

// Credential slots.
const (
	SlotNone Slot = ""
	SlotA    Slot = "a"
	SlotB    Slot = "b"
)

// Phase is where a rotation stands.
type Phase string

const (
	// PhaseApplying waits on the appliers to ensure the new value
	// ([Client.ConfirmApplied]). Readers still receive the old one.
	PhaseApplying Phase = "applying"
	// PhaseReading waits on every reader to confirm it reads the new value
	// ([Client.ConfirmRead]). Readers receive the new value.
	PhaseReading Phase = "reading"
	// PhaseRetiring waits on the appliers to retire the old two-party slot
	// ([Client.ConfirmRetired]); after an abandon, the new one.
	PhaseRetiring Phase = "retiring"
	// PhaseDone is returned by a step that ended the rotation (nobody left
	// to wait on).
	PhaseDone Phase = "done"
)

// Duration is a time.Duration written in JSON as Go's duration text ("720h").
type Duration time.Duration

// MarshalJSON writes d as "720h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration text such as "720h".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Spec says how vaultd makes a secret's value. It is read when the secret is
// first made and again at each rotation.
type Spec struct {
	// Length is the value's length in characters; 0 means 32.
	Length int `json:"length,omitempty"`
	// Alphabet is one of "alnum" (the default), "hex", "base64url".
	Alphabet string `json:"alphabet,omitempty"`
	// Format asks for a derived form beside the value: "mosquitto-pbkdf2"
	// or "bcrypt". Appliers receive it as [ItemDerived].
	Format string `json:"format,omitempty"`
	// NotRotatable, when set, is the reason a rotation is refused (a secret
	// a service takes only at first initialisation).
	NotRotatable string `json:"notRotatable,omitempty"`
	// Rotation is [OneParty] (the default) or [TwoParty].
	Rotation string `json:"rotation,omitempty"`
	// MaxAge, when set, makes vaultd start a rotation by itself once the
	// current value is older.
	MaxAge Duration `json:"maxAge,omitempty"`
	// Operator marks a secret an operator delivers (`meshgen vault put`):
	// vaultd never makes it, and a seal before it was delivered fails with
	// [ErrNotDelivered].
	Operator bool `json:"operator,omitempty"`
}

// SealRequest asks vaultd to seal a secret, making it first if absent.
type SealRequest struct {
	// Name is the secret's name: letters, digits and . _ - @ : /, at most
	// 200 characters, starting with a letter or digit.
	Name string `json:"name"`
	// Spec says how to make the value.
	Spec Spec `json:"spec"`
	// Appliers are the age recipients (node recipients) of the nodes that
	// apply the secret: the provider's run-once step.
	//
	// Appliers and Recipients are the secret's complete lists, every time:
	// vaultd records them, and a recipient left out is no longer a party
	// (a rotation stops waiting on it). Seal a secret once for all its
	// nodes, not once per node.
	Appliers []string `json:"appliers,omitempty"`
	// Recipients are the age recipients of the nodes that read the secret
	// (present it). A recipient may appear in both lists.
	Recipients []string `json:"recipients"`
}

// Sealed is one secret version's form sealed to one recipient.
type Sealed struct {
	// Recipient is the age recipient it is sealed to.
	Recipient string `json:"recipient"`
	// Role is how that recipient takes it.
	Role Role `json:"role"`
	// Slot is the two-party credential slot, or "" for one-party.
	Slot Slot `json:"slot,omitempty"`
	// Version is the secret version sealed.
	Version uint64 `json:"version"`
	// Item is the value or its derived form.
	Item Item `json:"item"`
	// Current is false for a staged one-party value an applier receives
	// beside the current one, or for a two-party slot readers do not use yet.
	Current bool `json:"current"`
	// Ciphertext is the age ciphertext (binary format). The same version
	// sealed to the same recipient is the same bytes every time.
	Ciphertext []byte `json:"ciphertext"`
	// SHA256 is the hex sha256 of Ciphertext.
	SHA256 string `json:"sha256"`
}

// SlotState is one credential slot of a two-party secret, or the current
// and staged values of a one-party one.
type SlotState struct {
	Slot    Slot   `json:"slot,omitempty"`
	Version uint64 `json:"version"`
	// State is "current", "next" (made, not yet given to readers),
	// "reading" (given to readers, the old one still valid) or "retiring"
	// (appliers must remove this credential, never the consumer's resource).
	State string `json:"state"`
}

// SealResponse is what a recipient must currently receive.
type SealResponse struct {
	Name   string `json:"name"`
	Origin Origin `json:"origin"`
	// Version is the version readers receive now.
	Version uint64 `json:"version"`
	// Slot is the slot readers use now (two-party), or "".
	Slot Slot `json:"slot,omitempty"`
	// Sealed holds, per recipient, every item it must hold now: readers one
	// value; appliers every live value (during a rotation, old and new) and
	// its derived form when Spec.Format is set.
	Sealed []Sealed `json:"sealed"`
	// Slots lists the live values and any credential to retire.
	Slots []SlotState `json:"slots"`
	// Rotation is the rotation in progress, if any.
	Rotation *Rotation `json:"rotation,omitempty"`
}

// For returns the items sealed to recipient in role, in a stable order.
func (r *SealResponse) For(recipient string, role Role) []Sealed {
	var out []Sealed
	for _, s := range r.Sealed {
		if s.Recipient == recipient && s.Role == role {
			out = append(out, s)
		}
	}
	return out
}

// Rotation is a rotation in progress and whom it waits on.
type Rotation struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // OneParty or TwoParty
	Phase Phase  `json:"phase"`
	// From is the version being replaced, To the new one.
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Abandoned is set while the appliers retire an abandoned new value.
	Abandoned bool `json:"abandoned,omitempty"`
	// Reason says who asked: "operator" or "max-age".
	Reason string `json:"reason"`
	// Started is when the rotation began.
	Started time.Time `json:"started"`
	// WaitsOn lists the recipients whose confirmation the current phase
	// still needs, with their role.
	WaitsOn []Party `json:"waitsOn"`
	// Confirmed lists those who confirmed the current phase.
	Confirmed []Party `json:"confirmed,omitempty"`
}

// Party is a recipient in a role.
type Party struct {
	Recipient string `json:"recipient"`
	Role      Role   `json:"role"`
}

// PutRequest delivers an operator's value, age-encrypted to the vault's own
// recipient so it never crosses the socket in clear.
type PutRequest struct {
	Name string `json:"name"`
	// Ciphertext is the value, sealed to [Client.Recipient].
	Ciphertext []byte `json:"ciphertext"`
	// Spec may carry NotRotatable and Rotation; Length, Alphabet and
	// Format's derived form are computed from the value delivered.
	Spec Spec `json:"spec"`
}

// PutResponse is the version an operator's value was stored as.
type PutResponse struct {
	Name    string `json:"name"`
	Version uint64 `json:"version"`
	// Unchanged is set when the same value was already held.
	Unchanged bool `json:"unchanged,omitempty"`
}

// AdoptRequest delivers the foundation's first secrets made by genesis.
type AdoptRequest struct {
	Secrets []AdoptSecret `json:"secrets"`
}

// AdoptSecret is one genesis secret, sealed to the vault's own recipient.
type AdoptSecret struct {
	Name string `json:"name"`
	Spec Spec   `json:"spec"`
	// Ciphertext is the value, sealed to [Client.Recipient].
	Ciphertext []byte `json:"ciphertext"`
	// Derived is the derived form genesis already gave the provider (sealed
	// to the vault's recipient), kept so nothing changes on the provider;
	// when empty and Spec.Format is set, vaultd derives it.
	Derived []byte `json:"derived,omitempty"`
}

// AdoptResponse lists what was adopted.
type AdoptResponse struct {
	Adopted []PutResponse `json:"adopted"`
}

// NameRequest names one secret (rotate, abandon).
type NameRequest struct {
	Name string `json:"name"`
}

// ConfirmRequest confirms one step of a rotation for one recipient.
type ConfirmRequest struct {
	Name string `json:"name"`
	// Recipient is the node recipient confirming.
	Recipient string `json:"recipient"`
	// Version is the version the step was taken with: the new version for
	// ConfirmApplied and ConfirmRead, the version retired for
	// ConfirmRetired. A confirmation of another version is refused.
	Version uint64 `json:"version"`
}

// SecretStatus is one secret as `meshgen vault status` shows it. It never
// carries a value.
type SecretStatus struct {
	Name     string      `json:"name"`
	Origin   Origin      `json:"origin"`
	Version  uint64      `json:"version"`
	Kind     string      `json:"kind"`
	Made     time.Time   `json:"made"`
	Slots    []SlotState `json:"slots"`
	Appliers []string    `json:"appliers,omitempty"`
	Readers  []string    `json:"readers,omitempty"`
	// NotRotatable is the reason rotation is refused, if any.
	NotRotatable string    `json:"notRotatable,omitempty"`
	Rotation     *Rotation `json:"rotation,omitempty"`
}

// Status is every secret vaultd holds, by name.
type Status struct {
	Recipient string         `json:"recipient"`
	Secrets   []SecretStatus `json:"secrets"`
}

// Generation is the vault's change token (GET /v1/generation). Epoch is
// made at random when a store is first opened, so another store (a replaced
// or a new one) never answers a token of this one; Counter rises with every
// record written (a seal that changed anything, a put, an adopt, a rotation
// started by an operator or by the maximum-age policy timer, every
// confirmation, an abandon) and never goes back, across restarts and kill -9
// included. A token is answered only once every write it counts is on disk.
//
// Two equal tokens mean no record changed between them. A maximum age
// passing is not a write: the token moves when the policy timer (or a seal
// of that secret) starts the due rotation. A reader that skips work while
// the token is unchanged relies on that timer.
type Generation struct {
	Epoch   string `json:"epoch"`
	Counter uint64 `json:"counter"`
}

// String is the token as one string, "epoch:counter".
func (g Generation) String() string { return g.Epoch + ":" + strconv.FormatUint(g.Counter, 10) }

// RecipientResponse is the vault's own age recipient.
type RecipientResponse struct {
	Recipient string `json:"recipient"`
}

// ErrorBody is the JSON body of every refused request. It never carries a
// value.
type ErrorBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}

// MaxSealBatch is the most seal requests one [Client.SealBatch] may carry.
const MaxSealBatch = 1024

// SealBatchRequest asks vaultd to seal many secrets at once
// (POST /v1/seal-batch): each as a [SealRequest] would, with the records
// they change written together.
type SealBatchRequest struct {
	// Requests are at most [MaxSealBatch] seal requests, each naming a
	// different secret.
	Requests []SealRequest `json:"requests"`
}

// SealBatchResponse answers a [SealBatchRequest]: one item per request, in
// the same order.
type SealBatchResponse struct {
	Items []SealBatchItem `json:"items"`
}

// SealBatchItem is the answer to one request of a batch: Sealed, or Error
// with the HTTP status a single seal would have answered. It never
// carries a value.
type SealBatchItem struct {
	Sealed *SealResponse `json:"sealed,omitempty"`
	Error  *ErrorBody    `json:"error,omitempty"`
	Status int           `json:"status,omitempty"`
}

// SealResult is one secret's outcome in [Client.SealBatch]: Response, or
// Err, the [*Error] vaultd answered for that secret alone (errors.Is works
// as for [Client.Seal]: an operator's value not delivered yet is
// [ErrNotDelivered]).
type SealResult struct {
	Response *SealResponse
	Err      error
}
